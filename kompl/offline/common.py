"""Text helpers shared by the offline model's handlers."""

from __future__ import annotations

import math
import re
from collections import Counter



_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]+|\d+")
STOP = frozenset(
    "a an the and or but if of to in on at by for with from as is are was were be been being it its "
    "this that these those he she they them his her their we our you your i me my not no so than then "
    "there here which who whom whose what when where why how all any both each few more most other some "
    "such only own same too very can will just should would could may might must do does did has have "
    "had having about above after again against below between into through during before under over "
    "out up down off also said says new one two like get got just".split()
)
# Nouns too general to be a wiki concept however often they occur.
GENERIC_NOUNS = frozenset(
    "year years time times day days week weeks month months people person thing things way ways "
    "part parts lot lots number numbers kind kinds end fact point case place world man men woman "
    "women life percent today yesterday tomorrow news story article report statement comment "
    "comments question questions answer answers information event events date occasion occasions "
    "group side sides home".split()
)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text) if w.lower() not in STOP and len(w) > 2]


def _cosine(a: Counter, b: Counter) -> float:
    if not a or not b:
        return 0.0
    dot = sum(v * b.get(k, 0) for k, v in a.items())
    na = math.sqrt(sum(v * v for v in a.values()))
    nb = math.sqrt(sum(v * v for v in b.values()))
    return dot / (na * nb) if na and nb else 0.0


def _tfidf(docs: list[list[str]]) -> list[Counter]:
    df: Counter = Counter()
    for words in docs:
        df.update(set(words))
    n = len(docs)
    out = []
    for words in docs:
        tf = Counter(words)
        out.append(Counter({w: c * (math.log((n + 1) / (df[w] + 1)) + 1) for w, c in tf.items()}))
    return out


