"""Read a browser bookmarks export (the Netscape HTML format all browsers write)."""

from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from kompl.errors import IngestError


@dataclass
class Bookmark:
    url: str
    title: str


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[Bookmark] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")
            self._text = []

    def handle_data(self, data):
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "a" and self._href is not None:
            self.links.append(Bookmark(self._href.strip(), "".join(self._text).strip()))
            self._href = None


def read_bookmarks(path: Path) -> list[Bookmark]:
    """Every link in the export, in order, duplicates included (dedup happens on ingest)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise IngestError("not_found", f"Bookmarks file not found: {path}") from None
    except OSError as exc:
        raise IngestError("unreadable", f"Could not read bookmarks file {path}: {exc.strerror}") from None
    parser = _Parser()
    parser.feed(text)
    parser.close()
    if not parser.links and "<a" not in text.lower():
        raise IngestError(
            "bad_bookmarks",
            f"{path} does not look like a bookmarks export (no links found)",
            hint="export bookmarks as HTML from your browser's bookmark manager",
        )
    return parser.links
