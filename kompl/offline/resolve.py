"""The offline model's `disambiguate` and `triage` purposes."""

from __future__ import annotations

import re

from kompl.text import norm_name

from kompl.offline import handler  # noqa: F401
from kompl.offline.common import _cosine, _tfidf, _words  # noqa: F401

# --- disambiguate --------------------------------------------------------------------------

_ANY_TYPE = {"OTHER", "UNKNOWN", "CONCEPT"}  # types that say nothing; GPE and LOC are one kind of thing
_CONNECTORS = {"of", "the", "and", "for", "&", "de", "la", "le", "der", "und"}
_VERSION = re.compile(r"\d+(?:\.\d+)*|\b[ivx]+\b")


@handler("disambiguate")
def disambiguate(variables: dict, schema: type) -> dict:
    """Same entity or not, for each pair of (name, type, context)."""
    return {"decisions": [same_entity(p.get("a") or {}, p.get("b") or {}) for p in variables.get("pairs") or []]}


def same_entity(a: dict, b: dict) -> dict:
    """One decision: {same, confidence, reason}. Rules first, context overlap as the tiebreak."""
    name_a, name_b = (a.get("name") or "").strip(), (b.get("name") or "").strip()
    type_a, type_b = (a.get("type") or "").upper(), (b.get("type") or "").upper()
    na, nb = norm_name(name_a), norm_name(name_b)
    overlap = _context_overlap(a.get("context") or "", b.get("context") or "")
    if type_a and type_b and type_a != type_b and not {type_a, type_b} & _ANY_TYPE and {type_a, type_b} != {"GPE", "LOC"}:
        return _decision(False, 0.85, f"different types ({type_a} vs {type_b})")
    if _versions_differ(na, nb):
        return _decision(False, 0.95, "names differ only in a number or version")
    if na == nb:
        return _decision(True, 0.95, "same name after normalisation")
    if _compact(na) == _compact(nb):
        return _decision(True, 0.9, "same name but for dots, hyphens or a leading article")
    if _is_acronym(name_a, name_b) or _is_acronym(name_b, name_a):
        return _decision(True, round(0.8 + 0.15 * overlap, 2), "one name is the acronym of the other")
    ta, tb = _name_tokens(na), _name_tokens(nb)
    if ta and tb and (ta <= tb or tb <= ta):
        short = min(ta, tb, key=len)
        if type_a == "PERSON" or type_b == "PERSON":
            return _decision(True, round(0.75 + 0.2 * overlap, 2), "one name is part of the other (same person)")
        if len(short) >= 2 or overlap >= 0.2:
            return _decision(True, round(0.6 + 0.3 * overlap, 2), "one name is contained in the other, same type")
        return _decision(False, 0.55, "a one-word part of the other name, with unrelated contexts")
    if overlap >= 0.5 and ta & tb:
        return _decision(True, 0.55, "names share words and the contexts agree")
    return _decision(False, round(0.7 + 0.2 * (1 - overlap), 2), "different names")


def _compact(norm: str) -> str:
    return re.sub(r"^(?:the|a|an)\s+|[.\-\s]", "", norm)


def _decision(same: bool, confidence: float, reason: str) -> dict:
    return {"same": same, "confidence": max(0.0, min(1.0, confidence)), "reason": reason}


def _name_tokens(norm: str) -> set[str]:
    return {t for t in re.split(r"[\s]+", norm) if t and t not in _CONNECTORS}


def _versions_differ(na: str, nb: str) -> bool:
    va, vb = _VERSION.findall(na), _VERSION.findall(nb)
    if not (va or vb) or va == vb:
        return False
    return _VERSION.sub("", na).strip(" -.") == _VERSION.sub("", nb).strip(" -.")


def _is_acronym(short: str, long: str) -> bool:
    letters = re.sub(r"[^A-Za-z]", "", short)
    if not (2 <= len(letters) <= 8 and letters.isupper()):
        return False
    if len(long.split()) < 2 and "-" not in long:
        return False
    words = [w for w in re.split(r"[\s\-]+", long) if w and w.lower() not in _CONNECTORS]
    initials = "".join(w[0] for w in words if w[0].isalpha())
    return initials.upper() == letters.upper() and len(words) > 1


def _context_overlap(a: str, b: str) -> float:
    wa, wb = set(_words(a)), set(_words(b))
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / min(len(wa), len(wb))



# --- triage --------------------------------------------------------------------------------

TRIAGE_THRESHOLD = 0.12


@handler("triage")
def triage(variables: dict, schema: type) -> dict:
    """Is this source relevant to this page? Word-overlap (TF-IDF cosine) of titles and summaries."""
    page, source = variables.get("page") or {}, variables.get("source") or {}
    page_text = f"{page.get('title', '')} {page.get('title', '')} {page.get('summary', '')}"
    source_text = f"{source.get('title', '')} {source.get('summary', '')}"
    va, vb = _tfidf([_words(page_text), _words(source_text)])
    sim = _cosine(va, vb)
    title = norm_name(page.get("title") or "")
    named = bool(title) and f" {title} " in f" {norm_name(source_text)} "
    relevant = named or sim >= TRIAGE_THRESHOLD
    if named:
        reason = f"the source names {page.get('title')!r}"
    else:
        reason = f"word overlap {sim:.2f} ({'at or above' if relevant else 'below'} {TRIAGE_THRESHOLD})"
    confidence = 0.9 if named else min(0.95, 0.5 + abs(sim - TRIAGE_THRESHOLD) * 2)
    return {"relevant": relevant, "confidence": round(confidence, 2), "reason": reason}


