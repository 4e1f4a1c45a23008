"""`kompl ingest` and `kompl sources` as a user types them: every input kind, titles,
dedup, every bad input, and retrying failures. Each case checks the exit code and
output, then the rows and the files on disk."""

from __future__ import annotations

import gzip
import hashlib
import json

import pytest

from fixtures_docs import LocalServer, docx_bytes, make_all, pdf_bytes, pptx_bytes, token
from kompl.ingest import store


def ingest_json(kompl, *args, input=None, code=0):
    result = kompl("ingest", *[str(a) for a in args], "--json", input=input)
    assert result.exit_code == code, result.output
    report = json.loads(result.stdout)
    assert set(report) >= {"ingested", "duplicates", "failed"}
    return report


def rows(conn):
    return {r["source_id"]: dict(r) for r in conn.execute("SELECT * FROM sources")}


def open_failures(conn):
    return conn.execute("SELECT * FROM ingest_failures WHERE resolved_at IS NULL ORDER BY id").fetchall()


def markdown_of(ws, source_id):
    return store.read_markdown(ws, source_id)


def flat(text: str) -> str:
    return " ".join(text.split())


# --- every format -----------------------------------------------------------------------

def test_every_format_keeps_its_planted_token(kompl, ws, conn, tmp_path):
    docs = make_all(tmp_path / "docs")
    report = ingest_json(kompl, *[d.path for d in docs.values()])
    assert report["failed"] == [] and report["duplicates"] == []
    assert len(report["ingested"]) == len(docs)
    by_input = {entry["input"]: entry for entry in report["ingested"]}
    stored = rows(conn)
    for kind, doc in docs.items():
        entry = by_input[str(doc.path)]
        assert entry["source_id"].startswith("src-") and entry["title"]
        row = stored[entry["source_id"]]
        md = markdown_of(ws, entry["source_id"])
        for text in doc.must_include:
            assert text in md, f"{kind}: {text!r} missing from {md!r}"
        for text in doc.must_not_include:
            assert text not in md, f"{kind}: {text!r} leaked into {md!r}"
        assert row["source_type"] == doc.source_type, kind
        if doc.title:
            assert (row["title"], entry["title"]) == (doc.title, doc.title), kind
        if doc.title_from:
            assert row["title_from"] == doc.title_from, kind
        # the hash is over the stored markdown; the original bytes are kept as they were
        assert row["content_hash"] == hashlib.sha256(md.encode()).hexdigest()
        original = ws.originals_dir / row["original_name"]
        assert original.read_bytes() == doc.path.read_bytes()
        assert row["original_sha256"] == hashlib.sha256(doc.path.read_bytes()).hexdigest()
        assert row["input_kind"] == "file" and row["input"] == str(doc.path) and row["status"] == "active"
        assert gzip.decompress(store.raw_path(ws, row["source_id"]).read_bytes()).decode() == md

    result = kompl("sources", "--json")
    assert result.exit_code == 0
    listed = json.loads(result.stdout)
    assert len(listed) == len(docs)
    for item in listed:
        assert {"source_id", "title", "status", "content_hash", "source_type"} <= set(item)
    # the human view lists them too
    result = kompl("sources")
    assert result.exit_code == 0 and "The Page Title" in result.stdout


def test_human_output_has_summary_and_errors(kompl, tmp_path):
    (tmp_path / "a.md").write_text("# Alpha\n\ntext\n")
    result = kompl("ingest", tmp_path / "a.md", tmp_path / "missing.md")
    assert result.exit_code == 1
    assert "Alpha" in result.stdout and "src-" in result.stdout
    assert "1 ingested, 0 duplicate, 1 failed" in flat(result.stdout)
    assert "No such file or folder" in flat(result.stderr)
    assert "Traceback" not in result.output


def test_nothing_to_ingest_is_a_usage_error(kompl):
    result = kompl("ingest")
    assert result.exit_code == 2
    assert "Nothing to ingest" in result.stderr


