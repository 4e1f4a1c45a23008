"""`kompl resolve` and `kompl aliases`: turn extracted names into entities, and review the merges."""

from __future__ import annotations

from contextlib import closing
from typing import Annotated

import typer

from kompl.cli.common import err_console, esc, open_workspace, out_console, print_json
from kompl.errors import EXIT_FAILURES

aliases_app = typer.Typer(
    help=(
        "List, merge and split entity aliases.\n\n"
        "Without a subcommand, lists every alias (or, with --pending, the merges waiting for review).\n\n"
        "Examples:\n\n"
        "    kompl aliases --pending\n\n"
        "    kompl aliases merge \"SBF\" \"Sam Bankman-Fried\"\n\n"
        "    kompl aliases split \"Jordan\""
    ),
    invoke_without_command=True,
    no_args_is_help=False,
)


def resolve(
    ctx: typer.Context,
    no_model: Annotated[bool, typer.Option("--no-model", help="Do not ask the model; ambiguous pairs go to the review list.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object with the counts.")] = False,
) -> None:
    """Resolve extracted names into entities (alias, fuzzy, embedding, then the model).

    Only names not seen before are compared, so a re-run with no new mentions
    changes nothing and makes no model calls. Merges the cascade is unsure of
    wait in `kompl aliases --pending`.

    Examples:

        kompl resolve

        kompl resolve --no-model --json
    """
    from kompl.pipeline.resolve import resolve as run_resolve

    ws, conn = open_workspace(ctx)
    with closing(conn):
        report = run_resolve(ws, conn, use_model=not no_model)
    if json_out:
        print_json(report.to_dict())
    else:
        console = out_console()
        if not report.new_names and not report.changed:
            console.print("Nothing new to resolve.")
        else:
            merged = ", ".join(f"{n} {layer}" for layer, n in sorted(report.merged.items())) or "none"
            console.print(f"{report.new_names} new names: {report.entities_created} new entities, merges: {merged}; "
                          f"{report.pending} pending review, {report.rejected} rejected, "
                          f"{report.model_calls} model call(s)")
            if report.pending:
                console.print("Review the pending merges with `kompl aliases --pending`.")
    for message in report.model_errors:
        err_console().print(f"[bold red]model:[/] {esc(message)}")
    if report.model_errors:
        raise typer.Exit(EXIT_FAILURES)


@aliases_app.callback()
def aliases(
    ctx: typer.Context,
    pending: Annotated[bool, typer.Option("--pending", help="Only merges waiting for review.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """List aliases and the entities they belong to (with --pending: the review list)."""
    if ctx.invoked_subcommand is not None:
        return
    from kompl.pipeline.resolve import list_aliases

    ws, conn = open_workspace(ctx)
    with closing(conn):
        rows = list_aliases(conn, "pending" if pending else None)
    if json_out:
        print_json(rows)
        return
    console = out_console()
    if not rows:
        console.print("No pending merges." if pending else "No aliases yet: run `kompl resolve` after `kompl extract`.")
        return
    from rich.table import Table

    table = Table("alias", "entity", "type", "status", "layer", "conf", "reason")
    for r in rows:
        table.add_row(esc(r["alias"]), esc(r["canonical_name"]), r["type"], r["status"], r["layer"],
                      f"{r['confidence']:.2f}", esc(r["reason"]))
    console.print(table)
    if pending:
        console.print("Accept with `kompl aliases merge ALIAS ENTITY`; refuse with `kompl aliases split ALIAS`.")


@aliases_app.command("merge")
def merge_cmd(
    ctx: typer.Context,
    a: Annotated[str, typer.Argument(help="The name (or alias) to merge away.")],
    b: Annotated[str, typer.Argument(help="The name (or alias) of the entity to merge into.")],
) -> None:
    """Merge the entity named A into the entity named B (B keeps its id).

    Example:

        kompl aliases merge "Bankman-Fried" "Sam Bankman-Fried"
    """
    from kompl.pipeline.resolve import merge

    ws, conn = open_workspace(ctx)
    with closing(conn):
        result = merge(conn, a, b)
    entity = result["entity"]
    if result["merged"]:
        out_console().print(f"Merged {esc(a)} into {esc(entity['canonical_name'])} ({entity['entity_id']}).")
    else:
        out_console().print(f"{esc(result['reason'])}: nothing to do.")


@aliases_app.command("split")
def split_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The alias to detach into an entity of its own.")],
) -> None:
    """Detach alias NAME from its entity (and refuse its pending merges); it never merges back.

    Example:

        kompl aliases split "Jordan"
    """
    from kompl.pipeline.resolve import split

    ws, conn = open_workspace(ctx)
    with closing(conn):
        result = split(conn, name)
    entity = result["entity"]
    out_console().print(f"{esc(result['alias'])} is now its own entity {esc(entity['canonical_name'])} "
                        f"({entity['entity_id']}).")
