"""The page vector index: Chroma (embedded) in `data/vectors/`, page chunks keyed by content hash.

    index = VectorIndex(ws)                      # read-only use
    index.query(text, k=10) -> list[VectorHit]   # VectorHit(page_id, chunk, score, text)
    sync_pages(ws, conn, page_ids) -> dict       # upsert changed pages, drop deleted ones (or defer)
    reconcile(ws, conn, fix=True) -> dict        # make the index match the database

Each active page's text (frontmatter excluded) is cut into chunks of about
`CHUNK_CHARS` at paragraph and heading boundaries with a small overlap, the
whole page and never a prefix. Chunk ids are "<page_id>:<n>", metadata
{page_id, content_hash, chunk, chunks}. A page whose stored chunks all carry its
current content hash is not embedded again; a changed page's chunks are
replaced and the leftovers of a longer old version deleted.

Chroma 1.5 corrupts a store written by two processes at once, even with a lock
per batch, because each process keeps its own in-memory index until its client
is closed. So there is ONE writer per store: an exclusive `fcntl.flock` on
`data/vectors/.writer.lock` is taken before the client is opened for writing
and released only after it is closed. A second writer waits up to
`LOCK_WAIT_S`, then defers (`{"deferred": True}`); `reconcile` catches up later.
Writes are batched (`UPSERT_BATCH` chunks per Chroma call): each call costs
tens of milliseconds whatever its size.

A `VectorIndex` keeps one client open across queries (opening one costs more
than the query). Before each query it reads the store's last write sequence
number (a read-only SQLite query, well under a millisecond): when another
process wrote since the client opened, it closes and reopens, and never
answers from a stale in-memory index.
Clients of one path share one Chroma system in a process, so a writer in this
process first closes the open readers of its store: it then starts from what
is on disk, not from a reader's possibly stale index.

The embedding function is always passed explicitly (Chroma's default downloads
a model), and the collection records the embedder's name, dimension and
configuration: when they change, the collection is rebuilt and every page
re-embedded. chromadb is imported lazily (it costs most of a second), with
telemetry off and without reading any `.env` file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import sqlite3
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kompl.errors import KomplError

COLLECTION = "kompl_pages"
CHUNK_CHARS = 1000
OVERLAP_CHARS = 150
LOCK_NAME = ".writer.lock"
LOCK_WAIT_S = 5.0
_LOCK_POLL_S = 0.05
_STORE_FILE = "chroma.sqlite3"
_GET_PAGE = 5000  # ids per `get` when listing the whole store
UPSERT_BATCH = 512  # chunks per Chroma upsert
_GET_IDS = 500  # page ids per `get` by page_id


class VectorError(KomplError):
    """The vector store could not be read or written."""


@dataclass(frozen=True)
class VectorHit:
    page_id: int
    chunk: int
    score: float  # cosine similarity, 1 = identical
    text: str


# --- chunking (pure) --------------------------------------------------------------------------

_HEADING = re.compile(r"^#{1,6}\s")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def page_body(text: str) -> str:
    """The page text without its YAML frontmatter."""
    from kompl.wiki import markdown as md

    try:
        _front, body = md.split_frontmatter(text)
    except ValueError:
        body = text
    return body


def chunk_text(text: str, max_chars: int = CHUNK_CHARS, overlap: int = OVERLAP_CHARS) -> list[str]:
    """Cut `text` into chunks of about `max_chars` at headings and paragraphs, covering all of it.

    A chunk after the first starts with the last ~`overlap` characters of the one
    before (cut at a word). A paragraph longer than `max_chars` is split at
    sentences, and a sentence longer than that at spaces.
    """
    blocks: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        if not line.strip() or _HEADING.match(line):
            if current:
                blocks.append("\n".join(current).strip())
                current = []
            if line.strip():
                current.append(line)
        else:
            current.append(line)
    if current:
        blocks.append("\n".join(current).strip())
    pieces: list[tuple[str, bool]] = []  # (text, starts with a heading)
    for block in filter(None, blocks):
        for piece in _split_long(block, max_chars):
            pieces.append((piece, bool(_HEADING.match(piece))))
    chunks: list[str] = []
    buf = ""
    for piece, heading in pieces:
        full = len(buf) + 2 + len(piece) > max_chars
        if buf and (full or (heading and len(buf) > max_chars // 2)):
            chunks.append(buf)
            tail = _tail(buf, overlap)
            buf = f"{tail}\n\n{piece}" if tail and len(tail) + 2 + len(piece) <= max_chars + overlap else piece
        else:
            buf = f"{buf}\n\n{piece}" if buf else piece
    if buf.strip():
        chunks.append(buf)
    return chunks


def _split_long(block: str, max_chars: int) -> list[str]:
    if len(block) <= max_chars:
        return [block]
    out: list[str] = []
    buf = ""
    for sentence in _SENTENCE_END.split(block):
        parts = [sentence]
        if len(sentence) > max_chars:
            parts, words = [], sentence.split(" ")
            cur = ""
            for word in words:
                while len(word) > max_chars:  # one enormous "word" (a URL, base64): hard cut
                    if cur:
                        parts.append(cur)
                        cur = ""
                    parts.append(word[:max_chars])
                    word = word[max_chars:]
                if cur and len(cur) + 1 + len(word) > max_chars:
                    parts.append(cur)
                    cur = word
                else:
                    cur = f"{cur} {word}" if cur else word
            if cur:
                parts.append(cur)
        for part in parts:
            if buf and len(buf) + 1 + len(part) > max_chars:
                out.append(buf)
                buf = part
            else:
                buf = f"{buf} {part}" if buf else part
    if buf:
        out.append(buf)
    return out


def _tail(text: str, overlap: int) -> str:
    if overlap <= 0 or len(text) <= overlap:
        return "" if overlap <= 0 else text
    tail = text[-overlap:]
    cut = tail.find(" ")
    return tail[cut + 1:].strip() if 0 <= cut < len(tail) - 1 else tail.strip()


def page_chunks(text: str) -> list[str]:
    """The chunks of a page's full text (frontmatter excluded)."""
    return chunk_text(page_body(text))


