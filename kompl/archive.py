"""Export and import: a lossless, verified zip of a workspace, and readable exports (Obsidian, markdown, JSON).

The archive (`kompl export OUT.zip`, format "kompl-archive" version 1) holds:

    manifest.json            format, format_version, kompl_version, created_at, migrations,
                             counts, redactions, and {name: {sha256, bytes}} for every other member
    db/<table>.jsonl         one JSON object per row, keyed by column name (bytes as {"$b64": ...})
    raw/<source_id>.md.gz    converted source markdown, as stored
    originals/<name>         original bytes as received
    failed/<name>            kept copies of failed stdin inputs (ingest_failures.kept_copy)
    pages/<slug>.md          current pages (from the database, not the possibly stale files)
    history/<slug>/<n>.md    every version of every page
    schema.md                the wiki's conventions
    settings.json            kompl.toml minus anything key-like, and the effective settings

Why a JSONL dump per table and no copy of kompl.db: import must MERGE into a
workspace that already has rows, so it needs rows with column names and stable
keys (content_hash, page_key, entity_id, pair_hash, ...) rather than a database
file whose integer ids collide and whose schema is tied to one kompl release.
Rows are read in ONE read transaction on a separate read-only connection: WAL
gives that transaction a consistent snapshot of every table, which is all that
`VACUUM INTO` or the backup API would add, without a second full copy on disk.
Raw and original files are immutable and written before their rows commit, so
every row in the snapshot has its file; page files are rendered from the
snapshot's rows. FTS rows are not exported (rebuilt on import), nor is term_df
rebuilt from the archive (the extraction triggers recompute it), nor the Chroma
directory (import re-embeds with `kompl.vectors.reconcile`).

Import first stages the archive in a temporary folder outside the workspace:
member names, types, sizes (declared and counted while streaming), the manifest
and every member's sha256 are checked, the tables parsed, and every path the
import will write is derived from validated row values. Only then does it
touch the workspace: under the ingest lock, new sources' files are written
atomically, then every row goes in ONE transaction with its `import` audit row;
if anything fails the transaction rolls back and the files written are removed.
Merge rules: sources by content_hash (an existing one is kept); pages by
page_key: absent -> added with every version; same text (ignoring the
`updated:` stamp) -> nothing; the imported text is an older version of the
local page -> nothing; otherwise a CONFLICT: the local page is untouched and
the imported text waits as a pending draft (`kompl drafts`, `kompl diff`,
`approve`/`reject`). Integer ids are kept when free and remapped otherwise.
Importing the same archive twice changes nothing the second time (apart from
the audit row that records the attempt).
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import json
import os
import re
import shutil
import sqlite3
import stat
import tempfile
import tomllib
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from kompl import __version__, db, faults
from kompl.errors import KomplError
from kompl.workspace import Settings, Workspace, default_schema_path

__all__ = [
    "FORMAT",
    "FORMATS",
    "FORMAT_VERSION",
    "ArchiveError",
    "ExportReport",
    "ImportReport",
    "Limits",
    "Staged",
    "export",
    "export_zip",
    "import_archive",
    "stage",
]

FORMAT = "kompl-archive"
FORMAT_VERSION = 1
SUPPORTED_VERSIONS = frozenset({1})
FORMATS = ("zip", "obsidian", "markdown", "json")
CHUNK = 1 << 20
REDACTED = "[redacted]"

_SAFE = r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}"
_MEMBER = re.compile(
    rf"^(?:manifest\.json|schema\.md|settings\.json|db/[a-z_][a-z0-9_]*\.jsonl|raw/{_SAFE}\.md\.gz"
    rf"|originals/{_SAFE}|failed/{_SAFE}|pages/{_SAFE}\.md|history/{_SAFE}/[0-9]+\.md)$")
_SAFE_NAME = re.compile(rf"^{_SAFE}$")
_KEYLIKE_NAME = re.compile(r"(api[_-]?key|secret|token|passw(or)?d|credential|auth|private[_-]?key)", re.IGNORECASE)
_KEYLIKE_VALUE = re.compile(r"^(sk-|sk_|pk_|rk_|xox[abpr]-|gh[pousr]_|glpat-|AKIA|AIza|hf_)[A-Za-z0-9_\-]{8,}")
# Tables whose rows import merges. Others (lint results, derived tables) are exported but not imported.
_DERIVED = frozenset({"term_df"})


class ArchiveError(KomplError):
    """An archive could not be written, or was refused on import."""


@dataclass(frozen=True)
class Limits:
    """Caps that make a hostile archive fail before it fills the disk."""

    member_bytes: int = 2 << 30  # one member, uncompressed
    total_bytes: int = 16 << 30  # all members, uncompressed
    members: int = 1_000_000
    manifest_bytes: int = 256 << 20


# --- secrets ------------------------------------------------------------------------------------

def _keylike(name: str, value: Any) -> bool:
    return bool(_KEYLIKE_NAME.search(name)) or (isinstance(value, str) and bool(_KEYLIKE_VALUE.match(value.strip())))


def _filter_settings(data: dict, dropped: list[str], prefix: str = "") -> dict:
    out: dict = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out[key] = _filter_settings(value, dropped, f"{prefix}{key}.")
        elif _keylike(key, value) or (isinstance(value, list) and any(_keylike(key, v) for v in value)):
            dropped.append(prefix + key)
        else:
            out[key] = value
    return out


def _walk_values(data: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, (dict, list)):
                yield from _walk_values(value)
            else:
                yield str(key), value
    elif isinstance(data, list):
        for value in data:
            yield from _walk_values(value)


class _Redactor:
    """Replaces every known secret (key-like environment values, key-like kompl.toml values) in text."""

    def __init__(self, ws: Workspace):
        secrets = {v for k, v in os.environ.items() if _keylike(k, v) and len(v.strip()) >= 8}
        for _key, value in _walk_values(_read_toml(ws)):
            if isinstance(value, str) and _keylike(_key, value) and len(value.strip()) >= 8:
                secrets.add(value)
        self.secrets = sorted({s.strip() for s in secrets}, key=len, reverse=True)
        self.count = 0

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                self.count += text.count(secret)
                text = text.replace(secret, REDACTED)
        return text


def _read_toml(ws: Workspace) -> dict:
    path = ws.root / "kompl.toml"
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}


# --- writing helpers --------------------------------------------------------------------------------

class _HashingWriter:
    def __init__(self, handle: IO[bytes]):
        self.handle, self.sha, self.size = handle, hashlib.sha256(), 0

    def write(self, data: bytes) -> None:
        self.handle.write(data)
        self.sha.update(data)
        self.size += len(data)


class _ZipOut:
    """A zip being written member by member, streaming, recording each member's sha256 and size."""

    def __init__(self, zf: zipfile.ZipFile, stamp: tuple):
        self.zf, self.stamp, self.members = zf, stamp, {}

    @contextlib.contextmanager
    def member(self, name: str, *, compress: bool = True) -> Iterator[_HashingWriter]:
        info = zipfile.ZipInfo(name, date_time=self.stamp)
        info.external_attr = (stat.S_IFREG | 0o644) << 16
        info.compress_type = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
        with self.zf.open(info, "w", force_zip64=True) as handle:
            writer = _HashingWriter(handle)
            yield writer
        self.members[name] = {"sha256": writer.sha.hexdigest(), "bytes": writer.size}

    def text(self, name: str, text: str) -> None:
        with self.member(name) as out:
            out.write(text.encode("utf-8"))

    def file(self, name: str, path: Path, *, compress: bool = True) -> None:
        with self.member(name, compress=compress) as out, open(path, "rb") as handle:
            while chunk := handle.read(CHUNK):
                out.write(chunk)


