"""The ingest workflow: expand inputs, fetch or read them, convert, dedup and store.

Interface-agnostic: it reports progress through a callback and returns an
`IngestReport`; the CLI decides how to show it. A failing input never stops the
batch: it is recorded in `ingest_failures` with a message a person understands
and can be retried with `kompl ingest --retry-failed`.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from kompl.errors import IngestError, KomplError
from kompl.ingest import store, urls
from kompl.ingest.bookmarks import read_bookmarks
from kompl.ingest.convert import Converter, content_hash, extension_for, human_size, limit_text
from kompl.workspace import Workspace

ProgressFn = Callable[[str, dict], None]


@dataclass
class Input:
    kind: str  # file | url | stdin
    value: str  # path, URL or "-"
    data: bytes | None = None  # stdin bytes
    title: str | None = None  # given title (wins) ...
    title_hint: str | None = None  # ... or a fallback (a bookmark's title)
    failure_id: int | None = None  # set when retrying a recorded failure
    allow_private: bool = False  # a retried URL keeps the --allow-private it was first given


@dataclass
class IngestReport:
    ingested: list[dict] = field(default_factory=list)
    duplicates: list[dict] = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict:
        return {"ingested": self.ingested, "duplicates": self.duplicates, "failed": self.failed, "skipped": self.skipped}


def expand(
    args: Iterable[str], *, glob: str | None = None, bookmarks: Path | None = None,
    stdin: Callable[[], bytes] | None = None, title: str | None = None, exclude: Path | None = None,
) -> tuple[list[Input], IngestReport]:
    """Turn command-line inputs into a flat list; what cannot be expanded is reported as failed.

    `exclude` is a folder never collected from a folder input: the workspace's own
    data/, so `kompl ingest .` inside a workspace does not ingest kompl's files.
    """
    exclude = exclude.resolve() if exclude is not None else None
    inputs: list[Input] = []
    report = IngestReport()
    for arg in args:
        if arg == "-":
            if stdin is None:
                raise IngestError("no_stdin", "'-' was given but no standard input is available")
            inputs.append(Input("stdin", "-", data=stdin(), title=title))
        elif urls.is_url(arg) or "://" in arg:
            inputs.append(Input("url", arg, title=title))
        else:
            path = Path(arg).expanduser()
            if path.is_dir():
                found = sorted(p for p in path.rglob(glob or "*")
                               if p.is_file() and not _hidden(p, path) and not _inside(p, exclude))
                if not found:
                    report.skipped.append({"input": arg, "reason": f"no files{' matching ' + glob if glob else ''} in this folder"})
                inputs.extend(Input("file", str(p)) for p in found)
            else:
                inputs.append(Input("file", str(path), title=title))
    if bookmarks is not None:
        for mark in read_bookmarks(bookmarks):
            if urls.is_url(mark.url):
                inputs.append(Input("url", mark.url, title_hint=mark.title or None))
            else:
                report.skipped.append({"input": mark.url, "reason": "not an http(s) link"})
    return inputs, report


def _inside(path: Path, folder: Path | None) -> bool:
    return folder is not None and path.resolve().is_relative_to(folder)


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def ingest(
    ws: Workspace, conn: sqlite3.Connection, inputs: list[Input], *,
    report: IngestReport | None = None, allow_private: bool | None = None,
    on_progress: ProgressFn | None = None,
) -> IngestReport:
    report = report or IngestReport()
    allow_private = ws.settings.allow_private_urls if allow_private is None else allow_private
    converter = Converter()
    notify = on_progress or (lambda _event, _info: None)
    store.reconcile(ws, conn)
    notify("start", {"total": len(inputs)})
    for item in inputs:
        label = _input_label(item)
        try:
            try:
                row, created = _ingest_one(ws, conn, converter, item, allow_private or item.allow_private)
            except (KomplError, KeyboardInterrupt):
                raise
            except Exception as exc:
                # A bug or an unexpected library error in one input must not stop the batch.
                if os.environ.get("KOMPL_DEBUG"):
                    raise
                raise IngestError(
                    "internal", f"{label} could not be ingested: {exc.__class__.__name__}: {exc}"[:500],
                    hint="this looks like a bug in kompl; run with KOMPL_DEBUG=1 for a traceback",
                ) from exc
        except IngestError as exc:
            kept = _keep_stdin_copy(ws, item) if item.kind == "stdin" else None
            store.record_failure(
                conn, input=label, input_kind=item.kind, code=exc.code, error=exc.message, hint=exc.hint,
                options={"title": item.title, "allow_private": allow_private or item.allow_private}, kept_copy=kept,
                failure_id=item.failure_id,
            )
            report.failed.append({"input": label, "error": exc.message, "code": exc.code, "hint": exc.hint})
            notify("item", {"input": label, "outcome": "failed", "error": exc.message})
            continue
        if item.failure_id is not None:
            _resolve_retried(ws, conn, item)
        elif not created:
            _resolve_duplicate(conn, label)
        entry = {"source_id": row["source_id"], "title": row["title"], "title_from": row["title_from"],
                 "source_type": row["source_type"], "input": label}
        if created:
            report.ingested.append(entry)
        else:
            report.duplicates.append({"input": label, "source_id": row["source_id"], "title": row["title"]})
        notify("item", {"input": label, "outcome": "ingested" if created else "duplicate"})
    notify("end", {})
    return report


def _resolve_retried(ws: Workspace, conn: sqlite3.Connection, item: Input) -> None:
    from kompl import db, files

    with db.transaction(conn, "ingest_retry_resolved", target=item.value, details={"failure_id": item.failure_id}):
        store.resolve_failures(conn, item.value, failure_id=item.failure_id)
    # The kept copy of failed stdin bytes has served its purpose, unless another open failure shares it.
    kept = conn.execute("SELECT kept_copy FROM ingest_failures WHERE id = ?", (item.failure_id,)).fetchone()
    if kept and kept[0] and not conn.execute(
        "SELECT 1 FROM ingest_failures WHERE kept_copy = ? AND resolved_at IS NULL", (kept[0],)
    ).fetchone():
        files.remove_quietly(ws.data / kept[0])


def _resolve_duplicate(conn: sqlite3.Connection, label: str) -> None:
    """An input that failed before and is now a duplicate is no longer a failure."""
    from kompl import db

    if label == "-" or not conn.execute(
        "SELECT 1 FROM ingest_failures WHERE input = ? AND resolved_at IS NULL", (label,)
    ).fetchone():
        return
    with db.transaction(conn, "ingest_retry_resolved", target=label, details={"duplicate": True}):
        store.resolve_failures(conn, label)


def retry_inputs(ws: Workspace, conn: sqlite3.Connection) -> list[Input]:
    """The open failures, as inputs to try again (stdin ones from their kept copy)."""
    inputs = []
    for failure in store.open_failures(conn):
        data = None
        if failure["input_kind"] == "stdin":
            kept = failure["kept_copy"]
            if not kept or not (ws.data / kept).exists():
                continue
            data = (ws.data / kept).read_bytes()
        inputs.append(Input(failure["input_kind"], failure["input"], data=data,
                            title=failure["options"].get("title"), failure_id=failure["id"],
                            allow_private=bool(failure["options"].get("allow_private"))))
    return inputs


def _keep_stdin_copy(ws: Workspace, item: Input) -> str | None:
    """Keep failed stdin bytes so `--retry-failed` can try again: nothing is lost."""
    from kompl import files

    if not item.data:
        return None
    rel = f"originals/failed/{hashlib.sha256(item.data).hexdigest()}.bin"
    files.atomic_write_bytes(ws.data / rel, item.data)
    return rel


def _ingest_one(ws: Workspace, conn, converter: Converter, item: Input, allow_private: bool) -> tuple[dict, bool]:
    cap = int(ws.settings.max_input_mb * 1_000_000)
    url = url_norm = mimetype = None
    if item.kind == "url":
        urls.check_url(item.value, allow_private)
        url_norm = urls.normalize_url(item.value)
        existing = store.find_by_url(conn, url_norm)
        if existing:
            return existing, False
        fetched = urls.fetch(item.value, timeout_s=ws.settings.fetch_timeout_s, max_bytes=cap,
                             max_redirects=ws.settings.fetch_max_redirects, allow_private=allow_private)
        data, url, mimetype = fetched.content, fetched.url, fetched.mimetype
        ext = extension_for(urlsplit(url).path, mimetype)
        parts = urlsplit(url)
        fallback, fallback_from = (item.title_hint, "given") if item.title_hint else (f"{parts.hostname}{parts.path}".rstrip("/"), "url")
        converted = converter.convert(data, name=url, extension=ext, mimetype=mimetype,
                                      charset=fetched.charset, url=url,
                                      fallback_title=fallback, fallback_from=fallback_from)
    elif item.kind == "stdin":
        data = item.data or b""
        if len(data) > cap:
            raise IngestError("too_large", f"Standard input is {human_size(len(data))}, over {limit_text(cap)}",
                              hint="raise max_input_mb in kompl.toml if you need it")
        ext = ".md"
        converted = converter.convert(data, name="standard input", extension=ext,
                                      fallback_title=item.title or "Untitled (standard input)",
                                      fallback_from="given" if item.title else "filename")
    else:
        path = Path(item.value)
        data = _read_file(path, cap)
        ext = extension_for(path.name)
        converted = converter.convert(data, name=str(path), extension=ext, fallback_title=path.stem or path.name)
    if item.title:
        converted.title, converted.title_from = item.title, "given"
    new = store.NewSource(
        title=converted.title, title_from=converted.title_from, source_type=converted.source_type,
        input_kind=item.kind, input=_input_label(item), markdown=converted.markdown,
        content_hash=content_hash(converted.markdown), original=data,
        original_sha256=hashlib.sha256(data).hexdigest(), original_ext=ext if ext.startswith(".") else "",
        url=url, url_norm=url_norm, mime_type=mimetype, metadata=converted.metadata,
    )
    with store.ingest_lock(ws):
        return store.store(ws, conn, new)


def _input_label(item: Input) -> str:
    if item.kind == "file":
        return str(Path(item.value).resolve())
    return item.value


def _read_file(path: Path, cap: int) -> bytes:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise IngestError("not_found", f"No such file or folder: {path}", hint="check the path") from None
    except OSError as exc:
        raise IngestError("unreadable", f"Could not read {path}: {exc.strerror}") from None
    if not path.is_file():
        raise IngestError("unsupported", f"{path} is not a regular file")
    if size > cap:
        raise IngestError("too_large", f"{path} is {human_size(size)}, over {limit_text(cap)}",
                          hint="raise max_input_mb in kompl.toml if you need it")
    try:
        with open(path, "rb") as handle:
            data = handle.read(cap + 1)  # bounded even if the file grew since stat()
    except PermissionError:
        raise IngestError("unreadable", f"Permission denied reading {path}", hint="check the file's permissions") from None
    except OSError as exc:
        raise IngestError("unreadable", f"Could not read {path}: {exc.strerror}") from None
    if len(data) > cap:
        raise IngestError("too_large", f"{path} is over {limit_text(cap)}",
                          hint="raise max_input_mb in kompl.toml if you need it")
    return data