# --- chromadb, lazily --------------------------------------------------------------------------

_chroma_mod: Any = None


def _chromadb() -> Any:
    """Import chromadb with telemetry off and no `.env` read (its Settings read ./.env by default)."""
    global _chroma_mod
    if _chroma_mod is not None:
        return _chroma_mod
    os.environ["ANONYMIZED_TELEMETRY"] = "False"
    # chromadb builds Settings() at import time, which reads ./.env: import it from an empty folder.
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="kompl-chroma-") as empty:
        os.chdir(empty)
        try:
            import chromadb
            from chromadb.config import Settings
        finally:
            os.chdir(here)
    Settings.model_config["env_file"] = None
    _chroma_mod = chromadb
    return chromadb


_settings: Any = None


def _client(ws: Any) -> Any:
    global _settings
    chromadb = _chromadb()
    if _settings is None:  # building Settings resolves every field (~0.1 s): once per process
        from chromadb.config import Settings

        _settings = Settings(anonymized_telemetry=False, allow_reset=False, _env_file=None)
    ws.vectors_dir.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(ws.vectors_dir), settings=_settings)


def _store_exists(ws: Any) -> bool:
    return (ws.vectors_dir / _STORE_FILE).exists()


def _store_stamp(ws: Any, conn: sqlite3.Connection | None = None) -> tuple | None:
    """What changes whenever vectors are written: the last write's sequence number and the
    collections; None without a store. (Not the file's mtime: opening a client touches it.)"""
    if not _store_exists(ws):
        return None
    own = conn is None
    if own:
        conn = sqlite3.connect(f"file:{ws.vectors_dir / _STORE_FILE}?mode=ro", uri=True)
    try:
        seq = conn.execute("SELECT MAX(seq_id) FROM embeddings_queue").fetchone()[0]
        cols = tuple(r[0] for r in conn.execute("SELECT id FROM collections ORDER BY id"))
        return (seq, cols)
    except sqlite3.Error:
        return ("unreadable", time.monotonic())  # never equal: reopen and let Chroma say what is wrong
    finally:
        if own:
            conn.close()


