"""Export and import: lossless round trip, merging, idempotence, hostile archives, secrets, readable formats."""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import sqlite3
import stat
import struct
import warnings
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kompl.demo import example_dir

QUERIES = ("penicillin mould", "Oxford team", "Nobel prize credit", "Albert Alexander")
FLEMING_SOURCE = "source:src-6ac33e6835f5"  # 01-fleming-discovery.md


def _runner(home: Path):
    from kompl.cli.main import app

    runner = CliRunner()

    def run(*args):
        return runner.invoke(app, ["--home", str(home), *map(str, args)], catch_exceptions=False)

    return run


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The bundled example, compiled and approved, with a hand-edited page (one more version)."""
    home = tmp_path_factory.mktemp("archive") / "wiki"
    run = _runner(home)
    assert run("init").exit_code == 0
    assert run("ingest", example_dir()).exit_code == 0
    assert run("compile").exit_code == 0
    assert run("approve", "--all").exit_code == 0
    page = home / "data" / "pages" / "penicillin.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nA note added by hand.\n", encoding="utf-8")
    assert run("pages").exit_code == 0  # takes the hand edit in as a human version
    return home


@pytest.fixture(scope="module")
def archive_zip(built, tmp_path_factory):
    out = tmp_path_factory.mktemp("zips") / "wiki.zip"
    result = _runner(built)("export", out)
    assert result.exit_code == 0, result.output
    return out


def _fresh(path: Path) -> Path:
    assert _runner(path)("init").exit_code == 0
    return path


def _db(home: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{home / 'data' / 'kompl.db'}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    return conn


def _counts(home: Path) -> dict[str, int]:
    conn = _db(home)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {n: conn.execute(f'SELECT COUNT(*) FROM "{n}"').fetchone()[0] for n in names}
    finally:
        conn.close()


def _files(home: Path) -> dict[str, str]:
    """sha256 of every file in the workspace (the WAL side files come and go with connections)."""
    return {str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(home.rglob("*")) if p.is_file() and not p.name.endswith(("-wal", "-shm"))}


def _pages(home: Path) -> dict[str, str]:
    conn = _db(home)
    try:
        return {r[0]: r[1] for r in conn.execute(
            "SELECT p.page_key, v.content FROM pages p JOIN page_versions v ON v.page_id = p.page_id"
            " AND v.version = p.version")}
    finally:
        conn.close()


def _versions(home: Path) -> set[tuple]:
    conn = _db(home)
    try:
        return {tuple(r) for r in conn.execute(
            "SELECT p.page_key, v.version, v.content, v.author, v.reason FROM page_versions v"
            " JOIN pages p USING (page_id)")}
    finally:
        conn.close()


def _sources(home: Path) -> dict[str, tuple]:
    conn = _db(home)
    try:
        out = {}
        for r in conn.execute("SELECT source_id, content_hash, original_name, status, title FROM sources"):
            raw = (home / "data" / "raw" / f"{r['source_id']}.md.gz").read_bytes()
            original = (home / "data" / "originals" / r["original_name"]).read_bytes()
            out[r["content_hash"]] = (r["source_id"], r["status"], r["title"], raw, original)
        return out
    finally:
        conn.close()


def _search(home: Path) -> dict[str, list[str]]:
    from kompl import db
    from kompl.read.search import search
    from kompl.workspace import find_workspace

    ws = find_workspace(home)
    conn = db.connect(ws.db_path)
    try:
        return {q: [(h.title, h.page_id) for h in search(ws, conn, q, limit=8).hits] for q in QUERIES}
    finally:
        conn.close()


# --- the round trip -----------------------------------------------------------------------------------

def test_export_then_import_into_a_fresh_workspace_gives_the_same_wiki(built, archive_zip, tmp_path):
    with zipfile.ZipFile(archive_zip) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        names = set(zf.namelist())
    assert manifest["format"] == "kompl-archive" and manifest["format_version"] == 1
    assert set(manifest["members"]) == names - {"manifest.json"}
    assert manifest["counts"]["versions"] > manifest["counts"]["pages"] > 0
    assert not any(n.startswith("data/vectors") or "chroma" in n for n in names)

    target = _fresh(tmp_path / "copy")
    result = _runner(target)("import", archive_zip, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["changed"] and report["conflicts"] == [] and len(report["sources_added"]) == 7

    assert _pages(target) == _pages(built)
    assert _versions(target) == _versions(built)
    assert _sources(target) == _sources(built)
    assert _search(target) == _search(built)
    # page files and every history file are on disk, and the vectors are rebuilt, not copied
    for rel, digest in _files(built).items():
        if rel.startswith(("data/pages/", "data/history/", "data/raw/", "data/originals/")):
            assert _files(target).get(rel) == digest, rel
    assert report["vectors"].get("embedded_pages", 0) > 0
    doctor = _runner(target)("doctor", "--json")
    assert json.loads(doctor.stdout)["ok"], doctor.stdout
    conn = _db(target)
    assert conn.execute("SELECT COUNT(*) FROM activity WHERE action = 'import'").fetchone()[0] == 1
    assert conn.execute("SELECT COUNT(*) FROM pages_fts").fetchone()[0] == len(_pages(built))
    conn.close()
    assert _db(built).execute("SELECT COUNT(*) FROM activity WHERE action = 'export'").fetchone()[0] >= 1


def test_importing_the_same_archive_twice_changes_nothing_the_second_time(archive_zip, tmp_path):
    target = _fresh(tmp_path / "twice")
    run = _runner(target)
    assert run("import", archive_zip).exit_code == 0
    counts, files = _counts(target), _files(target)
    result = run("import", archive_zip, "--json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert not report["changed"] and report["sources_added"] == [] and report["pages_added"] == []
    after = _counts(target)
    assert after.pop("activity") == counts.pop("activity") + 1  # only the audit row of the attempt
    assert after == counts
    without_db = lambda f: {k: v for k, v in f.items() if k != "data/kompl.db"}  # the audit row changes the db file
    assert without_db(_files(target)) == without_db(files)
    assert "Nothing changed" in run("import", archive_zip).stdout


def test_import_into_a_non_empty_workspace_merges_and_reports_conflicts(archive_zip, tmp_path):
    target = tmp_path / "mine"
    run = _runner(target)
    assert run("init").exit_code == 0
    assert run("ingest", example_dir() / "01-fleming-discovery.md").exit_code == 0
    assert run("compile").exit_code == 0 and run("approve", "--all").exit_code == 0
    conn = _db(target)
    slug = conn.execute("SELECT slug FROM pages WHERE page_key = ?", (FLEMING_SOURCE,)).fetchone()[0]
    conn.close()
    page = target / "data" / "pages" / f"{slug}.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nMy own local note.\n", encoding="utf-8")
    assert run("pages").exit_code == 0  # the hand edit becomes the local version
    local_text = _pages(target)[FLEMING_SOURCE]
    local_hashes = {h for h in _sources(target)}

    result = run("import", archive_zip, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["sources_existing"] == 1 and len(report["sources_added"]) == 6
    sources = _sources(target)
    assert len(sources) == 7 and local_hashes <= set(sources)
    conn = _db(target)
    assert conn.execute("SELECT COUNT(*) FROM sources WHERE source_id = 'src-6ac33e6835f5'").fetchone()[0] == 1
    conn.close()

    conflict = next(c for c in report["conflicts"] if c["page_key"] == FLEMING_SOURCE)
    assert conflict["draft_plan_id"] and conflict["new_draft"]
    assert _pages(target)[FLEMING_SOURCE] == local_text  # untouched
    assert page.read_text(encoding="utf-8") == local_text
    assert "My own local note." in local_text
    # pages the workspace lacked were added, with their versions
    assert report["pages_added"] and all(p["versions"] >= 1 for p in report["pages_added"])
    assert {p["page_key"] for p in report["pages_added"]} <= set(_pages(target))

    # the imported text waits for review; approving it makes it the next version
    drafts = json.loads(run("drafts", "--json").stdout)
    assert conflict["draft_plan_id"] in {d["plan_id"] for d in drafts}
    assert run("diff", conflict["draft_plan_id"]).exit_code == 0
    again = json.loads(run("import", archive_zip, "--json").stdout)
    assert not again["changed"]
    assert next(c for c in again["conflicts"] if c["page_key"] == FLEMING_SOURCE)["draft_plan_id"] == \
        conflict["draft_plan_id"]
    assert run("approve", conflict["draft_plan_id"]).exit_code == 0
    assert "My own local note." not in _pages(target)[FLEMING_SOURCE]


def test_a_failure_while_applying_rolls_back_and_removes_written_files(archive_zip, tmp_path, monkeypatch):
    from kompl import archive, db
    from kompl.workspace import find_workspace

    target = _fresh(tmp_path / "boom")
    counts, files = _counts(target), _files(target)

    def explode(self):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(archive._Merger, "pages", explode)
    ws = find_workspace(target)
    conn = db.connect(ws.db_path)
    with archive.stage(archive_zip) as staged, pytest.raises(RuntimeError):
        archive.import_archive(ws, conn, staged)
    conn.close()
    assert _counts(target) == counts
    assert {k: v for k, v in _files(target).items() if k != "data/.ingest.lock"} == files  # the lock file stays


# --- hostile archives ---------------------------------------------------------------------------------

def _rebuild(src: Path, dest: Path, mutate) -> Path:
    """Copy the archive member by member, letting `mutate(members, manifest)` change it; manifest last."""
    with zipfile.ZipFile(src) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        members = [[i.filename, zf.read(i), i.external_attr] for i in zf.infolist() if i.filename != "manifest.json"]
    mutate(members, manifest)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names
        with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data, attr in members:
                info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
                info.external_attr = attr
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, data)
            zf.writestr("manifest.json", json.dumps(manifest))
    return dest


def _listed(members, manifest, name, data, attr=(stat.S_IFREG | 0o644) << 16):
    members.append([name, data, attr])
    manifest["members"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def _zip_slip(m, man):
    _listed(m, man, "../../evil.txt", b"owned")


def _absolute(m, man):
    _listed(m, man, "/tmp/kompl-evil.txt", b"owned")


def _symlink(m, man):
    _listed(m, man, "originals/link", b"/etc/passwd", (stat.S_IFLNK | 0o777) << 16)


def _duplicate(m, man):
    m.append(["schema.md", b"# evil schema\n", (stat.S_IFREG | 0o644) << 16])


def _bomb(m, man):
    _listed(m, man, "originals/bomb.bin", b"\0" * (30 << 20))


def _tampered(m, man):
    for member in m:
        if member[0].startswith("history/"):
            member[1] = member[1] + b"\ninjected\n"
            return


def _unknown_version(m, man):
    man["format_version"] = 99


def _unlisted(m, man):
    m.append(["pages/extra.md", b"# extra\n", (stat.S_IFREG | 0o644) << 16])


def _bad_source_id(m, man):
    for member in m:
        if member[0] == "db/sources.jsonl":
            rows = [json.loads(line) for line in member[1].decode().splitlines()]
            rows[0]["source_id"] = "../../escape"
            member[1] = "".join(json.dumps(r) + "\n" for r in rows).encode()
            man["members"]["db/sources.jsonl"] = {"sha256": hashlib.sha256(member[1]).hexdigest(),
                                                  "bytes": len(member[1])}


HOSTILE = [
    (_zip_slip, [], "leaves its folder"),
    (_absolute, [], "absolute path"),
    (_symlink, [], "symbolic link"),
    (_duplicate, [], "appears twice"),
    (lambda m, man: None, ["--max-member-mb", "0.02"], "over the cap"),
    (_bomb, ["--max-total-mb", "10"], "total cap"),
    (_tampered, [], "does not match the sha256"),
    (_unknown_version, [], "unknown archive format version 99"),
    (_unlisted, [], "not listed in the manifest"),
    (_bad_source_id, [], "not a safe file name"),
]


@pytest.mark.parametrize("mutate,options,message", HOSTILE, ids=[
    "zip-slip", "absolute", "symlink", "duplicate", "oversize", "zip-bomb", "tampered", "version", "unlisted",
    "unsafe-id"])
def test_hostile_archives_are_refused_and_nothing_is_written(archive_zip, tmp_path, mutate, options, message):
    target = tmp_path / "victim"
    run = _runner(target)
    assert run("init").exit_code == 0
    assert run("ingest", example_dir() / "04-albert-alexander.txt").exit_code == 0
    bad = _rebuild(archive_zip, tmp_path / "bad.zip", mutate)
    counts, files = _counts(target), _files(target)
    result = run("import", bad, *options)
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "nothing was written" in result.stderr
    assert _counts(target) == counts
    assert _files(target) == files
    assert not (tmp_path / "evil.txt").exists() and not Path("/tmp/kompl-evil.txt").exists()


def test_a_member_larger_than_its_declared_size_is_refused(archive_zip, tmp_path):
    """A zip bomb that lies about its size in both headers: the bytes are counted while streaming."""
    from kompl import archive

    bad = _rebuild(archive_zip, tmp_path / "liar.zip", _bomb)
    data = bytearray(bad.read_bytes())
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as zf:
        info = zf.getinfo("originals/bomb.bin")
    struct.pack_into("<I", data, info.header_offset + 22, 1000)  # local header: uncompressed size
    central = data.find(b"PK\x01\x02")
    while central != -1 and data[central + 46:central + 46 + len(b"originals/bomb.bin")] != b"originals/bomb.bin":
        central = data.find(b"PK\x01\x02", central + 4)
    assert central != -1
    struct.pack_into("<I", data, central + 24, 1000)  # central directory: uncompressed size
    bad.write_bytes(bytes(data))
    with pytest.raises(archive.ArchiveError, match="bomb.bin"):
        archive.stage(bad)


def test_not_a_zip_is_refused(tmp_path, ws):
    (tmp_path / "x.zip").write_text("hello")
    result = _runner(ws.root)("import", tmp_path / "x.zip")
    assert result.exit_code == 2 and "not a readable zip" in result.stderr


# --- secrets -------------------------------------------------------------------------------------------

def test_the_archive_never_holds_an_api_key(built, tmp_path, monkeypatch):
    from kompl import archive, db
    from kompl.workspace import Settings, Workspace

    env_key, sub_key, top_key = "sk-envSECRET0123456789abcdef", "sk-subSECRET0123456789abcdef", "sk-topSECRET01234567"
    home = tmp_path / "keys"
    shutil.copytree(built, home)
    monkeypatch.setenv("OPENAI_API_KEY", env_key)
    (home / "kompl.toml").write_text(f'model = "kompl/offline"\n[openai]\napi_key = "{sub_key}"\n', encoding="utf-8")
    conn = db.connect(home / "data" / "kompl.db")
    with db.transaction(conn, "test", details={"leaked": f"Bearer {env_key}"}):
        pass  # a key that ended up in a logged row must not leave with the archive
    conn.close()
    result = _runner(home)("export", tmp_path / "a.zip", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["redactions"] >= 1

    # a top-level api_key (which kompl itself would refuse to load) is filtered too
    (home / "kompl.toml").write_text(f'model = "kompl/offline"\napi_key = "{top_key}"\n', encoding="utf-8")
    conn = db.connect(home / "data" / "kompl.db")
    archive.export_zip(Workspace(root=home, settings=Settings()), conn, tmp_path / "b.zip")
    conn.close()

    for path in (tmp_path / "a.zip", tmp_path / "b.zip"):
        blob = path.read_bytes()
        with zipfile.ZipFile(path) as zf:
            texts = [zf.read(n) for n in zf.namelist()]
            settings = json.loads(zf.read("settings.json"))
        for secret in (env_key, sub_key, top_key):
            assert secret.encode() not in blob
            assert not any(secret.encode() in t for t in texts), secret
        assert settings["kompl_toml"]["model"] == "kompl/offline"
    with zipfile.ZipFile(tmp_path / "a.zip") as zf:
        assert "openai.api_key" in json.loads(zf.read("settings.json"))["dropped"]


# --- readable formats ---------------------------------------------------------------------------------

def test_obsidian_vault_links_resolve_to_files(built, tmp_path):
    vault = tmp_path / "vault"
    assert _runner(built)("export", "--format", "obsidian", vault).exit_code == 0
    files = {p.stem for p in vault.glob("*.md")}
    assert "_index" in files and len(files) == len(_pages(built)) + 1
    links = 0
    for path in vault.glob("*.md"):
        text = path.read_text(encoding="utf-8")
        if path.stem != "_index":
            assert text.startswith("---\ntitle:") and "aliases:" in text and "tags:" in text
        for target in re.findall(r"\[\[([^\]|#]+)", text):
            links += 1
            assert target in files, f"{path.name}: [[{target}]] has no file"
    assert links > 30
    index = (vault / "_index.md").read_text(encoding="utf-8")
    assert all(f"[[{stem}]]" in index for stem in files - {"_index"})


def test_markdown_export_has_relative_links_that_resolve(built, tmp_path):
    folder = tmp_path / "md"
    assert _runner(built)("export", "--format", "markdown", folder).exit_code == 0
    assert (folder / "index.md").exists()
    links = 0
    for path in folder.glob("*.md"):
        text = path.read_text(encoding="utf-8")
        assert "[[" not in text and not text.startswith("---")
        for target in re.findall(r"\]\(([^)#]+\.md)(?:#[^)]*)?\)", text):
            links += 1
            assert (folder / target).is_file(), f"{path.name}: {target}"
    assert links > 30


def test_json_export_holds_pages_versions_sources_and_links(built, tmp_path):
    out = tmp_path / "wiki.json"
    run = _runner(built)
    assert run("export", "--format", "json", out).exit_code == 0
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert len(doc["pages"]) == len(_pages(built)) and len(doc["sources"]) == 7
    page = next(p for p in doc["pages"] if p["slug"] == "penicillin")
    assert len(page["versions"]) >= 2 and {"version", "author", "created_at"} <= set(page["versions"][0])
    assert "content" not in page["versions"][0] and "A note added by hand." in page["content"]
    assert all("original_sha256" in s and "content" not in s for s in doc["sources"])
    ids = {p["page_id"] for p in doc["pages"]}
    assert doc["links"] and all(link["to"] in ids for link in doc["links"] if link["to"] is not None)
    # an existing file is replaced only with --force
    result = run("export", "--format", "json", out)
    assert result.exit_code == 2 and "already exists" in result.stderr
    assert run("export", "--format", "json", out, "--force").exit_code == 0
