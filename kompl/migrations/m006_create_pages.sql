-- Committed pages, every version, provenance, links and full-text search.
-- Owned by kompl/wiki/store.py.

CREATE TABLE pages (
    page_id       INTEGER PRIMARY KEY,
    page_key      TEXT NOT NULL UNIQUE,        -- '<page_type>:<canonical key>': identity, never the title alone
    page_type     TEXT NOT NULL,
    title         TEXT NOT NULL,
    slug          TEXT NOT NULL UNIQUE,        -- data/pages/<slug>.md
    category      TEXT NOT NULL DEFAULT 'other',
    summary       TEXT NOT NULL DEFAULT '',
    aliases       TEXT NOT NULL DEFAULT '[]',  -- JSON: other names that link to this page
    version       INTEGER NOT NULL,
    content_hash  TEXT NOT NULL,               -- sha256 of the current version's full text
    status        TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'deleted')),
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);

CREATE TABLE page_versions (
    page_id       INTEGER NOT NULL REFERENCES pages (page_id) ON DELETE CASCADE,
    version       INTEGER NOT NULL,
    content       TEXT NOT NULL,               -- full text: frontmatter + body
    content_hash  TEXT NOT NULL,
    author        TEXT NOT NULL,               -- the model that wrote it, 'human', or 'kompl/linker'
    plan_id       INTEGER,                     -- the draft it came from, when it came from one
    reason        TEXT NOT NULL DEFAULT '',
    created_at    TEXT NOT NULL,
    PRIMARY KEY (page_id, version)
);

CREATE TABLE page_sources (
    page_id       INTEGER NOT NULL REFERENCES pages (page_id) ON DELETE CASCADE,
    source_id     TEXT NOT NULL,
    contribution  TEXT NOT NULL DEFAULT 'cited',  -- summary | mention | claim | cited
    PRIMARY KEY (page_id, source_id)
);
CREATE INDEX page_sources_source ON page_sources (source_id);

CREATE TABLE page_links (
    from_page     INTEGER NOT NULL REFERENCES pages (page_id) ON DELETE CASCADE,
    to_title      TEXT NOT NULL,               -- as written in the [[link]]
    to_page       INTEGER REFERENCES pages (page_id) ON DELETE SET NULL,  -- NULL: a broken link
    PRIMARY KEY (from_page, to_title)
);
CREATE INDEX page_links_to ON page_links (to_page);

CREATE VIRTUAL TABLE pages_fts USING fts5 (
    title, body, page_id UNINDEXED, tokenize = 'porter unicode61'
);
