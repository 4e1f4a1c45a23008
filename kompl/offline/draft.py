"""The offline model's `draft` and `summarize` purposes: extractive pages, every sentence from the inputs.

Pages are assembled from what the draft prompt's variables carry: the dossier
(claims with their quotes, context sentences, relationships, conflicts,
descriptions, member pages) and the source passages, ranked by TF-IDF where a
choice is needed. Nothing is paraphrased or added, and nothing in the inputs is
ever obeyed: the title and category are the plan's, not the sources'. An update
keeps the existing body and adds the new sources' lines to its sections.
"""

from __future__ import annotations

import re
from collections import Counter

from kompl.offline import handler
from kompl.offline.common import _cosine, _tfidf, _words
from kompl.pipeline.draft import CITATION, NEW_PAGE, cite, citation_ids, first_sentence, split_sentences, strip_links
from kompl.text import norm_name

LEAD_SENTENCES = 3
_PEOPLE_ORGS = ("PERSON", "ORG")
_QUOTE = "“{}”"


# --- draft ---------------------------------------------------------------------------------

@handler("draft")
def draft(variables: dict, schema: type) -> dict:
    page = variables.get("page") or {}
    page_type = page.get("page_type", "entity")
    dossier = variables.get("dossier") or {}
    passages = variables.get("passages") or []
    allowed = list(variables.get("allowed_sources") or [])
    build = {"source": _source_page, "original-source": _original_page, "comparison": _comparison_page,
             "overview": _overview_page}.get(page_type, _subject_page)
    lead, sections = build(page, dossier, passages, allowed)
    existing = variables.get("existing_page") or ""
    if existing.strip() and existing != NEW_PAGE:
        body = merge_update(existing, sections)
    else:
        body = render(lead, sections)
    body = bound_page(body)
    summary = first_sentence(body) or page.get("title", "")
    return {"title": page.get("title", ""), "summary": summary, "body": body, "category": page.get("category", "")}


def render(lead: str, sections: list[tuple[str, list[str]]]) -> str:
    parts = [lead.strip()] if lead.strip() else []
    for heading, lines in sections:
        if lines:
            parts.append(f"## {heading}\n\n" + "\n".join(lines))
    return "\n\n".join(parts).strip() + "\n"


def _source_page(page: dict, dossier: dict, passages: list[dict], allowed: list[str]) -> tuple[str, list]:
    sources = list((dossier.get("sources") or {}).keys()) or allowed[:1]
    lead_parts = []
    for sid in sources:
        byline = _byline((dossier.get("sources") or {}).get(sid) or {})
        if byline:
            lead_parts.append(cite(byline, sid))
        summary = (dossier.get("summary") or {}).get(sid, "")
        own = [p for p in passages if p.get("source") == sid or sid in p.get("source", "")]
        if summary.strip():
            sentences = split_sentences(summary)[:LEAD_SENTENCES + 2]
            lead_parts += [cite(s, sid) for s in sentences]
        else:
            lead_parts += _ranked_sentences(own, LEAD_SENTENCES, default_source=sid)
    key_points = _claim_lines(dossier.get("claims") or [], allowed)
    people = _entity_lines([e for e in dossier.get("entities") or [] if e.get("type") in _PEOPLE_ORGS])
    others = _entity_lines([e for e in dossier.get("entities") or []
                            if e.get("type") not in _PEOPLE_ORGS and e.get("type") not in ("DATE", "MONEY")])
    concepts = []
    seen = set()
    for c in dossier.get("concepts") or []:
        key = norm_name(c.get("name", ""))
        if key in seen or not c.get("description"):
            continue
        seen.add(key)
        concepts.append(f"- **{c['name']}**: {cite(c['description'], c.get('source') or sources[:1])}")
    return " ".join(lead_parts), [("Key points", key_points), ("People and organisations", people),
                                  ("Also mentioned", others), ("Concepts", concepts)]


def _byline(info: dict) -> str:
    """'Published by TechCrunch on 2023-10-06, written by Morgan Little.' from the source's metadata."""
    parts = []
    if info.get("publisher"):
        parts.append(f"Published by {info['publisher']}")
    if info.get("published"):
        parts.append(f"{'on' if parts else 'Published on'} {str(info['published'])[:10]}")
    if info.get("author"):
        parts.append(f"{'written' if parts else 'Written'} by {info['author']}")
    if not parts:
        return ""
    text = " ".join(parts[:2]) + (f", {parts[2]}" if len(parts) > 2 else "")
    return text + "."


