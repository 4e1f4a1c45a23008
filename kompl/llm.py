"""The model gateway: the ONLY module that calls litellm.

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
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import ipaddress
import json
import os
import random
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Awaitable, Callable
from urllib.parse import urlparse

from kompl import db
from kompl.errors import KomplError

if TYPE_CHECKING:
    from kompl.workspace import Workspace

OFFLINE_MODEL = "kompl/offline"

# Providers that serve models from the user's own machine or network and need no key.
NO_KEY_PROVIDERS = frozenset(
    {"ollama", "ollama_chat", "hosted_vllm", "vllm", "lm_studio", "llamafile", "xinference", "oobabooga", "lemonade"}
)
# Providers whose missing_keys (from litellm.validate_environment) are all needed, not alternatives.
ALL_KEYS_PROVIDERS = frozenset({"azure", "vertex_ai", "bedrock", "sagemaker"})
# Output-token cap sent with every real call when the task gives none; the
# budget reservation is computed from it, so it must be an actual cap.
DEFAULT_MAX_OUTPUT_TOKENS = 8192
BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 60.0
RETRY_AFTER_MAX_S = 300.0
RETRIABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})
EMBED_BATCH = 128  # texts per embedding request
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


class Gateway:
    """Runs `Task`s against one model, validating, retrying and recording every attempt.

    `model`: any litellm model string, or "kompl/offline"; default `ws.settings.model`.
    `api_base`: URL of an OpenAI-compatible server (e.g. "http://localhost:8000/v1");
    with a local or private address no API key is required.

    `completion_kwargs` are merged into every `litellm.acompletion` (and
    `aembedding`) call, and `acompletion` / `aembedding` replace those functions
    (None: litellm's); tests use them to inject litellm mock responses.
    """

    def __init__(self, ws: Workspace, conn: sqlite3.Connection, *, model: str | None = None, api_base: str | None = None):
        self.ws = ws
        self.conn = conn
        self.settings = ws.settings
        self.model = (model or self.settings.model or OFFLINE_MODEL).strip()
        self.api_base = api_base
        self.completion_kwargs: dict[str, Any] = {}
        self.acompletion: Callable[..., Awaitable[Any]] | None = None
        self.aembedding: Callable[..., Awaitable[Any]] | None = None
        self._checked = False
        self._provider: str | None = None
        self._call_kwargs: dict[str, Any] = {}
        self._sem: asyncio.Semaphore | None = None
        self._sem_loop: asyncio.AbstractEventLoop | None = None

    @property
    def offline(self) -> bool:
        return self.model == OFFLINE_MODEL

    # -- public API ---------------------------------------------------------

    def check(self) -> None:
        """Fail now if the model cannot be used: unknown provider or missing API key.

        Runs once per gateway, before its first real call; call it early to fail fast.
        The offline model needs nothing and does not import litellm.
        """
        if self._checked or self.offline:
            return
        litellm = _litellm()
        try:
            _, provider, _, _ = litellm.get_llm_provider(model=self.model, api_base=self.api_base)
        except Exception:
            raise UnknownModelError(
                f"Unknown model {self.model!r}: litellm cannot tell which provider serves it",
                hint="write models as provider/name, e.g. openai/gpt-4o-mini, anthropic/claude-3-5-haiku-latest, "
                "ollama/llama3.1; or use the built-in kompl/offline",
            ) from None
        self._provider = provider
        local_server = _is_local_url(self.api_base or os.environ.get("OPENAI_API_BASE") or os.environ.get("OPENAI_BASE_URL"))
        if provider in NO_KEY_PROVIDERS:
            pass
        elif provider in ("openai", "custom_openai") and local_server:
            if not os.environ.get("OPENAI_API_KEY"):
                # The OpenAI client insists on a key; local servers ignore it.
                self._call_kwargs["api_key"] = "no-key-needed"
        else:
            found = litellm.validate_environment(model=self.model)
            missing = list(found.get("missing_keys") or [])
            if missing and not found.get("keys_in_environment"):
                names = (" and " if provider in ALL_KEYS_PROVIDERS else " or ").join(missing)
                raise MissingKeyError(
                    f"Model {self.model} needs the environment variable {names}, which is not set",
                    hint=f"export {missing[0]}=... ({provider} credentials), or choose another model with "
                    f"--model / KOMPL_MODEL / kompl.toml (the built-in offline model is {OFFLINE_MODEL})",
                )
        try:
            supported = litellm.get_supported_openai_params(model=self.model, custom_llm_provider=provider) or []
        except Exception:
            supported = []
        if "response_format" in supported:
            self._call_kwargs["response_format"] = {"type": "json_object"}
        if self.api_base:
            self._call_kwargs["api_base"] = self.api_base
        self._checked = True

    def run(self, task: Task) -> Any:
        """Run one task; returns an instance of `task.schema` or raises an LLMError."""
        return _run_sync(self.arun(task))

    def run_many(self, tasks: list[Task]) -> list[Any]:
        """Run tasks concurrently (at most `llm_concurrency` at once), results in input order.

        Each result is a `task.schema` instance or the LLMError that task ended with.
        An unusable model (missing key, unknown provider) raises at once instead.
        """
        return _run_sync(self.arun_many(tasks))

    async def arun_many(self, tasks: list[Task]) -> list[Any]:
        if tasks:
            self.check()
        results = await asyncio.gather(*(self.arun(t) for t in tasks), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, LLMError):
                raise result
        return list(results)

    async def arun(self, task: Task) -> Any:
        """Run one task from async code (see `run`)."""
        from kompl import prompts

        system, user, version = prompts.render(task.prompt, task.variables)
        system = f"{system}\n\n{prompts.json_instruction(task.schema.model_json_schema())}"
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        task_id = uuid.uuid4().hex
        if self.offline:
            return self._run_offline(task, task_id, messages, version)
        self.check()
        return await self._run_model(task, task_id, messages, version)

    def embed(self, texts: list[str], *, purpose: str = "embed", meta: dict[str, Any] | None = None) -> list[list[float]]:
        """Embed texts with this gateway's model (a litellm embedding model), vectors in input order.

        Batches of EMBED_BATCH texts run concurrently under the same limit, retries,
        budget and recording as completions (prompt name "(embedding)"). The offline
        model has no embeddings: use kompl.embed's local embedders instead.
        """
        return _run_sync(self.aembed(texts, purpose=purpose, meta=meta))

    async def aembed(self, texts: list[str], *, purpose: str = "embed", meta: dict[str, Any] | None = None) -> list[list[float]]:
        if self.offline:
            raise UnknownModelError(
                f"{OFFLINE_MODEL} has no embeddings", hint='use embedder = "hashing" (offline) in kompl.toml'
            )
        if not texts:
            return []
        self.check()
        batches = [list(texts[i : i + EMBED_BATCH]) for i in range(0, len(texts), EMBED_BATCH)]
        parts = await asyncio.gather(*(self._embed_batch(batch, purpose, meta or {}) for batch in batches))
        return [vector for part in parts for vector in part]

    async def _embed_batch(self, texts: list[str], purpose: str, meta: dict[str, Any]) -> list[list[float]]:
        litellm = _litellm()
        task = Task(purpose=purpose, prompt="(embedding)", variables={}, schema=object, meta=meta | {"inputs": len(texts)})
        task_id = uuid.uuid4().hex
        messages = [{"role": "user", "content": t} for t in texts]
        limit = max(0, int(self.settings.llm_max_retries))
        attempt_no = 0
        while True:
            attempt_no += 1
            estimate = 0.0
            try:
                async with self._semaphore():
                    estimate = self._reserve(litellm, task, task_id, "-", messages, attempt_no, 0)
                    started = time.perf_counter()
                    try:
                        kwargs = {"model": self.model, "input": texts, "timeout": float(self.settings.llm_timeout_s),
                                  "num_retries": 0, "max_retries": 0}
                        kwargs.update({k: v for k, v in self._call_kwargs.items() if k != "response_format"})
                        kwargs.update(self.completion_kwargs)
                        response, error = await (self.aembedding or litellm.aembedding)(**kwargs), None
                    except Exception as exc:
                        response, error = None, exc
                    latency = _ms(started)
                if error is not None:
                    attempt = _Attempt("error", latency_ms=latency, error=_describe(error), meta=_error_meta(error))
                    self._record(task, task_id, "-", messages, attempt_no, attempt, estimate)
                else:
                    vectors = _vectors(response, len(texts))
                    usage = getattr(response, "usage", None)
                    try:
                        cost = float(litellm.completion_cost(completion_response=response, call_type="aembedding") or 0.0)
                    except Exception:
                        cost = 0.0
                    attempt = _Attempt(
                        "ok" if vectors is not None else "invalid",
                        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                        cost_usd=cost,
                        latency_ms=latency,
                        error=None if vectors is not None else f"expected {len(texts)} vectors of numbers",
                    )
                    self._record(task, task_id, "-", messages, attempt_no, attempt, estimate)
            finally:
                _release(self.ws, estimate)
            if error is None:
                if vectors is None:
                    raise InvalidOutputError(f"{self.model} returned malformed embeddings: {attempt.error}")
                return vectors
            if _retriable(error) and attempt_no <= limit:
                await _backoff_sleep(_retry_delay(error, attempt_no))
                continue
            raise _call_error(self.model, task, error, attempt_no - 1) from error

    # -- the offline model --------------------------------------------------

    def _run_offline(self, task: Task, task_id: str, messages: list[dict], version: str) -> Any:
        from kompl import offline
        from kompl.text import approx_tokens

        prompt_tokens = approx_tokens("".join(m["content"] for m in messages))
        started = time.perf_counter()
        try:
            data = offline.respond(task.purpose, task.variables, task.schema)
        except Exception as exc:
            attempt = _Attempt("error", prompt_tokens=prompt_tokens, latency_ms=_ms(started), error=_describe(exc))
            self._record(task, task_id, version, messages, 1, attempt)
            if isinstance(exc, LLMError):
                raise
            if isinstance(exc, KomplError):  # the offline model's own explanation, kept as it is
                raise ModelCallError(exc.message, hint=exc.hint) from exc
            raise ModelCallError(
                f"The offline model failed on a {task.purpose} task: {_describe(exc)}",
                hint="this is a bug in kompl's offline model; run with KOMPL_DEBUG=1 for the traceback",
            ) from exc
        if hasattr(data, "model_dump"):
            data = data.model_dump(mode="json")
        text = json.dumps(data, ensure_ascii=False, default=str)
        value, outcome, problem = _parse_reply(text, task.schema)
        attempt = _Attempt(
            outcome,
            prompt_tokens=prompt_tokens,
            completion_tokens=approx_tokens(text),
            latency_ms=_ms(started),
            error=problem,
            response=text,
        )
        call_id = self._record(task, task_id, version, messages, 1, attempt)
        if value is None:
            # Deterministic: asking again would give the same reply.
            raise InvalidOutputError(
                f"The offline model's reply to a {task.purpose} task does not match its schema: {problem}",
                hint="this is a bug in kompl's offline model",
            )
        task.call_id = call_id
        return value

    # -- real models ----------------------------------------------------------

    async def _run_model(self, task: Task, task_id: str, messages: list[dict], version: str) -> Any:
        litellm = _litellm()
        limit = max(0, int(self.settings.llm_max_retries))
        max_out = self._max_output_tokens(litellm, task)
        transport_retries = invalid_retries = 0
        attempt_no = 0
        messages = list(messages)
        while True:
            attempt_no += 1
            estimate = 0.0
            try:
                async with self._semaphore():
                    # Reserved once a slot is free, so queued calls do not hold budget.
                    estimate = self._reserve(litellm, task, task_id, version, messages, attempt_no, max_out)
                    started = time.perf_counter()
                    try:
                        response = await self._call(litellm, messages, max_out)
                        error = None
                    except Exception as exc:  # every provider failure is recorded, then judged
                        response, error = None, exc
                    latency = _ms(started)
                if error is not None:
                    attempt = _Attempt("error", latency_ms=latency, error=_describe(error), meta=_error_meta(error))
                    self._record(task, task_id, version, messages, attempt_no, attempt, estimate)
                else:
                    text, attempt = self._read_response(litellm, response, latency)
                    value, outcome, problem = _parse_reply(text, task.schema)
                    attempt.outcome, attempt.error = outcome, problem
                    call_id = self._record(task, task_id, version, messages, attempt_no, attempt, estimate)
            finally:
                _release(self.ws, estimate)
            if error is not None:
                if _retriable(error) and transport_retries < limit:
                    transport_retries += 1
                    await _backoff_sleep(_retry_delay(error, transport_retries))
                    continue
                raise _call_error(self.model, task, error, transport_retries) from error
            if value is not None:
                task.call_id = call_id
                return value
            if invalid_retries < limit:
                invalid_retries += 1
                from kompl import prompts

                messages += [
                    {"role": "assistant", "content": text or ""},
                    {"role": "user", "content": prompts.retry_instruction(_clip(problem or "", 2000))},
                ]
                continue
            raise InvalidOutputError(
                f"{self.model} gave no valid reply to a {task.purpose} task after {attempt_no} attempt(s): {problem}",
                hint="try again, raise llm_max_retries in kompl.toml, or use a stronger model with --model",
            )

    async def _call(self, litellm: Any, messages: list[dict], max_out: int) -> Any:
        timeout = float(self.settings.llm_timeout_s)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "timeout": timeout,
            "max_tokens": max_out,
            "num_retries": 0,  # retries are ours, so that each one is recorded
            "max_retries": 0,
        }
        kwargs.update(self._call_kwargs)
        kwargs.update(self.completion_kwargs)
        call = self.acompletion or litellm.acompletion
        # litellm enforces `timeout` itself; this guards against a hang outside the HTTP request.
        return await asyncio.wait_for(call(**kwargs), timeout=timeout + 30)

    def _read_response(self, litellm: Any, response: Any, latency: int) -> tuple[str, _Attempt]:
        choice = response.choices[0] if getattr(response, "choices", None) else None
        message = getattr(choice, "message", None)
        text = getattr(message, "content", None) or ""
        usage = getattr(response, "usage", None)
        try:
            cost = float(litellm.completion_cost(completion_response=response) or 0.0)
        except Exception:  # no price known for this model
            cost = 0.0
        meta: dict[str, Any] = {}
        if getattr(choice, "finish_reason", None):
            meta["finish_reason"] = choice.finish_reason
        refusal = getattr(message, "refusal", None)
        if refusal:
            meta["refusal"] = str(refusal)
        return text, _Attempt(
            "ok",
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost_usd=cost,
            latency_ms=latency,
            response=text,
            meta=meta,
        )

    def _max_output_tokens(self, litellm: Any, task: Task) -> int:
        if task.max_output_tokens:
            return int(task.max_output_tokens)
        try:
            known = litellm.get_model_info(self.model).get("max_output_tokens")
        except Exception:
            known = None
        return min(int(known), DEFAULT_MAX_OUTPUT_TOKENS) if known else DEFAULT_MAX_OUTPUT_TOKENS

    # -- budget -----------------------------------------------------------------

    def _reserve(
        self, litellm: Any, task: Task, task_id: str, version: str, messages: list[dict], attempt_no: int, max_out: int
    ) -> float:
        """Reserve the worst-case cost of the next attempt, or refuse it. Returns the amount reserved."""
        cap = float(self.settings.daily_budget_usd or 0)
        if cap <= 0:
            return 0.0
        estimate = estimate_cost(litellm, self.model, messages, max_out)
        key = str(self.ws.db_path)
        with _reserved_lock:
            spent = spent_today(self.conn)
            in_flight = _reserved.get(key, 0.0)
            if spent + in_flight + estimate > cap:
                attempt = _Attempt(
                    "refused",
                    error="daily budget",
                    meta={"estimate_usd": estimate, "spent_today_usd": spent, "reserved_usd": in_flight, "cap_usd": cap},
                )
                self._record(task, task_id, version, messages, attempt_no, attempt)
                raise BudgetExceededError(
                    f"Not sending a {task.purpose} call to {self.model}: it could cost up to ${estimate:.4f}, and "
                    f"${spent:.4f} spent today (UTC) plus ${in_flight:.4f} in flight would pass the daily budget "
                    f"of ${cap:.2f}. The work stays pending.",
                    hint="raise daily_budget_usd in kompl.toml or KOMPL_DAILY_BUDGET_USD (0 = no cap), "
                    "or run again tomorrow; see `kompl stats`",
                )
            _reserved[key] = in_flight + estimate
        return estimate

    # -- recording --------------------------------------------------------------

    def _record(
        self,
        task: Task,
        task_id: str,
        version: str,
        messages: list[dict],
        attempt_no: int,
        attempt: _Attempt,
        estimate: float = 0.0,
    ) -> int:
        meta = dict(task.meta) | attempt.meta
        if estimate:
            meta["estimate_usd"] = estimate
        prompt_hash = hashlib.sha256(json.dumps(messages, ensure_ascii=False).encode("utf-8", "surrogatepass")).hexdigest()
        with db.transaction(self.conn):
            cur = self.conn.execute(
                "INSERT INTO llm_calls (at, task_id, purpose, model, prompt_name, prompt_version, prompt_sha256,"
                " prompt_tokens, completion_tokens, cost_usd, latency_ms, outcome, error, attempt, response, meta)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    db.utcnow(),
                    task_id,
                    task.purpose,
                    self.model,
                    task.prompt,
                    str(version),
                    prompt_hash,
                    attempt.prompt_tokens,
                    attempt.completion_tokens,
                    attempt.cost_usd,
                    attempt.latency_ms,
                    attempt.outcome,
                    attempt.error,
                    attempt_no,
                    attempt.response,
                    json.dumps(meta, ensure_ascii=False, sort_keys=True, default=str),
                ),
            )
        return int(cur.lastrowid)

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._sem is None or self._sem_loop is not loop:
            self._sem = asyncio.Semaphore(max(1, int(self.settings.llm_concurrency)))
            self._sem_loop = loop
        return self._sem


# -- services for `kompl stats` and budgets -----------------------------------------


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


# -- helpers ---------------------------------------------------------------------------

_litellm_module: Any = None
_litellm_lock = threading.Lock()
_reserved: dict[str, float] = {}
_reserved_lock = threading.Lock()


def _litellm() -> Any:
    """Import and configure litellm once: local price map, no telemetry, no callbacks, quiet."""
    global _litellm_module
    with _litellm_lock:
        if _litellm_module is None:
            # Without these (the literal string "true"), importing litellm fetches its
            # price map from the internet. An explicit "false" from the user is respected.
            for var in ("LITELLM_LOCAL_MODEL_COST_MAP", "LITELLM_OFFLINE_MODE"):
                if os.environ.get(var, "").strip().lower() not in ("true", "false"):
                    os.environ[var] = "true"
            import litellm

            litellm.telemetry = False
            litellm.success_callback = []
            litellm.failure_callback = []
            litellm.callbacks = []
            litellm.suppress_debug_info = True
            litellm.set_verbose = False
            litellm.drop_params = True  # an unsupported option is dropped, not an error
            _litellm_module = litellm
    return _litellm_module


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


def _run_sync(coro: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()
    raise RuntimeError("Gateway.run()/run_many() called inside a running event loop; use `await gateway.arun()`")


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


def _retriable(exc: BaseException) -> bool:
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True
    litellm = _litellm_module
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


async def _backoff_sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


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


def _ms(started: float) -> int:
    return int(round((time.perf_counter() - started) * 1000))


def _is_local_url(url: str | None) -> bool:
    """True for URLs on this machine or a private network (a self-hosted server)."""
    if not url:
        return False
    host = (urlparse(url if "://" in url else f"http://{url}").hostname or "").lower()
    if host in ("localhost", "host.docker.internal") or host.endswith(".local") or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_link_local


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