_embedders: dict[str, Any] = {}


def default_embedder(settings: Any) -> Any:
    """The embedder of `settings`, made once per process and setting (a local model loads in seconds)."""
    from kompl.embed import DEFAULT_EMBEDDER, get_embedder

    spec = (getattr(settings, "embedder", None) or DEFAULT_EMBEDDER).strip()
    if spec not in _embedders:
        _embedders[spec] = get_embedder(settings, spec)
    return _embedders[spec]


def _embedder_meta(embedder: Any) -> dict[str, Any]:
    get_config = getattr(embedder, "get_config", None)
    config = get_config() if callable(get_config) else {}
    return {"embedder": str(embedder.name), "dim": int(embedder.dim),
            "embedder_config": json.dumps(config, sort_keys=True, default=str)}


def _same_embedder(metadata: dict | None, embedder: Any) -> bool:
    metadata = metadata or {}
    want = _embedder_meta(embedder)
    return all(metadata.get(k) == v for k, v in want.items())


# --- the writer lock -----------------------------------------------------------------------------

@contextlib.contextmanager
def writer_lock(ws: Any, wait_s: float = LOCK_WAIT_S) -> Iterator[bool]:
    """Hold the store's exclusive writer lock; yields False when it was not free within `wait_s`."""
    ws.vectors_dir.mkdir(parents=True, exist_ok=True)
    with open(ws.vectors_dir / LOCK_NAME, "a+") as handle:
        deadline = time.monotonic() + max(0.0, wait_s)
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(_LOCK_POLL_S)
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


# --- reading ---------------------------------------------------------------------------------------

_readers: weakref.WeakSet[VectorIndex] = weakref.WeakSet()


class VectorIndex:
    """Read access to the page vectors through one client, kept open and reopened when the store changes."""

    def __init__(self, ws: Any, *, embedder: Any = None):
        self.ws = ws
        self.embedder = embedder or default_embedder(ws.settings)
        self._lock = threading.RLock()
        self._client: Any = None
        self._col: Any = None  # None: no collection, or one written by another embedder
        self._count = 0
        self._stamp: tuple | None = None
        _readers.add(self)

    def query(self, text: str, k: int = 10, *, page_ids: Iterable[int] | None = None) -> list[VectorHit]:
        """The `k` chunks most similar to `text` (optionally only of `page_ids`), best first.

        An empty or missing store, or one built with another embedder (until
        `reconcile` rebuilds it), gives no hits.
        """
        if not text.strip() or k <= 0:
            return []
        where = None
        if page_ids is not None:
            ids = sorted({int(p) for p in page_ids})
            if not ids:
                return []
            where = {"page_id": {"$in": ids}}
        with self._lock:
            col = self._collection()
            if col is None or not self._count:
                return []
            res = col.query(query_embeddings=self.embedder.embed([text]).tolist(), n_results=min(k, self._count),
                            where=where, include=["documents", "metadatas", "distances"])
        hits = []
        for doc, meta, dist in zip(res["documents"][0], res["metadatas"][0], res["distances"][0]):
            hits.append(VectorHit(int(meta["page_id"]), int(meta["chunk"]), round(1.0 - float(dist), 4), doc or ""))
        return hits

    def indexed(self) -> dict[int, dict]:
        """page_id -> {"hashes": set of content hashes, "chunks": set of chunk numbers, "expected": n} (no lock)."""
        with self._lock:
            if not _store_exists(self.ws):
                return {}
            self._collection()
            if self._client is None:
                return {}
            names = {getattr(c, "name", c) for c in self._client.list_collections()}
            if COLLECTION not in names:
                return {}
            return _indexed(self._client.get_collection(COLLECTION, embedding_function=self.embedder))

    def close(self) -> None:
        """Close the client (the next query opens a new one)."""
        with self._lock:
            client, self._client, self._col, self._count, self._stamp = self._client, None, None, 0, None
            if client is not None:
                client.close()

    def _collection(self) -> Any:
        """The open collection, reopened when vectors were written since it was opened."""
        stamp = _store_stamp(self.ws)
        if stamp is None:
            self.close()
            return None
        if self._client is not None and stamp == self._stamp:
            return self._col
        self.close()
        client = _client(self.ws)
        try:
            names = {getattr(c, "name", c) for c in client.list_collections()}
            col = client.get_collection(COLLECTION, embedding_function=self.embedder) if COLLECTION in names else None
            if col is not None and not _same_embedder(col.metadata, self.embedder):
                col = None
            count = col.count() if col is not None else 0
        except BaseException:
            client.close()
            raise
        # The stamp read before opening: a write that lands meanwhile makes the next query reopen.
        self._client, self._col, self._count, self._stamp = client, col, count, stamp
        return col