# --- folders, stdin, bookmarks, URLs -------------------------------------------------------

def test_folder_is_recursive_and_skips_hidden(kompl, conn, tmp_path):
    top = tmp_path / "notes"
    (top / "sub" / "deeper").mkdir(parents=True)
    (top / ".git").mkdir()
    names = {"top.md": token(), "sub/mid.txt": token(), "sub/deeper/low.md": token()}
    for name, tok in names.items():
        (top / name).write_text(f"text {tok}\n")
    (top / ".hidden.md").write_text(f"hidden {token()}\n")
    (top / ".git" / "config.md").write_text(f"git {token()}\n")
    report = ingest_json(kompl, top)
    assert sorted(e["input"] for e in report["ingested"]) == sorted(str(top / n) for n in names)
    assert len(rows(conn)) == 3


def test_folder_input_never_collects_the_workspace_itself(kompl, ws, conn, monkeypatch):
    monkeypatch.chdir(ws.root)
    (ws.root / "inbox").mkdir()
    (ws.root / "inbox" / "note.md").write_text("a note\n")
    report = ingest_json(kompl, ".")
    assert sorted(e["input"] for e in report["ingested"]) == sorted(
        [str(ws.root / "inbox" / "note.md"), str(ws.schema_path)])
    assert report["failed"] == []
    # a second run: kompl's own raw files and originals are not taken for new inputs
    report = ingest_json(kompl, ".")
    assert report["ingested"] == [] and len(report["duplicates"]) == 2


def test_folder_glob_filters(kompl, conn, tmp_path):
    top = tmp_path / "mixed"
    (top / "sub").mkdir(parents=True)
    (top / "a.md").write_text("a\n")
    (top / "b.txt").write_text("b\n")
    (top / "sub" / "c.md").write_text("c\n")
    report = ingest_json(kompl, top, "--glob", "*.md")
    assert sorted(e["input"] for e in report["ingested"]) == [str(top / "a.md"), str(top / "sub" / "c.md")]
    # a folder with nothing matching is reported, not failed
    report = ingest_json(kompl, top, "--glob", "*.pdf")
    assert report["ingested"] == [] and report["failed"] == []
    assert "no files matching *.pdf" in report["skipped"][0]["reason"]


def test_stdin_with_title(kompl, ws, conn):
    tok = token()
    report = ingest_json(kompl, "-", "--title", "Meeting notes", input=f"Decisions: {tok}\n")
    [entry] = report["ingested"]
    assert entry["title"] == "Meeting notes" and entry["title_from"] == "given"
    row = rows(conn)[entry["source_id"]]
    assert row["input_kind"] == "stdin" and row["input"] == "-"
    assert tok in markdown_of(ws, entry["source_id"])


def test_stdin_without_title_uses_its_heading(kompl, conn):
    report = ingest_json(kompl, "-", input="# Piped Heading\n\nbody\n")
    assert report["ingested"][0]["title"] == "Piped Heading"
    report = ingest_json(kompl, "-", input="no heading here\n")
    assert report["ingested"][0]["title"] == "Untitled (standard input)"


def test_bookmarks_file_ingests_every_http_link(kompl, ws, conn, tmp_path):
    toks = [token(), token()]
    with LocalServer() as srv:
        first = srv.page("/one", f"<html><body><p>first {toks[0]}</p></body></html>")
        second = srv.page("/two", f"<html><head><title>Second Page</title></head><body>{toks[1]}</body></html>")
        marks = tmp_path / "bookmarks.html"
        marks.write_text(
            "<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<TITLE>Bookmarks</TITLE><H1>Bookmarks</H1>\n<DL><p>\n"
            f'  <DT><A HREF="{first}" ADD_DATE="1">My First Bookmark</A>\n'
            '  <DT><H3>Folder</H3><DL><p>\n'
            f'    <DT><A HREF="{second}">Second</A>\n'
            '    <DT><A HREF="javascript:void(0)">bookmarklet</A>\n'
            "  </DL><p>\n</DL><p>\n"
        )
        report = ingest_json(kompl, "--bookmarks", marks, "--allow-private")
    titles = {e["input"]: (e["title"], e["title_from"]) for e in report["ingested"]}
    # no title of its own: the bookmark's name; its own <title> wins otherwise
    assert titles == {first: ("My First Bookmark", "given"), second: ("Second Page", "document")}
    assert report["skipped"][0]["input"] == "javascript:void(0)"
    for entry, tok in zip(report["ingested"], toks):
        assert tok in markdown_of(ws, entry["source_id"])


