"""`kompl export` and `kompl import`: a lossless, verified zip of the workspace, and readable exports."""

from __future__ import annotations

from contextlib import closing
from pathlib import Path
from typing import Annotated

import typer

from kompl.cli.common import esc, home_of, open_workspace, out_console, print_json

FORMAT_HELP = "zip (lossless archive, the default), obsidian (a vault folder), markdown (a folder), json (one file)."


def export(
    ctx: typer.Context,
    out: Annotated[Path, typer.Argument(help="The zip or JSON file to write, or the folder for obsidian/markdown.")],
    fmt: Annotated[str, typer.Option("--format", "-f", help=FORMAT_HELP)] = "zip",
    include_archived: Annotated[bool, typer.Option("--include-archived", help="Readable formats: also pages whose sources are all archived.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing zip or JSON file.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object describing the export.")] = False,
) -> None:
    """Export the wiki: a lossless zip (default), an Obsidian vault, plain markdown, or one JSON file.

    The zip holds every table, raw sources, originals, current pages, every page
    version, schema.md and the settings (never API keys), with a manifest of
    sha256 hashes; `kompl import` reads it. It is written atomically.

    Examples:

        kompl export backup.zip

        kompl export --format obsidian ~/vaults/wiki

        kompl export --format json wiki.json
    """
    from kompl import archive

    ws, conn = open_workspace(ctx)
    with closing(conn):
        report = archive.export(ws, conn, out, fmt=fmt.lower(), include_archived=include_archived, force=force)
    if json_out:
        print_json(report.to_dict())
        return
    console = out_console()
    counts = report.counts
    what = (f"{counts.get('sources', 0)} sources, {counts.get('pages', 0)} pages, {counts.get('versions', 0)} versions"
            if report.format == "zip" else f"{counts.get('pages', 0)} pages")
    console.print(f"Exported {what} to {esc(report.path)} ({report.format}).")
    if report.dropped_settings:
        console.print(f"Left out key-like settings: {esc(', '.join(report.dropped_settings))}.")
    if report.redactions:
        console.print(f"[yellow]Redacted {report.redactions} API key value(s) found in the data.[/]")


def import_(
    ctx: typer.Context,
    archive_path: Annotated[Path, typer.Argument(metavar="ARCHIVE", help="A zip written by `kompl export`.")],
    max_member_mb: Annotated[float, typer.Option("--max-member-mb", help="Refuse a member that unpacks to more than this.")] = 2048,
    max_total_mb: Annotated[float, typer.Option("--max-total-mb", help="Refuse an archive that unpacks to more than this.")] = 16384,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object describing the import.")] = False,
) -> None:
    """Merge an archive into this workspace (empty or not); nothing is overwritten.

    Sources are matched by content hash, pages by identity: a page that differs
    here is a conflict, kept as it is, with the imported text waiting as a draft
    (`kompl drafts`, `kompl diff`, `kompl approve` or `kompl reject`). The archive
    is checked first (paths, links, sizes, every sha256) and nothing is written
    when it is refused. Vectors are re-embedded, never taken from the archive.

    Examples:

        kompl import backup.zip

        kompl import colleague.zip --json
    """
    from kompl import archive
    from kompl.workspace import find_workspace

    find_workspace(home_of(ctx))  # fail on a missing workspace before reading the archive
    limits = archive.Limits(member_bytes=int(max_member_mb * 1024 * 1024), total_bytes=int(max_total_mb * 1024 * 1024))
    with archive.stage(archive_path, limits) as staged:
        ws, conn = open_workspace(ctx)
        with closing(conn):
            report = archive.import_archive(ws, conn, staged)
    if json_out:
        print_json(report.to_dict())
        return
    _render(report)


def _render(report) -> None:
    console = out_console()
    console.print(f"Imported {esc(Path(report.archive).name)}: {len(report.sources_added)} source(s) added, "
                  f"{report.sources_existing} already here; {len(report.pages_added)} page(s) added "
                  f"({report.versions_added} versions), {report.pages_same} unchanged, "
                  f"{report.pages_older} older than here.")
    for item in report.sources_skipped:
        console.print(f"[yellow]skipped source[/] {esc(item['source_id'])}: {esc(item['reason'])}")
    if report.conflicts:
        console.print(f"[yellow]{len(report.conflicts)} conflict(s)[/]: these pages differ here; the local text is kept.")
        for c in report.conflicts:
            draft = f"draft {c['draft_plan_id']}" if c["draft_plan_id"] else "no draft"
            console.print(f"  {esc(c['title'])} ({esc(c['page_key'])}): {draft}; {esc(c['note'])}")
        console.print("Review the imported texts with `kompl drafts` and `kompl diff PLAN`.")
    if report.aliases_skipped:
        console.print(f"{report.aliases_skipped} alias(es) skipped: the name already means another entity here.")
    if report.skipped_tables:
        console.print(f"Not imported (derived or unknown here): {esc(', '.join(report.skipped_tables))}.")
    if report.schema == "kept_local":
        console.print("schema.md differs from the archive's; kept this workspace's.")
    if report.vectors.get("error"):
        console.print(f"[yellow]vectors:[/] {esc(report.vectors['error'])} (run `kompl doctor --fix`)")
    if not report.changed:
        console.print("Nothing changed: everything in the archive is already here.")
