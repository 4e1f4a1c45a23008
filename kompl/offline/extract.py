"""The offline model's `extract` purpose: entities, concepts, claims, relationships, summary."""

from __future__ import annotations

import re
from collections import Counter

from kompl import nlp
from kompl.text import norm_name

from kompl.offline import handler, model_label  # noqa: F401
from kompl.offline.common import GENERIC_NOUNS
from kompl.offline.common import _cosine, _tfidf, _words  # noqa: F401

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
            "context": analysis.sentences[_context_sentence(analysis, g)].text,
            "_first": g["first"],
        })
    out.sort(key=lambda e: (-e["mentions"], e["_first"], e["name"]))
    for e in out:
        del e["_first"]
    return out, canon


def _in_table(analysis, idx: int) -> bool:
    """Whether sentence `idx` is a table row (its line starts with '|')."""
    start = analysis.sentences[idx].start
    line_start = analysis.text.rfind("\n", 0, start) + 1
    return analysis.text[line_start:start + 1].lstrip().startswith("|")


def _context_sentence(analysis, group: dict) -> int:
    """The first prose sentence mentioning the entity (a table row only when there is nothing else)."""
    sentences = sorted({analysis.mentions[i].sent for i in group["mentions"]} | {group["first"]})
    return next((i for i in sentences if not _in_table(analysis, i)), group["first"])


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
        if _in_table(analysis, idx):
            continue  # a table row: its cells feed entities, but it is not a stated claim
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


