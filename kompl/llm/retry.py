"""Transport failures: which errors are retried, how long to wait (Retry-After, backoff) and how they are reported."""

from __future__ import annotations

import asyncio
import email.utils
import random
from datetime import datetime, timezone
from typing import Any

from kompl.llm import provider
from kompl.llm.task import ModelCallError, Task

BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 60.0
RETRY_AFTER_MAX_S = 300.0
RETRIABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})


def _retriable(exc: BaseException) -> bool:
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True
    litellm = provider._litellm_module  # only set once a real model has been used
    if litellm is not None:
        kinds = tuple(
            getattr(litellm, name)
            for name in ("Timeout", "APIConnectionError", "RateLimitError", "InternalServerError", "ServiceUnavailableError", "BadGatewayError")
            if isinstance(getattr(litellm, name, None), type)
        )
        if isinstance(exc, kinds):
            return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and status in RETRIABLE_STATUS

def _retry_after(exc: BaseException) -> float | None:
    """Seconds the provider asked us to wait (Retry-After / retry-after-ms), if it said."""
    sources = [getattr(exc, "headers", None), getattr(exc, "litellm_response_headers", None)]
    response = getattr(exc, "response", None)
    sources.append(getattr(response, "headers", None))
    for headers in sources:
        if not headers:
            continue
        try:
            lowered = {str(k).lower(): str(v) for k, v in dict(headers).items()}
        except Exception:
            continue
        if "retry-after-ms" in lowered:
            try:
                return max(0.0, float(lowered["retry-after-ms"]) / 1000)
            except ValueError:
                pass
        value = lowered.get("retry-after")
        if value is None:
            continue
        try:
            return max(0.0, float(value))
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                continue
            if when.tzinfo is None:
                when = when.replace(tzinfo=timezone.utc)
            return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
    return None

def _retry_delay(exc: BaseException, retry_no: int) -> float:
    asked = _retry_after(exc)
    if asked is not None:
        return min(asked, RETRY_AFTER_MAX_S)
    delay = min(BACKOFF_BASE_S * 2 ** (retry_no - 1), BACKOFF_MAX_S)
    return delay + random.uniform(0, delay / 4)  # jitter, so parallel calls do not retry in lockstep

def _error_meta(exc: BaseException) -> dict[str, Any]:
    meta: dict[str, Any] = {"error_type": type(exc).__name__}
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        meta["status_code"] = status
    asked = _retry_after(exc)
    if asked is not None:
        meta["retry_after_s"] = asked
    return meta

def _call_error(model: str, task: Task, exc: BaseException, retries: int) -> ModelCallError:
    status = getattr(exc, "status_code", None)
    what = f"The {task.purpose} call to {model} failed"
    if retries:
        what += f" after {retries} retr{'y' if retries == 1 else 'ies'}"
    if status in (401, 403):
        hint = "check the API key for this provider (is it valid, with access to this model?)"
    elif status == 404:
        hint = "check the model name (litellm's provider/model spelling)"
    elif _retriable(exc):
        hint = "the provider is busy or unreachable; run the command again later (done work is kept)"
    else:
        hint = "run with KOMPL_DEBUG=1 for details"
    return ModelCallError(f"{what}: {_describe(exc)}", hint=hint)

def _describe(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return _clip(f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text, 1000)

def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 20] + f"... [{len(text) - limit + 20} more chars]"
