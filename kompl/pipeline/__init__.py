"""Pipeline stages: extract, resolve, conflicts, plan, draft, and compile (which runs them)."""

from __future__ import annotations

import dataclasses


class StageResult:
    """Mixin for a stage's report dataclass (needs `failed` and `seconds` fields).

    `ok` is true when nothing failed; `to_dict()` is every field, seconds rounded.
    """

    @property
    def ok(self) -> bool:
        return not self.failed  # type: ignore[attr-defined]

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)  # type: ignore[call-overload]
        out["seconds"] = round(out.get("seconds", 0.0), 3)
        return out
