"""Reading replies: JSON (repaired when broken) validated against the task's schema, and embedding vectors."""

from __future__ import annotations

import json
from typing import Any


def _parse_reply(text: str | None, schema: type) -> tuple[Any, str, str | None]:
    """(value, outcome, problem): outcome 'ok', 'repaired' (json-repair was needed) or 'invalid'."""
    from pydantic import ValidationError

    if not text or not text.strip():
        return None, "invalid", "the reply was empty"
    repaired = False
    try:
        data = json.loads(text)
    except ValueError:
        import json_repair

        repaired = True
        try:
            data = json_repair.loads(text)
        except Exception:
            data = None
        if not isinstance(data, (dict, list)) or (not data and "{" not in text and "[" not in text):
            return None, "invalid", "the reply is not JSON"
    try:
        value = schema.model_validate(data)
    except ValidationError as exc:
        return None, "invalid", _validation_summary(exc)
    return value, ("repaired" if repaired else "ok"), None

def _vectors(response: Any, expected: int) -> list[list[float]] | None:
    """The vectors of an embedding response in input order, or None when malformed."""
    items = list(getattr(response, "data", None) or [])
    if len(items) != expected:
        return None
    out: list[tuple[int, list[float]]] = []
    for position, item in enumerate(items):
        get = item.get if isinstance(item, dict) else lambda k, d=None, it=item: getattr(it, k, d)
        vector = get("embedding")
        index = get("index", position)
        if not isinstance(vector, list) or not vector or not all(isinstance(x, (int, float)) for x in vector):
            return None
        out.append((int(index if index is not None else position), [float(x) for x in vector]))
    out.sort(key=lambda pair: pair[0])
    return [vector for _, vector in out]

def _validation_summary(exc: Any) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
        parts.append(f"{loc}: {err.get('msg')}")
    return f"{len(parts)} validation error(s): " + "; ".join(parts)
