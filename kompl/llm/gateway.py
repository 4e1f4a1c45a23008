"""The `Gateway`: runs `Task`s against one model (offline or litellm), validating, retrying and recording each attempt."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import kompl.llm as _patchable  # `_backoff_sleep` and `EMBED_BATCH` are read from the package (see its __init__)
from kompl import db
from kompl.errors import KomplError
from kompl.llm.budget import (
    _release,
    _reserved,
    _reserved_lock,
    estimate_cost,
    spent_today,
)
from kompl.llm.provider import (
    ALL_KEYS_PROVIDERS,
    NO_KEY_PROVIDERS,
    _is_local_url,
    _litellm,
)
from kompl.llm.replies import _parse_reply, _vectors
from kompl.llm.retry import (
    _call_error,
    _clip,
    _describe,
    _error_meta,
    _retriable,
    _retry_delay,
)
from kompl.llm.task import (
    OFFLINE_MODEL,
    BudgetExceededError,
    InvalidOutputError,
    LLMError,
    MissingKeyError,
    ModelCallError,
    Task,
    UnknownModelError,
    _Attempt,
)

if TYPE_CHECKING:
    from kompl.workspace import Workspace

# Output-token cap sent with every real call when the task gives none; the
# budget reservation is computed from it, so it must be an actual cap.
DEFAULT_MAX_OUTPUT_TOKENS = 8192


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
        batches = [list(texts[i : i + _patchable.EMBED_BATCH]) for i in range(0, len(texts), _patchable.EMBED_BATCH)]
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
                await _patchable._backoff_sleep(_retry_delay(error, attempt_no))
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
                    if outcome == "repaired" and attempt.meta.get("finish_reason") == "length":
                        # JSON "repaired" after the output limit cut it off is a partial reply, not a page.
                        value, outcome, problem = None, "invalid", "the reply was cut off at the output token limit"
                    attempt.outcome, attempt.error = outcome, problem
                    call_id = self._record(task, task_id, version, messages, attempt_no, attempt, estimate)
            finally:
                _release(self.ws, estimate)
            if error is not None:
                if _retriable(error) and transport_retries < limit:
                    transport_retries += 1
                    await _patchable._backoff_sleep(_retry_delay(error, transport_retries))
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

def _run_sync(coro: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()
    raise RuntimeError("Gateway.run()/run_many() called inside a running event loop; use `await gateway.arun()`")

def _ms(started: float) -> int:
    return int(round((time.perf_counter() - started) * 1000))
