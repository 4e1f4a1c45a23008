"""`kompl pages`, `kompl show`, `kompl history`: read the committed wiki."""

from __future__ import annotations

from contextlib import closing
from typing import Annotated, Optional

import typer

from kompl.cli.common import esc, open_workspace, out_console, print_json


def pages(
    ctx: typer.Context,
    page_type: Annotated[Optional[str], typer.Option("--type", help="Only pages of this type (source, entity, concept, comparison, overview, ...).")] = None,
    include_archived: Annotated[bool, typer.Option("--include-archived", help="Also list pages whose sources are all archived.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """List committed pages (drafts are in `kompl drafts`).

    Example:

        kompl pages --type entity --json
    """
    from kompl.wiki import store

    ws, conn = open_workspace(ctx)
    with closing(conn):
        rows = store.list_pages(conn, page_type=page_type, include_hidden=include_archived)
    for row in rows:
        row["path"] = str(store.page_path(ws, row["slug"]).relative_to(ws.root))
    if json_out:
        print_json([{k: r[k] for k in ("page_id", "title", "page_type", "category", "version", "sources",
                                        "path", "summary", "updated_at")} for r in rows])
        return
    from rich.table import Table

    if not rows:
        out_console().print("No pages yet: run `kompl compile`, then `kompl approve`.")
        return
    table = Table("id", "title", "type", "v", "sources", "path")
    for r in rows:
        table.add_row(str(r["page_id"]), esc(r["title"]), r["page_type"], str(r["version"]),
                      str(len(r["sources"])), esc(r["path"]))
    out_console().print(table)


def show(
    ctx: typer.Context,
    page: Annotated[str, typer.Argument(help="Page id, slug, key or title.")],
    version: Annotated[Optional[int], typer.Option(help="Show this earlier version instead of the current one.")] = None,
    raw: Annotated[bool, typer.Option("--raw", help="Print the markdown file as it is.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the page and its metadata as JSON.")] = False,
) -> None:
    """Show a page, rendered (or --raw).

    Example:

        kompl show "Alexander Fleming"
    """
    from kompl.wiki import store
    from kompl.wiki.markdown import parse_page

    ws, conn = open_workspace(ctx)
    with closing(conn):
        row = store.get(conn, page)
        text = store.content(conn, row["page_id"], version)
        row["sources"] = store.page_source_ids(conn, row["page_id"])
    if json_out:
        print_json(row | {"content": text, "shown_version": version or row["version"]})
        return
    if raw:
        typer.echo(text, nl=False)
        return
    from rich.markdown import Markdown
    from rich.panel import Panel

    meta, body = parse_page(text)
    console = out_console()
    subtitle = f"{row['page_type']} · v{version or row['version']} · {len(row['sources'])} source(s) · {meta.get('model', '')}"
    console.print(Panel(esc(meta.get("summary") or ""), title=esc(row["title"]), subtitle=esc(subtitle)))
    console.print(Markdown(body))


def history(
    ctx: typer.Context,
    page: Annotated[str, typer.Argument(help="Page id, slug, key or title.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """List every version of a page: who wrote it, when and why.

    See one with `kompl show PAGE --version N`; compare two with `kompl diff PAGE --from N --to M`.

    Example:

        kompl history alexander-fleming
    """
    from kompl.wiki import store

    ws, conn = open_workspace(ctx)
    with closing(conn):
        row = store.get(conn, page)
        versions = store.history(conn, row["page_id"])
    if json_out:
        print_json(versions)
        return
    from rich.table import Table

    table = Table("version", "author", "plan", "when", "reason", title=esc(row["title"]), title_justify="left")
    for v in versions:
        table.add_row(str(v["version"]), esc(v["author"]), str(v["plan_id"] or ""), v["created_at"][:19], esc(v["reason"]))
    out_console().print(table)