@contextlib.contextmanager
def _atomic_target(path: Path, *, force: bool, folder: bool = False) -> Iterator[Path]:
    """A temporary sibling of `path` that becomes `path` (rename) when the block succeeds."""
    path = path.expanduser().resolve()
    if folder:
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise ArchiveError(f"Could not export to {path}: it exists and is not an empty folder",
                               hint="choose a new or empty folder")
    elif path.exists() and (path.is_dir() or not force):
        raise ArchiveError(f"Could not export to {path}: it already exists",
                           hint="choose another name, or pass --force to replace the file")
    path.parent.mkdir(parents=True, exist_ok=True)
    if folder:
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    else:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        tmp = Path(name)
    try:
        yield tmp
        if folder:
            if path.exists():
                path.rmdir()
            os.rename(tmp, path)
        else:
            with open(tmp, "rb") as handle:
                os.fsync(handle.fileno())
            os.replace(tmp, path)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise


def _copy_atomic(src: Path, dest: Path) -> None:
    """Copy `src` to `dest` in chunks via a temp file in dest's folder (fsync + rename)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as out, open(src, "rb") as handle:
            shutil.copyfileobj(handle, out, CHUNK)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --- export: the lossless zip -----------------------------------------------------------------------

@dataclass
class ExportReport:
    path: str
    format: str
    counts: dict = field(default_factory=dict)
    bytes: int = 0
    redactions: int = 0
    dropped_settings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _snapshot(ws: Workspace) -> sqlite3.Connection:
    """A read-only connection inside one read transaction: a consistent snapshot of every table."""
    conn = sqlite3.connect(f"file:{ws.db_path}?mode=ro", uri=True, isolation_level=None, timeout=30)
    conn.row_factory = sqlite3.Row
    conn.execute("BEGIN")
    conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # the snapshot starts at the first read
    return conn


def _close(snap: sqlite3.Connection) -> None:
    if snap.in_transaction:
        snap.execute("ROLLBACK")
    snap.close()


def _tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall()
    virtual = [r["name"] for r in rows if (r["sql"] or "").upper().startswith("CREATE VIRTUAL TABLE")]
    return [r["name"] for r in rows
            if not r["name"].startswith(("sqlite_", "_")) and r["name"] not in virtual
            and not any(r["name"].startswith(f"{v}_") for v in virtual)]


def _encode(value: Any) -> Any:
    return {"$b64": base64.b64encode(value).decode("ascii")} if isinstance(value, bytes) else value


def _decode(value: Any) -> Any:
    return base64.b64decode(value["$b64"]) if isinstance(value, dict) and "$b64" in value else value


def _rows(conn: sqlite3.Connection, table: str) -> Iterator[sqlite3.Row]:
    try:
        yield from conn.execute(f'SELECT * FROM "{table}" ORDER BY rowid')
    except sqlite3.OperationalError:  # WITHOUT ROWID
        yield from conn.execute(f'SELECT * FROM "{table}" ORDER BY 1')


def export_zip(ws: Workspace, conn: sqlite3.Connection, out: Path, *, force: bool = False) -> ExportReport:
    """Write the lossless archive of `ws` to `out` (atomically). See the module docstring for the layout."""
    redact = _Redactor(ws)
    snap = _snapshot(ws)
    created = db.utcnow()
    stamp = tuple(int(x) for x in re.findall(r"\d+", created)[:6])
    counts: dict[str, Any] = {"tables": {}}
    try:
        missing = _missing_files(ws, snap)
        if missing:
            raise ArchiveError(
                f"Could not export: {len(missing)} source file(s) are missing ({', '.join(missing[:3])})",
                hint="run `kompl doctor` to see which sources lack files, then re-ingest them")
        with _atomic_target(Path(out), force=force) as tmp:
            with zipfile.ZipFile(tmp, "w", allowZip64=True) as zf:
                zout = _ZipOut(zf, stamp)
                for table in _tables(snap):
                    n = 0
                    with zout.member(f"db/{table}.jsonl") as member:
                        for row in _rows(snap, table):
                            line = json.dumps(dict(zip(row.keys(), map(_encode, row))), ensure_ascii=False)
                            member.write((redact(line) + "\n").encode("utf-8"))
                            n += 1
                    counts["tables"][table] = n
                counts.update(_export_files(ws, snap, zout, redact))
                dropped: list[str] = []
                settings = {"kompl_toml": _filter_settings(_read_toml(ws), dropped), "dropped": dropped,
                            "effective": {k: v for k, v in ws.settings.to_dict().items() if not _keylike(k, v)}}
                zout.text("settings.json", redact(json.dumps(settings, indent=2, ensure_ascii=False, sort_keys=True)))
                if ws.schema_path.exists():
                    zout.text("schema.md", redact(ws.schema_path.read_text(encoding="utf-8")))
                migrations = [r[0] for r in snap.execute("SELECT name FROM _migrations ORDER BY name")]
                manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "kompl_version": __version__,
                            "created_at": created, "migrations": migrations, "counts": counts,
                            "redactions": redact.count, "members": zout.members}
                info = zipfile.ZipInfo("manifest.json", date_time=stamp)
                info.external_attr = (stat.S_IFREG | 0o644) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, json.dumps(manifest, indent=1, ensure_ascii=False, sort_keys=True))
            size = tmp.stat().st_size
    finally:
        _close(snap)
    report = ExportReport(path=str(Path(out).resolve()), format="zip", counts=counts, bytes=size,
                          redactions=redact.count, dropped_settings=dropped)
    with db.transaction(conn, "export", target=report.path,
                        details={"format": "zip", "bytes": size, "sources": counts["sources"],
                                 "pages": counts["pages"], "versions": counts["versions"]}):
        pass
    return report


def _missing_files(ws: Workspace, snap: sqlite3.Connection) -> list[str]:
    missing = []
    for row in snap.execute("SELECT source_id, original_name FROM sources ORDER BY source_id"):
        if not (ws.raw_dir / f"{row[0]}.md.gz").is_file():
            missing.append(f"data/raw/{row[0]}.md.gz")
        if row[1] and not (ws.originals_dir / row[1]).is_file():
            missing.append(f"data/originals/{row[1]}")
    return missing


def _export_files(ws: Workspace, snap: sqlite3.Connection, zout: _ZipOut, redact: _Redactor) -> dict[str, int]:
    counts = {"sources": 0, "originals": 0, "pages": 0, "versions": 0, "kept_copies": 0}
    originals: set[str] = set()
    for sid, name in snap.execute("SELECT source_id, original_name FROM sources ORDER BY source_id").fetchall():
        zout.file(f"raw/{sid}.md.gz", ws.raw_dir / f"{sid}.md.gz", compress=False)
        counts["sources"] += 1
        if name and name not in originals:
            originals.add(name)
            zout.file(f"originals/{name}", ws.originals_dir / name)
            counts["originals"] += 1
    for (kept,) in snap.execute("SELECT DISTINCT kept_copy FROM ingest_failures WHERE kept_copy IS NOT NULL"):
        path = ws.data / kept
        if kept.startswith("originals/failed/") and path.is_file() and _SAFE_NAME.match(path.name):
            zout.file(f"failed/{path.name}", path)
            counts["kept_copies"] += 1
    rows = snap.execute(
        "SELECT p.slug, p.status, p.version AS current, v.version, v.content FROM page_versions v"
        " JOIN pages p ON p.page_id = v.page_id ORDER BY p.page_id, v.version")
    for row in rows:
        text = redact(row["content"])
        zout.text(f"history/{row['slug']}/{row['version']}.md", text)
        counts["versions"] += 1
        if row["version"] == row["current"] and row["status"] == "active":
            zout.text(f"pages/{row['slug']}.md", text)
            counts["pages"] += 1
    return counts


# --- export: readable formats ------------------------------------------------------------------------

_LINK = re.compile(r"\[\[([^\]\n|#]+)((?:[#|][^\]\n]*)?)\]\]")
_OBSIDIAN_BAD = re.compile(r'[\\/:*?"<>|#^\[\]]')


def export(ws: Workspace, conn: sqlite3.Connection, out: Path, *, fmt: str = "zip",
           include_archived: bool = False, force: bool = False) -> ExportReport:
    """Export to `out` in one of FORMATS. Readable formats hold visible pages only unless `include_archived`."""
    if fmt not in FORMATS:
        raise ArchiveError(f"Unknown export format {fmt!r}", hint=f"use one of: {', '.join(FORMATS)}")
    if fmt == "zip":
        return export_zip(ws, conn, out, force=force)
    from kompl.wiki import store as wiki

    redact = _Redactor(ws)
    snap = _snapshot(ws)
    try:
        pages = wiki.list_pages(snap, include_hidden=include_archived)
        for page in pages:
            page["text"] = redact(wiki.content(snap, page["page_id"]))
        if fmt == "json":
            with _atomic_target(Path(out), force=force) as tmp:
                doc = _json_document(snap, pages, redact)
                tmp.write_text(json.dumps(doc, indent=1, ensure_ascii=False), encoding="utf-8")
            counts = {"pages": len(pages), "sources": len(doc["sources"]), "links": len(doc["links"])}
        else:
            titles = {s["source_id"]: s["title"] for s in snap.execute("SELECT source_id, title FROM sources")}
            with _atomic_target(Path(out), force=force, folder=True) as tmp:
                write = _write_obsidian if fmt == "obsidian" else _write_markdown
                counts = write(tmp, pages, titles)
    finally:
        _close(snap)
    report = ExportReport(path=str(Path(out).resolve()), format=fmt, counts=counts, redactions=redact.count)
    with db.transaction(conn, "export", target=report.path, details={"format": fmt, **counts}):
        pass
    return report


def _json_document(snap: sqlite3.Connection, pages: list[dict], redact: _Redactor) -> dict:
    from kompl.wiki import store as wiki

    ids = {p["page_id"] for p in pages}
    out_pages = []
    for page in pages:
        out_pages.append({k: page[k] for k in ("page_id", "page_key", "page_type", "title", "slug", "category",
                                               "summary", "aliases", "version", "content_hash", "status",
                                               "created_at", "updated_at", "sources")}
                         | {"content": page["text"], "versions": wiki.history(snap, page["page_id"])})
    sources = []
    for row in snap.execute("SELECT source_id, title, source_type, input_kind, input, url, content_hash,"
                            " original_sha256, original_name, mime_type, bytes, chars, status, ingested_at, metadata"
                            " FROM sources ORDER BY ingested_at, source_id"):
        sources.append(dict(row) | {"metadata": json.loads(redact(row["metadata"] or "{}"))})
    links = [{"from": r[0], "to_title": r[1], "to": r[2]}
             for r in snap.execute("SELECT from_page, to_title, to_page FROM page_links ORDER BY from_page, to_title")
             if r[0] in ids]
    return {"format": "kompl-json", "format_version": 1, "kompl_version": __version__, "exported_at": db.utcnow(),
            "pages": out_pages, "sources": sources, "links": links}


def _split(text: str) -> tuple[dict, str]:
    from kompl.wiki import markdown as md

    try:
        return md.parse_page(text)
    except ValueError:
        return {}, md.split_frontmatter(text)[1]


def _relink(body: str, resolve) -> str:
    """Rewrite each [[Title|text]] with `resolve(title, text, anchor)`; unknown titles stay as written."""
    def replace(match: re.Match) -> str:
        title, rest = match.group(1).strip(), match.group(2)
        text = rest[1:] if rest.startswith("|") else title
        anchor = rest[1:].split("|")[0] if rest.startswith("#") else ""
        if rest.startswith("#") and "|" in rest:
            text = rest.split("|", 1)[1]
        return resolve(title, text, anchor) or match.group(0)

    return _LINK.sub(replace, body)


def _unique_names(pages: list[dict], name_of) -> dict[int, str]:
    names: dict[int, str] = {}
    taken: set[str] = set()
    for page in pages:
        base = name_of(page)
        name, n = base, 2
        while name.casefold() in taken:
            name, n = f"{base} ({n})", n + 1
        taken.add(name.casefold())
        names[page["page_id"]] = name
    return names


def _write_obsidian(folder: Path, pages: list[dict], source_titles: dict[str, str]) -> dict[str, int]:
    """A vault: one `<Title>.md` per page (frontmatter Obsidian understands, [[links]] to file names), an index."""
    from kompl.wiki import markdown as md

    names = _unique_names(pages, lambda p: _OBSIDIAN_BAD.sub("-", p["title"]).strip(" .") or p["slug"])
    by_title = {p["title"].casefold(): names[p["page_id"]] for p in pages}
    for page in pages:
        for alias in page["aliases"]:
            by_title.setdefault(alias.casefold(), names[page["page_id"]])

    def resolve(title: str, text: str, anchor: str) -> str | None:
        name = by_title.get(title.casefold())
        if name is None:
            return None
        target = f"{name}#{anchor}" if anchor else name
        return f"[[{target}]]" if text == name and not anchor else f"[[{target}|{text}]]"

    links = 0
    for page in pages:
        meta, body = _split(page["text"])
        front = {"title": page["title"], "aliases": list(page["aliases"]),
                 "tags": sorted({f"kompl/{page['page_type']}", f"category/{page['category']}"}),
                 "summary": page["summary"], "sources": [source_titles.get(s, s) for s in page["sources"]],
                 "source_ids": page["sources"], "kompl_page_key": page["page_key"],
                 "updated": meta.get("updated", page["updated_at"])}
        new_body = _relink(body, resolve)
        links += len(_LINK.findall(new_body))
        (folder / f"{names[page['page_id']]}.md").write_text(md.render_page(front, new_body), encoding="utf-8")
    index = "_index" if "_index" not in {n.casefold() for n in names.values()} else "_kompl index"
    (folder / f"{index}.md").write_text(_index_text(pages, lambda p: f"[[{names[p['page_id']]}]]"), encoding="utf-8")
    return {"pages": len(pages), "links": links}


def _write_markdown(folder: Path, pages: list[dict], source_titles: dict[str, str]) -> dict[str, int]:
    """Plain markdown: `<slug>.md` per page, links rewritten to relative `.md` links, an index.md."""
    by_title = {p["title"].casefold(): p["slug"] for p in pages}
    for page in pages:
        for alias in page["aliases"]:
            by_title.setdefault(alias.casefold(), page["slug"])

    def resolve(title: str, text: str, anchor: str) -> str:
        slug = by_title.get(title.casefold())
        if slug is None:
            return text  # a broken link becomes plain text, never a link to nowhere
        return f"[{text}]({slug}.md{'#' + _anchor(anchor) if anchor else ''})"

    links = 0
    for page in pages:
        _meta, body = _split(page["text"])
        body = _relink(body, resolve)
        links += len(re.findall(r"\]\([^)]+\.md(?:#[^)]*)?\)", body))
        if not body.lstrip().startswith("# "):
            body = f"# {page['title']}\n\n{body.lstrip()}"
        if page["sources"]:
            body = body.rstrip() + "\n\n---\n\nSources: " + "; ".join(
                f"{source_titles.get(s, s)} ({s})" for s in page["sources"]) + "\n"
        (folder / f"{page['slug']}.md").write_text(body, encoding="utf-8")
    index = "index" if "index" not in by_title.values() else "_index"
    (folder / f"{index}.md").write_text(_index_text(pages, lambda p: f"[{p['title']}]({p['slug']}.md)"),
                                        encoding="utf-8")
    return {"pages": len(pages), "links": links}


def _anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading).strip().lower().replace(" ", "-")


def _index_text(pages: list[dict], link) -> str:
    lines = ["# Index", "", f"{len(pages)} pages exported by kompl {__version__}.", ""]
    by_category: dict[str, list[dict]] = {}
    for page in pages:
        by_category.setdefault(page["category"], []).append(page)
    for category in sorted(by_category):
        lines += [f"## {category.title()}", ""]
        for page in sorted(by_category[category], key=lambda p: p["title"].casefold()):
            summary = f" — {page['summary']}" if page["summary"] else ""
            lines.append(f"- {link(page)}{summary}")
        lines.append("")
    return "\n".join(lines)


# --- import: staging and validation -------------------------------------------------------------------

@dataclass
class Staged:
    """A validated archive, extracted into a temporary folder (removed by `close()`)."""

    source: Path
    folder: Path
    manifest: dict
    tables: dict[str, list[dict]]
    paths: dict[str, Path]  # member name -> verified copy

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Staged:  # noqa: PYI034 - a dataclass, not subclassed
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _refuse(archive: Path, why: str, hint: str | None = None) -> ArchiveError:
    return ArchiveError(f"Refused to import {archive.name}: {why}; nothing was written",
                        hint=hint or "export the archive again with `kompl export`, or check where it came from")


def _check_name(archive: Path, name: str) -> None:
    if "\x00" in name or "\\" in name:
        raise _refuse(archive, f"member {name!r} has a NUL or backslash in its path")
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise _refuse(archive, f"member {name!r} has an absolute path")
    if any(part in ("..", ".", "") for part in name.split("/")):
        raise _refuse(archive, f"member {name!r} has a path that leaves its folder ('..', '.' or an empty part)")
    if not _MEMBER.match(name):
        raise _refuse(archive, f"member {name!r} is not part of the kompl archive layout")


def _check_type(archive: Path, info: zipfile.ZipInfo) -> None:
    mode = info.external_attr >> 16
    kind = stat.S_IFMT(mode)
    if stat.S_ISLNK(mode):
        raise _refuse(archive, f"member {info.filename!r} is a symbolic link")
    if info.is_dir() or (kind and kind != stat.S_IFREG):
        raise _refuse(archive, f"member {info.filename!r} is not a regular file (a link, device or folder)")
    if info.flag_bits & 0x1:
        raise _refuse(archive, f"member {info.filename!r} is encrypted")


def stage(path: Path, limits: Limits | None = None) -> Staged:
    """Validate `path` completely and extract it to a temporary folder; raise ArchiveError when it is refused.

    Nothing in any workspace is touched here.
    """
    limits = limits or Limits()
    path = Path(path).expanduser()
    if not path.is_file():
        raise ArchiveError(f"Could not import {path}: no such file", hint="give the path of a `kompl export` zip")
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise _refuse(path, f"it is not a readable zip file ({exc})") from None
    folder = Path(tempfile.mkdtemp(prefix="kompl-import-"))
    try:
        with zf:
            staged = _stage(path, zf, folder, limits)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return staged


def _stage(path: Path, zf: zipfile.ZipFile, folder: Path, limits: Limits) -> Staged:
    infos = zf.infolist()
    if len(infos) > limits.members:
        raise _refuse(path, f"it has {len(infos)} members, more than the cap of {limits.members}")
    seen: set[str] = set()
    total = 0
    for info in infos:
        _check_name(path, info.filename)
        if info.filename in seen:
            raise _refuse(path, f"member {info.filename!r} appears twice")
        seen.add(info.filename)
        _check_type(path, info)
        cap = limits.manifest_bytes if info.filename == "manifest.json" else limits.member_bytes
        if info.file_size > cap:
            raise _refuse(path, f"member {info.filename!r} declares {info.file_size} bytes, over the cap of {cap}",
                          hint="raise the cap with --max-member-mb if you trust this archive")
        total += info.file_size
        if total > limits.total_bytes:
            raise _refuse(path, f"its members declare more than the total cap of {limits.total_bytes} bytes",
                          hint="raise the cap with --max-total-mb if you trust this archive")
    if "manifest.json" not in seen:
        raise _refuse(path, "it has no manifest.json (not a kompl archive)")
    counted = [0]
    manifest_path = _extract(path, zf, zf.getinfo("manifest.json"), folder / "manifest.json",
                             limits.manifest_bytes, limits, counted)[0]
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise _refuse(path, f"manifest.json is not valid JSON ({exc})") from None
    _check_manifest(path, manifest, seen)
    paths: dict[str, Path] = {}
    for n, info in enumerate(infos):
        if info.filename == "manifest.json":
            continue
        dest = folder / "m" / str(n)  # never a path built from the member name
        got, digest, size = _extract(path, zf, info, dest, limits.member_bytes, limits, counted)
        want = manifest["members"][info.filename]
        if digest != want.get("sha256") or size != want.get("bytes"):
            raise _refuse(path, f"member {info.filename!r} does not match the sha256 in the manifest (tampered or damaged)")
        paths[info.filename] = got
    tables = _parse_tables(path, paths)
    _check_rows(path, tables, paths)
    return Staged(source=path, folder=folder, manifest=manifest, tables=tables, paths=paths)


def _extract(archive: Path, zf: zipfile.ZipFile, info: zipfile.ZipInfo, dest: Path, cap: int, limits: Limits,
             counted: list[int]) -> tuple[Path, str, int]:
    """Stream one member to `dest`, counting bytes against its declared size and the caps."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    sha, size = hashlib.sha256(), 0
    try:
        with zf.open(info) as src, open(dest, "wb") as out:
            while chunk := src.read(CHUNK):
                size += len(chunk)
                counted[0] += len(chunk)
                if size > info.file_size or size > cap:
                    raise _refuse(archive, f"member {info.filename!r} unpacks to more than its declared size "
                                           f"or the cap of {cap} bytes (a zip bomb?)")
                if counted[0] > limits.total_bytes:
                    raise _refuse(archive, f"its members unpack to more than the total cap of {limits.total_bytes} bytes")
                sha.update(chunk)
                out.write(chunk)
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, NotImplementedError) as exc:
        raise _refuse(archive, f"member {info.filename!r} could not be read ({exc})") from None
    return dest, sha.hexdigest(), size


