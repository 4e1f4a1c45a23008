"""The built-in offline model `kompl/offline`: kompl's prompts answered by local NLP.

    respond(purpose, variables, schema) -> dict   # JSON-able, validates against `schema`

The gateway calls it in-process with the same `variables` it renders into the
prompt template, and records the call like any other model's. It is
deterministic (same input, same output), uses only local NLP (spaCy through
`kompl.nlp`, TF-IDF, sentence ranking, pattern rules) and says what it is:
wherever the schema has a `model` or `by` field, the answer names
"kompl/offline" and the spaCy pipeline behind it.

Each purpose is a handler in `HANDLERS` (purpose -> function(variables, schema)
-> dict), registered with `@handler("name")` in one module of this package per
stage (extract.py, resolve.py, ...); shared text helpers are in common.py. An
unknown purpose raises `OfflineModelError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from kompl import nlp
from kompl.errors import KomplError


MODEL_NAME = "kompl/offline"

Handler = Callable[[dict, type], dict]
HANDLERS: dict[str, Handler] = {}
PLANNED = ("draft", "answer", "judge_contradiction", "summarize")


class OfflineModelError(KomplError):
    """The offline model was asked something it cannot answer."""


def handler(purpose: str) -> Callable[[Handler], Handler]:
    """Register the offline answer for one prompt purpose."""

    def register(fn: Handler) -> Handler:
        HANDLERS[purpose] = fn
        return fn

    return register


def model_label() -> str:
    """How the offline model names itself in its outputs, e.g. 'kompl/offline (en_core_web_sm 3.8.0)'."""
    return f"{MODEL_NAME} ({nlp.pipeline_info().label})"


def respond(purpose: str, variables: dict[str, Any], schema: type[BaseModel]) -> dict:
    """Answer one prompt locally. The result validates against `schema` (aliases as keys)."""
    fn = HANDLERS.get(purpose)
    if fn is None:
        planned = f" ({purpose!r} is planned but not written yet)" if purpose in PLANNED else ""
        raise OfflineModelError(
            f"The offline model cannot answer {purpose!r} prompts{planned}; it knows: {', '.join(sorted(HANDLERS))}",
            hint="use a real model with --model (e.g. openai/gpt-4o-mini), or add a handler in kompl/offline/",
        )
    out = fn(variables or {}, schema)
    fields = getattr(schema, "model_fields", {})
    for name in ("model", "by"):
        if name in fields and not out.get(name):
            out[name] = model_label()
    try:
        return schema.model_validate(out).model_dump(by_alias=True, mode="json")
    except ValidationError as exc:
        raise OfflineModelError(
            f"The offline model's {purpose!r} answer does not fit {schema.__name__}: {exc.errors()[:3]}",
            hint="the schema and the offline handler disagree; this is a kompl bug",
        ) from None


# --- reference contracts (stages define their own; these document the shapes) --------------

# The disambiguation contract belongs to the resolve stage; re-exported here for reference.
from kompl.pipeline.resolve import DisambiguationResult  # noqa: E402
from kompl.pipeline.resolve import PairDecision as Decision  # noqa: E402


class TriageResult(BaseModel):
    relevant: bool
    confidence: float = Field(ge=0, le=1)
    reason: str = ""
    model: str = ""


__all__ = [
    "HANDLERS", "MODEL_NAME", "Decision", "DisambiguationResult", "OfflineModelError", "TriageResult",
    "handler", "model_label", "respond", "same_entity", "summarize_sentences",
]


# Register the handlers (each module uses @handler from above).
from kompl.offline import extract as _extract  # noqa: E402,F401
from kompl.offline import resolve as _resolve  # noqa: E402,F401
from kompl.offline import draft as _draft  # noqa: E402,F401
from kompl.offline import judge as _judge  # noqa: E402,F401
from kompl.offline import answer as _answer  # noqa: E402,F401
