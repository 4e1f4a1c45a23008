-- Claims already compared with the rest of the corpus. Owned by kompl/pipeline/conflicts.py.
-- A scan compares only claims that are not in here yet, so its cost follows the new
-- claims, not the size of the corpus.

CREATE TABLE conflict_scans (
    claim_id    INTEGER PRIMARY KEY REFERENCES claims (id) ON DELETE CASCADE,
    scanned_at  TEXT NOT NULL
);