def _check_manifest(archive: Path, manifest: Any, names: set[str]) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _refuse(archive, "manifest.json does not describe a kompl archive")
    version = manifest.get("format_version")
    if version not in SUPPORTED_VERSIONS:
        raise _refuse(archive, f"unknown archive format version {version!r} (this kompl reads "
                               f"{', '.join(map(str, sorted(SUPPORTED_VERSIONS)))})",
                      hint="upgrade kompl to import archives written by a newer version")
    known = {name for name, _ in db.migration_files()}
    migrations = manifest.get("migrations")
    if not isinstance(migrations, list) or not set(map(str, migrations)) <= known:
        newer = sorted(set(map(str, migrations or [])) - known)
        raise _refuse(archive, f"it was written by a newer kompl (migrations {', '.join(newer) or '?'})",
                      hint="upgrade kompl, then import again")
    members = manifest.get("members")
    if not isinstance(members, dict) or not all(isinstance(v, dict) for v in members.values()):
        raise _refuse(archive, "manifest.json has no valid member list")
    unlisted = sorted(names - set(members) - {"manifest.json"})
    if unlisted:
        raise _refuse(archive, f"member {unlisted[0]!r} is not listed in the manifest")
    absent = sorted(set(members) - names)
    if absent:
        raise _refuse(archive, f"member {absent[0]!r} is listed in the manifest but missing")


