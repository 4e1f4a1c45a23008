-- Resolved entities and the aliases that point at them. Owned by kompl/pipeline/resolve.py.

-- One row per real-world entity (or concept). An entity absorbed by a merge keeps
-- its row with merged_into set, so ids handed out earlier still lead somewhere.
CREATE TABLE entities (
    entity_id       TEXT PRIMARY KEY,
    canonical_name  TEXT NOT NULL,       -- the most frequent full form (recomputed on every change)
    norm            TEXT NOT NULL,       -- kompl.text.norm_name(canonical_name)
    type            TEXT NOT NULL,       -- majority type of its mentions (PERSON ORG GPE ...)
    kind            TEXT NOT NULL CHECK (kind IN ('entity', 'concept')),
    merged_into     TEXT REFERENCES entities (entity_id),
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX entities_norm ON entities (norm);
CREATE INDEX entities_live ON entities (kind, merged_into);

-- Which normalised name belongs to which entity, and why.
--   merged:   the name is this entity (exactly one merged row per (norm, kind));
--   pending:  a proposed merge below the confidence threshold, waiting for review
--             (`kompl aliases --pending`, then `kompl aliases merge` or `split`);
--   rejected: the name is known NOT to be this entity (a split, or the model said no);
--             resolution never merges them again.
CREATE TABLE aliases (
    id           INTEGER PRIMARY KEY,
    norm         TEXT NOT NULL,           -- kompl.text.norm_name(alias)
    kind         TEXT NOT NULL CHECK (kind IN ('entity', 'concept')),
    entity_id    TEXT NOT NULL REFERENCES entities (entity_id),
    alias        TEXT NOT NULL,           -- surface form, most frequent spelling
    layer        TEXT NOT NULL CHECK (layer IN ('exact', 'alias', 'fuzzy', 'acronym', 'surname',
                                                'embedding', 'model', 'manual')),
    confidence   REAL NOT NULL,
    reason       TEXT NOT NULL DEFAULT '',
    status       TEXT NOT NULL CHECK (status IN ('merged', 'pending', 'rejected')),
    needs_model  INTEGER NOT NULL DEFAULT 0,   -- pending because the model could not be asked yet
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL,
    UNIQUE (norm, kind, entity_id)
);
CREATE UNIQUE INDEX aliases_one_merged ON aliases (norm, kind) WHERE status = 'merged';
CREATE INDEX aliases_entity ON aliases (entity_id, status);
CREATE INDEX aliases_status ON aliases (status);