def test_bookmarks_file_that_is_not_one(kompl, tmp_path):
    (tmp_path / "marks.html").write_text("just some text\n")
    result = kompl("ingest", "--bookmarks", tmp_path / "marks.html")
    assert result.exit_code == 2
    assert "does not look like a bookmarks export" in flat(result.stderr)


def test_http_url_from_local_server(kompl, ws, conn):
    tok, secret = token(), token()
    with LocalServer() as srv:
        url = srv.page("/article/", "<html><head><title>Served Article</title>"
                                    f"<script>steal('{secret}')</script></head>"
                                    f"<body><h1>H</h1><p>{tok}</p></body></html>")
        report = ingest_json(kompl, url, "--allow-private")
    [entry] = report["ingested"]
    assert entry["title"] == "Served Article" and entry["title_from"] == "document"
    row = rows(conn)[entry["source_id"]]
    assert row["input_kind"] == "url" and row["url"] == url and row["source_type"] == "html"
    assert row["url_norm"] == url.rstrip("/") and row["mime_type"] == "text/html"
    md = markdown_of(ws, entry["source_id"])
    assert tok in md and secret not in md


def test_url_title_option_and_url_fallback_title(kompl, conn):
    with LocalServer() as srv:
        plain = srv.page("/notes/today", "just words, no heading\n", content_type="text/plain")
        given = srv.page("/other", "other words\n", content_type="text/plain")
        report = ingest_json(kompl, plain, "--allow-private")
        assert report["ingested"][0]["title"] == "127.0.0.1/notes/today"
        assert report["ingested"][0]["title_from"] == "url"
        report = ingest_json(kompl, given, "--allow-private", "--title", "Chosen")
        assert report["ingested"][0]["title"] == "Chosen"


def test_url_serving_a_pdf_and_a_latin1_page(kompl, ws):
    tok, tok2 = token(), token()
    with LocalServer() as srv:
        pdf = srv.page("/download?id=7", pdf_bytes([f"served {tok}"]), content_type="application/pdf")
        srv.routes["/download"] = srv.routes.pop("/download?id=7")
        latin = srv.page("/latin", f"<p>Caf\u00e9 cr\u00e8me {tok2}</p>".encode("latin-1"),
                         content_type="text/html; charset=iso-8859-1")
        report = ingest_json(kompl, pdf, latin, "--allow-private")
    pdf_entry, latin_entry = report["ingested"]
    assert pdf_entry["source_type"] == "pdf" and tok in markdown_of(ws, pdf_entry["source_id"])
    assert "Caf\u00e9 cr\u00e8me" in markdown_of(ws, latin_entry["source_id"])


# --- titles ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name, body, title, title_from", [
    ("own.html", "<html><head><title>Own Title</title></head><body><h1>Heading</h1></body></html>",
     "Own Title", "document"),
    ("untitled.html", "<html><body><h1>Only A Heading</h1><p>x</p></body></html>", "Only A Heading", "heading"),
    ("atx.md", "intro line\n\n# The *First* H1\n\n# Second H1\n", "The First H1", "heading"),
    ("setext.md", "Setext Title\n============\n\nbody\n", "Setext Title", "heading"),
    ("h2-only.md", "## Not an H1\n\nbody\n", "h2-only", "filename"),
    ("my-notes.txt", "no heading at all\n", "my-notes", "filename"),
])
def test_title_choice_is_recorded(kompl, conn, tmp_path, name, body, title, title_from):
    (tmp_path / name).write_text(body)
    report = ingest_json(kompl, tmp_path / name)
    [entry] = report["ingested"]
    assert (entry["title"], entry["title_from"]) == (title, title_from)
    row = rows(conn)[entry["source_id"]]
    assert (row["title"], row["title_from"]) == (title, title_from)