def _parse_tables(archive: Path, paths: dict[str, Path]) -> dict[str, list[dict]]:
    tables: dict[str, list[dict]] = {}
    for name, file in paths.items():
        if not name.startswith("db/"):
            continue
        rows = []
        with open(file, encoding="utf-8") as handle:
            for n, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    raise _refuse(archive, f"{name} line {n} is not valid JSON") from None
                if not isinstance(row, dict):
                    raise _refuse(archive, f"{name} line {n} is not a row object")
                rows.append({k: _decode(v) for k, v in row.items()})
        tables[name[3:-6]] = rows
    return tables


def _check_rows(archive: Path, tables: dict[str, list[dict]], paths: dict[str, Path]) -> None:
    """Every value the import turns into a path is safe, and every source's files are present and match."""
    for row in tables.get("sources", []):
        sid, original = row.get("source_id"), row.get("original_name")
        if not isinstance(sid, str) or not _SAFE_NAME.match(sid):
            raise _refuse(archive, f"source id {sid!r} is not a safe file name")
        if original is not None and (not isinstance(original, str) or not _SAFE_NAME.match(original)):
            raise _refuse(archive, f"original file name {original!r} of {sid} is not a safe file name")
        raw = paths.get(f"raw/{sid}.md.gz")
        if raw is None:
            raise _refuse(archive, f"source {sid} has no raw/{sid}.md.gz")
        try:
            with gzip.open(raw, "rb") as handle:
                sha = hashlib.sha256()
                while chunk := handle.read(CHUNK):
                    sha.update(chunk)
        except (OSError, EOFError, zlib.error) as exc:
            raise _refuse(archive, f"raw/{sid}.md.gz is not valid gzip ({exc})") from None
        if sha.hexdigest() != row.get("content_hash"):
            raise _refuse(archive, f"raw/{sid}.md.gz does not match the source's content_hash")
        if original:
            file = paths.get(f"originals/{original}")
            if file is None:
                raise _refuse(archive, f"source {sid} has no originals/{original}")
            if _sha256_file(file) != row.get("original_sha256"):
                raise _refuse(archive, f"originals/{original} does not match the source's original_sha256")
    for row in tables.get("pages", []):
        slug = row.get("slug")
        if not isinstance(slug, str) or not _SAFE_NAME.match(slug):
            raise _refuse(archive, f"page slug {slug!r} is not a safe file name")
        if not isinstance(row.get("page_id"), int) or not isinstance(row.get("version"), int):
            raise _refuse(archive, f"page {slug!r} has no integer page_id and version")
    for row in tables.get("page_versions", []):
        if not isinstance(row.get("version"), int) or not isinstance(row.get("content"), str):
            raise _refuse(archive, "a page version has no integer version or no text")


