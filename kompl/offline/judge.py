"""The offline model's `judge_contradiction` purpose: do two claims about one topic disagree?

Rules over the two claims' words, in order (the first that applies decides):

1. They must say something about the same thing: at least `MIN_SHARED` content
   words in common besides the topic's own name and an overlap of at least
   `MIN_OVERLAP` of the shorter claim; otherwise "compatible".
2. Different numbers for the same measured thing: both claims carry numbers of
   the same kind (years, or other quantities), each has one the other lacks, and
   the rest of the claims overlap strongly -> "contradicts".
3. Refutation: a negation or refutation cue ("not", "never", "wrong", "myth",
   "false", "rarely, if ever", ...) next to the shared content in exactly one
   claim -> "contradicts"; if the other claim calls the matter disputed it is
   doubted by both -> "compatible"; cues in both -> "compatible".
4. Contrast: "instead", "contrary to", "in fact" ... next to the shared
   content in exactly one claim, when the claims do not simply say the same
   thing -> "contradicts" (less sure).
5. Dispute: "disputed", "contested", "disagree" ... in exactly one claim ->
   "unsure" (it reports a dispute without taking a side).
6. Otherwise "compatible".

A cue counts only within `CUE_WINDOW` words of a shared content word in the same
clause, so "not toxic to white blood cells" does not refute a claim about who
discovered penicillin. Deterministic; the reason names the rule and the words.
"""

from __future__ import annotations

import re

from kompl.offline import handler
from kompl.offline.common import STOP

MIN_SHARED = 3  # content words in common (topic words excluded)
MIN_OVERLAP = 0.2  # shared / content words of the shorter claim
SAME_OVERLAP = 0.6  # from here on, two claims say much the same thing
NUMBER_OVERLAP = 0.5  # overlap needed before different numbers count as a disagreement
CUE_WINDOW = 6  # words either side of a cue that it applies to

# Multi-word cues become one token before the claims are split into clauses.
_PHRASES = {
    "rarely, if ever": "rarely_if_ever", "rarely if ever": "rarely_if_ever", "hardly ever": "hardly_ever",
    "no longer": "no_longer", "not true": "not_true", "contrary to": "contrary_to", "in fact": "in_fact",
    "as opposed to": "as_opposed_to", "on the contrary": "contrary_to",
    # internal contrasts ("X instead of Y" asserts X): not cues
    "instead of": "instead_of", "rather than": "rather_than",
}
NEGATION = frozenset(
    "not no never nor cannot can't isn't wasn't aren't weren't didn't doesn't don't won't hasn't haven't "
    "wrong myth myths false untrue incorrect mistaken erroneous apocryphal legend fiction debunked refuted "
    "refutes refute denied denies deny disproved disproves unfounded baseless rarely_if_ever hardly_ever "
    "no_longer not_true".split()
)
CONTRAST = frozenset("instead contrary_to in_fact actually as_opposed_to".split())
DISPUTE = frozenset(
    "disputed dispute disputes contested contests controversial disagree disagrees disagreement "
    "doubt doubts doubtful questioned questionable debated uncertain".split()
)
_CUES = NEGATION | CONTRAST | DISPUTE
_TOKEN = re.compile(r"[a-z][a-z'_-]*|\d[\d,.]*\d|\d")
_CLAUSE = re.compile(r"[;:,()\[\]\u2014\u2013]|\s-\s|\b(?:but|while|whereas|although|though|which)\b")
_YEAR = re.compile(r"^(1[0-9]{3}|20[0-9]{2})$")


@handler("judge_contradiction")
def judge_contradiction(variables: dict, schema: type) -> dict:
    """One verdict per pair of claims, in the order given."""
    verdicts = []
    for pair in variables.get("pairs") or []:
        a, b = pair.get("a") or {}, pair.get("b") or {}
        verdicts.append(judge(_text(a), _text(b), str(pair.get("topic") or "")))
    return {"verdicts": verdicts}


def _text(side: dict | str) -> str:
    if isinstance(side, str):
        return side
    return str(side.get("claim") or side.get("quote") or "")


