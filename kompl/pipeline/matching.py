"""Entity-resolution rules: name normal forms, the cheap match layers and union-find (pure, no database)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

FUZZY_MERGE = 92.0  # fuzzy score (0-100) that merges on its own
FUZZY_CANDIDATE = 55.0  # below this a shared-token pair is not considered at all

_STOP = {"the", "of", "and", "for", "a", "an", "&", "de", "la", "le", "du", "von", "van", "in", "on", "at", "to"}
_HONORIFICS = {"mr", "mrs", "ms", "miss", "dr", "sir", "dame", "prof", "professor", "judge", "president", "sen", "rep"}
_CORP_SUFFIXES = {"inc", "corp", "corporation", "co", "ltd", "llc", "plc", "gmbh", "ag", "sa"}
_STATE_PREFIXES = ("state of ", "republic of ", "kingdom of ", "commonwealth of ")
_GENERATIONAL = {"jr", "sr", "ii", "iii", "iv", "v"}
_ROMAN = {"ii": 2, "iii": 3, "iv": 4, "vi": 6, "vii": 7, "viii": 8, "ix": 9, "xi": 11, "xii": 12,
          "xiii": 13, "xiv": 14, "xv": 15, "xvi": 16, "xx": 20}
_VERSION = re.compile(r"\d+(?:\.\d+)*")
_PLACE_TYPES = {"GPE", "LOC"}
_ANY_TYPES = {"", "OTHER", "UNKNOWN", "MISC", "CONCEPT"}
# Type pairs that may name one thing although they differ (extractors mislabel these).
_COMPATIBLE = {frozenset({"GPE", "LOC"}), frozenset({"ORG", "PRODUCT"}), frozenset({"ORG", "NORP"}),
               frozenset({"WORK", "PRODUCT"}), frozenset({"EVENT", "WORK"})}


# --- names and matching (pure functions) ---------------------------------------------------

@dataclass
class Name:
    """One distinct (norm, kind) with what the corpus says about it."""

    norm: str
    kind: str = "entity"
    surface: str = ""
    type: str = "OTHER"
    count: int = 1
    context: str = ""
    sources: int = 1
    surfaces: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.surface = self.surface or self.norm
        self.type = (self.type or "OTHER").upper()
        self.base = base_form(self.norm, self.type)
        self.key = self.base.replace("-", " ").replace("/", " ")
        self.key = re.sub(r"\s+", " ", self.key).strip()
        if self.type != "PERSON":  # "Diablo IV" is "Diablo 4"; a person's "III" stays a suffix
            self.key = " ".join(str(_ROMAN[t]) if t in _ROMAN else t for t in self.key.split())
        self.tokens = tuple(self.key.split())
        self.squashed = self.key.replace(" ", "")

    @property
    def id(self) -> tuple[str, str]:
        return (self.norm, self.kind)


def base_form(norm: str, type_: str = "OTHER") -> str:
    """The comparison form of a normalised name: no dots or apostrophes, no "the",
    honorifics (people), company suffixes (organisations) or "State of" (places)."""
    text = norm.replace(".", "").replace("'", "").replace("&", " and ").replace(",", " ")
    text = re.sub(r"\s+", " ", text).strip()
    words = text.split()
    if len(words) > 1 and words[-1] == "s":  # a possessive that norm_name split off ("kelce s")
        words = words[:-1]
    if len(words) > 1 and words[0] == "the":
        words = words[1:]
    if len(words) > 1 and type_ in ({"PERSON"} | _ANY_TYPES) and words[0] in _HONORIFICS:
        words = words[1:]
    if len(words) > 1 and type_ in ({"ORG"} | _ANY_TYPES) and words[-1] in _CORP_SUFFIXES:
        words = words[:-1]
    text = " ".join(words)
    if type_ in (_PLACE_TYPES | _ANY_TYPES):
        for prefix in _STATE_PREFIXES:
            if text.startswith(prefix) and len(text) > len(prefix):
                text = text[len(prefix):]
                break
    return text or norm


def types_compatible(a: str, b: str) -> bool:
    """PERSON only with PERSON (or an untyped name); GPE with LOC; OTHER/unknown with anything."""
    a, b = (a or "OTHER").upper(), (b or "OTHER").upper()
    if a == b:
        return True
    if "PERSON" in (a, b):
        return (b if a == "PERSON" else a) in _ANY_TYPES - {"CONCEPT"}
    if a in _ANY_TYPES or b in _ANY_TYPES:
        return True
    return frozenset({a, b}) in _COMPATIBLE


def _numbers(tokens: tuple[str, ...]) -> list[str]:
    """Numbers and versions in order ("gpt 3.5" -> ["3.5"], "diablo iv" -> ["4"])."""
    out: list[str] = []
    for tok in tokens:
        out.extend([str(_ROMAN[tok])] if tok in _ROMAN else _VERSION.findall(tok))
    return out


def _is_code(token: str, person: bool) -> bool:
    return any(ch.isdigit() for ch in token) or token in _ROMAN or (len(token) == 1 and not person)


def version_siblings(a: Name, b: Name) -> bool:
    """True when the names differ in a number, version or model letter: never the same thing."""
    ta, tb = a.tokens, b.tokens
    person = "PERSON" in (a.type, b.type)
    if person:  # "Kenneth Walker III" is "Kenneth Walker"; "Henry VIII" is not "Henry VII"
        ta, tb = _drop_generational(ta, tb), _drop_generational(tb, ta)
    if _numbers(ta) != _numbers(tb):
        return True
    diff = set(ta) ^ set(tb)
    return bool(diff) and all(_is_code(tok, person) for tok in diff)


def _drop_generational(tokens: tuple[str, ...], other: tuple[str, ...]) -> tuple[str, ...]:
    if len(tokens) >= 3 and tokens[-1] in _GENERATIONAL and not (other and other[-1] in _GENERATIONAL):
        return tokens[:-1]
    return tokens


def looks_like_acronym(name: Name) -> bool:
    letters = re.sub(r"[.\s]", "", name.surface)
    return (2 <= len(letters) <= 6 and letters.isalpha() and letters.isupper()
            and len(name.tokens) == 1)


def initials(name: Name) -> set[str]:
    """Acronyms a multi-word name could have ("federal bureau of investigation" -> fboi, fbi)."""
    words = name.key.split()
    if len(words) < 2:
        return set()
    out = {"".join(w[0] for w in words if w[0].isalpha())}
    out.add("".join(w[0] for w in words if w not in _STOP and w[0].isalpha()))
    return {x for x in out if len(x) >= 2}


def person_parts(name: Name) -> tuple[str, ...]:
    """Whitespace tokens of a name without a generational suffix (hyphenated surnames stay whole)."""
    toks = tuple(name.base.split())
    if len(toks) >= 3 and toks[-1] in _GENERATIONAL:
        toks = toks[:-1]
    return toks


def _fuzzy_prefilter(n: Name, others: list[Name]) -> list[tuple]:
    """Ids of the names that could reach FUZZY_CANDIDATE with `n` (one vectorised rapidfuzz call)."""
    if not others:
        return []
    from rapidfuzz import fuzz, process

    sorted_scores = process.cdist([n.key], [o.key for o in others], scorer=fuzz.token_sort_ratio)[0]
    squashed = process.cdist([n.squashed], [o.squashed for o in others], scorer=fuzz.ratio)[0]
    return [o.id for o, x, y in zip(others, sorted_scores, squashed) if max(x, y) >= FUZZY_CANDIDATE]


def fuzzy_score(a: Name, b: Name) -> float:
    from rapidfuzz import fuzz

    return max(fuzz.token_sort_ratio(a.key, b.key), fuzz.ratio(a.squashed, b.squashed))


@dataclass
class Match:
    layer: str
    confidence: float
    reason: str
    band: bool = False  # ambiguous: needs the embedding or the model
    score: float = 0.0


def match_pair(a: Name, b: Name) -> Match | None:
    """The cheap layers for one pair (exact, acronym, surname, fuzzy), or None for "different".

    Acronym and surname matches assume the match is unique in the corpus; the
    pipeline checks that. `band=True` marks a pair the embedding/model layers decide.
    """
    if a.kind != b.kind or not types_compatible(a.type, b.type):
        return None
    if a.key == b.key:
        return Match("exact", 1.0, f"same name after normalisation ({a.key!r})")
    for short, full in ((a, b), (b, a)):
        if looks_like_acronym(short) and short.key in initials(full):
            conf = 0.9 if len(short.key) >= 3 else 0.85
            return Match("acronym", conf, f"{short.surface!r} is the acronym of {full.surface!r}")
    for short, full in ((a, b), (b, a)):
        sp, fp = person_parts(short), person_parts(full)
        if (len(sp) == 1 and len(fp) >= 2 and sp[-1] == fp[-1] and full.type == "PERSON"
                and short.type in ({"PERSON"} | _ANY_TYPES) and not looks_like_acronym(short)):
            return Match("surname", 0.9, f"{short.surface!r} is the surname of {full.surface!r}")
    if version_siblings(a, b):
        return None
    if "PERSON" in (a.type, b.type) and len(person_parts(a)) >= 2 and person_parts(a) == person_parts(b):
        return Match("fuzzy", 0.95, "same person name without a generational suffix", score=95.0)
    score = fuzzy_score(a, b)
    if score >= FUZZY_MERGE:
        return Match("fuzzy", round(score / 100, 3), f"spelling variants (fuzzy score {score:.0f})", score=score)
    if score >= FUZZY_CANDIDATE and _worth_asking(a, b, score):
        return Match("fuzzy", round(score / 100, 3), f"similar names (fuzzy score {score:.0f})", band=True, score=score)
    return None


def _worth_asking(a: Name, b: Name, score: float) -> bool:
    """Whether a pair below the fuzzy threshold goes on to the embedding and model layers.

    Close spellings do; so does a name contained in another ("Alameda" / "Alameda
    Research"). People with different surnames do not ("Sam X" / "Sam Y"), nor do
    names that merely share a word ("PGA Tour" / "Eras Tour" score below 75).
    """
    from rapidfuzz import fuzz

    if a.type == "PERSON" and b.type == "PERSON":
        pa, pb = person_parts(a), person_parts(b)
        if fuzz.ratio(pa[-1], pb[-1]) < 80:
            return False
    if score >= 75:
        return True
    ta, tb = set(a.tokens) - _STOP, set(b.tokens) - _STOP
    return bool(ta and tb) and (ta < tb or tb < ta)


# --- union-find --------------------------------------------------------------------------

class UnionFind:
    """Union-find over name ids, with member lists (for the cannot-link check) and the tree edges."""

    def __init__(self) -> None:
        self.parent: dict[Any, Any] = {}
        self.members: dict[Any, list] = {}

    def add(self, x: Any) -> None:
        if x not in self.parent:
            self.parent[x] = x
            self.members[x] = [x]

    def find(self, x: Any) -> Any:
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: Any, b: Any) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        if len(self.members[ra]) < len(self.members[rb]):
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.members[ra].extend(self.members.pop(rb))
        return True


__all__ = ["FUZZY_CANDIDATE", "FUZZY_MERGE", "Match", "Name", "UnionFind", "base_form", "fuzzy_score", "initials",
           "looks_like_acronym", "match_pair", "person_parts", "types_compatible", "version_siblings"]
