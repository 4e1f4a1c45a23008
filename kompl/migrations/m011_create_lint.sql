-- Lint runs and their findings. Owned by kompl/lint.py.

-- One row per finished `kompl lint` (a run that crashed leaves no row).
CREATE TABLE lint_runs (
    id               INTEGER PRIMARY KEY,
    started_at       TEXT NOT NULL,
    finished_at      TEXT NOT NULL,
    complete         INTEGER NOT NULL DEFAULT 1,   -- every check ran (what `lint --if-due` counts)
    fix              INTEGER NOT NULL DEFAULT 0,   -- run with --fix
    checks           TEXT NOT NULL DEFAULT '[]',   -- JSON: the checks that ran
    pages_checked    INTEGER NOT NULL DEFAULT 0,
    links_checked    INTEGER NOT NULL DEFAULT 0,
    sources_checked  INTEGER NOT NULL DEFAULT 0,
    entities_checked INTEGER NOT NULL DEFAULT 0,
    claims_checked   INTEGER NOT NULL DEFAULT 0,
    pairs_judged     INTEGER NOT NULL DEFAULT 0,   -- claim pairs the contradiction scan sent to the model
    findings         INTEGER NOT NULL DEFAULT 0,
    fixed            INTEGER NOT NULL DEFAULT 0,
    counts           TEXT NOT NULL DEFAULT '{}',   -- JSON: findings per check and per severity
    errors           TEXT NOT NULL DEFAULT '[]',   -- JSON: what could not be checked, and why
    duration_ms      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX lint_runs_finished ON lint_runs (complete, finished_at);

CREATE TABLE lint_findings (
    id          INTEGER PRIMARY KEY,
    run_id      INTEGER NOT NULL REFERENCES lint_runs (id) ON DELETE CASCADE,
    check_name  TEXT NOT NULL,
    severity    TEXT NOT NULL CHECK (severity IN ('error', 'warning', 'info')),
    page_id     INTEGER,                  -- no foreign key: a finding keeps the id of a page deleted later
    message     TEXT NOT NULL,
    details     TEXT NOT NULL DEFAULT '{}',
    fixed       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX lint_findings_run ON lint_findings (run_id, check_name);