@pytest.mark.parametrize("name, data, title, title_from", [
    ("core.docx", lambda: docx_bytes(["body"], title="  Core\n Properties Title ", heading="Heading One"),
     "Core Properties Title", "document"),
    ("plain.docx", lambda: docx_bytes(["no title, no heading"]), "plain", "filename"),
    ("titled.pptx", lambda: pptx_bytes("Slide Heading", "body", core_title="Deck <Title>"), "Deck <Title>", "document"),
])
def test_office_documents_own_title(kompl, tmp_path, name, data, title, title_from):
    (tmp_path / name).write_bytes(data())
    [entry] = ingest_json(kompl, tmp_path / name)["ingested"]
    assert (entry["title"], entry["title_from"]) == (title, title_from)


def test_title_option_wins_for_a_file(kompl, tmp_path):
    (tmp_path / "a.md").write_text("# Heading\n")
    report = ingest_json(kompl, tmp_path / "a.md", "--title", "Mine")
    assert (report["ingested"][0]["title"], report["ingested"][0]["title_from"]) == ("Mine", "given")


# --- dedup ----------------------------------------------------------------------------------

def test_same_text_as_md_and_txt_is_one_source(kompl, ws, conn, tmp_path):
    text = f"Same words {token()}\r\nsecond line   \n\n\n\nthird\n"
    (tmp_path / "a.md").write_text(text)
    (tmp_path / "b.txt").write_text(text.replace("\r\n", "\n") + "\n\n")  # differs only in normalization
    report = ingest_json(kompl, tmp_path / "a.md", tmp_path / "b.txt")
    [entry] = report["ingested"]
    assert report["duplicates"] == [{"input": str(tmp_path / "b.txt"), "source_id": entry["source_id"],
                                     "title": entry["title"]}]
    assert len(rows(conn)) == 1
    assert len(list(ws.raw_dir.glob("*.md.gz"))) == 1
    # a second run reports both as duplicates and stores nothing
    report = ingest_json(kompl, tmp_path / "a.md", tmp_path / "b.txt")
    assert report["ingested"] == [] and len(report["duplicates"]) == 2
    assert len(rows(conn)) == 1


def test_same_content_via_stdin_and_file_is_duplicate(kompl, conn, tmp_path):
    text = f"# Shared\n\nshared body {token()}\n"
    (tmp_path / "shared.md").write_text(text)
    first = ingest_json(kompl, "-", input=text)
    second = ingest_json(kompl, tmp_path / "shared.md")
    assert second["ingested"] == []
    assert second["duplicates"][0]["source_id"] == first["ingested"][0]["source_id"]
    # and the other way round, in one batch with stdin last
    (tmp_path / "other.md").write_text("other text\n")
    third = ingest_json(kompl, tmp_path / "other.md", "-", input="other text\n")
    assert third["duplicates"] == [{"input": "-", "source_id": third["ingested"][0]["source_id"],
                                    "title": "other"}]
    assert len(rows(conn)) == 2


def test_same_url_in_normalized_forms_is_fetched_once(kompl, conn):
    with LocalServer() as srv:
        srv.page("/page", f"<html><body>{token()}</body></html>")
        port = srv.port
        base = f"http://127.0.0.1:{port}/page"
        report = ingest_json(kompl, base, "--allow-private")
        assert srv.hits["/page"] == 1
        variants = [
            f"HTTP://127.0.0.1:{port}/page/",
            f"http://127.0.0.1:{port}/page#section-2",
            f"http://127.0.0.1:{port}/page?utm_source=mail&utm_medium=x&fbclid=abc",
        ]
        again = ingest_json(kompl, *variants, "--allow-private")
        assert srv.hits["/page"] == 1  # none of them was fetched again
    sid = report["ingested"][0]["source_id"]
    assert again["ingested"] == []
    assert [d["source_id"] for d in again["duplicates"]] == [sid] * 3
    assert len(rows(conn)) == 1