def _close_readers(ws: Any) -> None:
    """Close this process's open readers of `ws`'s store (see the module docstring)."""
    here = os.path.realpath(ws.vectors_dir)
    for reader in list(_readers):
        if reader._client is not None and os.path.realpath(reader.ws.vectors_dir) == here:
            reader.close()


def _indexed(col: Any) -> dict[int, dict]:
    out: dict[int, dict] = {}
    offset = 0
    while True:
        got = col.get(include=["metadatas"], limit=_GET_PAGE, offset=offset)
        for pid, entry in _entries(got).items():
            if pid in out:
                for key in entry:
                    out[pid][key] |= entry[key]
            else:
                out[pid] = entry
        if len(got["ids"]) < _GET_PAGE:
            return out
        offset += len(got["ids"])


def _complete(entry: dict | None, content_hash: str) -> bool:
    """All of a page's stored chunks carry `content_hash`, and none is missing."""
    if not entry or entry["hashes"] != {content_hash} or len(entry["expected"]) != 1:
        return False
    (n,) = entry["expected"]
    return isinstance(n, int) and entry["chunks"] == set(range(n))


# --- writing ---------------------------------------------------------------------------------------

class _Writer:
    """An open collection for writing. Only ever created under the writer lock, and closed before it is released."""

    def __init__(self, ws: Any, embedder: Any):
        self.ws, self.embedder = ws, embedder
        self._pending: list[tuple[str, str, str, dict]] = []  # (id, chunk, text to embed, metadata)
        self._leftover: list[str] = []
        self.client = _client(ws)
        self.reset = False
        # A wide search beam makes the approximate index return the exact neighbours at the
        # sizes a wiki has, so the same pages give the same results however they were inserted.
        metadata = {**_embedder_meta(embedder), "hnsw:space": "cosine", "hnsw:search_ef": 256,
                    "hnsw:construction_ef": 256}
        names = {getattr(c, "name", c) for c in self.client.list_collections()}
        if COLLECTION in names:
            col = self.client.get_collection(COLLECTION, embedding_function=embedder)
            if not _same_embedder(col.metadata, embedder):
                # Another embedder wrote these vectors: they cannot be compared with ours.
                self.client.delete_collection(COLLECTION)
                self.reset = True
            else:
                self.col = col
                return
        self.col = self.client.create_collection(COLLECTION, embedding_function=embedder, metadata=metadata)

    def close(self) -> None:
        self.client.close()

    def upsert(self, page: dict, text: str, old: dict | None) -> int:
        """Replace a page's chunks with those of `text` (written by `flush`); returns the number of chunks."""
        chunks = page_chunks(text) or [""]
        n = len(chunks)
        ids = [f"{page['page_id']}:{i}" for i in range(n)]
        title = page.get("title") or ""
        for i, (cid, chunk) in enumerate(zip(ids, chunks)):
            meta = {"page_id": int(page["page_id"]), "content_hash": page["content_hash"], "chunk": i, "chunks": n}
            self._pending.append((cid, chunk, f"{title}\n\n{chunk}" if title else chunk, meta))
        self._leftover.extend(sorted((old or {}).get("ids", set()) - set(ids)))
        if len(self._pending) >= UPSERT_BATCH:
            self.flush()
        return n

    def flush(self) -> None:
        """Embed and write the staged chunks, then drop the leftovers of pages that got shorter."""
        pending, self._pending = self._pending, []
        leftover, self._leftover = self._leftover, []
        if pending:
            vectors = self.embedder.embed([p[2] for p in pending]).tolist()
            self.col.upsert(ids=[p[0] for p in pending], embeddings=vectors, documents=[p[1] for p in pending],
                            metadatas=[p[3] for p in pending])
        if leftover:
            self.col.delete(ids=leftover)

    def delete(self, entry: dict | None, page_id: int) -> None:
        ids = sorted((entry or {}).get("ids", set()))
        if ids:
            self.col.delete(ids=ids)
        else:
            self.col.delete(where={"page_id": int(page_id)})


