-- Contradicting claims across sources. Owned by kompl/pipeline/conflicts.py.

CREATE TABLE conflicts (
    id           INTEGER PRIMARY KEY,
    claim_a      INTEGER NOT NULL REFERENCES claims (id) ON DELETE CASCADE,
    claim_b      INTEGER NOT NULL REFERENCES claims (id) ON DELETE CASCADE,
    source_a     TEXT NOT NULL,
    source_b     TEXT NOT NULL,
    entity_id    TEXT,                        -- the entity both claims are about (entities.entity_id)
    topic        TEXT NOT NULL DEFAULT '',    -- the entity's canonical name or the shared subject
    verdict      TEXT NOT NULL CHECK (verdict IN ('contradicts', 'compatible', 'unsure')),
    confidence   REAL NOT NULL DEFAULT 0,
    reason       TEXT NOT NULL DEFAULT '',
    model        TEXT NOT NULL,
    pair_hash    TEXT NOT NULL UNIQUE,        -- hash of both claims' text: a judged pair is never judged again
    judged_at    TEXT NOT NULL
);
CREATE INDEX conflicts_entity ON conflicts (entity_id, verdict);
