"""The model gateway: the ONLY module that calls litellm.  (Skeleton: contract only.)

Contract the other stages build on:

    task = Task(purpose="extract", prompt="extract", variables={...}, schema=ExtractionResult)
    gw = Gateway(ws, conn)                 # model from --model / KOMPL_MODEL / kompl.toml
    result = gw.run(task)                  # -> instance of task.schema, or raises LLMError
    results = gw.run_many([task, ...])     # concurrent; list of schema instances or LLMError, in order

`kompl/offline` is served in-process by `kompl.offline.respond(purpose, variables, schema)`,
recorded in llm_calls like any other model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kompl.errors import KomplError


class LLMError(KomplError):
    """A model call failed for good (retries exhausted, invalid output, budget, missing key)."""


@dataclass
class Task:
    purpose: str  # extract | disambiguate | triage | draft | answer | judge_contradiction | summarize
    prompt: str  # template name: kompl/prompts/<prompt>.md
    variables: dict[str, Any]  # template values; also handed as-is to the offline model
    schema: type  # pydantic model of the expected JSON reply
    max_output_tokens: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. {"source_id": ...} recorded with the call
