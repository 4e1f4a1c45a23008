-- The corpus vocabulary for TF-IDF keyphrases, and claim offsets. Owned by kompl/pipeline/extract.py.

-- Document frequency of each keyphrase term over the extracted sources. Kept in
-- step with `extractions` by the triggers below: each extraction row lists its
-- distinct terms in local.terms (JSON), so inserting a row adds its terms, and
-- deleting it (a re-extraction, or a source deleted by cascade) takes them back.
-- The number of documents is the number of extraction rows.
CREATE TABLE term_df (
    term  TEXT PRIMARY KEY,
    df    INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TRIGGER extractions_terms_insert AFTER INSERT ON extractions
BEGIN
    INSERT INTO term_df (term, df)
        SELECT value, 1 FROM json_each(NEW.local, '$.terms') WHERE true
        ON CONFLICT (term) DO UPDATE SET df = df + 1;
END;

CREATE TRIGGER extractions_terms_delete AFTER DELETE ON extractions
BEGIN
    UPDATE term_df SET df = df - 1 WHERE term IN (SELECT value FROM json_each(OLD.local, '$.terms'));
    DELETE FROM term_df WHERE df <= 0;
END;

CREATE TRIGGER extractions_terms_update AFTER UPDATE OF local ON extractions
BEGIN
    UPDATE term_df SET df = df - 1 WHERE term IN (SELECT value FROM json_each(OLD.local, '$.terms'));
    DELETE FROM term_df WHERE df <= 0;
    INSERT INTO term_df (term, df)
        SELECT value, 1 FROM json_each(NEW.local, '$.terms') WHERE true
        ON CONFLICT (term) DO UPDATE SET df = df + 1;
END;

-- Where the claim's quote starts in the source markdown (NULL when the model's quote
-- is not found verbatim: such a claim is model-only, not backed by a passage).
ALTER TABLE claims ADD COLUMN quote_start INTEGER;
