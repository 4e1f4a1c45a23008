-- Extraction results per source. Owned by kompl/pipeline/extract.py.

CREATE TABLE extractions (
    source_id          TEXT PRIMARY KEY REFERENCES sources (source_id) ON DELETE CASCADE,
    content_hash       TEXT NOT NULL,     -- the source's hash this extraction was made from
    extractor_version  TEXT NOT NULL,
    model              TEXT NOT NULL,     -- which model wrote the model pass
    chunks             INTEGER NOT NULL,
    local              TEXT NOT NULL,     -- JSON: local NLP pass (entity counts, keyphrases, profile)
    result             TEXT NOT NULL,     -- JSON: merged model pass (title, summary, entities, ...)
    extracted_at       TEXT NOT NULL
);

-- One row per (source, normalized name, kind): what planning and resolution read.
CREATE TABLE entity_mentions (
    id           INTEGER PRIMARY KEY,
    source_id    TEXT NOT NULL REFERENCES sources (source_id) ON DELETE CASCADE,
    name         TEXT NOT NULL,           -- surface form as extracted (most frequent one)
    norm         TEXT NOT NULL,           -- kompl.text.norm_name(name)
    type         TEXT NOT NULL,           -- PERSON ORG GPE LOC PRODUCT EVENT WORK LAW NORP FAC DATE MONEY CONCEPT OTHER
    kind         TEXT NOT NULL CHECK (kind IN ('entity', 'concept')),
    count        INTEGER NOT NULL DEFAULT 1,
    context      TEXT NOT NULL DEFAULT '', -- a sentence from the source where it appears
    description  TEXT NOT NULL DEFAULT '',
    UNIQUE (source_id, norm, kind)
);
CREATE INDEX entity_mentions_norm ON entity_mentions (norm);

CREATE TABLE claims (
    id          INTEGER PRIMARY KEY,
    source_id   TEXT NOT NULL REFERENCES sources (source_id) ON DELETE CASCADE,
    claim       TEXT NOT NULL,
    quote       TEXT NOT NULL,            -- the supporting sentence(s), verbatim from the source
    confidence  REAL NOT NULL DEFAULT 0.5,
    entities    TEXT NOT NULL DEFAULT '[]' -- JSON array of entity names involved
);
CREATE INDEX claims_source ON claims (source_id);

CREATE TABLE relationship_mentions (
    id           INTEGER PRIMARY KEY,
    source_id    TEXT NOT NULL REFERENCES sources (source_id) ON DELETE CASCADE,
    from_name    TEXT NOT NULL,
    to_name      TEXT NOT NULL,
    type         TEXT NOT NULL,           -- e.g. works_for, founded, competes_with, contradicts, part_of, related_to
    description  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX relationship_mentions_source ON relationship_mentions (source_id);
