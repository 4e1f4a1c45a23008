-- Chat sessions and their messages. Owned by kompl/read/chat.py.

CREATE TABLE chat_sessions (
    session_id   TEXT PRIMARY KEY,           -- short id shown to the user (`kompl chat --session ID`)
    title        TEXT NOT NULL DEFAULT '',   -- the first question, for listing
    model        TEXT NOT NULL DEFAULT '',   -- the model last used in it
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);

CREATE TABLE chat_messages (
    id           INTEGER PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES chat_sessions (session_id) ON DELETE CASCADE,
    role         TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    content      TEXT NOT NULL,
    citations    TEXT NOT NULL DEFAULT '[]', -- JSON [{page_id, title}] (assistant messages)
    pages_used   TEXT NOT NULL DEFAULT '[]', -- JSON [{page_id, title}] given to the model
    removed      TEXT NOT NULL DEFAULT '[]', -- JSON: citations removed because the model was not given those pages
    model        TEXT,
    llm_call_id  INTEGER,
    created_at   TEXT NOT NULL
);
CREATE INDEX chat_messages_session ON chat_messages (session_id, id);