def _original_page(page: dict, dossier: dict, passages: list[dict], allowed: list[str]) -> tuple[str, list]:
    return "\n\n".join(p["text"] for p in passages), []


def _subject_page(page: dict, dossier: dict, passages: list[dict], allowed: list[str]) -> tuple[str, list]:
    """Entity and concept pages."""
    subject = dossier.get("subject") or {}
    names = [subject.get("name") or page.get("title", "")] + list(subject.get("aliases") or [])
    titles = {sid: (info or {}).get("title", sid) for sid, info in (dossier.get("sources") or {}).items()}
    lead = _lead(names, dossier, passages, concept=page.get("page_type") == "concept")
    if not lead and allowed:
        new = sorted({c["source"] for c in dossier.get("claims") or []} | {p.get("source") for p in passages
                                                                          if p.get("source") in allowed})
        if new:
            lead = cite(f"{names[0]} is mentioned in the sources listed below", new)
    return lead, [
        ("What the sources say", _grouped_claims(dossier.get("claims") or [], titles, allowed)),
        ("Relationships", _relationship_lines(dossier.get("relationships") or [])),
        ("Disagreements", _disagreement_lines(dossier.get("conflicts") or [])),
    ]


def _comparison_page(page: dict, dossier: dict, passages: list[dict], allowed: list[str]) -> tuple[str, list]:
    subject = dossier.get("subject") or {}
    topic = subject.get("name") or re.sub(r":\s*conflicting accounts$", "", page.get("title", ""), flags=re.I)
    titles = {sid: (info or {}).get("title", sid) for sid, info in (dossier.get("sources") or {}).items()}
    conflicts = dossier.get("conflicts") or []
    involved = sorted({c[s]["source"] for c in conflicts for s in ("a", "b")})
    lead = cite(f"The sources disagree about {topic}", involved) if involved else ""
    positions: list[str] = []
    for n, c in enumerate(conflicts, 1):
        if positions:
            positions.append("")
        positions += [f"**Dispute {n}**", "", "| Source | Position | Quote |", "| --- | --- | --- |"]
        for side in ("a", "b"):
            s = c[side]
            positions.append(f"| {_cell(titles.get(s['source'], s['source']))} [{s['source']}] | {_cell(s['claim'])}"
                             f" | {_cell(_QUOTE.format(s.get('quote') or s['claim']))} |")
        positions += ["", _disputed(c)]
    others = [c for c in dossier.get("claims") or []
              if c.get("id") not in {x[s].get("id") for x in conflicts for s in ("a", "b")}]
    quoted = {_key(c[s]["claim"]) for c in conflicts for s in ("a", "b")}
    others = [c for c in others if _key(c["claim"]) not in quoted]
    return lead, [("Positions", positions),
                  (f"Other statements about {topic}", _claim_lines(others, allowed))]


def _overview_page(page: dict, dossier: dict, passages: list[dict], allowed: list[str]) -> tuple[str, list]:
    members = sorted(dossier.get("members") or [], key=lambda m: m.get("title", "").casefold())
    lines = [_member_line(m, allowed) for m in members]
    category = dossier.get("category") or page.get("category", "")
    lead = f"This page lists the wiki's {category} pages, one line each." if members else ""
    return lead, [("Pages", lines)]


def _member_line(member: dict, allowed: list[str]) -> str:
    summary = (member.get("summary") or "").strip()
    ids = [s for s in member.get("sources") or [] if s in allowed]
    text = f"- **{member.get('title', '')}**"
    if summary:
        return f"{text}: {cite(summary, ids)}"
    return f"{text} [{', '.join(ids)}]" if ids else text


# --- pieces --------------------------------------------------------------------------------

def _key(text: str) -> str:
    text = CITATION.sub("", strip_links(text or ""))
    text = re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", text)
    return re.sub(r"[^\w]+", " ", text.casefold()).strip()


def _claim_lines(claims: list[dict], allowed: list[str]) -> list[str]:
    """One bullet per distinct claim, citing every source that made it."""
    order: dict[str, list] = {}
    for c in claims:
        if c.get("source") not in allowed:
            continue
        slot = order.setdefault(_key(c["claim"]), [c["claim"], []])
        slot[1].append(c["source"])
    return [f"- {cite(text, ids)}" for text, ids in order.values() if text.strip()]


