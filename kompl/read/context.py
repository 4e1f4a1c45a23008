"""Fitting a question, its conversation and wiki pages into a model's context budget.

What is never cut: the instructions (the prompt template and the JSON-reply
instruction) and the question. They are measured first by rendering the real
prompt with no pages and no history. What is left is shared:

- history gets at most `HISTORY_SHARE` of it and is filled from the NEWEST turn
  backwards, so the most recent turns stay, in their original order;
- pages get the rest. Each page is split into passages (paragraphs; an
  over-long paragraph into sentences), passages are ranked by how many of the
  question's words they hold (weighted by rarity), and each page keeps its best
  passages within its share (the opening paragraph, and passages sharing a word
  with the question), shown in page order with "…" where text was skipped.
  A share a page does not use passes to the next page.

The result is checked against the rendered prompt; if estimates were off,
the weakest passages (then the oldest turns) go until it fits. Whatever was
left out is listed in `left_out` with the reason.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kompl.read.search import terms
from kompl.text import approx_tokens

HISTORY_SHARE = 0.3  # of the budget left after instructions and question
GAP = "…"
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_WIKILINK = re.compile(r"\[\[([^\]|\n]+)(?:\|([^\]\n]+))?\]\]")


@dataclass
class Context:
    pages: list[dict[str, Any]]  # [{page_id, title, passages}], as the model sees them
    history: list[dict[str, str]]  # [{role, content}], oldest first
    prompt_tokens: int
    budget: int
    left_out: list[dict[str, Any]] = field(default_factory=list)  # [{what, why}]


def stem(word: str) -> str:
    """A crude suffix strip so "discoveries" meets "discovery" and "tested" meets "test"."""
    for suffix in ("ies", "ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def question_terms(question: str) -> set[str]:
    return {stem(t) for t in terms(question)}


def plain(body: str) -> str:
    """Page body as reading text: [[Target|label]] -> label, [[Target]] -> Target."""
    return _WIKILINK.sub(lambda m: m.group(2) or m.group(1), body)


def passages(body: str, max_tokens: int | None = None) -> list[str]:
    """Paragraphs of `body` (blank-line separated; a heading joins the paragraph under it).

    A paragraph longer than `max_tokens` is split into its sentences.
    """
    out: list[str] = []
    heading = ""
    for block in re.split(r"\n\s*\n", plain(body)):
        block = block.strip()
        if not block:
            continue
        if block.startswith("#") and "\n" not in block:
            heading = block
            continue
        if heading:
            block, heading = f"{heading}\n{block}", ""
        if max_tokens and approx_tokens(block) > max_tokens:
            out.extend(s.strip() for s in _SENTENCE.split(block) if s.strip())
        else:
            out.append(block)
    if heading:
        out.append(heading)
    return out


def score_passages(texts: list[str], qterms: set[str], idf: dict[str, float]) -> list[float]:
    scores = []
    for text in texts:
        words = Counter(stem(t) for t in terms(text))
        scores.append(sum(idf.get(t, 1.0) * (1 + math.log(words[t])) for t in qterms if words.get(t)))
    return scores


def fit_history(turns: list[dict[str, str]], budget: int) -> tuple[list[dict[str, str]], int]:
    """The most recent turns that fit in `budget` tokens, oldest first; and how many were dropped.

    Filled from the newest turn backwards and stopped at the first turn that
    does not fit, so the kept turns are one unbroken, most recent stretch.
    """
    kept: list[dict[str, str]] = []
    used = 0
    for turn in reversed(turns):
        cost = approx_tokens(json.dumps(turn, ensure_ascii=False)) + 1
        if used + cost > budget:
            break
        kept.append(turn)
        used += cost
    kept.reverse()
    return kept, len(turns) - len(kept)


def build_context(
    question: str,
    pages: list[dict[str, Any]],
    turns: list[dict[str, str]],
    *,
    budget: int,
    measure,
) -> Context:
    """Choose history turns and page passages for `question` within `budget` tokens.

    `pages`: [{page_id, title, body}] best first. `measure(pages, history)` returns
    the token count of the full rendered prompt (instructions and question included).
    """
    left_out: list[dict[str, Any]] = []
    fixed = measure([], [])
    available = budget - fixed
    if available <= 0:
        left_out.append({"what": f"all {len(pages)} page(s) and {len(turns)} earlier message(s)",
                         "why": f"the instructions and the question alone take {fixed} of {budget} tokens"})
        return Context([], [], fixed, budget, left_out)

    history, dropped = fit_history(turns, int(available * HISTORY_SHARE)) if turns else ([], 0)
    if dropped:
        left_out.append({"what": f"the {dropped} oldest message(s) of the conversation", "why": "context budget"})
    page_budget = available - (measure([], history) - fixed)

    chosen = _choose_passages(question, pages, page_budget, left_out)
    # Estimates above are per passage; the rendered prompt is the judge.
    while True:
        tokens = measure(_as_variables(chosen), history)
        if tokens <= budget:
            break
        if not _drop_weakest(chosen, left_out):
            if not history:
                break
            history = history[1:]
            left_out.append({"what": "one more of the oldest messages", "why": "context budget"})
    chosen = [c for c in chosen if c["picked"]]
    return Context(_as_variables(chosen), history, measure(_as_variables(chosen), history), budget, left_out)


def _choose_passages(question: str, pages: list[dict[str, Any]], budget: int, left_out: list) -> list[dict]:
    if not pages:
        return []
    qterms = question_terms(question)
    per_page = max(1, budget // len(pages))
    split = [passages(p["body"], max_tokens=max(40, per_page // 2)) for p in pages]
    df = Counter(t for texts in split for text in texts for t in {stem(w) for w in terms(text)} if t in qterms)
    n = sum(len(texts) for texts in split) or 1
    idf = {t: math.log((n + 1) / (df[t] + 1)) + 1 for t in qterms}
    chosen, carry = [], 0
    for index, (page, texts) in enumerate(zip(pages, split)):
        share = per_page + carry
        overhead = approx_tokens(json.dumps({"page_id": page["page_id"], "title": page["title"], "passages": []},
                                            ensure_ascii=False))
        scores = score_passages(texts, qterms, idf)
        # The opening paragraph usually says what the page is: a small prior.
        if scores:
            scores[0] += 0.1
        order = sorted(range(len(texts)), key=lambda i: (-scores[i], i))
        used, picked = overhead, set()
        for i in order:
            if scores[i] <= 0:
                break  # no word of the question: not worth the tokens
            cost = approx_tokens(json.dumps(texts[i], ensure_ascii=False)) + 1
            if used + cost <= share:
                picked.add(i)
                used += cost
        if not picked and texts and share - overhead > 20:
            best = order[0]  # one passage longer than the whole share: keep its most relevant start
            texts[best] = _clip_tokens(texts[best], share - overhead - 2)
            picked.add(best)
            used = share
            left_out.append({"what": f"the end of a passage of page {page['page_id']} ({page['title']})",
                             "why": "context budget: one passage is longer than the page's share"})
        if not picked:
            left_out.append({"what": f"page {page['page_id']} ({page['title']})", "why": "context budget"})
            carry = share
            continue
        if len(picked) < len(texts):
            left_out.append({"what": f"{len(texts) - len(picked)} of {len(texts)} passages of page "
                                     f"{page['page_id']} ({page['title']})",
                             "why": "context budget: the passages least related to the question"})
        carry = max(0, share - used)
        chosen.append({"page": page, "texts": texts, "scores": scores, "picked": picked, "rank": index})
    return chosen


def _drop_weakest(chosen: list[dict], left_out: list) -> bool:
    """Remove the least relevant passage of the lowest-ranked page that has more than one,
    else the lowest-ranked page. False when nothing is left to drop."""
    for entry in reversed(chosen):
        if len(entry["picked"]) > 1:
            weakest = min(entry["picked"], key=lambda i: (entry["scores"][i], -i))
            entry["picked"].discard(weakest)
            left_out.append({"what": f"one more passage of page {entry['page']['page_id']}", "why": "context budget"})
            return True
    for entry in reversed(chosen):
        if entry["picked"]:
            entry["picked"] = set()
            left_out.append({"what": f"page {entry['page']['page_id']} ({entry['page']['title']})",
                             "why": "context budget"})
            return True
    return False


def _as_variables(chosen: list[dict]) -> list[dict[str, Any]]:
    out = []
    for entry in chosen:
        if not entry["picked"]:
            continue
        shown, last = [], None
        for i in sorted(entry["picked"]):
            if (last is None and i > 0) or (last is not None and i != last + 1):
                shown.append(GAP)
            shown.append(entry["texts"][i])
            last = i
        if last is not None and last < len(entry["texts"]) - 1:
            shown.append(GAP)
        out.append({"page_id": entry["page"]["page_id"], "title": entry["page"]["title"], "passages": shown})
    return out


def _clip_tokens(text: str, tokens: int) -> str:
    chars = max(0, tokens * 4 - 1)
    return text if len(text) <= chars else text[:chars].rstrip() + GAP


__all__ = ["Context", "build_context", "fit_history", "passages", "plain", "question_terms", "score_passages", "stem"]