def _sha256_file(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            sha.update(chunk)
    return sha.hexdigest()


# --- import: merging ------------------------------------------------------------------------------------

@dataclass
class ImportReport:
    archive: str
    sources_added: list[str] = field(default_factory=list)
    sources_existing: int = 0
    sources_skipped: list[dict] = field(default_factory=list)  # {source_id, reason}
    pages_added: list[dict] = field(default_factory=list)  # {page_id, page_key, title, versions}
    pages_same: int = 0
    pages_older: int = 0  # the imported text is an older version of the local page
    conflicts: list[dict] = field(default_factory=list)  # {page_key, title, local_version, draft_plan_id, note}
    versions_added: int = 0
    rows_added: dict[str, int] = field(default_factory=dict)
    aliases_skipped: int = 0
    plans_closed: int = 0  # imported open plans closed because a local plan was open for the page
    skipped_tables: list[str] = field(default_factory=list)
    schema: str = "same"  # same | imported | kept_local
    settings: str = "not_imported"  # written | kept_local | none | not_imported
    vectors: dict = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(self.sources_added or self.pages_added or any(self.rows_added.values())
                    or any(c.get("new_draft") for c in self.conflicts) or self.schema == "imported"
                    or self.settings == "written")

    def to_dict(self) -> dict:
        return asdict(self) | {"changed": self.changed}

    def summary(self) -> dict:
        return {"sources_added": len(self.sources_added), "sources_existing": self.sources_existing,
                "pages_added": len(self.pages_added), "pages_same": self.pages_same, "pages_older": self.pages_older,
                "conflicts": [c["page_key"] for c in self.conflicts], "versions_added": self.versions_added,
                "rows_added": {k: v for k, v in self.rows_added.items() if v}}


_MERGED = ("sources", "extractions", "entity_mentions", "claims", "relationship_mentions", "entities", "aliases",
           "conflicts", "llm_calls", "ingest_failures", "pages", "page_versions", "page_sources", "page_links",
           "page_plans", "tombstones", "chat_sessions", "chat_messages", "activity")
_OPEN = ("planned", "drafted", "failed")


def _comparable(text: str) -> str:
    """Page text without the `updated:` stamp: two renders of the same page compare equal."""
    return "\n".join(line for line in text.splitlines() if not line.startswith("updated:"))


class _Merger:
    def __init__(self, ws: Workspace, conn: sqlite3.Connection, staged: Staged, report: ImportReport):
        self.ws, self.conn, self.staged, self.report = ws, conn, staged, report
        self.t = staged.tables
        self.columns = {name: [r[1] for r in conn.execute(f'PRAGMA table_info("{name}")')] for name in _MERGED}
        self.smap: dict[str, str] = {}
        self.new_sources: set[str] = set()
        self.cmap: dict[int, int] = {}
        self.lmap: dict[int, int] = {}
        self.pmap: dict[int, int] = {}
        self.plan_map: dict[int, int] = {}
        self.added_pages: dict[int, dict] = {}  # local page_id -> archived page row
        self.conflicted: dict[int, dict] = {}  # archived page_id -> conflict entry
        self.vrows = {(v.get("page_id"), v.get("version")): v for v in self.t.get("page_versions", [])}

    # generic helpers
    def _insert(self, table: str, row: dict, pk: str | None = None) -> int:
        data = {k: v for k, v in row.items() if k in self.columns[table]}
        if pk and (data.get(pk) is None or self.conn.execute(
                f'SELECT 1 FROM "{table}" WHERE "{pk}" = ?', (data[pk],)).fetchone()):
            data.pop(pk, None)  # the id is taken here: a new one is allocated (and mapped by the caller)
        names = ", ".join(f'"{k}"' for k in data)
        cur = self.conn.execute(f'INSERT INTO "{table}" ({names}) VALUES ({", ".join("?" * len(data))})',
                                list(data.values()))
        self.report.rows_added[table] = self.report.rows_added.get(table, 0) + 1
        return cur.lastrowid

    def _one(self, sql: str, args: tuple) -> Any:
        row = self.conn.execute(sql, args).fetchone()
        return row[0] if row else None

    def run(self) -> None:
        self.conn.execute("PRAGMA defer_foreign_keys = ON")
        self.sources()
        self.source_rows()
        self.entities()
        self.contradictions()
        self.llm_calls()
        self.failures()
        self.pages()
        self.plans()
        self.versions()
        self.conflict_drafts()
        self.tombstones()
        self.chats()
        self.activity()
        self.report.skipped_tables = sorted(set(self.t) - set(_MERGED) - _DERIVED)

    def sources(self) -> None:
        for row in self.t.get("sources", []):
            sid = row["source_id"]
            local = self._one("SELECT source_id FROM sources WHERE content_hash = ?", (row["content_hash"],))
            if local:
                self.smap[sid] = local
                self.report.sources_existing += 1
            elif self._one("SELECT 1 FROM sources WHERE source_id = ?", (sid,)):
                self.report.sources_skipped.append({"source_id": sid, "reason": "the id is taken by another source"})
            else:
                self._insert("sources", row)
                self.smap[sid] = sid
                self.new_sources.add(sid)
                self.report.sources_added.append(sid)

    def source_rows(self) -> None:
        for row in self.t.get("extractions", []):
            if row.get("source_id") in self.new_sources:
                self._insert("extractions", row)  # its triggers add the terms to term_df
        for table in ("entity_mentions", "relationship_mentions"):
            for row in self.t.get(table, []):
                if row.get("source_id") in self.new_sources:
                    self._insert(table, row, "id")
        for row in self.t.get("claims", []):
            sid = row.get("source_id")
            if sid in self.new_sources:
                self.cmap[row["id"]] = self._insert("claims", row, "id")
            elif sid in self.smap:
                local = self._one("SELECT id FROM claims WHERE source_id = ? AND claim = ? AND quote = ? ORDER BY id",
                                  (self.smap[sid], row.get("claim"), row.get("quote")))
                if local is not None:
                    self.cmap[row["id"]] = local

    def entities(self) -> None:
        for row in self.t.get("entities", []):
            if not self._one("SELECT 1 FROM entities WHERE entity_id = ?", (row["entity_id"],)):
                self._insert("entities", row)
        for row in self.t.get("aliases", []):
            key = (row.get("norm"), row.get("kind"), row.get("entity_id"))
            if self._one("SELECT 1 FROM aliases WHERE norm = ? AND kind = ? AND entity_id = ?", key):
                continue
            if row.get("status") == "merged" and self._one(
                    "SELECT 1 FROM aliases WHERE norm = ? AND kind = ? AND status = 'merged'", key[:2]):
                self.report.aliases_skipped += 1  # the name already means another entity here
                continue
            self._insert("aliases", row, "id")

    def contradictions(self) -> None:
        for row in self.t.get("conflicts", []):
            if self._one("SELECT 1 FROM conflicts WHERE pair_hash = ?", (row.get("pair_hash"),)):
                continue
            a, b = self.cmap.get(row.get("claim_a")), self.cmap.get(row.get("claim_b"))
            if a is None or b is None:
                continue
            self._insert("conflicts", row | {"claim_a": a, "claim_b": b,
                                             "source_a": self.smap.get(row.get("source_a"), row.get("source_a")),
                                             "source_b": self.smap.get(row.get("source_b"), row.get("source_b"))}, "id")

    def llm_calls(self) -> None:
        for row in self.t.get("llm_calls", []):
            local = self._one("SELECT id FROM llm_calls WHERE at = ? AND task_id = ? AND attempt = ? AND purpose = ?",
                              (row.get("at"), row.get("task_id"), row.get("attempt"), row.get("purpose")))
            self.lmap[row["id"]] = local if local is not None else self._insert("llm_calls", row, "id")

    def failures(self) -> None:
        for row in self.t.get("ingest_failures", []):
            if self._one("SELECT 1 FROM ingest_failures WHERE input = ? AND failed_at = ?",
                         (row.get("input"), row.get("failed_at"))):
                continue
            kept = row.get("kept_copy")
            if kept and (not re.match(rf"^originals/failed/{_SAFE}$", kept)
                         or f"failed/{kept.rsplit('/', 1)[1]}" not in self.staged.paths):
                kept = None
            self._insert("ingest_failures", row | {"kept_copy": kept}, "id")

    def pages(self) -> None:
        for row in sorted(self.t.get("pages", []), key=lambda r: r["page_id"]):
            local = self.conn.execute("SELECT page_id, title, version, content_hash, status FROM pages"
                                      " WHERE page_key = ?", (row["page_key"],)).fetchone()
            if local is None:
                slug, n = row["slug"], 2
                while self._one("SELECT 1 FROM pages WHERE slug = ?", (slug,)):
                    slug, n = f"{row['slug']}-{n}", n + 1
                pid = self._insert("pages", row | {"slug": slug}, "page_id")
                self.pmap[row["page_id"]] = pid
                self.added_pages[pid] = row | {"slug": slug, "page_id": pid}
                continue
            self.pmap[row["page_id"]] = local["page_id"]
            imported = self._current_text(row)
            local_text = self._one("SELECT content FROM page_versions WHERE page_id = ? AND version = ?",
                                   (local["page_id"], local["version"]))
            if local["content_hash"] == row["content_hash"] or (
                    imported is not None and local_text is not None and _comparable(local_text) == _comparable(imported)):
                self.report.pages_same += 1
                continue
            older = self.conn.execute("SELECT content FROM page_versions WHERE page_id = ?", (local["page_id"],))
            if imported is not None and any(_comparable(r[0]) == _comparable(imported) for r in older):
                self.report.pages_older += 1
                continue
            entry = {"page_key": row["page_key"], "title": local["title"], "page_id": local["page_id"],
                     "local_version": local["version"], "imported_version": row["version"],
                     "local_hash": local["content_hash"], "imported_hash": row["content_hash"],
                     "draft_plan_id": None, "new_draft": False, "note": ""}
            self.conflicted[row["page_id"]] = entry | {"_row": row, "_text": imported, "_local_status": local["status"]}
            self.report.conflicts.append(entry)

    def _current_text(self, row: dict) -> str | None:
        version = self.vrows.get((row["page_id"], row["version"]))
        return version["content"] if version else None

    def plans(self) -> None:
        for row in self.t.get("page_plans", []):
            local = self._one("SELECT plan_id FROM page_plans WHERE page_key = ? AND inputs_hash = ? ORDER BY plan_id",
                              (row.get("page_key"), row.get("inputs_hash")))
            if local is not None:
                self.plan_map[row["plan_id"]] = local
                continue
            extra: dict[str, Any] = {"page_id": self.pmap.get(row.get("page_id")) if row.get("page_id") else None,
                                     "llm_call_id": self.lmap.get(row.get("llm_call_id"))}
            if row.get("status") in _OPEN and self._one(
                    f"SELECT 1 FROM page_plans WHERE page_key = ? AND status IN {_OPEN}", (row.get("page_key"),)):
                extra |= {"status": "superseded", "decided_at": db.utcnow(),
                          "decided_reason": "imported while this workspace had an open plan for the page"}
                self.report.plans_closed += 1
            self.plan_map[row["plan_id"]] = self._insert("page_plans", row | extra, "plan_id")

    def versions(self) -> None:
        from kompl.wiki import store as wiki

        by_old = {row["page_id"]: pid for pid, row in self.added_pages.items()}
        for row in self.t.get("page_versions", []):
            pid = by_old.get(row.get("page_id"))
            if pid is None:
                continue
            plan = self.plan_map.get(row.get("plan_id")) if row.get("plan_id") is not None else None
            self._insert("page_versions", row | {"page_id": pid, "plan_id": plan})
            self.report.versions_added += 1
        for row in self.t.get("page_sources", []):
            pid = by_old.get(row.get("page_id"))
            if pid is not None:
                self._insert("page_sources", row | {"page_id": pid,
                                                     "source_id": self.smap.get(row["source_id"], row["source_id"])})
        for pid, row in self.added_pages.items():
            count = self._one("SELECT COUNT(*) FROM page_versions WHERE page_id = ?", (pid,))
            self.report.pages_added.append({"page_id": pid, "page_key": row["page_key"], "title": row["title"],
                                            "versions": count})
            if row.get("status") == "active":
                wiki.index_page(self.conn, pid, row["title"], wiki.content(self.conn, pid))
        for pid, row in self.added_pages.items():
            if row.get("status") == "active":
                wiki.relink_targets(self.conn, row["title"], json.loads(row.get("aliases") or "[]"), pid)

    def conflict_drafts(self) -> None:
        """Each conflict's imported text waits as a pending draft of an update to the local page."""
        from kompl.wiki import markdown as md

        for old_id, entry in self.conflicted.items():
            public = next(c for c in self.report.conflicts if c["page_key"] == entry["page_key"])
            row, text = entry["_row"], entry["_text"]
            if text is None or entry["_local_status"] != "active":
                public["note"] = "the local page is deleted; the imported text was not proposed" \
                    if text is not None else "the archive has no text for the page"
                continue
            digest = hashlib.sha256(f"import\0{row['page_key']}\0{row['content_hash']}".encode()).hexdigest()
            existing = self._one("SELECT plan_id FROM page_plans WHERE page_key = ? AND inputs_hash = ?",
                                 (row["page_key"], digest))
            if existing is not None or self._one("SELECT 1 FROM tombstones WHERE page_key = ? AND inputs_hash = ?",
                                                 (row["page_key"], digest)):
                public["draft_plan_id"] = existing
                public["note"] = "proposed by an earlier import" if existing else "rejected after an earlier import"
                continue
            if self._one(f"SELECT 1 FROM page_plans WHERE page_key = ? AND status IN {_OPEN}", (row["page_key"],)):
                public["note"] = "the page has an open draft here; review it, then import again to propose this text"
                continue
            page = self.conn.execute("SELECT page_type, version FROM pages WHERE page_id = ?",
                                     (entry["page_id"],)).fetchone()
            meta, _body = _split(text)
            author = self._one("SELECT author FROM page_versions WHERE page_id = ? AND version = ?",
                               (entry["page_id"], entry["local_version"]))
            author = (self.vrows.get((old_id, row["version"])) or {}).get("author") or author
            sources = sorted({self.smap.get(s.get("source_id"), s.get("source_id"))
                              for s in self.t.get("page_sources", []) if s.get("page_id") == old_id})
            inputs = {"sources": sources, "new_sources": [], "removed_sources": [],
                      "aliases": json.loads(row.get("aliases") or "[]"),
                      "imported_from": self.staged.source.name, "imported_version": row["version"],
                      "imported_hash": row["content_hash"]}
            now = db.utcnow()
            cur = self.conn.execute(
                "INSERT INTO page_plans (page_key, page_type, title, category, action, page_id, base_version, status,"
                " inputs_hash, inputs, draft, summary, model, created_at, updated_at)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (row["page_key"], page["page_type"], row["title"], row.get("category") or "other", "update",
                 entry["page_id"], page["version"], "drafted", digest,
                 json.dumps(inputs, ensure_ascii=False, sort_keys=True), md.split_frontmatter(text)[1].lstrip("\n"),
                 str(meta.get("summary") or row.get("summary") or ""), author or "import", now, now))
            public.update(draft_plan_id=cur.lastrowid, new_draft=True,
                          note="kept the local page; the imported text waits as a draft")
            self.report.rows_added["page_plans"] = self.report.rows_added.get("page_plans", 0) + 1

    def tombstones(self) -> None:
        for row in self.t.get("tombstones", []):
            if not self._one("SELECT 1 FROM tombstones WHERE page_key = ? AND inputs_hash = ?",
                             (row.get("page_key"), row.get("inputs_hash"))):
                self._insert("tombstones", row | {"plan_id": self.plan_map.get(row.get("plan_id"))})

    def chats(self) -> None:
        added = set()
        for row in self.t.get("chat_sessions", []):
            if not self._one("SELECT 1 FROM chat_sessions WHERE session_id = ?", (row.get("session_id"),)):
                self._insert("chat_sessions", row)
                added.add(row["session_id"])
        for row in self.t.get("chat_messages", []):
            if row.get("session_id") in added:
                fixed = {k: self._remap_page_refs(row.get(k)) for k in ("citations", "pages_used", "removed")
                         if k in row}
                self._insert("chat_messages", row | fixed | {"llm_call_id": self.lmap.get(row.get("llm_call_id"))},
                             "id")

    def _remap_page_refs(self, value: Any) -> Any:
        try:
            items = json.loads(value or "[]")
        except ValueError:
            return value
        if isinstance(items, list):
            for item in items:
                if isinstance(item, dict) and isinstance(item.get("page_id"), int):
                    item["page_id"] = self.pmap.get(item["page_id"], item["page_id"])
        return json.dumps(items, ensure_ascii=False)

    def activity(self) -> None:
        for row in self.t.get("activity", []):
            if not self._one("SELECT 1 FROM activity WHERE at = ? AND action = ? AND target IS ? AND actor = ?"
                             " AND details = ?", (row.get("at"), row.get("action"), row.get("target"),
                                                  row.get("actor"), row.get("details"))):
                self._insert("activity", row, "id")