def test_normalize_url_rules():
    from kompl.ingest.urls import normalize_url

    same = [
        "https://Example.COM/a/b/", "https://example.com:443/a/b", "HTTPS://example.com/a/b#frag",
        "https://example.com/a/b?utm_campaign=x&gclid=1", "https://example.com./a/b",
    ]
    assert {normalize_url(u) for u in same} == {"https://example.com/a/b"}
    assert normalize_url("http://example.com:80") == "http://example.com/"
    assert normalize_url("http://example.com:8080/") == "http://example.com:8080/"
    assert normalize_url("http://e.com/p?b=2&a=1&utm_x=3") == "http://e.com/p?a=1&b=2"
    assert normalize_url("http://e.com/P") != normalize_url("http://e.com/p")  # paths are case-sensitive


# --- bad inputs ------------------------------------------------------------------------------

def _bad_inputs(tmp_path):
    """(path, code, words that must be in the message) for every kind of bad input."""
    good_pdf = pdf_bytes([f"real text {token()}"])
    bad = tmp_path / "bad"
    bad.mkdir()
    docs = make_all(tmp_path / "good")
    cases = []

    def case(name, data, code, *words):
        path = bad / name
        if data is not None:
            path.write_bytes(data)
        cases.append((path, code, words))

    case("empty.md", b"", "empty", "is empty (0 bytes)")
    case("truncated.pdf", good_pdf[: len(good_pdf) // 2], "corrupt", "could not be read as a PDF", "damaged")
    case("garbage.pdf", b"%PDF-1.7\n" + b"\x8f\x00junk" * 50, "corrupt", "could not be read as a PDF")
    case("truncated.docx", docs["docx"].path.read_bytes()[:300], "corrupt", "could not be read as a Word document")
    case("truncated.xlsx", docs["xlsx"].path.read_bytes()[:300], "corrupt", "could not be read as an Excel workbook")
    case("junk.md", bytes(range(256)) * 8, "binary", "contains binary data, not text", ".md")
    case("undecodable.txt", bytes(range(0x80, 0x100)) * 3, "encoding",
         "is not UTF-8 text and its encoding could not be detected")
    case("unknown.xyz", b"\x89\xa7\x01\x02" * 64 + b"\x00\x00", "unsupported", ".xyz files are not a supported format")
    case("missing.pdf", None, "not_found", "No such file or folder")
    return cases


def test_every_bad_input_has_its_own_message_and_never_stops_the_batch(kompl, ws, conn, tmp_path):
    cases = _bad_inputs(tmp_path)
    good = tmp_path / "good.md"
    good.write_text(f"# Good\n\n{token()}\n")
    args = [p for p, _, _ in cases[:4]] + [good] + [p for p, _, _ in cases[4:]]
    report = ingest_json(kompl, *args, code=1)
    assert [e["input"] for e in report["ingested"]] == [str(good)]
    failed = {f["input"]: f for f in report["failed"]}
    assert len(failed) == len(cases)
    for path, code, words in cases:
        entry = failed[str(path.resolve())]
        assert entry["code"] == code, (path.name, entry)
        for word in words:
            assert word in entry["error"], (path.name, entry["error"])
        assert entry["hint"]
        assert "Traceback" not in entry["error"]
    # one open failure per input, with reason, time and input
    recorded = {r["input"]: r for r in open_failures(conn)}
    assert set(recorded) == set(failed)
    for row in recorded.values():
        assert row["failed_at"] and row["error"] == failed[row["input"]]["error"] and row["attempts"] == 1
    # nothing of the bad inputs was stored
    assert len(rows(conn)) == 1 and len(list(ws.raw_dir.glob("*.md.gz"))) == 1
    # the listing a person reads
    result = kompl("sources", "--failed", "--json")
    assert result.exit_code == 0
    listed = json.loads(result.stdout)
    assert {item["input"] for item in listed} == set(failed)
    assert all({"input", "error"} <= set(item) for item in listed)
    result = kompl("sources", "--failed")
    assert result.exit_code == 0 and "attempts" in result.stdout and "No failed inputs" not in result.stdout
    status = json.loads(kompl("status", "--json").stdout)
    assert status["failed_inputs"] == len(cases)
    # failing again updates the same failure instead of adding rows
    ingest_json(kompl, cases[0][0], code=1)
    again = [r for r in open_failures(conn) if r["input"] == str(cases[0][0])]
    assert len(again) == 1 and again[0]["attempts"] == 2


def test_over_size_file(kompl, conn, tmp_path, monkeypatch):
    monkeypatch.setenv("KOMPL_MAX_INPUT_MB", "0.001")  # 1000 bytes
    (tmp_path / "big.txt").write_text("x" * 5000)
    (tmp_path / "small.txt").write_text("small\n")
    report = ingest_json(kompl, tmp_path / "big.txt", tmp_path / "small.txt", code=1)
    [fail] = report["failed"]
    assert fail["code"] == "too_large"
    assert "is 5.0 KB, over the 0.001 MB limit" in fail["error"]
    assert len(report["ingested"]) == 1


def test_latin1_text_is_decoded_not_refused(kompl, ws, conn, tmp_path):
    text = "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e: na\u00efve r\u00e9sum\u00e9s and a fa\u00e7ade.\n"
    (tmp_path / "latin.txt").write_bytes(text.encode("latin-1"))
    report = ingest_json(kompl, tmp_path / "latin.txt")
    sid = report["ingested"][0]["source_id"]
    assert markdown_of(ws, sid) == text
    assert rows(conn)[sid]["metadata"] != "{}"  # the detected encoding is recorded


def test_utf8_with_bom_and_crlf(kompl, ws, tmp_path):
    (tmp_path / "bom.md").write_bytes("\ufeff# \u00dcberschrift\r\n\r\nText\r\n".encode("utf-8"))
    report = ingest_json(kompl, tmp_path / "bom.md")
    assert report["ingested"][0]["title"] == "\u00dcberschrift"
    assert markdown_of(ws, report["ingested"][0]["source_id"]) == "# \u00dcberschrift\n\nText\n"


def test_bad_url_forms_fail_alone(kompl, tmp_path):
    (tmp_path / "ok.md").write_text("fine\n")
    report = ingest_json(kompl, "http://example.com:99999/", "http://[::1/", tmp_path / "ok.md", code=1)
    assert [f["code"] for f in report["failed"]] == ["bad_url", "bad_url"]
    assert len(report["ingested"]) == 1


def test_unexpected_error_in_one_input_does_not_stop_the_batch(kompl, conn, tmp_path, monkeypatch):
    from kompl.ingest import convert

    real = convert.Converter.convert

    def flaky(self, data, **kw):
        if kw["name"].endswith("boom.md"):
            raise ZeroDivisionError("a bug")
        return real(self, data, **kw)

    monkeypatch.setattr(convert.Converter, "convert", flaky)
    (tmp_path / "boom.md").write_text("boom\n")
    (tmp_path / "fine.md").write_text("fine\n")
    report = ingest_json(kompl, tmp_path / "boom.md", tmp_path / "fine.md", code=1)
    assert report["failed"][0]["code"] == "internal" and "ZeroDivisionError" in report["failed"][0]["error"]
    assert len(report["ingested"]) == 1


# --- retry -----------------------------------------------------------------------------------

def test_retry_failed_after_fixing_the_files(kompl, ws, conn, tmp_path):
    empty = tmp_path / "later.md"
    empty.write_bytes(b"")
    broken = tmp_path / "report.pdf"
    broken.write_bytes(b"%PDF-1.4 broken")
    report = ingest_json(kompl, empty, broken, code=1)
    assert len(report["failed"]) == 2
    # fix one, retry: it is stored, its failure is resolved, the other stays open
    tok = token()
    empty.write_text(f"# Later\n\n{tok}\n")
    report = ingest_json(kompl, "--retry-failed", code=1)
    assert [e["input"] for e in report["ingested"]] == [str(empty)]
    assert [f["input"] for f in report["failed"]] == [str(broken)]
    assert tok in markdown_of(ws, report["ingested"][0]["source_id"])
    assert [r["input"] for r in open_failures(conn)] == [str(broken)]
    assert open_failures(conn)[0]["attempts"] == 2
    # fix the other, retry: nothing left
    broken.write_bytes(pdf_bytes(["now a real pdf"]))
    report = ingest_json(kompl, "--retry-failed")
    assert len(report["ingested"]) == 1 and report["failed"] == []
    assert open_failures(conn) == []
    assert json.loads(kompl("sources", "--failed", "--json").stdout) == []
    actions = [r[0] for r in conn.execute("SELECT action FROM activity")]
    assert actions.count("ingest") == 2 and actions.count("ingest_failed") == 3
    # nothing to retry is fine
    report = ingest_json(kompl, "--retry-failed")
    assert report == {"ingested": [], "duplicates": [], "failed": [], "skipped": []}


def test_failed_input_that_later_arrives_as_duplicate_is_resolved(kompl, conn, tmp_path):
    target = tmp_path / "x.md"
    target.write_bytes(b"")
    ingest_json(kompl, target, code=1)
    target.write_text("dup text\n")
    ingest_json(kompl, "-", input="dup text\n")  # same content arrives another way
    report = ingest_json(kompl, target)  # now a duplicate: the old failure no longer stands
    assert report["duplicates"] and open_failures(conn) == []


def test_failed_stdin_keeps_its_bytes_and_can_be_retried(kompl, ws, conn, monkeypatch):
    monkeypatch.setenv("KOMPL_MAX_INPUT_MB", "0.00001")  # 10 bytes
    tok = token()
    text = f"# Piped\n\nlong enough to fail {tok}\n"
    report = ingest_json(kompl, "-", "--title", "From a pipe", input=text, code=1)
    assert report["failed"][0]["code"] == "too_large" and report["failed"][0]["input"] == "-"
    [failure] = open_failures(conn)
    kept = ws.data / failure["kept_copy"]
    assert kept.read_bytes() == text.encode()
    monkeypatch.setenv("KOMPL_MAX_INPUT_MB", "1")
    report = ingest_json(kompl, "--retry-failed")
    [entry] = report["ingested"]
    assert entry["title"] == "From a pipe"  # the options it was given are kept too
    assert tok in markdown_of(ws, entry["source_id"])
    assert open_failures(conn) == []
    assert not kept.exists()  # the kept bytes are removed once stored


def test_sources_status_filter(kompl, conn, tmp_path):
    (tmp_path / "a.md").write_text("a\n")
    (tmp_path / "b.md").write_text("b\n")
    report = ingest_json(kompl, tmp_path / "a.md", tmp_path / "b.md")
    archived = report["ingested"][1]["source_id"]
    conn.execute("UPDATE sources SET status = 'archived' WHERE source_id = ?", (archived,))
    active = json.loads(kompl("sources", "--status", "active", "--json").stdout)
    assert [s["source_id"] for s in active] == [report["ingested"][0]["source_id"]]
    assert [s["source_id"] for s in json.loads(kompl("sources", "--status", "archived", "--json").stdout)] == [archived]
    assert len(json.loads(kompl("sources", "--json").stdout)) == 2
    result = kompl("sources", "--status", "deleted")
    assert result.exit_code == 2 and "Unknown status 'deleted'" in result.stderr
