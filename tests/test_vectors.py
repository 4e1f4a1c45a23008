"""The page vector index: chunking, upsert by content hash, deletes, embedder changes, one writer per store."""

from __future__ import annotations

import multiprocessing as mp
import shutil

import pytest

from kompl import vectors as V
from kompl.embed import HashingEmbedder
from kompl.wiki import store


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting the texts it embeds."""

    def __init__(self, dim: int = 512):
        super().__init__(dim=dim)
        self.texts: list[str] = []

    def embed(self, texts):
        self.texts.extend(texts)
        return super().embed(texts)


def commit(ws, conn, key: str, title: str, body: str) -> dict:
    page, _ = store.commit_version(ws, conn, store.PageWrite(
        page_key=key, page_type="entity", title=title, body=body, sources=[], author="test"))
    return page


def delete_page(conn, page_id: int) -> None:
    conn.execute("UPDATE pages SET status='deleted' WHERE page_id=?", (page_id,))


def stored(ws) -> dict[int, dict]:
    return V.VectorIndex(ws).indexed()


LONG_BODY = "\n\n".join(
    f"## Part {i}\n\n" + " ".join(f"Paragraph {i} sentence {j} about moulds, cultures and plates." for j in range(12))
    for i in range(8)
) + "\n\nThe final paragraph mentions the zanzibar quokka telescope only here."


# --- chunking ---------------------------------------------------------------------------------------

def test_chunks_cover_the_whole_text_with_overlap():
    chunks = V.chunk_text(LONG_BODY)
    assert len(chunks) > 3
    assert all(len(c) <= V.CHUNK_CHARS + V.OVERLAP_CHARS + 2 for c in chunks)
    assert "zanzibar quokka telescope" in chunks[-1]
    for i in range(8):
        assert any(f"## Part {i}" in c for c in chunks)
    # consecutive chunks share some text (the overlap)
    assert chunks[1][:20] in chunks[0]


def test_chunks_exclude_frontmatter_and_split_giant_paragraphs():
    text = "---\ntitle: Secret Frontmatter Title\n---\n" + "word " * 1000 + "\n\n" + "x" * 2500
    chunks = V.page_chunks(text)
    assert all("Secret Frontmatter" not in c for c in chunks)
    assert sum(c.count("word") for c in chunks) >= 1000
    assert all(len(c) <= V.CHUNK_CHARS + V.OVERLAP_CHARS + 2 for c in chunks)


# --- upsert, query, delete ------------------------------------------------------------------------

def test_upsert_query_unchanged_changed_deleted(ws, conn):
    emb = CountingEmbedder()
    a = commit(ws, conn, "entity:a", "Alexander Fleming", "Fleming found penicillin on a mouldy culture plate.")
    b = commit(ws, conn, "entity:b", "Pfizer", "Pfizer built deep-tank fermentation plants in Brooklyn.")
    out = V.sync_pages(ws, conn, [a["page_id"], b["page_id"]], embedder=emb)
    assert out["embedded_pages"] == 2 and not out["deferred"]
    hits = V.VectorIndex(ws, embedder=emb).query("deep-tank fermentation in Brooklyn", k=3)
    assert hits and hits[0].page_id == b["page_id"]
    assert "Brooklyn" in hits[0].text

    # unchanged pages: nothing embedded
    emb.texts.clear()
    out = V.sync_pages(ws, conn, [a["page_id"], b["page_id"]], embedder=emb)
    assert out["unchanged"] == 2 and out["embedded_chunks"] == 0 and emb.texts == []

    # a long page shrinks: its chunks are replaced, no stale chunk stays
    long = commit(ws, conn, "entity:c", "Moulds", LONG_BODY)
    V.sync_pages(ws, conn, [long["page_id"]], embedder=emb)
    before = stored(ws)[long["page_id"]]
    assert len(before["ids"]) > 3
    long = commit(ws, conn, "entity:c", "Moulds", "Now a short page about slime moulds.")
    out = V.sync_pages(ws, conn, [long["page_id"]], embedder=emb)
    assert out["embedded_pages"] == 1
    after = stored(ws)[long["page_id"]]
    assert after["ids"] == {f"{long['page_id']}:0"}
    assert after["hashes"] == {long["content_hash"]}
    hits = V.VectorIndex(ws, embedder=emb).query("zanzibar quokka telescope", k=10)
    assert all("zanzibar" not in h.text for h in hits)

    # a deleted page's vectors are gone
    delete_page(conn, b["page_id"])
    out = V.sync_pages(ws, conn, [b["page_id"]], embedder=emb)
    assert out["deleted_pages"] == 1
    assert b["page_id"] not in stored(ws)
    assert all(h.page_id != b["page_id"] for h in V.VectorIndex(ws, embedder=emb).query("Pfizer Brooklyn", k=10))


def test_long_page_is_embedded_beyond_its_start(ws, conn):
    page = commit(ws, conn, "entity:long", "Moulds", LONG_BODY)
    V.sync_pages(ws, conn, [page["page_id"]])
    assert len(store.content(conn, page["page_id"])) > 4000
    hits = V.VectorIndex(ws).query("zanzibar quokka telescope", k=1)
    assert hits and hits[0].page_id == page["page_id"] and "zanzibar quokka telescope" in hits[0].text
    assert hits[0].chunk > 0


def test_embedder_change_reembeds_everything(ws, conn):
    pages = [commit(ws, conn, f"entity:{i}", f"Page {i}", f"Body number {i} about penicillin.") for i in range(3)]
    V.sync_pages(ws, conn, [p["page_id"] for p in pages], embedder=CountingEmbedder(512))
    new = CountingEmbedder(256)
    assert V.VectorIndex(ws, embedder=new).query("penicillin") == []  # other embedder's vectors are not used
    found = V.reconcile(ws, conn, fix=False, embedder=new)
    assert found["embedder_changed"] and found["stale"] == sorted(p["page_id"] for p in pages)
    out = V.sync_pages(ws, conn, [pages[0]["page_id"]], embedder=new)
    assert out["reset"] and out["embedded_pages"] == 3
    assert len(new.texts) == 3
    assert V.VectorIndex(ws, embedder=new).query("Body number 2", k=1)[0].page_id == pages[2]["page_id"]
    assert V.reconcile(ws, conn, fix=False, embedder=new)["stale"] == []


def test_reconcile_repairs_a_wiped_store_and_orphans(ws, conn):
    pages = [commit(ws, conn, f"entity:{i}", f"Page {i}", f"Body number {i} about moulds.") for i in range(4)]
    V.sync_pages(ws, conn, [p["page_id"] for p in pages])
    shutil.rmtree(ws.vectors_dir)
    found = V.reconcile(ws, conn, fix=False)
    assert found["missing"] == sorted(p["page_id"] for p in pages)
    assert not (ws.vectors_dir / "chroma.sqlite3").exists()  # reporting creates nothing
    fixed = V.reconcile(ws, conn)
    assert fixed["fixed"] and fixed["embedded_pages"] == 4
    delete_page(conn, pages[0]["page_id"])
    pages[1] = commit(ws, conn, "entity:1", "Page 1", "A new text for page one.")
    found = V.reconcile(ws, conn, fix=False)
    assert found["orphaned"] == [pages[0]["page_id"]] and found["stale"] == [pages[1]["page_id"]]
    V.reconcile(ws, conn)
    clean = V.reconcile(ws, conn, fix=False)
    assert clean["missing"] == clean["stale"] == clean["orphaned"] == []


# --- one writer per store ---------------------------------------------------------------------------

def test_second_writer_defers_while_the_lock_is_held(ws, conn):
    page = commit(ws, conn, "entity:x", "X", "Text about x.")
    with V.writer_lock(ws) as got:
        assert got
        out = V.sync_pages(ws, conn, [page["page_id"]], wait_s=0.2)
    assert out["deferred"] is True
    assert V.reconcile(ws, conn, fix=False)["missing"] == [page["page_id"]]
    assert V.reconcile(ws, conn)["embedded_pages"] == 1


def _writer_process(root: str, offset: int, count: int, wait_s: float, queue) -> None:
    from kompl import db, vectors
    from kompl.workspace import Workspace

    ws = Workspace(root=__import__("pathlib").Path(root))
    conn = db.connect(ws.db_path)
    ids = [r[0] for r in conn.execute("SELECT page_id FROM pages ORDER BY page_id")][offset:offset + count]
    results = []
    for pid in ids:  # many small writes, each a separate writer session: maximal interleaving
        results.append(vectors.sync_pages(ws, conn, [pid], wait_s=wait_s))
    queue.put(results)


def test_two_processes_writing_at_once_do_not_corrupt_the_store(ws, conn):
    pages = [commit(ws, conn, f"entity:{i}", f"Page {i}", f"Body {i}: " + " ".join(f"w{i}x{j}" for j in range(200)))
             for i in range(24)]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_writer_process, args=(str(ws.root), k * 12, 12, 30.0, queue)) for k in range(2)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert all(not r["deferred"] for rs in results for r in rs)
    found = V.reconcile(ws, conn, fix=False)
    assert found["missing"] == found["stale"] == found["orphaned"] == []
    index = V.VectorIndex(ws)
    for page in pages:  # every page's own text finds it: no chunk was lost or scrambled
        hits = index.query(store.content(conn, page["page_id"]).split("\n")[-2], k=1)
        assert hits and hits[0].page_id == page["page_id"]


def test_a_writer_that_cannot_get_the_lock_defers_in_another_process(ws, conn):
    page = commit(ws, conn, "entity:y", "Y", "Text about y.")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with V.writer_lock(ws):
        proc = ctx.Process(target=_writer_process, args=(str(ws.root), 0, 1, 0.3, queue))
        proc.start()
        result = queue.get(timeout=60)
        proc.join(timeout=30)
    assert result[0]["deferred"] is True
    assert V.reconcile(ws, conn)["embedded_pages"] == 1
    assert V.VectorIndex(ws).query("Text about y", k=1)[0].page_id == page["page_id"]


def test_chromadb_is_imported_lazily():
    import subprocess
    import sys

    code = "import sys, kompl.vectors, kompl.doctor; print('chromadb' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.fixture(autouse=True)
def _env_file_is_ignored(tmp_path, monkeypatch):
    """A .env in the current folder must not reach chromadb's settings."""
    (tmp_path / ".env").write_text("CHROMA_SERVER_HOST=evil.example\nPERSIST_DIRECTORY=/nonexistent\n")
    yield
