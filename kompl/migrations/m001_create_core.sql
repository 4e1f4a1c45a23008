-- Core tables: the audit log, sources and failed ingests.

CREATE TABLE activity (
    id      INTEGER PRIMARY KEY,
    at      TEXT NOT NULL,
    action  TEXT NOT NULL,
    target  TEXT,
    actor   TEXT NOT NULL DEFAULT 'user',
    details TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX activity_at ON activity (at);
CREATE INDEX activity_action ON activity (action, at);

-- One row per stored source. Owned by kompl/ingest/store.py.
CREATE TABLE sources (
    source_id      TEXT PRIMARY KEY,
    title          TEXT NOT NULL,
    title_from     TEXT NOT NULL CHECK (title_from IN ('document', 'heading', 'filename', 'url', 'given')),
    source_type    TEXT NOT NULL,              -- pdf, docx, html, markdown, text, url, stdin, ...
    input_kind     TEXT NOT NULL CHECK (input_kind IN ('file', 'url', 'stdin')),
    input          TEXT NOT NULL,              -- path, URL or '-' as given
    url            TEXT,                       -- final URL after redirects (url inputs)
    url_norm       TEXT,                       -- normalized URL for dedup (url inputs)
    content_hash   TEXT NOT NULL UNIQUE,       -- sha256 of the normalized markdown
    original_sha256 TEXT NOT NULL,
    original_name  TEXT,                       -- data/originals/<file name>
    mime_type      TEXT,
    bytes          INTEGER NOT NULL,
    chars          INTEGER NOT NULL,
    status         TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
    ingested_at    TEXT NOT NULL,
    metadata       TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX sources_url_norm ON sources (url_norm);
CREATE INDEX sources_status ON sources (status);

-- Inputs that could not be ingested, kept so they can be listed and retried.
CREATE TABLE ingest_failures (
    id           INTEGER PRIMARY KEY,
    input        TEXT NOT NULL,
    input_kind   TEXT NOT NULL,
    code         TEXT NOT NULL,
    error        TEXT NOT NULL,
    hint         TEXT,
    failed_at    TEXT NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 1,
    kept_copy    TEXT,          -- data/originals/failed/<name> for stdin input, so a retry has the bytes
    options      TEXT NOT NULL DEFAULT '{}',
    resolved_at  TEXT
);
CREATE INDEX ingest_failures_open ON ingest_failures (resolved_at, input);
