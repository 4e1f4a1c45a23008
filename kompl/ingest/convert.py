"""Turn input bytes into markdown with markitdown, plus a title and a source type.

One `Converter` holds one `MarkItDown(enable_plugins=False)` instance for a
batch (creating it costs more than converting a small file). Text-like inputs
are checked and decoded here first, so binary junk with a `.md` name and text in
a legacy encoding get their own clear outcome instead of markitdown's guesses.
"""

from __future__ import annotations

import io
import re
import unicodedata
import warnings
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from kompl.errors import IngestError

TEXT_EXTENSIONS = {".md", ".markdown", ".mdown", ".txt", ".text", ".rst", ".csv", ".json", ".jsonl", ".tsv", ".log", ".htm", ".html", ".xml", ""}
HTML_EXTENSIONS = {".htm", ".html", ".xhtml"}
SOURCE_TYPES = {
    ".pdf": "pdf", ".docx": "docx", ".pptx": "pptx", ".xlsx": "xlsx", ".xls": "xls",
    ".html": "html", ".htm": "html", ".xhtml": "html", ".md": "markdown", ".markdown": "markdown",
    ".mdown": "markdown", ".txt": "text", ".text": "text", ".rst": "text", ".csv": "csv",
    ".json": "json", ".jsonl": "json", ".tsv": "csv", ".xml": "xml", ".epub": "epub",
    ".ipynb": "notebook", ".zip": "zip", ".msg": "outlook",
}
MIME_EXTENSIONS = {
    "text/html": ".html", "application/xhtml+xml": ".html", "application/pdf": ".pdf",
    "text/markdown": ".md", "text/plain": ".txt", "text/csv": ".csv", "application/json": ".json",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
    "application/xml": ".xml", "text/xml": ".xml",
}
FORMAT_NAMES = {"pdf": "PDF", "docx": "Word document", "pptx": "PowerPoint file", "xlsx": "Excel workbook", "xls": "Excel workbook", "epub": "EPUB", "zip": "zip archive"}
_H1 = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.MULTILINE)
_SETEXT_H1 = re.compile(r"^(\S.*)\n=+\s*$", re.MULTILINE)
_BLANKS = re.compile(r"\n{3,}")


@dataclass
class Converted:
    markdown: str
    title: str
    title_from: str  # document | heading | filename | url | given
    source_type: str
    metadata: dict = field(default_factory=dict)