def _grouped_claims(claims: list[dict], titles: dict[str, str], allowed: list[str]) -> list[str]:
    """Claims grouped by source; a claim made by several sources appears once, citing them all."""
    by_key: dict[str, list[str]] = {}
    for c in claims:
        if c.get("source") in allowed:
            by_key.setdefault(_key(c["claim"]), []).append(c["source"])
    lines: list[str] = []
    done: set[str] = set()
    for sid in list(dict.fromkeys(c["source"] for c in claims if c.get("source") in allowed)):
        group = []
        for c in claims:
            key = _key(c["claim"])
            if c["source"] != sid or key in done:
                continue
            done.add(key)
            group.append(f"- {cite(c['claim'], by_key[key])}")
        if group:
            if lines:
                lines.append("")
            lines += [f"From *{titles.get(sid, sid)}*:", "", *group]
    return lines


def _relationship_lines(relationships: list[dict]) -> list[str]:
    seen: dict[tuple, list] = {}
    for r in relationships:
        key = (norm_name(r["from"]), norm_name(r["to"]), r.get("type", ""))
        slot = seen.setdefault(key, [r, []])
        slot[1].append(r["source"])
    lines = []
    for r, ids in seen.values():
        verb = (r.get("type") or "related_to").replace("_", " ")
        desc = (r.get("description") or "").strip()
        line = f"- {r['from']} — {verb} — {r['to']}"
        lines.append(f"{line}: {cite(desc, ids)}" if desc else f"{line} [{', '.join(dict.fromkeys(ids))}]")
    return lines


def _disputed(c: dict) -> str:
    a, b = c["a"], c["b"]
    return (f"**Disputed:** one account says {_QUOTE.format(_strip_stop(a.get('quote') or a['claim']))} [{a['source']}];"
            f" another says {_QUOTE.format(_strip_stop(b.get('quote') or b['claim']))} [{b['source']}].")


def _disagreement_lines(conflicts: list[dict]) -> list[str]:
    lines = []
    for c in conflicts:
        if lines:
            lines.append("")
        lines.append(_disputed(c))
    return lines


