"""Page text: slugs, YAML frontmatter, and deterministic [[wikilink]] injection.

Links are added by code, never by the model: the longest title or alias wins,
only the first mention of each target in a page is linked, and frontmatter,
code, headings, existing links, URLs and HTML are never touched. Names made of
non-word characters ("C++", "AT&T") are matched with explicit boundaries
instead of `\\b`, which would fail on them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

FRONTMATTER_FIELDS = ("title", "page_type", "category", "summary", "sources", "model", "updated")
_SLUG_STRIP = re.compile(r"[^a-z0-9]+")

# Spans that must never receive a link, tried in this order at each position.
_PROTECTED = re.compile(
    r"(?P<fence>^(?P<fchar>`{3,}|~{3,})[^\n]*\n.*?(?:^(?P=fchar)[^\n]*$|\Z))"
    r"|(?P<heading>^\#{1,6}[ \t][^\n]*$)"
    r"|(?P<code>`+[^`\n]*`+)"
    r"|(?P<wikilink>\[\[[^\]\n]*\]\])"
    r"|(?P<mdlink>!?\[[^\]\n]*\]\([^)\n]*\))"
    r"|(?P<url>\b(?:https?|ftp|mailto):[^\s<>)\]]+)"
    r"|(?P<html><[^>\n]+>)"
    r"|(?P<cite>\[(?:src-[0-9a-f]+(?:,\s*)?)+\])",
    re.MULTILINE | re.DOTALL,
)


def slugify(title: str, max_len: int = 80) -> str:
    """File-name slug of a title: ascii, lower case, words joined by '-' ("C++" -> "c-plus-plus")."""
    text = title.replace("++", " plus plus ").replace("+", " plus ").replace("#", " sharp ").replace("&", " and ")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    slug = _SLUG_STRIP.sub("-", text).strip("-")
    if len(slug) > max_len:
        slug = slug[:max_len].rsplit("-", 1)[0] or slug[:max_len]
    return slug or "page"


def split_frontmatter(text: str) -> tuple[str, str]:
    """(frontmatter block including its --- lines, body). Empty block when there is none."""
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end != -1:
            return text[: end + 5], text[end + 5 :]
        if text.endswith("\n---"):
            return text, ""
    return "", text


def one_line(value):
    """Frontmatter strings are single lines: every run of whitespace (YAML's own line
    breaks \x85, \u2028 and \u2029 included) becomes one space."""
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, list):
        return [one_line(v) for v in value]
    return value


def render_page(meta: Mapping, body: str) -> str:
    """Frontmatter (the schema's fields in their order, then any others) + body."""
    import yaml

    ordered = {k: one_line(meta[k]) for k in FRONTMATTER_FIELDS if k in meta}
    ordered.update({k: one_line(v) for k, v in meta.items() if k not in ordered})
    head = yaml.safe_dump(ordered, sort_keys=False, allow_unicode=True, default_flow_style=None, width=10_000)
    return f"---\n{head}---\n{body if body.endswith(chr(10)) or not body else body + chr(10)}"


def parse_page(text: str) -> tuple[dict, str]:
    """(frontmatter dict, body). Raises ValueError when the frontmatter is not a YAML mapping."""
    import yaml

    block, body = split_frontmatter(text)
    if not block:
        return {}, text
    inner = block[4:].rsplit("---", 1)[0]
    try:
        meta = yaml.safe_load(inner) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"invalid frontmatter: {exc}") from None
    if not isinstance(meta, dict):
        raise ValueError("frontmatter is not a mapping")
    return meta, body


def link_pattern(names: list[str]) -> re.Pattern | None:
    """One regex matching any of `names`, longest first, case-insensitive, with boundaries
    that work for names starting or ending in non-word characters."""
    names = sorted({n for n in names if n.strip()}, key=lambda n: (-len(n), n))
    if not names:
        return None
    alternation = "|".join(re.escape(n) for n in names)
    return re.compile(rf"(?<![\w])(?:{alternation})(?![\w])", re.IGNORECASE)


def inject_links(text: str, targets: Mapping[str, str], *, self_title: str | None = None) -> str:
    """Link the first mention of each target page in `text`.

    `targets` maps every name to link (titles and aliases, any case) to the
    title of the page it belongs to. The page never links to itself; a target
    already linked anywhere in the page is not linked again.
    """
    lowered = {name.casefold(): title for name, title in targets.items() if name.strip()}
    if self_title:
        lowered = {n: t for n, t in lowered.items() if t.casefold() != self_title.casefold()}
    pattern = link_pattern(list(lowered))
    if pattern is None:
        return text
    front, body = split_frontmatter(text)
    linked = {m.group(1).split("|")[0].strip().casefold() for m in re.finditer(r"\[\[([^\]\n]+)\]\]", body)}
    out: list[str] = []
    pos = 0
    for prot in _PROTECTED.finditer(body):
        out.append(_link_segment(body[pos : prot.start()], pattern, lowered, linked))
        out.append(prot.group(0))
        pos = prot.end()
    out.append(_link_segment(body[pos:], pattern, lowered, linked))
    return front + "".join(out)


def _link_segment(segment: str, pattern: re.Pattern, lowered: Mapping[str, str], linked: set[str]) -> str:
    if not segment:
        return segment

    def replace(match: re.Match) -> str:
        found = match.group(0)
        title = lowered.get(found.casefold())
        if title is None or title.casefold() in linked:
            return found
        linked.add(title.casefold())
        return f"[[{title}]]" if found == title else f"[[{title}|{found}]]"

    return pattern.sub(replace, segment)


def wikilinks(text: str) -> list[str]:
    """Titles of the pages a text links to, in order of first appearance."""
    _front, body = split_frontmatter(text)
    seen: dict[str, None] = {}
    for match in re.finditer(r"\[\[([^\]\n|#]+)(?:[#|][^\]\n]*)?\]\]", body):
        seen.setdefault(match.group(1).strip(), None)
    return list(seen)
