"""A scripted "real" model for whole CLI commands: litellm mock responses behind a real-model gateway.

`MockModel(monkeypatch, fault=...)` makes every `kompl` command run in this
process use `openai/gpt-4o-mini` with a fake key, and answers each model call
through `litellm.acompletion(..., mock_response=...)`: by default with the
offline model's correct JSON for that task, or with what `fault(task, attempt,
kwargs)` returns instead (a string, an exception instance, or `LENGTH_CUT` + text
for a reply cut off at the output limit). Every call's messages are kept, so
tests can read the rendered prompts; backoff sleeps are recorded, not slept.
"""

from __future__ import annotations

import contextvars
import json
from collections import defaultdict
from typing import Any

REAL = "openai/gpt-4o-mini"
LENGTH_CUT = "\x00length\x00"  # prefix: reply with this text and finish_reason "length"
_task: contextvars.ContextVar = contextvars.ContextVar("kompl_test_task", default=None)


class MockModel:
    def __init__(self, monkeypatch, fault=None):
        import litellm

        from kompl import llm, offline

        self.fault = fault
        self.calls: list[dict] = []
        self.sleeps: list[float] = []
        self.attempts: dict[str, int] = defaultdict(int)  # task id -> attempts so far
        real_acompletion = litellm.acompletion
        real_arun = llm.Gateway.arun

        async def arun(gateway, task):
            token = _task.set(task)
            try:
                return await real_arun(gateway, task)
            finally:
                _task.reset(token)

        async def acompletion(**kwargs):
            task = _task.get()
            key = str(id(task))
            self.attempts[key] += 1
            attempt = self.attempts[key]
            self.calls.append({"purpose": task.purpose, "meta": dict(task.meta or {}), "attempt": attempt,
                               "messages": kwargs["messages"]})
            reply = self.fault(task, attempt, kwargs) if self.fault else None
            if reply is None:
                reply = json.dumps(offline.respond(task.purpose, task.variables, task.schema))
            cut = isinstance(reply, str) and reply.startswith(LENGTH_CUT)
            if cut:
                reply = reply[len(LENGTH_CUT):]
            response = await real_acompletion(**kwargs, mock_response=reply)
            if cut:
                response.choices[0].finish_reason = "length"
            return response

        async def no_sleep(seconds: float) -> None:
            self.sleeps.append(seconds)

        monkeypatch.setattr(litellm, "acompletion", acompletion)
        monkeypatch.setattr(llm.Gateway, "arun", arun)
        monkeypatch.setattr(llm, "_backoff_sleep", no_sleep)
        monkeypatch.setenv("KOMPL_MODEL", REAL)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")

    def purposes(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for call in self.calls:
            out[call["purpose"]] += 1
        return dict(out)


def error(kind: str, headers: dict | None = None) -> Any:
    """A litellm exception as a provider would raise it."""
    import httpx
    import litellm

    request = httpx.Request("POST", "https://api.openai.example/v1/chat/completions")
    if kind == "rate":
        response = httpx.Response(429, headers=headers or {}, request=request)
        return litellm.RateLimitError("rate limited", llm_provider="openai", model="gpt-4o-mini", response=response)
    if kind == "server":
        return litellm.InternalServerError("upstream 500", llm_provider="openai", model="gpt-4o-mini")
    if kind == "timeout":
        return litellm.Timeout("request timed out", model="gpt-4o-mini", llm_provider="openai")
    raise ValueError(kind)


__all__ = ["LENGTH_CUT", "REAL", "MockModel", "error"]