def _strip_stop(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().rstrip(".")


def _cell(text: str) -> str:
    return re.sub(r"\s+", " ", str(text)).replace("|", "\\|").strip()


def _entity_lines(entities: list[dict]) -> list[str]:
    seen: dict[str, dict] = {}
    for e in entities:
        key = norm_name(e.get("name", ""))
        if key and key not in seen:
            seen[key] = e
    kinds = {"PERSON": "person", "ORG": "organisation", "GPE": "place", "LOC": "place", "FAC": "place",
             "NORP": "group", "PRODUCT": "product", "EVENT": "event", "WORK": "work", "LAW": "work"}
    return [f"- {e['name']} ({kinds.get(e.get('type', ''), 'other')})" for e in seen.values()]


def _lead(names: list[str], dossier: dict, passages: list[dict], *, concept: bool) -> str:
    """The best sentences that say who or what the subject is (descriptions first for concepts)."""
    candidates: list[tuple[str, str]] = []  # (sentence, source)
    if concept:
        candidates += [(d["description"], d["source"]) for d in dossier.get("descriptions") or []]
    candidates += [(c["sentence"], c["source"]) for c in dossier.get("contexts") or []]
    candidates += [(c.get("quote") or c["claim"], c["source"]) for c in dossier.get("claims") or []]
    if not candidates:
        for p in passages:
            if p.get("kind") != "summary":
                candidates += [(s, p["source"]) for s in split_sentences(p["text"])]
    name_pats = [re.compile(rf"(?<!\w){re.escape(n)}(?!\w)", re.I) for n in names if n.strip()]
    scored: dict[str, list] = {}
    for position, (sentence, source) in enumerate(candidates):
        sentence = re.sub(r"\s+", " ", sentence).strip()
        words = len(sentence.split())
        if words < 4 or sentence.startswith("#") or (words < 8 and sentence[-1:] not in ".!?\"”"):
            continue  # headings and fragments ("Container shipping is the") make no lead
        key = _key(sentence)
        if key in scored:
            scored[key][2].append(source)
            continue
        score = 0.0
        if name_pats and name_pats[0].search(sentence):
            score += 2
            if re.search(rf"{name_pats[0].pattern}\s*(?:,[^,]{{3,80}},\s*)?(?:is|was|are|were|refers to|means)\b",
                         sentence, re.I):
                score += 2
        elif any(p.search(sentence) for p in name_pats[1:]):
            score += 1
        if 8 <= words <= 45:
            score += 1
        if sentence[-1:] in ".!?\"”":
            score += 0.5
        score -= position * 0.01
        scored[key] = [score, sentence, [source]]
    best = sorted(scored.values(), key=lambda t: -t[0])[:2]
    best = [b for b in best if b[0] >= 2] or best[:1]
    return " ".join(cite(s, ids) for _, s, ids in best)


def _ranked_sentences(passages: list[dict], k: int, *, default_source: str = "", boost: list[str] = ()) -> list[str]:
    """The k sentences nearest the passages' TF-IDF centroid (in text order), each cited."""
    items: list[tuple[str, list[str]]] = []
    for p in passages:
        source = p.get("source") or default_source
        for s in split_sentences(p.get("text", "")):
            if s.startswith("#") or len(s.split()) < 4:
                continue
            ids = [i for m in CITATION.finditer(s) for i in citation_ids(m.group(1))]
            text = CITATION.sub("", s).replace(" .", ".").strip() if ids else s
            items.append((re.sub(r"\s+", " ", text), ids or [i.strip() for i in source.split(",") if i.strip()]))
    if not items:
        return []
    vectors = _tfidf([_words(t) for t, _ in items])
    centroid: Counter = Counter()
    for v in vectors:
        centroid.update(v)
    pats = [re.compile(rf"(?<!\w){re.escape(b)}(?!\w)", re.I) for b in boost if b]
    scores = []
    for i, ((text, _), v) in enumerate(zip(items, vectors)):
        bonus = 0.2 if any(p.search(text) for p in pats) else 0.0
        lead = 0.1 * max(0, 3 - i) / 3
        scores.append((_cosine(v, centroid) + bonus + lead, i))
    chosen = sorted(i for _, i in sorted(scores, key=lambda t: (-t[0], t[1]))[:k])
    return [cite(items[i][0], items[i][1]) for i in chosen]


# --- updates -------------------------------------------------------------------------------

def merge_update(existing: str, sections: list[tuple[str, list[str]]]) -> str:
    """The existing body with each new section's lines added to the section of the same
    heading (or as a new section at the end). Lines already present are not repeated;
    a bullet that repeats an existing one adds its citations to it instead."""
    lines = existing.rstrip("\n").split("\n")
    for heading, new_lines in sections:
        new_lines = [l for l in new_lines]
        if not any(l.strip() for l in new_lines):
            continue
        start = next((i for i, l in enumerate(lines) if re.fullmatch(rf"#{{2,3}}\s+{re.escape(heading)}\s*", l.strip())), None)
        if start is None:
            fresh = [l for l in new_lines if not _merge_citation(lines, l)]
            if any(l.strip() and not _is_label(l) for l in fresh):
                lines += ["", f"## {heading}", "", *_squeeze(fresh)]
            continue
        end = next((i for i in range(start + 1, len(lines)) if re.match(r"^#{1,2}\s", lines[i])), len(lines))
        section = lines[start + 1:end]
        fresh = [l for l in new_lines if not _merge_citation(section, l)]
        if any(l.strip() and not _is_label(l) for l in fresh):
            while section and not section[-1].strip():
                section.pop()
            section += ["", *_squeeze(fresh)]
            if end < len(lines):
                section.append("")
        lines[start + 1:end] = section
    return "\n".join(lines).strip() + "\n"


# A page stays readable, and updating it costs the same, however many sources it has:
# the newest source groups keep their statements; older ones fold into one line each
# under "Further sources" (their statements stay on their own source pages and in
# this page's history); past a limit those lines fold into a count.
MAX_SOURCE_GROUPS = 6
MAX_FURTHER_LINES = 15
MAX_RELATIONSHIP_LINES = 12
MAX_DISAGREEMENT_ITEMS = 6
_EARLIER_ITEMS = re.compile(r"^\*… and (\d+) earlier (?:items|disagreements), in this page's history\.\*$")
MAX_DISPUTES = 6
MAX_STATEMENT_LINES = 20
_EARLIER_DISPUTES = re.compile(r"^\*… and (\d+) earlier disputes?, in this page's history\.\*$")
_FURTHER = "Further sources"
_MORE = re.compile(r"^- … and (\d+) earlier sources? \(all listed in this page's `sources`\)\.$")


def _sections(lines: list[str]) -> list[tuple[str | None, list[str]]]:
    out: list[tuple[str | None, list[str]]] = [(None, [])]
    for line in lines:
        m = re.fullmatch(r"##\s+(.+?)\s*", line)
        if m:
            out.append((m.group(1), []))
        else:
            out[-1][1].append(line)
    return out


def _bound_comparison(sections: list, names: list) -> None:
    """Comparison pages keep their newest disputes and statements; older ones become a count."""
    if "Positions" in names:
        i = names.index("Positions")
        lines = sections[i][1]
        earlier = 0
        kept = []
        for line in lines:
            m = _EARLIER_DISPUTES.match(line.strip())
            if m:
                earlier += int(m.group(1))
            else:
                kept.append(line)
        starts = [n for n, l in enumerate(kept) if re.fullmatch(r"\*\*Dispute \d+\*\*", l.strip())]
        if len(starts) > MAX_DISPUTES:
            earlier += len(starts) - MAX_DISPUTES
            kept = kept[:starts[0]] + kept[starts[len(starts) - MAX_DISPUTES]:]
        if earlier:
            note = f"*… and {earlier} earlier dispute{'s' if earlier != 1 else ''}, in this page's history.*"
            kept = ["", note] + kept
        sections[i] = ("Positions", kept)
    for n, (heading, lines) in enumerate(sections):
        if heading and heading.startswith("Other statements about"):
            items = [l for l in lines if l.strip()]
            if len(items) > MAX_STATEMENT_LINES:
                sections[n] = (heading, [""] + items[-MAX_STATEMENT_LINES:] + [""])


def bound_page(body: str) -> str:
    """Fold the oldest source groups, disputes and relationships so the page size is bounded."""
    sections = _sections(body.rstrip("\n").split("\n"))
    names = [h for h, _ in sections]
    if "Positions" in names:
        _bound_comparison(sections, names)
        return _join(sections)
    if "What the sources say" in names:
        _fold_source_groups(sections, names)
    _bound_lists(sections, names)
    return _join(sections)


def _fold_source_groups(sections: list, names: list) -> None:
    """The newest MAX_SOURCE_GROUPS source groups stay whole; older ones become lines of 'Further sources'."""
    say = dict(sections)["What the sources say"]
    starts = [i for i, l in enumerate(say) if l.strip().startswith("From *") and l.strip().endswith(":")]
    folded: list[str] = []
    if len(starts) > MAX_SOURCE_GROUPS:
        cut = starts[len(starts) - MAX_SOURCE_GROUPS]
        old, keep = say[:cut], say[cut:]
        head = old[:starts[0]]
        for n, start in enumerate(starts[: len(starts) - MAX_SOURCE_GROUPS]):
            end = starts[n + 1] if n + 1 < len(starts) else cut
            label = old[start].strip()[len("From "):-1]
            ids = list(dict.fromkeys(i for line in old[start + 1:end] for m in CITATION.finditer(line)
                                     for i in citation_ids(m.group(1))))
            folded.append(f"- {label}" + (f" {cite('', ids).strip()}" if ids else ""))
        say[:] = head + keep
    if folded or _FURTHER in names:
        further = dict(sections).get(_FURTHER, [])
        lines = [l for l in further if l.strip()]
        earlier = 0
        if lines and _MORE.match(lines[0]):
            earlier = int(_MORE.match(lines[0]).group(1))
            lines = lines[1:]
        lines += folded
        if len(lines) > MAX_FURTHER_LINES:
            earlier += len(lines) - MAX_FURTHER_LINES
            lines = lines[-MAX_FURTHER_LINES:]
        if earlier:
            lines.insert(0, f"- … and {earlier} earlier source{'s' if earlier != 1 else ''} (all listed in this page's `sources`).")
        if _FURTHER in names:
            sections[names.index(_FURTHER)] = (_FURTHER, [""] + lines + [""])
        else:
            at = names.index("What the sources say") + 1
            sections.insert(at, (_FURTHER, [""] + lines + [""]))
            names.insert(at, _FURTHER)


def _bound_lists(sections: list, names: list) -> None:
    """Relationships and disagreements keep their newest lines; older disagreements become a count."""
    if "Relationships" in names:
        rel = sections[names.index("Relationships")][1]
        items = [l for l in rel if l.strip()]
        if len(items) > MAX_RELATIONSHIP_LINES:
            sections[names.index("Relationships")] = ("Relationships", [""] + items[-MAX_RELATIONSHIP_LINES:] + [""])
    if "Disagreements" in names:
        i = names.index("Disagreements")
        items = [l for l in sections[i][1] if l.strip()]
        earlier = sum(int(m.group(1)) for l in items if (m := _EARLIER_ITEMS.match(l.strip())))
        items = [l for l in items if not _EARLIER_ITEMS.match(l.strip())]
        if len(items) > MAX_DISAGREEMENT_ITEMS:
            earlier += len(items) - MAX_DISAGREEMENT_ITEMS
            items = items[-MAX_DISAGREEMENT_ITEMS:]
        if earlier:
            items.insert(0, f"*… and {earlier} earlier disagreements, in this page's history.*")
        sections[i] = ("Disagreements", [""] + [x for item in items for x in (item, "")])


def _join(sections: list) -> str:
    out: list[str] = []
    for heading, lines in sections:
        if heading is not None:
            while out and not out[-1].strip():
                out.pop()
            out += ["", f"## {heading}"] if out else [f"## {heading}"]
        out += lines
    text = "\n".join(out)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def _is_label(line: str) -> bool:
    return bool(re.fullmatch(r"From \*.*\*:|\*\*Dispute \d+\*\*|\|.*\|", line.strip()))


def _squeeze(lines: list[str]) -> list[str]:
    """Drop labels left without any line under them, and doubled blank lines."""
    out: list[str] = []
    for i, line in enumerate(lines):
        if _is_label(line) and line.startswith("From"):
            rest = lines[i + 1:]
            nxt = next((j for j, l in enumerate(rest) if _is_label(l) and l.startswith("From")), len(rest))
            if not any(l.strip() for l in rest[:nxt]):
                continue
        if not line.strip() and (not out or not out[-1].strip()):
            continue
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return out


def _merge_citation(section: list[str], line: str) -> bool:
    """True when `line` is already in `section` (its citations are added to the line there)."""
    if not line.strip() or _is_label(line):
        return False
    key = _key(line)
    if not key:
        return False
    ids = [i for m in CITATION.finditer(line) for i in citation_ids(m.group(1))]
    for n, old in enumerate(section):
        if _key(old) != key:
            continue
        have = [i for m in CITATION.finditer(old) for i in citation_ids(m.group(1))]
        extra = [i for i in ids if i not in have]
        if extra:
            matches = list(CITATION.finditer(old))
            if matches:
                last = matches[-1]
                merged = ", ".join(dict.fromkeys(citation_ids(last.group(1)) + extra))
                section[n] = old[:last.start()] + f"[{merged}]" + old[last.end():]
        return True
    return False


# --- summarize -----------------------------------------------------------------------------

@handler("summarize")
def summarize(variables: dict, schema: type) -> dict:
    """The passages' most central sentences, cited, up to about `target_words` words."""
    passages = variables.get("passages") or []
    subject = variables.get("subject") or {}
    target = max(20, int(variables.get("target_words") or 150))
    ranked = _ranked_sentences(passages, 10_000, boost=[subject.get("title", "")])
    if not ranked:
        return {"summary": ""}
    # _ranked_sentences returns text order for the top k; rank again to pick within the word budget.
    order = _ranked_sentences(passages, len(ranked), boost=[subject.get("title", "")])
    scores = _centrality(order)
    chosen, words = [], 0
    for i in sorted(range(len(order)), key=lambda i: (-scores[i], i)):
        n = len(order[i].split())
        if chosen and words + n > target:
            continue
        chosen.append(i)
        words += n
        if words >= target:
            break
    return {"summary": " ".join(order[i] for i in sorted(chosen))}


def _centrality(sentences: list[str]) -> list[float]:
    vectors = _tfidf([_words(CITATION.sub("", s)) for s in sentences])
    centroid: Counter = Counter()
    for v in vectors:
        centroid.update(v)
    return [_cosine(v, centroid) + 0.1 * max(0, 3 - i) / 3 for i, v in enumerate(vectors)]
