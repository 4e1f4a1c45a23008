-- One row per model call attempt (offline model included). Owned by kompl/llm.py.

CREATE TABLE llm_calls (
    id                 INTEGER PRIMARY KEY,
    at                 TEXT NOT NULL,             -- when the attempt started (UTC, ISO-8601)
    task_id            TEXT NOT NULL,             -- groups the attempts of one Task run
    purpose            TEXT NOT NULL,             -- extract, disambiguate, draft, answer, ...
    model              TEXT NOT NULL,
    prompt_name        TEXT NOT NULL,
    prompt_version     TEXT NOT NULL,
    prompt_sha256      TEXT,                      -- hash of the messages sent
    prompt_tokens      INTEGER NOT NULL DEFAULT 0,
    completion_tokens  INTEGER NOT NULL DEFAULT 0,
    cost_usd           REAL NOT NULL DEFAULT 0,
    latency_ms         INTEGER NOT NULL DEFAULT 0,
    outcome            TEXT NOT NULL CHECK (outcome IN ('ok', 'repaired', 'invalid', 'error', 'refused')),
    error              TEXT,
    attempt            INTEGER NOT NULL DEFAULT 1,
    response           TEXT,                      -- the model's reply text, as received
    meta               TEXT NOT NULL DEFAULT '{}' -- JSON: the task's meta plus call details
);
CREATE INDEX llm_calls_at ON llm_calls (at);
CREATE INDEX llm_calls_purpose ON llm_calls (purpose, at);
CREATE INDEX llm_calls_task ON llm_calls (task_id);
