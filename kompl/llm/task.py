"""What a model call is for (`Task`), what one attempt produced, and the `LLMError` hierarchy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kompl.errors import KomplError

OFFLINE_MODEL = "kompl/offline"
OUTCOMES = ("ok", "repaired", "invalid", "error", "refused")


class LLMError(KomplError):
    """A model call failed for good (retries exhausted, invalid output, budget, missing key)."""


class MissingKeyError(LLMError):
    """A real model was chosen but its provider's API key is not in the environment."""


class UnknownModelError(LLMError):
    """litellm cannot tell which provider serves the model string."""


class BudgetExceededError(LLMError):
    """The call would pass the daily spending cap; it was not sent."""


class InvalidOutputError(LLMError):
    """The model's replies never validated against the task's schema."""


class ModelCallError(LLMError):
    """The provider failed (HTTP error, timeout, connection) and retries did not help."""


@dataclass
class Task:
    purpose: str  # extract | disambiguate | triage | draft | answer | judge_contradiction | summarize
    prompt: str  # template name: kompl/prompts/<prompt>.md
    variables: dict[str, Any]  # template values; also handed as-is to the offline model
    schema: type  # pydantic model of the expected JSON reply
    max_output_tokens: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. {"source_id": ...} recorded with the call
    # Filled in by the gateway on success: the llm_calls row whose reply was used.
    call_id: int | None = field(default=None, compare=False)


@dataclass
class _Attempt:
    """What one attempt produced, before it is written to llm_calls."""

    outcome: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: int = 0
    error: str | None = None
    response: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