@contextlib.contextmanager
def _writing(ws: Any, embedder: Any, wait_s: float) -> Iterator[_Writer | None]:
    with writer_lock(ws, wait_s) as locked:
        if not locked:
            yield None
            return
        _close_readers(ws)
        writer = _Writer(ws, embedder)
        try:
            yield writer
            writer.flush()
        finally:
            writer.close()


def _active_pages(conn: sqlite3.Connection, page_ids: Iterable[int] | None = None) -> dict[int, dict]:
    sql = "SELECT page_id, title, content_hash, status, version FROM pages"
    rows = conn.execute(sql).fetchall() if page_ids is None else [
        r for pid in sorted({int(p) for p in page_ids})
        for r in conn.execute(sql + " WHERE page_id = ?", (pid,)).fetchall()]
    return {r["page_id"]: dict(r) for r in rows}


def _text(conn: sqlite3.Connection, page_id: int) -> str:
    from kompl.wiki import store

    return store.content(conn, page_id)


def sync_pages(ws: Any, conn: sqlite3.Connection, page_ids: Iterable[int], *, embedder: Any = None,
               wait_s: float = LOCK_WAIT_S) -> dict[str, Any]:
    """Bring the vectors of `page_ids` up to date: embed changed pages, drop deleted ones.

    Returns {"deferred", "embedded_pages", "embedded_chunks", "unchanged", "deleted_pages", "reset"};
    when another process holds the writer lock past `wait_s`, nothing is written and
    "deferred" is True (the next `reconcile` catches up).
    """
    page_ids = sorted({int(p) for p in page_ids})
    result = {"deferred": False, "embedded_pages": 0, "embedded_chunks": 0, "unchanged": 0, "deleted_pages": 0,
              "reset": False}
    if not page_ids:
        return result
    embedder = embedder or default_embedder(ws.settings)
    pages = _active_pages(conn, page_ids)
    with _writing(ws, embedder, wait_s) as writer:
        if writer is None:
            return {**result, "deferred": True, "pages": len(page_ids)}
        if writer.reset:
            # A new embedder: this sync rebuilds everything, not only the pages asked for.
            done = _reconcile_with(writer, conn, fix=True)
            return {**result, "reset": True, "embedded_pages": done["embedded_pages"],
                    "embedded_chunks": done["embedded_chunks"], "deleted_pages": done["deleted_pages"]}
        entries: dict[int, dict] = {}
        for start in range(0, len(page_ids), _GET_IDS):
            part = page_ids[start:start + _GET_IDS]
            entries.update(_entries(writer.col.get(where={"page_id": {"$in": part}}, include=["metadatas"])))
        for pid in page_ids:
            entry = entries.get(pid)
            page = pages.get(pid)
            if page is None or page["status"] != "active":
                if entry:
                    writer.delete(entry, pid)
                    result["deleted_pages"] += 1
                continue
            if _complete(entry, page["content_hash"]):
                result["unchanged"] += 1
                continue
            result["embedded_chunks"] += writer.upsert(page, _text(conn, pid), entry)
            result["embedded_pages"] += 1
    return result


