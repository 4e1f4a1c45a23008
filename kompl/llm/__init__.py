"""The model gateway: the ONLY package that calls litellm.

Every model call kompl makes goes through a `Gateway`:

    task = Task(purpose="extract", prompt="extract", variables={...}, schema=ExtractionResult)
    gw = Gateway(ws, conn)                 # model: Gateway(model=...) / KOMPL_MODEL / kompl.toml
    result = gw.run(task)                  # -> instance of task.schema, or raises LLMError
    results = gw.run_many([task, ...])     # concurrent; list of schema instances or LLMError, in order
    result = await gw.arun(task)           # the same from async code

A call renders the prompt file `kompl/prompts/<task.prompt>.md`, appends the
JSON-schema instruction of `task.schema`, sends it, parses the reply as JSON
(repairing it with json-repair when broken), validates it with pydantic and,
when invalid, asks again with the validation error appended, up to
`llm_max_retries` times. Rate limits, 5xx, timeouts and connection errors are
retried with exponential backoff, honouring `Retry-After`. At most
`llm_concurrency` calls are in flight at once.

Every attempt is a row in `llm_calls` (purpose, model, prompt name and
version, tokens, cost, latency, outcome, error), the offline model's
included; `call_stats` summarises them for `kompl stats`. With a daily budget
set, each real call first reserves its worst-case cost (prompt tokens plus
the output-token cap, at litellm's prices); a call that would pass the cap is
refused (`BudgetExceededError`, an outcome 'refused' row) before anything is sent.

`kompl/offline` (the default model) is served in-process by
`kompl.offline.respond(purpose, variables, schema)` and never imports litellm,
which costs seconds to import. Real models are any litellm model string; their
API key is checked before the first call and a missing key is an error naming
the variable, never a fallback to the offline model.

Do not hold a database transaction open across a model call: the call rows are
written on the same connection and would share the caller's fate.

Layout: `gateway` (the Gateway), `task` (Task and the LLMError hierarchy),
`provider` (importing litellm, key rules), `retry` (what is retried and how
long to wait), `replies` (parsing and validating replies) and `budget`
(reservations, spend, `call_stats`). Everything is importable from
`kompl.llm`, as it was before the package was split.
"""

from __future__ import annotations

import asyncio

# Patch points: the gateway reads these two through this package at call time
# (`kompl.llm.EMBED_BATCH`, `kompl.llm._backoff_sleep`), so that replacing them
# here (as the tests do) changes what every Gateway does.
EMBED_BATCH = 128  # texts per embedding request


async def _backoff_sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


# Everything the single module defined stays importable from here, the private
# helpers included (tests and kompl.read.ask use some of them).
from kompl.llm.budget import (  # noqa: E402,F401
    _release,
    _reserved,
    _reserved_lock,
    _stat_row,
    call_stats,
    estimate_cost,
    spent_today,
)
from kompl.llm.gateway import DEFAULT_MAX_OUTPUT_TOKENS, Gateway, _ms, _run_sync  # noqa: E402,F401
from kompl.llm.provider import (  # noqa: E402,F401
    ALL_KEYS_PROVIDERS,
    NO_KEY_PROVIDERS,
    _is_local_url,
    _litellm,
)
from kompl.llm.replies import _parse_reply, _validation_summary, _vectors  # noqa: E402,F401
from kompl.llm.retry import (  # noqa: E402,F401
    BACKOFF_BASE_S,
    BACKOFF_MAX_S,
    RETRIABLE_STATUS,
    RETRY_AFTER_MAX_S,
    _call_error,
    _clip,
    _describe,
    _error_meta,
    _retriable,
    _retry_after,
    _retry_delay,
)
from kompl.llm.task import (  # noqa: E402,F401
    OFFLINE_MODEL,
    OUTCOMES,
    BudgetExceededError,
    InvalidOutputError,
    LLMError,
    MissingKeyError,
    ModelCallError,
    Task,
    UnknownModelError,
    _Attempt,
)

__all__ = [
    "BudgetExceededError",
    "Gateway",
    "InvalidOutputError",
    "LLMError",
    "MissingKeyError",
    "ModelCallError",
    "OFFLINE_MODEL",
    "Task",
    "UnknownModelError",
    "call_stats",
    "estimate_cost",
    "spent_today",
]
