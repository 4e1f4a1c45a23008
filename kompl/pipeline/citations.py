"""Page-body text rules shared by drafting, the offline model and maintenance: citations, sentences, links."""

from __future__ import annotations

import re

from kompl.wiki.markdown import split_frontmatter

CITATION = re.compile(r"\[\s*(src-[0-9A-Za-z]+(?:\s*[,;]\s*src-[0-9A-Za-z]+)*)\s*\]")
_WIKILINK = re.compile(r"\[\[([^\]|\n]+)(?:\|([^\]\n]+))?\]\]")
_SENTENCE_END = re.compile(
    r"[.!?…][\"'”’)]*(?:\s*\[\s*src-[0-9A-Za-z]+(?:\s*[,;]\s*src-[0-9A-Za-z]+)*\s*\][.!?]?)?\s+(?=[A-Z0-9\"“‘(\[*_])"
)
_SPACES = re.compile(r"[ \t]+")


def citation_ids(group: str) -> list[str]:
    """The ids inside one citation group's brackets."""
    return [p.strip() for p in re.split(r"[,;]", group) if p.strip()]


def cite(sentence: str, ids: list[str] | tuple[str, ...] | str) -> str:
    """`sentence` with a citation before its final full stop (after a closing quote)."""
    ids = [ids] if isinstance(ids, str) else list(dict.fromkeys(ids))
    text = sentence.strip()
    if not ids:
        return text
    group = f"[{', '.join(ids)}]"
    match = re.match(r"^(.*?)([.!?…]*)$", text, re.S)
    body, stop = match.group(1), match.group(2)
    if not stop:  # ends in a closing quote or bracket ("... “yes.”"), or without punctuation
        return f"{text} {group}" if body.endswith(("\"", "”", "’", "'", ")")) else f"{text} {group}."
    return f"{body} {group}{stop}"


def split_sentences(text: str) -> list[str]:
    """Sentences of a paragraph (a simple splitter that keeps a trailing citation with its sentence)."""
    text = re.sub(r"\s+", " ", text).strip()
    if not text:
        return []
    out, pos = [], 0
    for match in _SENTENCE_END.finditer(text):
        out.append(text[pos:match.end()].strip())
        pos = match.end()
    out.append(text[pos:].strip())
    return [s for s in out if s]


def strip_links(text: str) -> str:
    """`[[Title]]` -> Title, `[[Title|shown]]` -> shown."""
    return _WIKILINK.sub(lambda m: m.group(2) or m.group(1), text)


def body_key(text: str) -> str:
    """What two bodies must share to count as the same page (links and spacing ignored)."""
    return re.sub(r"\s+", " ", strip_links(split_frontmatter(text or "")[1])).strip()


def first_sentence(text: str, max_chars: int = 300) -> str:
    """The first sentence of the first prose line (no headings, citations, links or markup)."""
    for line in split_frontmatter(text)[1].splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "|", "```", "---", ">")) or re.fullmatch(r"[-*_=\s]+", line):
            continue
        line = re.sub(r"^(?:[-*+]|\d+[.)])\s+", "", line)
        line = CITATION.sub("", strip_links(line))
        line = re.sub(r"[*_`]+", "", line)
        line = _SPACES.sub(" ", line).replace(" .", ".").replace(" ,", ",").strip()
        sentences = split_sentences(line)
        if sentences:
            sentence = sentences[0]
            return sentence if len(sentence) <= max_chars else sentence[: max_chars - 1].rsplit(" ", 1)[0] + "…"
    return ""


def remove_cited(text: str, removed: set[str]) -> tuple[str, int]:
    """Take out every statement whose citation names only `removed` sources, and those ids
    from mixed citations. Returns (text, statements removed). A statement is the text from
    the previous sentence end, line start or ';' up to its citation."""
    if not removed:
        return text, 0
    out: list[str] = []
    pos = dropped = 0
    for match in CITATION.finditer(text):
        ids = citation_ids(match.group(1))
        keep = [i for i in ids if i not in removed]
        if len(keep) == len(ids):
            continue
        if keep:
            out.append(text[pos:match.start()] + f"[{', '.join(keep)}]")
        else:
            before = text[pos:match.start()]
            cut = _statement_start(before)
            out.append(before[:cut].rstrip(" ;,") if cut else "")
            dropped += 1
            pos = match.end()
            joiner = re.match(r"[ \t]*[;,][ \t]*", text[pos:])
            if joiner and re.search(r"(?:^|[.!?…\]\n])\s*$", "".join(out)):
                pos += joiner.end()  # "A [a]. B [gone]; C [a]." -> "A [a]. C [a]."
                out.append(" ")
            continue
        pos = match.end()
    out.append(text[pos:])
    return _tidy("".join(out)), dropped


def _statement_start(before: str) -> int:
    """Where the statement that ends at the end of `before` starts."""
    best = 0
    for pattern in (r"\n", r"[.!?…][\"'”’)]*\s+", r";\s*", r"\]\s*[.!?]?\s+"):
        for m in re.finditer(pattern, before):
            best = max(best, m.end())
    return best


def _tidy(text: str) -> str:
    """Drop lines and sections that a removal left empty, and doubled spaces."""
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and re.fullmatch(r"(?:[-*+]|\d+[.)])?\s*(?:\*\*[^*]*\*\*:?)?\s*[.;,:]*", stripped) and not stripped.startswith("**"):
            continue
        lines.append(re.sub(r"(?<=\S) {2,}", " ", line.rstrip()).replace(" .", ".").replace(" ;", ";"))
    # A heading followed only by blank lines until the next heading of its level or higher goes too.
    out: list[str] = []
    for i, line in enumerate(lines):
        heading = re.match(r"^(#{1,6})\s", line)
        if heading:
            level = len(heading.group(1))
            rest = lines[i + 1:]
            nxt = next((j for j, l in enumerate(rest) if re.match(rf"^#{{1,{level}}}\s", l)), len(rest))
            if not any(l.strip() for l in rest[:nxt]):
                continue
        out.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip() + "\n"


def clean_body(body: str, allowed: set[str], removed: set[str]) -> tuple[str, list[dict]]:
    """The model's body made safe to store: no frontmatter, no wikilinks, citations only to
    allowed ids (a statement citing only other ids is taken out). Returns (body, notes)."""
    notes: list[dict] = []
    text = strip_links(split_frontmatter((body or "").replace("\r\n", "\n"))[1].strip())
    foreign = sorted({i for m in CITATION.finditer(text) for i in citation_ids(m.group(1)) if i not in allowed})
    if foreign:
        # A statement whose only support is an id the page may not cite has no source, so
        # (schema.md: "a claim without a source does not belong on the page") it goes too.
        text, dropped = remove_cited(text, set(foreign))
        for source_id in foreign:
            why = "a removed source" if source_id in removed else "not among the page's sources"
            notes.append({"what": f"citation [{source_id}] in the draft",
                          "why": f"{why}: taken out, with any statement citing only it"})
        if dropped:
            notes.append({"what": f"{dropped} statement(s) of the draft supported only by such citations",
                          "why": "a claim without a citable source does not belong on the page"})
    return (text.strip() + "\n") if text.strip() else "", notes


__all__ = ["CITATION", "body_key", "citation_ids", "cite", "clean_body", "first_sentence", "remove_cited",
           "split_sentences", "strip_links"]
