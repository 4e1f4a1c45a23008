-- The page plan and the pending outbox. Owned by kompl/pipeline/plan.py (rows are created
-- there); kompl/pipeline/draft.py fills in drafts, kompl/review.py records decisions.

CREATE TABLE page_plans (
    plan_id        INTEGER PRIMARY KEY,
    page_key       TEXT NOT NULL,            -- '<page_type>:<canonical key>' (same key as pages.page_key)
    page_type      TEXT NOT NULL CHECK (page_type IN ('source', 'original-source', 'entity', 'concept',
                                                      'comparison', 'overview', 'answer')),
    title          TEXT NOT NULL,
    category       TEXT NOT NULL DEFAULT 'other',
    action         TEXT NOT NULL CHECK (action IN ('create', 'update')),
    page_id        INTEGER REFERENCES pages (page_id),   -- the page an update changes
    base_version   INTEGER,                  -- the page version the update starts from
    status         TEXT NOT NULL CHECK (status IN ('planned', 'drafted', 'failed', 'approved',
                                                   'rejected', 'superseded', 'noop')),
    inputs_hash    TEXT NOT NULL,            -- hash of everything the draft depends on (tombstone key)
    inputs         TEXT NOT NULL DEFAULT '{}', -- JSON, see kompl/pipeline/plan.py: sources, new_sources, ...
    draft          TEXT,                     -- the drafted page body (markdown, no frontmatter)
    summary        TEXT,                     -- one-sentence summary for the frontmatter
    model          TEXT,                     -- which model wrote the draft
    llm_call_id    INTEGER,                  -- the llm_calls row of the final drafting call
    left_out       TEXT NOT NULL DEFAULT '[]', -- JSON: what a budget kept out of the prompt, and why
    error          TEXT,                     -- last drafting error (status 'failed'; retryable)
    attempts       INTEGER NOT NULL DEFAULT 0,
    decided_reason TEXT,                     -- why it was rejected / superseded
    created_at     TEXT NOT NULL,
    updated_at     TEXT NOT NULL,
    decided_at     TEXT
);
-- At most one open plan per page.
CREATE UNIQUE INDEX page_plans_open ON page_plans (page_key) WHERE status IN ('planned', 'drafted', 'failed');
CREATE INDEX page_plans_status ON page_plans (status);

-- A rejected draft is not proposed again until its inputs change.
CREATE TABLE tombstones (
    page_key     TEXT NOT NULL,
    inputs_hash  TEXT NOT NULL,
    reason       TEXT NOT NULL DEFAULT '',
    plan_id      INTEGER,
    created_at   TEXT NOT NULL,
    PRIMARY KEY (page_key, inputs_hash)
);