def _entries(got: dict) -> dict[int, dict]:
    """page_id -> its stored chunks' ids, hashes, chunk numbers and expected counts, from a `get` result."""
    out: dict[int, dict] = {}
    for cid, meta in zip(got["ids"], got["metadatas"]):
        meta = meta or {}
        try:
            pid = int(meta.get("page_id", cid.split(":")[0]))
        except ValueError:
            pid = -1
        entry = out.setdefault(pid, {"ids": set(), "hashes": set(), "chunks": set(), "expected": set()})
        entry["ids"].add(cid)
        entry["hashes"].add(meta.get("content_hash"))
        entry["chunks"].add(meta.get("chunk"))
        entry["expected"].add(meta.get("chunks"))
    return out


def reconcile(ws: Any, conn: sqlite3.Connection, *, fix: bool = True, embedder: Any = None,
              wait_s: float = LOCK_WAIT_S) -> dict[str, Any]:
    """Compare the index with the database; with `fix`, repair it under the writer lock.

    Returns {"missing": [page_id...], "stale": [...], "orphaned": [...], "embedder_changed": bool,
    "fixed": bool, "deferred": bool, "embedded_pages", "embedded_chunks", "deleted_pages"}.
    "missing": active pages without vectors; "stale": vectors of an older version
    (or incomplete); "orphaned": vectors of deleted or unknown pages.
    """
    embedder = embedder or default_embedder(ws.settings)
    if not fix or (not _store_exists(ws) and not _active_pages_exist(conn)):
        return _diff(conn, *_read_state(ws, embedder))
    with _writing(ws, embedder, wait_s) as writer:
        if writer is None:
            found = _diff(conn, *_read_state(ws, embedder))
            return {**found, "deferred": True, "fixed": False}
        return _reconcile_with(writer, conn, fix=True)


def _active_pages_exist(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM pages WHERE status = 'active' LIMIT 1").fetchone() is not None


def _read_state(ws: Any, embedder: Any) -> tuple[dict[int, dict], bool]:
    """(indexed entries, embedder changed) read without the lock and without creating a store."""
    if not _store_exists(ws):
        return {}, False
    client = _client(ws)
    try:
        names = {getattr(c, "name", c) for c in client.list_collections()}
        if COLLECTION not in names:
            return {}, False
        col = client.get_collection(COLLECTION, embedding_function=embedder)
        if not _same_embedder(col.metadata, embedder):
            return {}, True
        return _indexed(col), False
    finally:
        client.close()


def _diff(conn: sqlite3.Connection, indexed: dict[int, dict], changed: bool) -> dict[str, Any]:
    pages = {pid: p for pid, p in _active_pages(conn).items() if p["status"] == "active"}
    if changed:  # every page's vectors come from another embedder
        missing, stale = [], sorted(pages)
    else:
        missing = sorted(pid for pid in pages if pid not in indexed)
        stale = sorted(pid for pid in pages if pid in indexed and not _complete(indexed[pid], pages[pid]["content_hash"]))
    orphaned = sorted(pid for pid in indexed if pid not in pages)
    return {"missing": missing, "stale": stale, "orphaned": orphaned, "embedder_changed": changed,
            "fixed": False, "deferred": False, "embedded_pages": 0, "embedded_chunks": 0, "deleted_pages": 0}


def _reconcile_with(writer: _Writer, conn: sqlite3.Connection, *, fix: bool) -> dict[str, Any]:
    indexed = _indexed(writer.col)
    found = _diff(conn, indexed, writer.reset)
    pages = _active_pages(conn)
    for pid in found["orphaned"]:
        writer.delete(indexed.get(pid), pid)
        found["deleted_pages"] += 1
    for pid in sorted(found["missing"] + found["stale"]):
        found["embedded_chunks"] += writer.upsert(pages[pid], _text(conn, pid), indexed.get(pid))
        found["embedded_pages"] += 1
    found["fixed"] = True
    return found


__all__ = ["CHUNK_CHARS", "COLLECTION", "LOCK_WAIT_S", "VectorError", "VectorHit", "VectorIndex", "chunk_text", "default_embedder",
           "page_chunks", "reconcile", "sync_pages", "writer_lock"]
