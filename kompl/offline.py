"""The built-in offline model `kompl/offline`: kompl's prompts answered by local NLP.

    respond(purpose, variables, schema) -> dict   # JSON-able, validates against `schema`

The gateway calls it in-process with the same `variables` it renders into the
prompt template, and records the call like any other model's. It is
deterministic (same input, same output), uses only local NLP (spaCy through
`kompl.nlp`, TF-IDF, sentence ranking, pattern rules) and says what it is:
wherever the schema has a `model` or `by` field, the answer names
"kompl/offline" and the spaCy pipeline behind it.

Each purpose is a handler in `HANDLERS` (purpose -> function(variables, schema)
-> dict); later work adds `draft`, `answer`, `judge_contradiction` and
`summarize` with `@handler("name")`. An unknown purpose raises
`OfflineModelError`.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from kompl import nlp
from kompl.errors import KomplError
from kompl.text import norm_name

MODEL_NAME = "kompl/offline"

Handler = Callable[[dict, type], dict]
HANDLERS: dict[str, Handler] = {}
PLANNED = ("draft", "answer", "judge_contradiction", "summarize")


class OfflineModelError(KomplError):
    """The offline model was asked something it cannot answer."""


def handler(purpose: str) -> Callable[[Handler], Handler]:
    """Register the offline answer for one prompt purpose."""

    def register(fn: Handler) -> Handler:
        HANDLERS[purpose] = fn
        return fn

    return register


def model_label() -> str:
    """How the offline model names itself in its outputs, e.g. 'kompl/offline (en_core_web_sm 3.8.0)'."""
    return f"{MODEL_NAME} ({nlp.pipeline_info().label})"


def respond(purpose: str, variables: dict[str, Any], schema: type[BaseModel]) -> dict:
    """Answer one prompt locally. The result validates against `schema` (aliases as keys)."""
    fn = HANDLERS.get(purpose)
    if fn is None:
        planned = f" ({purpose!r} is planned but not written yet)" if purpose in PLANNED else ""
        raise OfflineModelError(
            f"The offline model cannot answer {purpose!r} prompts{planned}; it knows: {', '.join(sorted(HANDLERS))}",
            hint="use a real model with --model (e.g. openai/gpt-4o-mini), or add a handler in kompl/offline.py",
        )
    out = fn(variables or {}, schema)
    fields = getattr(schema, "model_fields", {})
    for name in ("model", "by"):
        if name in fields and not out.get(name):
            out[name] = model_label()
    try:
        return schema.model_validate(out).model_dump(by_alias=True, mode="json")
    except ValidationError as exc:
        raise OfflineModelError(
            f"The offline model's {purpose!r} answer does not fit {schema.__name__}: {exc.errors()[:3]}",
            hint="the schema and the offline handler disagree; this is a kompl bug",
        ) from None


# --- reference contracts (stages define their own; these document the shapes) --------------

# The disambiguation contract belongs to the resolve stage; re-exported here for reference.
from kompl.pipeline.resolve import DisambiguationResult  # noqa: E402
from kompl.pipeline.resolve import PairDecision as Decision  # noqa: E402


class TriageResult(BaseModel):
    relevant: bool
    confidence: float = Field(ge=0, le=1)
    reason: str = ""
    model: str = ""


# --- shared helpers ------------------------------------------------------------------------

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


# --- extract -------------------------------------------------------------------------------

ASSERTION_VERBS = frozenset(
    "say tell announce report claim state confirm deny reveal disclose estimate expect predict "
    "warn argue allege accuse charge plead testify rule find show acquire buy purchase sell sue "
    "found launch release win beat defeat lose sign agree raise increase decrease rise fall drop "
    "grow cut invest hire fire appoint resign elect vote approve reject ban fine pay earn owe file "
    "arrest convict sentence open close join leave score lead become".split()
)
_ASSERTION_TEXT = re.compile(
    r"\b(said|says|told|announced|reported|according to|claimed|confirmed|denied|revealed|estimated|"
    r"expects?|predicted|warned|alleged|accused|charged|pleaded|testified|ruled|found|acquired|bought|"
    r"sold|sued|founded|launched|released|won|beat|defeated|lost|signed|agreed|raised|rose|fell|"
    r"increased|decreased|invested|hired|appointed|resigned|elected|approved|rejected|paid|filed|"
    r"arrested|convicted|sentenced|joined|scored)\b",
    re.I,
)

# Verb lemma (from a dependency parse) -> relationship type.
VERB_RELATIONS = {
    "acquire": "acquired", "buy": "acquired", "purchase": "acquired", "sue": "sued",
    "found": "founded", "co-found": "founded", "cofound": "founded", "establish": "founded",
    "compete": "competes_with", "rival": "competes_with", "beat": "defeated", "defeat": "defeated",
    "invest": "invested_in", "partner": "partners_with", "own": "owns", "lead": "leads", "head": "leads",
    "run": "leads", "join": "works_for", "work": "works_for", "hire": "employs", "employ": "employs",
    "sign": "signed_with", "play": "plays_for", "date": "in_relationship_with", "marry": "married_to",
    "accuse": "accused", "charge": "accused", "criticize": "criticized", "criticise": "criticized",
    "represent": "represents", "fund": "funds", "regulate": "regulates", "ban": "banned",
}
_TITLE_WORDS = (
    r"(?:chief executive(?: officer)?|ceo|cto|cfo|coo|founder|co-founder|cofounder|president|chairman|"
    r"chairwoman|chair|director|head|executive|vice president|vp|spokes(?:man|woman|person)|employee|"
    r"analyst|engineer|manager|member|owner|coach|player|star|quarterback|captain|minister|"
    r"secretary|general counsel|lawyer|attorney|professor|researcher|editor|reporter|governor|senator)"
)
# Text between two entity mentions -> relationship type (applied to "A <between> B").
BETWEEN_PATTERNS: list[tuple[re.Pattern, str, bool]] = [
    # "Sam Bankman-Fried, former CEO of bankrupt crypto exchange FTX" (person first)
    (re.compile(rf"^\s*,?\s*(?:the\s+|a\s+|an\s+)?(?:former\s+|then-|now-|current\s+|new\s+|interim\s+|acting\s+)?"
                rf"(?i:(?:co-)?{_TITLE_WORDS}(?:\s+and\s+{_TITLE_WORDS})?)\s+(?:of|at|for)\s+(?:the\s+)?"
                rf"(?:[a-z][\w’'-]*\s+){{0,4}}$"),
     "works_for", False),
    # "FTX founder Sam Bankman-Fried" (organisation first: reversed)
    (re.compile(r"^\s*(?:’s|'s)?\s*(?:co-)?(?:founder|co-founder|cofounder)\s*,?\s*$", re.I), "founded", True),
    (re.compile(rf"^\s*(?:’s|'s)?\s*(?:former\s+|then-|current\s+|new\s+|interim\s+)?{_TITLE_WORDS}\s*,?\s*$", re.I),
     "works_for", True),
    (re.compile(r"^\s*(?:has\s+|have\s+|had\s+|will\s+|agreed\s+to\s+|plans\s+to\s+)?(?:acquired?|bought|buys?|purchased?|takes?\s+over|took\s+over)\s+(?:the\s+)?$", re.I), "acquired", False),
    (re.compile(r"^\s*(?:has\s+|have\s+|had\s+|is\s+|was\s+)?(?:sued|suing|sues)\s+(?:the\s+)?$", re.I), "sued", False),
    (re.compile(r"^\s*(?:has\s+|had\s+|)?(?:co-)?found(?:ed)?\s+(?:the\s+)?(?:[\w-]+\s+){0,3}$", re.I), "founded", False),
    (re.compile(r"^\s*(?:vs\.?|v\.?|versus|against)\s+(?:the\s+)?$", re.I), "competes_with", False),
    (re.compile(r"^\s*(?:competes?|competing|competed)\s+(?:with|against)\s+(?:the\s+)?$|^\s*(?:’s|'s)\s+(?:main\s+|biggest\s+|chief\s+)?rivals?\s*,?\s*$", re.I),
     "competes_with", False),
    (re.compile(r"^\s*(?:beat|defeated|beats|defeats|edged|thrashed|downed)\s+(?:the\s+)?$", re.I), "defeated", False),
    (re.compile(r"^\s*(?:is\s+|was\s+)?(?:owned\s+by|a\s+subsidiary\s+of|part\s+of|a\s+unit\s+of|a\s+division\s+of)\s+(?:the\s+)?$", re.I), "part_of", False),
]
_MAX_BETWEEN_WORDS = 10


@handler("extract")
def extract(variables: dict, schema: type) -> dict:
    """Entities, concepts, claims, relationships and an extractive summary of one chunk."""
    text = variables.get("text") or ""
    hints = variables.get("hints") or {}
    overlap = int(hints.get("overlap_chars") or 0)
    analysis = nlp.analyze(text)
    entities, canon = _entities(analysis, overlap)
    return {
        "title": (variables.get("title") or _first_heading(analysis) or "").strip(),
        "summary": summarize_sentences(analysis),
        "entities": entities,
        "concepts": _concepts(analysis, hints, {norm_name(e["name"]) for e in entities}),
        "claims": _claims(analysis, canon),
        "relationships": _relationships(analysis, canon),
        "contradictions": [],
    }


def _first_heading(analysis) -> str:
    for line in analysis.text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return ""


def _entities(analysis, overlap: int) -> tuple[list[dict], dict[int, str]]:
    """Group entity mentions by normalised name; merge lone surnames into the one full name.

    Returns the entity list and, for each mention index, its canonical name.
    """
    groups: dict[str, dict] = {}
    for i, m in enumerate(analysis.mentions):
        if not m.is_entity:
            continue
        key = norm_name(m.text)
        if not key:
            continue
        g = groups.setdefault(key, {"surfaces": Counter(), "labels": Counter(), "counted": 0,
                                    "first": m.sent, "mentions": []})
        g["surfaces"][m.text] += 1
        g["labels"][m.label] += 1
        g["counted"] += m.start >= overlap
        g["mentions"].append(i)

    # "Bankman-Fried" -> "Sam Bankman-Fried" when exactly one longer PERSON name ends (or
    # starts) with it in this text; ambiguous surnames ("Kelce": Travis, Jason) stay apart.
    persons = [k for k, g in groups.items() if g["labels"]["PERSON"] and len(k.split()) > 1]
    merged: dict[str, str] = {}
    for key in list(groups):
        if len(key.split()) != 1:
            continue
        owners = [p for p in persons if p.split()[-1] == key or p.split()[0] == key]
        if len(owners) == 1 and key not in _KNOWN_PLACES:  # "Jordan" may be the country
            merged[key] = owners[0]
    surnames = {p.split()[-1] for p in persons}
    for key, g in groups.items():  # "Kelce" (Travis or Jason): still a person, whichever
        if key in surnames and key not in merged:
            g["labels"]["PERSON"] += sum(g["labels"].values())
    for short, full in merged.items():
        g, into = groups.pop(short), groups[full]
        into["labels"]["PERSON"] += sum(g["labels"].values())
        into["counted"] += g["counted"]
        into["mentions"].extend(g["mentions"])
        into["first"] = min(into["first"], g["first"])

    out, canon = [], {}
    for key, g in groups.items():
        name = max(g["surfaces"].items(), key=lambda kv: (kv[1], len(kv[0]), kv[0]))[0]
        for i in g["mentions"]:
            canon[i] = name
        if g["counted"] == 0:  # only in the overlap with the previous chunk, which reported it
            continue
        label = max(g["labels"].items(), key=lambda kv: (kv[1], _LABEL_PRIORITY.get(kv[0], 0), kv[0]))[0]
        out.append({
            "name": name,
            "type": nlp_type(label),
            "mentions": g["counted"],
            "context": analysis.sentences[g["first"]].text,
            "_first": g["first"],
        })
    out.sort(key=lambda e: (-e["mentions"], e["_first"], e["name"]))
    for e in out:
        del e["_first"]
    return out, canon


_KNOWN_PLACES = frozenset(norm_name(p) for p in nlp.PLACES)
_LABEL_PRIORITY = {"PERSON": 3, "ORG": 2, "GPE": 1}  # breaks ties between equally frequent labels


def nlp_type(label: str) -> str:
    return nlp.ENTITY_LABELS.get(label, "OTHER")


def _concepts(analysis, hints: dict, entity_norms: set[str]) -> list[dict]:
    counts: Counter = Counter()
    surfaces: dict[str, Counter] = {}
    first: dict[str, int] = {}
    for p in analysis.phrases:
        counts[p.key] += 1
        surfaces.setdefault(p.key, Counter())[p.text] += 1
        first.setdefault(p.key, p.sent)
    scores: dict[str, float] = {}
    for kp in hints.get("keyphrases") or []:
        key = kp.get("key") or norm_name(kp.get("phrase", ""))
        if key in counts:
            scores[key] = float(kp.get("score") or 0.0)
    if not scores:  # no corpus hints: term frequency within the chunk, longer phrases first
        scores = {k: c * (1 + 0.5 * (len(k.split()) - 1)) for k, c in counts.items()}
    top = [k for k in sorted(scores, key=lambda k: (-scores[k], k)) if k.split()[-1] not in GENERIC_NOUNS]
    # As many concepts as the text is long: a ranking, like a model's choice of what matters.
    chosen = [k for k in top if counts[k] >= 2][: 3 + analysis.words // 200] or top[:3]
    out = []
    for key in chosen:
        forms = surfaces[key]
        # Prefer a lower-case form: a capital is often just the sentence start.
        name = max(forms.items(), key=lambda kv: (kv[0].islower(), kv[1], kv[0]))[0]
        if norm_name(name) in entity_norms:
            continue
        out.append({"name": name, "description": _defining_sentence(analysis, name, first[key])})
    return out


def _defining_sentence(analysis, name: str, fallback: int) -> str:
    rx = re.compile(rf"\b{re.escape(name)}s?\b\s+(?:is|are|was|were|refers to|means|describes)\b", re.I)
    for s in analysis.sentences:
        if rx.search(s.text):
            return s.text
    return analysis.sentences[fallback].text


def _sentence_mentions(analysis) -> list[list[int]]:
    per: list[list[int]] = [[] for _ in analysis.sentences]
    for i, m in enumerate(analysis.mentions):
        per[m.sent].append(i)
    for ids in per:  # in text order (names found by string match come last in the list)
        ids.sort(key=lambda i: analysis.mentions[i].start)
    return per


def _claims(analysis, canon: dict[int, str]) -> list[dict]:
    per = _sentence_mentions(analysis)
    scored = []
    for idx, sent in enumerate(analysis.sentences):
        if sent.words < 6 or sent.words > 80 or sent.text.endswith("?") or nlp.is_boilerplate(sent.text):
            continue
        names = list(dict.fromkeys(canon[i] for i in per[idx] if i in canon))
        values = sum(1 for i in per[idx] if not analysis.mentions[i].is_entity)
        asserts = any(v in ASSERTION_VERBS for v in sent.verbs) or bool(_ASSERTION_TEXT.search(sent.text))
        if not names and not values:
            continue
        score = min(len(names), 3) + 0.75 * min(values, 2) + (1.0 if asserts else 0.0)
        score += 0.25 if sent.text[-1:] in ".!”\"'" else -0.5  # headings and fragments rank lower
        if score < 2.0:
            continue
        scored.append((score, idx, names))
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [
        {
            "claim": analysis.sentences[idx].text,
            "confidence": round(min(0.9, 0.3 + 0.1 * score), 2),
            "entities_involved": names,
            "quote": analysis.quote(idx),
        }
        for score, idx, names in scored
    ]


def _relationships(analysis, canon: dict[int, str]) -> list[dict]:
    found: dict[tuple[str, str, str], str] = {}
    mentions = analysis.mentions

    def add(a: str, b: str, kind: str, sent: int) -> None:
        if a and b and norm_name(a) != norm_name(b):
            found.setdefault((a, b, kind), analysis.sentences[sent].text)

    for t in analysis.triples:  # dependency parse: subject-verb-object
        kind = VERB_RELATIONS.get(t.verb)
        if kind and t.subj in canon and t.obj in canon:
            add(canon[t.subj], canon[t.obj], kind, t.sent)

    per = _sentence_mentions(analysis)
    cooccur: dict[tuple[str, str], list[int]] = {}
    for idx, ids in enumerate(per):
        ents = [i for i in ids if i in canon]
        for x, i in enumerate(ents):
            for j in ents[x + 1:]:
                a, b = mentions[i], mentions[j]
                between = analysis.text[a.end:b.start]
                # Patterns link neighbours only: "A, CEO of B" (nothing named in between).
                if j == ents[x + 1] and len(between.split()) <= _MAX_BETWEEN_WORDS:
                    for rx, kind, reverse in BETWEEN_PATTERNS:
                        if rx.search(between):
                            src, dst = (canon[j], canon[i]) if reverse else (canon[i], canon[j])
                            add(src, dst, kind, idx)
                            break
                pair = tuple(sorted((canon[i], canon[j])))
                if pair[0] != pair[1]:
                    sents = cooccur.setdefault(pair, [])
                    if idx not in sents:
                        sents.append(idx)
    typed = {tuple(sorted((a, b))) for a, b, _ in found}
    for (a, b), sents in cooccur.items():
        if len(sents) >= 2 and (a, b) not in typed:
            add(a, b, "related_to", sents[0])
    return [{"from": a, "to": b, "type": kind, "description": desc} for (a, b, kind), desc in found.items()]


def summarize_sentences(analysis, k: int | None = None) -> str:
    """An extractive summary: the sentences closest to the text's TF-IDF centroid, in order."""
    candidates = [
        i for i, s in enumerate(analysis.sentences)
        if 8 <= s.words <= 60 and s.text[-1:] in ".!”\"'" and not nlp.is_boilerplate(s.text)
    ]
    if not candidates:
        candidates = [i for i, s in enumerate(analysis.sentences) if s.words >= 3]
    if not candidates:
        return ""
    vectors = _tfidf([_words(analysis.sentences[i].text) for i in candidates])
    centroid: Counter = Counter()
    for v in vectors:
        centroid.update(v)
    k = k or min(6, 3 + analysis.words // 1500)
    scores = []
    for rank, (i, v) in enumerate(zip(candidates, vectors)):
        lead = 0.1 * max(0, 3 - rank) / 3  # news puts the gist first
        scores.append((_cosine(v, centroid) + lead, i))
    best = sorted(sorted(scores, key=lambda t: (-t[0], t[1]))[:k], key=lambda t: t[1])
    return " ".join(analysis.sentences[i].text for _, i in best)


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


__all__ = [
    "HANDLERS", "MODEL_NAME", "Decision", "DisambiguationResult", "OfflineModelError", "TriageResult",
    "handler", "model_label", "respond", "same_entity", "summarize_sentences",
]