def judge(a: str, b: str, topic: str = "") -> dict:
    """{verdict, confidence, reason} for claims `a` and `b` about `topic`."""
    topic_words = {_stem(t) for t in _TOKEN.findall(topic.lower().replace("\u2019", "'"))}
    clauses_a, clauses_b = _clauses(a), _clauses(b)
    words_a, words_b = _content(clauses_a, topic_words), _content(clauses_b, topic_words)
    shared = words_a & words_b
    small = min(len(words_a), len(words_b)) or 1
    overlap = len(shared) / small
    listed = ", ".join(sorted(shared)[:6])
    if len(shared) < MIN_SHARED or overlap < MIN_OVERLAP:
        return _verdict("compatible", 0.6, f"the claims talk about different things (shared words: {listed or 'none'})")

    nums_a, nums_b = _numbers(a), _numbers(b)
    if nums_a and nums_b and overlap >= NUMBER_OVERLAP:
        only_a, only_b = nums_a - nums_b, nums_b - nums_a
        if any(_same_kind(x, y) for x in only_a for y in only_b):
            return _verdict("contradicts", round(0.55 + 0.35 * overlap, 2),
                            f"different figures for the same thing ({', '.join(sorted(only_a))} vs "
                            f"{', '.join(sorted(only_b))}; shared: {listed})")

    neg_a, neg_b = _cues(clauses_a, shared, NEGATION), _cues(clauses_b, shared, NEGATION)
    dis_a, dis_b = _cues(clauses_a, shared, DISPUTE), _cues(clauses_b, shared, DISPUTE)
    if bool(neg_a) != bool(neg_b):
        cue, other_doubts = (neg_a, dis_b) if neg_a else (neg_b, dis_a)
        which = "a" if neg_a else "b"
        if other_doubts:
            return _verdict("compatible", 0.55, f"both claims doubt it ({_q(cue)} / {_q(other_doubts)})")
        return _verdict("contradicts", round(min(0.95, 0.55 + 0.4 * overlap), 2),
                        f"claim {which} denies what the other states ({_q(cue)} about: {listed})")
    if neg_a and neg_b:
        return _verdict("compatible", 0.6, f"both claims deny it ({_q(neg_a)} / {_q(neg_b)})")

    con_a, con_b = _cues(clauses_a, shared, CONTRAST), _cues(clauses_b, shared, CONTRAST)
    if bool(con_a) != bool(con_b) and overlap < SAME_OVERLAP:
        which = "a" if con_a else "b"
        return _verdict("contradicts", 0.55,
                        f"claim {which} sets itself against the other ({_q(con_a or con_b)} about: {listed})")
    if bool(dis_a) != bool(dis_b):
        return _verdict("unsure", 0.5, f"one claim calls the matter disputed ({_q(dis_a or dis_b)}); "
                                       "the other states it")
    return _verdict("compatible", round(min(0.9, 0.5 + 0.3 * overlap), 2),
                    f"same subject, no sign of disagreement (shared: {listed})")


def _verdict(verdict: str, confidence: float, reason: str) -> dict:
    return {"verdict": verdict, "confidence": max(0.0, min(1.0, confidence)), "reason": reason}


def _q(cues: set[str]) -> str:
    return ", ".join(f'"{c.replace("_", " ")}"' for c in sorted(cues))


def _clauses(text: str) -> list[list[str]]:
    """Lower-case tokens per clause, multi-word cues joined into one token."""
    low = " ".join(text.lower().replace("\u2019", "'").split())
    for phrase, token in _PHRASES.items():
        low = low.replace(phrase, token)
    return [toks for part in _CLAUSE.split(low) if (toks := _TOKEN.findall(part))]


def _stem(word: str) -> str:
    word = word.strip("'-_")
    word = word.removesuffix("'s")
    if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word


def _is_content(word: str) -> bool:
    return len(word) > 2 and word not in STOP and word not in _CUES and not word[0].isdigit() and "_" not in word


def _content(clauses: list[list[str]], exclude: set[str]) -> set[str]:
    return {s for toks in clauses for t in toks if _is_content(t) and (s := _stem(t)) not in exclude}


def _cues(clauses: list[list[str]], shared: set[str], cues: frozenset) -> set[str]:
    """Cues of the kind `cues` that stand within CUE_WINDOW words of shared content, clause by clause."""
    found: set[str] = set()
    for toks in clauses:
        stems = [_stem(t) for t in toks]
        for i, tok in enumerate(toks):
            if tok in cues:
                near = stems[max(0, i - CUE_WINDOW):i] + stems[i + 1:i + 1 + CUE_WINDOW]
                if any(s in shared for s in near):
                    found.add(tok)
    return found


def _numbers(text: str) -> set[str]:
    out = set()
    for raw in re.findall(r"\d[\d,.]*\d|\d", text):
        value = raw.replace(",", "")
        out.add(value.rstrip(".0") if "." in value else value)
    return out


def _same_kind(x: str, y: str) -> bool:
    return bool(_YEAR.match(x)) == bool(_YEAR.match(y))