def import_archive(ws: Workspace, conn: sqlite3.Connection, staged: Staged, *, reembed: bool = True) -> ImportReport:
    """Merge a staged (validated) archive into `ws`; see the module docstring for the rules."""
    from kompl.ingest import store as sources
    from kompl.wiki import store as wiki

    report = ImportReport(archive=str(staged.source.resolve()))
    written: list[Path] = []
    pending = ws.data / ".import-vectors-pending"
    details: dict[str, Any] = {"archive": staged.source.name, "created_at": staged.manifest.get("created_at")}
    with sources.ingest_lock(ws):
        try:
            local_hashes = {r[0] for r in conn.execute("SELECT content_hash FROM sources")}
            for row in staged.tables.get("sources", []):
                if row["content_hash"] in local_hashes:
                    continue
                for member, dest in ((f"raw/{row['source_id']}.md.gz", sources.raw_path(ws, row["source_id"])),
                                     (f"originals/{row.get('original_name')}",
                                      ws.originals_dir / str(row.get("original_name")))):
                    if member in staged.paths and not dest.exists():
                        _copy_atomic(staged.paths[member], dest)
                        written.append(dest)
            for member, path in staged.paths.items():
                dest = ws.originals_dir / "failed" / member[len("failed/"):]
                if member.startswith("failed/") and not dest.exists():
                    _copy_atomic(path, dest)
                    written.append(dest)
            faults.point("import.after_files")
            with db.transaction(conn, "import", target=staged.source.name, details=details):
                _Merger(ws, conn, staged, report).run()
                details.update(report.summary())
                if report.pages_added and reembed:
                    pending.touch()  # removed once the vectors are in: a crash before that is caught up next time
        except BaseException:
            for path in written:
                path.unlink(missing_ok=True)
            raise
    faults.point("import.after_commit")
    for page in report.pages_added:  # projections of the committed rows
        row = conn.execute(f"SELECT {wiki.PAGE_COLUMNS} FROM pages WHERE page_id = ?", (page["page_id"],)).fetchone()
        for version in wiki.history(conn, row["page_id"]):
            path = wiki.history_path(ws, row["slug"], version["version"])
            if not path.exists():
                from kompl import files

                files.atomic_write_text(path, wiki.content(conn, row["page_id"], version["version"]))
        if row["status"] == "active":
            wiki.write_files(ws, conn, dict(row))
    report.schema = _merge_schema(ws, staged)
    report.settings = _merge_settings(ws, staged)
    if reembed:
        try:
            from kompl import vectors

            # Also when this run adds no page: an earlier import that crashed after its commit left
            # the marker, and its pages without vectors.
            if report.pages_added or not ws.vectors_dir.exists() or pending.exists():
                report.vectors = {k: v for k, v in vectors.reconcile(ws, conn).items()
                                  if k in ("embedded_pages", "embedded_chunks", "deferred", "fixed")}
                if not report.vectors.get("deferred"):
                    pending.unlink(missing_ok=True)
        except Exception as exc:  # noqa: BLE001 - rows are committed; `kompl doctor --fix` re-embeds later
            report.vectors = {"error": str(exc), "hint": "run `kompl doctor --fix` to re-embed"}
    return report


