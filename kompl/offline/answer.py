"""The offline model's `answer` purpose: extractive answers, each sentence cited to its page.

It picks the sentences of the given passages that share the most (rare) words
with the question, keeps at most MAX_SENTENCES of them, and quotes them with
`[page:<id>]` after each. It never writes anything the pages do not say: when
no sentence shares a word with the question, it says that the wiki has nothing
on it and cites nothing.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from kompl.offline import handler

MAX_SENTENCES = 4
MIN_SHARE = 0.34  # of the best sentence's score: weaker sentences are not worth quoting
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_WORD = re.compile(r"\w+", re.UNICODE)
_CITE = re.compile(r"\s*\[(?:src-[0-9a-f]+(?:,\s*)?)+\]")
# "**spore**: …" (a concept line) or "A — related to — B: …" (a relationship line): quote what follows.
_PREFIX = re.compile(r"^(?:[^:]{0,80}\*\*|[^:]{0,80} — [^:]{0,80}):\s+")
_LABEL = re.compile(r"(?:From \*.*\*|\*\*[^*]+\*\*|\*[^*]+\*|.{0,80}):")
_STOP = frozenset(
    ["a", "an", "the", "and", "or", "but", "if", "of", "to", "in", "on", "at", "by", "for", "with", "from", "as", "is", "are", "was", "were", "be", "been", "being", "it", "its", "this", "that", "these", "those", "he", "she", "they", "them", "his", "her", "their", "we", "our", "you", "your", "i", "me", "my", "not", "no", "so", "than", "then", "there", "here", "which", "who", "whom", "whose", "what", "when", "where", "why", "how", "all", "any", "both", "each", "more", "most", "other", "some", "such", "only", "own", "same", "too", "very", "can", "will", "just", "should", "would", "could", "may", "might", "must", "do", "does", "did", "has", "have", "had", "about", "into", "over", "also", "tell", "explain", "describe", "please", "know", "wiki"]
)
NOTHING_FOUND = "The wiki has nothing that answers this question."


def _stem(word: str) -> str:
    for suffix in ("ies", "ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def _terms(text: str) -> list[str]:
    return [_stem(w) for w in (t.lower() for t in _WORD.findall(text)) if w not in _STOP and len(w) > 1]


@handler("answer")
def answer(variables: dict, schema: type) -> dict:
    """The best supporting sentences for the question, each cited to its page."""
    question = str(variables.get("question") or "")
    qterms = set(_terms(question))
    candidates: list[tuple[int, str, int, str]] = []  # (page_id, title, position, sentence)
    rank: dict[int, int] = {}
    for page in variables.get("pages") or []:
        rank.setdefault(int(page["page_id"]), len(rank))
        position = 0
        for passage in page.get("passages") or []:
            if passage == "…":
                continue
            for line in str(passage).splitlines():
                line = line.strip()
                if not line or line.startswith(("#", "|")) or _LABEL.fullmatch(line):
                    continue  # headings, table rows and labels ("From *Title*:") are not statements
                for sentence in _SENTENCE.split(line.lstrip("-> ").lstrip("* ").strip() if not line.startswith("**") else line):
                    sentence = _PREFIX.sub("", _CITE.sub("", sentence).strip())
                    sentence = sentence.replace("**", "")
                    if len(sentence) > 12:
                        candidates.append((int(page["page_id"]), str(page.get("title") or ""), position, sentence))
                        position += 1
    if not qterms or not candidates:
        return {"answer": NOTHING_FOUND, "citations": []}
    df = Counter(t for c in candidates for t in set(_terms(c[3])) if t in qterms)
    n = len(candidates)
    idf = {t: math.log((n + 1) / (df[t] + 1)) + 1 for t in qterms}
    scored = []
    for index, (page_id, title, position, sentence) in enumerate(candidates):
        words = set(_terms(sentence))
        hit = qterms & words
        if not hit:
            continue
        coverage = sum(idf[t] for t in hit) / sum(idf.values())
        # Pages come ranked by retrieval: among equally good sentences, the better page's wins.
        coverage *= 1 + 0.25 / (1 + rank.get(page_id, 0))
        scored.append((coverage, -index, page_id, title, sentence))
    if not scored:
        return {"answer": NOTHING_FOUND, "citations": []}
    scored.sort(reverse=True)
    best = scored[0][0]
    chosen, seen = [], set()
    for item in scored:
        key = " ".join(_terms(item[4]))
        if item[0] < best * MIN_SHARE or key in seen:
            continue  # too weak, or the same sentence quoted from another page
        seen.add(key)
        chosen.append(item)
        if len(chosen) == MAX_SENTENCES:
            break
    chosen.sort(key=lambda s: -s[1])  # back in the order the pages gave them
    lines, cited = [], {}
    for _score, _order, page_id, title, sentence in chosen:
        lines.append(f"- {sentence} [page:{page_id}]")
        cited.setdefault(page_id, title)
    text = "From the wiki (quoted passages, not a written answer):\n\n" + "\n".join(lines)
    return {"answer": text, "citations": [{"page_id": pid, "title": title} for pid, title in cited.items()]}