def normalize_markdown(text: str) -> str:
    """The one normalization every input kind goes through before hashing and storing."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n").replace("\ufeff", "")
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return _BLANKS.sub("\n\n", text).strip() + "\n"


def content_hash(markdown: str) -> str:
    import hashlib

    return hashlib.sha256(markdown.encode("utf-8")).hexdigest()


def human_size(size: float) -> str:
    """Bytes as a person reads them: 512 bytes, 12.3 KB, 4.5 MB (decimal units, like the limit)."""
    if size < 1000:
        return f"{int(size)} bytes"
    if size < 1_000_000:
        return f"{size / 1000:.1f} KB"
    return f"{size / 1_000_000:.1f} MB"


def limit_text(max_bytes: int) -> str:
    """The size limit as it is configured (max_input_mb), e.g. 'the 100 MB limit'."""
    return f"the {max_bytes / 1_000_000:g} MB limit"


def looks_binary(data: bytes) -> bool:
    """NUL bytes or many control characters in the first 8 KB mean this is not text."""
    head = data[:8192]
    if b"\x00" in head:
        return True
    if not head:
        return False
    control = sum(1 for b in head if b < 32 and b not in (9, 10, 12, 13, 27))
    return control / len(head) > 0.10


def decode_text(data: bytes, name: str, declared: str | None = None) -> tuple[str, str]:
    """Decode text bytes: the declared charset (an HTTP header) if it fits, then UTF-8,
    else the encoding charset_normalizer is sure of."""
    if declared:
        try:
            return data.decode(declared), declared
        except (LookupError, UnicodeDecodeError):
            pass
    try:
        return data.decode("utf-8-sig"), "utf-8"
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    # Short texts often tie between code pages; on a tie prefer Windows-1252, the
    # most common legacy encoding of Western text.
    candidates = sorted(
        from_bytes(data),
        key=lambda m: (round(m.chaos, 3), -round(m.coherence, 3), "cp1252" not in m.could_be_from_charset),
    )
    best = candidates[0] if candidates else None
    if best is None or best.encoding is None:
        raise IngestError(
            "encoding",
            f"{name} is not UTF-8 text and its encoding could not be detected",
            hint="convert it to UTF-8 (e.g. `iconv -f LATIN1 -t UTF-8`) and ingest again",
        )
    return str(best), best.encoding


# Frontmatter keys that describe a document (web clippers and note apps write these).
DOCUMENT_KEYS = {
    "title": "title", "author": "author", "authors": "author", "by": "author",
    "source": "publisher", "publisher": "publisher", "site": "publisher", "site_name": "publisher",
    "published": "published", "published_at": "published", "date": "published", "created": "published",
    "url": "url", "source_url": "url", "link": "url", "description": "description",
}


def frontmatter_metadata(markdown: str) -> dict[str, str]:
    """Who wrote a markdown document, where and when, from its YAML frontmatter (if any)."""
    if not markdown.startswith("---\n"):
        return {}
    end = markdown.find("\n---\n", 4)
    if end == -1:
        return {}
    import yaml

    try:
        data = yaml.safe_load(markdown[4:end])
    except yaml.YAMLError:
        return {}
    if not isinstance(data, dict):
        return {}
    out: dict[str, str] = {}
    for key, value in data.items():
        field = DOCUMENT_KEYS.get(str(key).lower())
        if field is None or field in out or value in (None, "", []):
            continue
        if isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        out[field] = " ".join(str(value).split())[:500]
    return out


def title_from_markdown(markdown: str) -> str | None:
    for pattern in (_H1, _SETEXT_H1):
        match = pattern.search(markdown)
        if match:
            title = re.sub(r"[*_`\[\]]", "", match.group(1)).strip()
            if title:
                return title[:300]
    return None


def extension_for(name: str, mimetype: str | None = None) -> str:
    ext = PurePosixPath(name.split("?")[0]).suffix.lower()
    if mimetype and (not ext or ext not in SOURCE_TYPES):
        ext = MIME_EXTENSIONS.get(mimetype, ext)
    return ext


# Formats whose bytes must be read by their own converter: if it fails, the file
# is damaged; falling through to markitdown's plain-text converter would store
# the raw bytes of a broken PDF as if they were its text.
STRICT_CONVERTERS = {
    ".pdf": "PdfConverter", ".docx": "DocxConverter", ".pptx": "PptxConverter",
    ".xlsx": "XlsxConverter", ".xls": "XlsConverter", ".epub": "EpubConverter",
}


class Converter:
    """Converts one input at a time; reuse one instance for a whole batch."""

    def __init__(self) -> None:
        self._md = None
        self._strict: dict[str, object] = {}

    def _convert_stream(self, data: bytes, stream_info, extension: str):
        name = STRICT_CONVERTERS.get(extension)
        if name is None:
            return self.markitdown.convert_stream(io.BytesIO(data), stream_info=stream_info)
        from markitdown import FileConversionException, converters

        if name not in self._strict:
            self._strict[name] = getattr(converters, name)()
        try:
            return self._strict[name].convert(io.BytesIO(data), stream_info)
        except Exception as exc:
            from markitdown._exceptions import FailedConversionAttempt

            raise FileConversionException(
                attempts=[FailedConversionAttempt(self._strict[name], exc_info=(type(exc), exc, exc.__traceback__))]
            ) from exc

    @property
    def markitdown(self):
        if self._md is None:
            from markitdown import MarkItDown

            # Plugins off: nothing but the built-in, offline converters runs.
            self._md = MarkItDown(enable_plugins=False)
        return self._md

    def convert(
        self,
        data: bytes,
        *,
        name: str,
        extension: str,
        mimetype: str | None = None,
        charset: str | None = None,
        url: str | None = None,
        fallback_title: str,
        fallback_from: str = "filename",
    ) -> Converted:
        from markitdown import FileConversionException, StreamInfo, UnsupportedFormatException

        if not data:
            raise IngestError("empty", f"{name} is empty (0 bytes)", hint="check the file; nothing was stored")
        metadata: dict = {}
        textual = extension in TEXT_EXTENSIONS or (mimetype or "").startswith("text/")
        if textual:
            if looks_binary(data):
                raise IngestError(
                    "binary",
                    f"{name} contains binary data, not text, although its name says {extension or 'text'}",
                    hint="check that it is the file you meant; rename it with its real extension if it is a document",
                )
            text, encoding = decode_text(data, name, charset)
            if encoding.lower().replace("_", "-") not in ("utf-8", "utf-8-sig", "ascii"):
                metadata["encoding"] = encoding
            data, charset = text.encode("utf-8"), "utf-8"
        stream_info = StreamInfo(
            extension=extension or None,
            mimetype=mimetype,
            charset=charset,
            filename=PurePosixPath(name).name if not url else None,
            url=url,
        )
        kind = SOURCE_TYPES.get(extension, extension.lstrip(".") or "text")
        try:
            with warnings.catch_warnings():
                # Converter libraries warn about what they could not parse (deeply nested
                # HTML, odd PDF objects); the outcome is reported per input instead.
                warnings.simplefilter("ignore")
                result = self._convert_stream(data, stream_info, extension)
        except UnsupportedFormatException:
            raise IngestError(
                "unsupported",
                f"kompl cannot convert {name}: {extension or 'this'} files are not a supported format",
                hint="supported: PDF, DOCX, PPTX, XLSX, HTML, Markdown, text, CSV, JSON (and EPUB, ZIP, notebooks)",
            ) from None
        except FileConversionException as exc:
            fmt = FORMAT_NAMES.get(kind, kind.upper())
            article = "an" if fmt[:1] in "AEIOU" else "a"
            cause = _first_cause(exc)
            raise IngestError(
                "corrupt",
                f"{name} could not be read as {article} {fmt}: the file looks damaged, truncated or not really {article} {fmt}"
                + (f" ({cause})" if cause else ""),
                hint="open it in its usual program to check it, or re-export it, then ingest again",
            ) from None
        except Exception as exc:  # a converter library failing in its own way is still a corrupt input
            raise IngestError("corrupt", f"{name} could not be converted: {exc.__class__.__name__}: {exc}"[:500],
                              hint="check the file, re-export it, then ingest again") from None
        markdown = normalize_markdown(result.markdown or "")
        if not markdown.strip():
            raise IngestError(
                "no_text",
                f"No text could be extracted from {name}",
                hint="a scanned PDF or an image-only document needs OCR first",
            )
        front = frontmatter_metadata(markdown) if kind in ("markdown", "text") else {}
        if front:
            metadata["document"] = front
        doc_title = " ".join((result.title or front.get("title") or "").split())
        if not doc_title and extension in OOXML_EXTENSIONS:
            doc_title = _ooxml_title(data)
        if doc_title:
            title, title_from = doc_title[:300], "document"
        elif (h1 := title_from_markdown(markdown)) is not None:
            title, title_from = h1, "heading"
        else:
            title, title_from = fallback_title, fallback_from
        return Converted(markdown, title, title_from, kind, metadata)


OOXML_EXTENSIONS = {".docx", ".pptx", ".xlsx"}
_DC_TITLE = re.compile(r"<dc:title(?:\s[^>]*)?>([^<]*)</dc:title>")


def _ooxml_title(data: bytes) -> str:
    """The title an Office file carries in docProps/core.xml (markitdown does not read it)."""
    import html
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            core = archive.read("docProps/core.xml")[:100_000].decode("utf-8", "replace")
    except (KeyError, zipfile.BadZipFile, OSError, ValueError):
        return ""
    match = _DC_TITLE.search(core)
    return " ".join(html.unescape(match.group(1)).split()) if match else ""


def _first_cause(exc: Exception) -> str:
    attempts = getattr(exc, "attempts", None) or []
    for attempt in attempts:
        info = getattr(attempt, "exc_info", None)
        if info and info[1] is not None:
            return f"{info[1].__class__.__name__}: {info[1]}"[:200]
    return ""