def _merge_schema(ws: Workspace, staged: Staged) -> str:
    """The archived schema.md replaces the local one only when the local one is missing or the shipped default."""
    from kompl import files

    member = staged.paths.get("schema.md")
    if member is None:
        return "same"
    archived = member.read_bytes()
    local = ws.schema_path.read_bytes() if ws.schema_path.exists() else None
    if local == archived:
        return "same"
    try:
        default = default_schema_path().read_bytes()
    except KomplError:
        default = None
    if local is None or local == default:
        files.atomic_write_bytes(ws.schema_path, archived)
        return "imported"
    return "kept_local"


def _merge_settings(ws: Workspace, staged: Staged) -> str:
    """The archived settings become kompl.toml only when the workspace has none (known, non-secret keys only)."""
    from kompl import files

    member = staged.paths.get("settings.json")
    if member is None:
        return "none"
    try:
        data = json.loads(member.read_text(encoding="utf-8")).get("kompl_toml") or {}
    except (ValueError, AttributeError):
        return "none"
    known = {f for f in Settings().to_dict()}
    flat = {k: v for k, v in {**{k: v for k, v in data.items() if not isinstance(v, dict)},
                              **(data.get("kompl") or {})}.items()
            if k in known and isinstance(v, (str, int, float, bool)) and not _keylike(k, v)}
    if not flat:
        return "none"
    if (ws.root / "kompl.toml").exists():
        return "kept_local"
    lines = ["# settings imported by `kompl import` from " + staged.source.name.replace("\n", " ")]
    lines += [f"{k} = {_toml_value(v)}" for k, v in sorted(flat.items())]
    files.atomic_write_text(ws.root / "kompl.toml", "\n".join(lines) + "\n")
    return "written"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)  # a JSON string is a valid TOML basic string
