"""Spending: the daily budget's in-flight reservations, today's spend, worst-case estimates and call statistics."""

from __future__ import annotations

import sqlite3
import threading
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kompl.workspace import Workspace

# Worst-case cost of the calls in flight, per database: reserved before a call is
# sent, released once it is recorded (with its actual cost) in llm_calls.
_reserved: dict[str, float] = {}
_reserved_lock = threading.Lock()


def spent_today(conn: sqlite3.Connection) -> float:
    """Dollars recorded in llm_calls since midnight UTC."""
    start = datetime.now(timezone.utc).strftime("%Y-%m-%dT00:00:00")
    row = conn.execute("SELECT COALESCE(SUM(cost_usd), 0) FROM llm_calls WHERE at >= ?", (start,)).fetchone()
    return float(row[0])

def call_stats(ws: Workspace, conn: sqlite3.Connection, *, since: str | None = None) -> dict[str, Any]:
    """Calls, tokens and cost by purpose, by model and in total (refused calls are counted apart).

    `calls` counts attempts sent to a model (offline included); `failed` those among
    them whose outcome was 'error' or 'invalid'; `refused` those the budget stopped.
    """
    where, args = "", []
    if since:
        where, args = "WHERE at >= ?", [since]
    columns = (
        "SUM(outcome != 'refused') AS calls, SUM(outcome IN ('error', 'invalid')) AS failed,"
        " SUM(outcome = 'refused') AS refused, SUM(prompt_tokens) AS prompt_tokens,"
        " SUM(completion_tokens) AS completion_tokens, SUM(cost_usd) AS cost_usd, SUM(latency_ms) AS latency_ms"
    )

    def group(by: str) -> dict[str, dict[str, Any]]:
        rows = conn.execute(f"SELECT {by} AS key, {columns} FROM llm_calls {where} GROUP BY {by} ORDER BY {by}", args)
        return {row["key"]: _stat_row(row) for row in rows}

    total = conn.execute(f"SELECT {columns} FROM llm_calls {where}", args).fetchone()
    return {
        "by_purpose": group("purpose"),
        "by_model": group("model"),
        "total": _stat_row(total),
        "since": since,
        "budget": {"daily_budget_usd": float(ws.settings.daily_budget_usd), "spent_today_usd": spent_today(conn)},
    }

def estimate_cost(litellm: Any, model: str, messages: list[dict], max_output_tokens: int) -> float:
    """Worst-case dollars for one call: its prompt plus `max_output_tokens` at litellm's prices (0 if unknown)."""
    try:
        prompt_tokens = int(litellm.token_counter(model=model, messages=messages))
    except Exception:
        from kompl.text import approx_tokens

        prompt_tokens = approx_tokens("".join(str(m.get("content", "")) for m in messages))
    try:
        prompt_cost, output_cost = litellm.cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=max_output_tokens
        )
    except Exception:  # the price of this model is not in litellm's table
        return 0.0
    return float(prompt_cost) + float(output_cost)

def _release(ws: Workspace, estimate: float) -> None:
    if not estimate:
        return
    key = str(ws.db_path)
    with _reserved_lock:
        left = _reserved.get(key, 0.0) - estimate
        if left > 1e-12:
            _reserved[key] = left
        else:
            _reserved.pop(key, None)

def _stat_row(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "calls": int(row["calls"] or 0),
        "failed": int(row["failed"] or 0),
        "refused": int(row["refused"] or 0),
        "prompt_tokens": int(row["prompt_tokens"] or 0),
        "completion_tokens": int(row["completion_tokens"] or 0),
        "cost_usd": float(row["cost_usd"] or 0.0),
        "latency_ms": int(row["latency_ms"] or 0),
    }
