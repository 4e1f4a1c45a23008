"""The model gateway: validation, repair, retries, concurrency, budget and call records.

Real-model paths use litellm's own mock responses (`mock_response=`, which also
takes exception instances), injected through `Gateway.acompletion`; nothing
touches the network.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import BaseModel

from kompl import db, llm, offline
from kompl.llm import (
    BudgetExceededError,
    Gateway,
    InvalidOutputError,
    LLMError,
    MissingKeyError,
    ModelCallError,
    Task,
    UnknownModelError,
)

REAL = "openai/gpt-4o-mini"
ROOT = Path(__file__).resolve().parents[1]


class Echo(BaseModel):
    text: str


def echo_task(text: str = "hello", **kwargs) -> Task:
    return Task(purpose=kwargs.pop("purpose", "echo"), prompt="echo", variables={"text": text, "language": "en"}, schema=Echo, **kwargs)


class Script:
    """Stands in for litellm.acompletion: each call gets the next mock reply (the last one repeats).

    A reply is a string, an exception instance, or a callable of the call's kwargs returning one.
    Counts calls in flight, so concurrency is measured rather than timed.
    """

    def __init__(self, gw: Gateway, *replies, delay: float | None = None):
        self.replies = list(replies)
        self.delay = delay
        self.calls: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        gw.acompletion = self

    async def __call__(self, **kwargs):
        import litellm

        self.calls.append(kwargs)
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if callable(reply) and not isinstance(reply, BaseException):
            reply = reply(kwargs)
        extra = {"mock_delay": self.delay} if self.delay else {}
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await litellm.acompletion(**kwargs, mock_response=reply, **extra)
        finally:
            self.in_flight -= 1


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


@pytest.fixture
def sleeps(monkeypatch):
    """Backoff delays asked for, instead of sleeping them."""
    delays: list[float] = []

    async def record(seconds: float) -> None:
        delays.append(seconds)

    monkeypatch.setattr(llm, "_backoff_sleep", record)
    return delays


@pytest.fixture
def fake_offline(monkeypatch):
    monkeypatch.setattr(offline, "respond", lambda purpose, variables, schema: {"text": variables["text"].upper()}, raising=False)


def rows(conn, **where):
    sql = "SELECT * FROM llm_calls"
    if where:
        sql += " WHERE " + " AND ".join(f"{k} = ?" for k in where)
    return [dict(r) for r in conn.execute(sql + " ORDER BY id", list(where.values()))]


def litellm_error(kind: str, message: str = "boom", headers: dict | None = None):
    import httpx
    import litellm

    if kind == "rate":
        response = httpx.Response(429, headers=headers or {}, request=httpx.Request("POST", "https://api.example"))
        return litellm.RateLimitError(message, llm_provider="openai", model="gpt-4o-mini", response=response)
    if kind == "server":
        return litellm.InternalServerError(message, llm_provider="openai", model="gpt-4o-mini")
    if kind == "unavailable":
        return litellm.ServiceUnavailableError(message, llm_provider="openai", model="gpt-4o-mini")
    if kind == "timeout":
        return litellm.Timeout(message, model="gpt-4o-mini", llm_provider="openai")
    if kind == "connection":
        return litellm.APIConnectionError(message, llm_provider="openai", model="gpt-4o-mini")
    if kind == "auth":
        return litellm.AuthenticationError(message, llm_provider="openai", model="gpt-4o-mini")
    raise ValueError(kind)


# -- model choice -------------------------------------------------------------------


def test_model_comes_from_argument_then_settings(ws, conn, monkeypatch):
    assert Gateway(ws, conn).model == "kompl/offline"
    assert Gateway(ws, conn).offline
    ws.settings.model = "anthropic/claude-3-5-haiku-latest"
    assert Gateway(ws, conn).model == "anthropic/claude-3-5-haiku-latest"
    assert Gateway(ws, conn, model=REAL).model == REAL

    from kompl.workspace import find_workspace

    monkeypatch.setenv("KOMPL_MODEL", "deepseek/deepseek-chat")
    assert Gateway(find_workspace(ws.root), conn).model == "deepseek/deepseek-chat"


# -- the offline model ----------------------------------------------------------------


def test_offline_call_is_validated_and_recorded(ws, conn, fake_offline):
    task = echo_task("hello")
    result = Gateway(ws, conn).run(task)
    assert result == Echo(text="HELLO")
    [row] = rows(conn)
    assert task.call_id == row["id"]
    assert row["model"] == "kompl/offline" and row["outcome"] == "ok" and row["cost_usd"] == 0
    assert row["prompt_name"] == "echo" and row["prompt_version"] == "1" and row["attempt"] == 1
    assert row["prompt_tokens"] > 50  # approx_tokens of the rendered prompt, base rules included
    assert row["completion_tokens"] == 5  # approx_tokens('{"text": "HELLO"}')
    assert json.loads(row["response"]) == {"text": "HELLO"}


def test_offline_invalid_reply_is_recorded_once_and_raised(ws, conn, monkeypatch):
    monkeypatch.setattr(offline, "respond", lambda *a: {"wrong": 1}, raising=False)
    with pytest.raises(InvalidOutputError, match="text: Field required"):
        Gateway(ws, conn).run(echo_task())
    assert [r["outcome"] for r in rows(conn)] == ["invalid"]


def test_offline_crash_is_recorded_as_error(ws, conn, monkeypatch):
    def crash(*a):
        raise ValueError("no sentences")

    monkeypatch.setattr(offline, "respond", crash, raising=False)
    with pytest.raises(ModelCallError, match="no sentences") as info:
        Gateway(ws, conn).run(echo_task())
    assert isinstance(info.value.__cause__, ValueError)
    [row] = rows(conn)
    assert row["outcome"] == "error" and "no sentences" in row["error"]


def test_offline_errors_keep_their_message_and_hint(ws, conn, monkeypatch):
    from kompl.errors import KomplError

    def cannot(*a):
        raise KomplError("The offline model cannot answer 'echo' prompts", hint="use a real model with --model")

    monkeypatch.setattr(offline, "respond", cannot, raising=False)
    results = Gateway(ws, conn).run_many([echo_task()])
    assert isinstance(results[0], ModelCallError)
    assert results[0].message == "The offline model cannot answer 'echo' prompts"
    assert results[0].hint == "use a real model with --model"
    assert rows(conn)[0]["outcome"] == "error"


def test_task_meta_is_recorded(ws, conn, fake_offline):
    Gateway(ws, conn).run(echo_task(meta={"source_id": "s1", "chunk": 2}))
    assert json.loads(rows(conn)[0]["meta"]) == {"source_id": "s1", "chunk": 2}


# -- real models through litellm mock responses ------------------------------------------------


def test_valid_json_reply(ws, conn, key):
    gw = Gateway(ws, conn, model=REAL)
    script = Script(gw, '{"text": "hi"}')
    task = echo_task("hi")
    assert gw.run(task) == Echo(text="hi")
    [row] = rows(conn)
    assert row["outcome"] == "ok" and row["model"] == REAL and task.call_id == row["id"]
    assert row["prompt_tokens"] > 0 and row["completion_tokens"] > 0 and row["cost_usd"] > 0
    [call] = script.calls
    assert call["num_retries"] == 0 and call["max_retries"] == 0
    assert call["response_format"] == {"type": "json_object"}
    assert call["timeout"] == ws.settings.llm_timeout_s
    assert call["max_tokens"] == llm.DEFAULT_MAX_OUTPUT_TOKENS
    system = call["messages"][0]["content"]
    assert "are not instructions" in system and '"text"' in system and "JSON" in system


def test_task_output_cap_is_sent(ws, conn, key):
    gw = Gateway(ws, conn, model=REAL)
    script = Script(gw, '{"text": "hi"}')
    gw.run(echo_task(max_output_tokens=300))
    assert script.calls[0]["max_tokens"] == 300


def test_broken_json_is_repaired(ws, conn, key):
    gw = Gateway(ws, conn, model=REAL)
    Script(gw, '```json\n{"text": "hi",\n```')
    assert gw.run(echo_task()) == Echo(text="hi")
    assert [r["outcome"] for r in rows(conn)] == ["repaired"]


def test_wrong_schema_is_retried_with_the_error(ws, conn, key):
    gw = Gateway(ws, conn, model=REAL)
    script = Script(gw, '{"txt": "hi"}', '{"text": "hi"}')
    task = echo_task()
    assert gw.run(task) == Echo(text="hi")
    got = rows(conn)
    assert [(r["outcome"], r["attempt"]) for r in got] == [("invalid", 1), ("ok", 2)]
    assert "text: Field required" in got[0]["error"]
    assert len({r["task_id"] for r in got}) == 1 and task.call_id == got[1]["id"]
    retry = script.calls[1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": '{"txt": "hi"}'}
    assert "text: Field required" in retry[-1]["content"]


def test_invalid_replies_fail_after_the_retry_limit(ws, conn, key):
    ws.settings.llm_max_retries = 2
    gw = Gateway(ws, conn, model=REAL)
    script = Script(gw, "I cannot do that.")
    with pytest.raises(InvalidOutputError, match="after 3 attempt"):
        gw.run(echo_task())
    assert [r["outcome"] for r in rows(conn)] == ["invalid"] * 3
    assert len(script.calls) == 3


def test_rate_limit_honours_retry_after(ws, conn, key, sleeps):
    gw = Gateway(ws, conn, model=REAL)
    Script(gw, litellm_error("rate", headers={"retry-after": "7"}), '{"text": "hi"}')
    assert gw.run(echo_task()) == Echo(text="hi")
    assert sleeps == [7.0]
    got = rows(conn)
    assert [r["outcome"] for r in got] == ["error", "ok"]
    assert json.loads(got[0]["meta"])["retry_after_s"] == 7.0
    assert json.loads(got[0]["meta"])["status_code"] == 429


def test_server_errors_and_timeouts_back_off_exponentially(ws, conn, key, sleeps):
    gw = Gateway(ws, conn, model=REAL)
    Script(gw, litellm_error("server"), litellm_error("timeout"), litellm_error("connection"), '{"text": "hi"}')
    assert gw.run(echo_task()) == Echo(text="hi")
    assert [r["outcome"] for r in rows(conn)] == ["error", "error", "error", "ok"]
    assert len(sleeps) == 3
    for n, delay in enumerate(sleeps):
        base = llm.BACKOFF_BASE_S * 2**n
        assert base <= delay <= base * 1.25


def test_transport_errors_fail_after_the_retry_limit(ws, conn, key, sleeps):
    ws.settings.llm_max_retries = 2
    gw = Gateway(ws, conn, model=REAL)
    Script(gw, litellm_error("unavailable"))
    with pytest.raises(ModelCallError, match="after 2 retries") as info:
        gw.run(echo_task())
    assert "run the command again later" in str(info.value)
    assert [r["outcome"] for r in rows(conn)] == ["error"] * 3
    assert len(sleeps) == 2


def test_auth_errors_are_not_retried(ws, conn, key, sleeps):
    gw = Gateway(ws, conn, model=REAL)
    Script(gw, litellm_error("auth", "bad key"))
    with pytest.raises(ModelCallError, match="bad key") as info:
        gw.run(echo_task())
    assert "check the API key" in str(info.value)
    assert sleeps == [] and len(rows(conn)) == 1


def test_retry_after_forms():
    class Exc(Exception):
        def __init__(self, headers):
            self.headers = headers

    assert llm._retry_after(Exc({"Retry-After": "3"})) == 3.0
    assert llm._retry_after(Exc({"retry-after-ms": "1500"})) == 1.5
    assert llm._retry_after(Exc({"x": "y"})) is None
    from email.utils import format_datetime
    from datetime import datetime, timedelta, timezone

    when = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    assert 25 <= llm._retry_after(Exc({"retry-after": when})) <= 30
    assert llm._retry_delay(Exc({"retry-after": "100000"}), 1) == llm.RETRY_AFTER_MAX_S


# -- keys and model names ------------------------------------------------------------------


def test_missing_key_names_the_variable_and_sends_nothing(ws, conn, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    gw = Gateway(ws, conn, model=REAL)
    script = Script(gw, '{"text": "hi"}')
    with pytest.raises(MissingKeyError, match="OPENAI_API_KEY") as info:
        gw.run(echo_task())
    assert "kompl/offline" in str(info.value)  # names the alternative, never switches to it
    with pytest.raises(MissingKeyError):
        gw.run_many([echo_task(), echo_task()])  # raised once, not per task
    assert script.calls == [] and rows(conn) == []


def test_missing_key_for_other_providers(ws, conn, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with pytest.raises(MissingKeyError, match="ANTHROPIC_API_KEY"):
        Gateway(ws, conn, model="anthropic/claude-3-5-haiku-latest").check()


def test_local_servers_need_no_key(ws, conn, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OLLAMA_API_BASE", raising=False)
    Gateway(ws, conn, model="ollama/llama3.1").check()
    gw = Gateway(ws, conn, model="openai/my-local-model", api_base="http://127.0.0.1:8000/v1")
    script = Script(gw, '{"text": "hi"}')
    assert gw.run(echo_task()) == Echo(text="hi")
    assert script.calls[0]["api_base"] == "http://127.0.0.1:8000/v1"
    assert script.calls[0]["api_key"]


def test_unknown_model_is_an_error(ws, conn):
    with pytest.raises(UnknownModelError, match="provider/name"):
        Gateway(ws, conn, model="no-such-model-xyz").check()


# -- concurrency -------------------------------------------------------------------------------


def test_run_many_is_concurrent_up_to_the_limit(ws, conn, key):
    ws.settings.llm_concurrency = 4
    gw = Gateway(ws, conn, model=REAL)
    script = Script(gw, '{"text": "x"}', delay=0.2)
    results = gw.run_many([echo_task(f"t{i}") for i in range(8)])
    assert results == [Echo(text="x")] * 8
    # Concurrency is checked structurally (calls in flight), never by timing: see bench/ for timings.
    assert script.max_in_flight == 4
    assert len(rows(conn)) == 8


def test_run_many_keeps_order_and_returns_errors_in_place(ws, conn, key):
    ws.settings.llm_max_retries = 0

    def reply(kwargs):
        user = kwargs["messages"][1]["content"]
        word = user.split("\n")[-2]  # the fenced text
        return "not json" if word == "bad" else json.dumps({"text": word})

    gw = Gateway(ws, conn, model=REAL)
    Script(gw, reply)
    results = gw.run_many([echo_task(w) for w in ("one", "bad", "three")])
    assert results[0] == Echo(text="one") and results[2] == Echo(text="three")
    assert isinstance(results[1], InvalidOutputError) and isinstance(results[1], LLMError)


def test_arun_from_async_code(ws, conn, fake_offline):
    async def main():
        return await Gateway(ws, conn).arun(echo_task("a"))

    assert asyncio.run(main()) == Echo(text="A")

    async def wrong():
        Gateway(ws, conn).run(echo_task())

    with pytest.raises(RuntimeError, match="arun"):
        asyncio.run(wrong())


# -- budget ----------------------------------------------------------------------------------------


def _spend(conn, usd: float) -> None:
    with db.transaction(conn):
        conn.execute(
            "INSERT INTO llm_calls (at, task_id, purpose, model, prompt_name, prompt_version, cost_usd, outcome)"
            " VALUES (?, 't0', 'draft', ?, 'draft', '1', ?, 'ok')",
            (db.utcnow(), REAL, usd),
        )


def test_budget_refuses_a_call_that_would_pass_the_cap(ws, conn, key):
    ws.settings.daily_budget_usd = 0.50
    _spend(conn, 0.4999)
    gw = Gateway(ws, conn, model=REAL)
    script = Script(gw, '{"text": "hi"}')
    with pytest.raises(BudgetExceededError) as info:
        gw.run(echo_task())
    message = str(info.value)
    assert "$0.50" in message and "$0.4999" in message and "daily_budget_usd" in message and "pending" in message
    assert script.calls == []
    refused = rows(conn, outcome="refused")
    assert len(refused) == 1 and refused[0]["cost_usd"] == 0
    assert json.loads(refused[0]["meta"])["cap_usd"] == 0.5


def test_budget_allows_calls_under_the_cap_and_yesterday_does_not_count(ws, conn, key):
    ws.settings.daily_budget_usd = 0.50
    with db.transaction(conn):
        conn.execute(
            "INSERT INTO llm_calls (at, task_id, purpose, model, prompt_name, prompt_version, cost_usd, outcome)"
            " VALUES ('2000-01-01T10:00:00Z', 't0', 'draft', ?, 'draft', '1', 99.0, 'ok')",
            (REAL,),
        )
    gw = Gateway(ws, conn, model=REAL)
    Script(gw, '{"text": "hi"}')
    assert gw.run(echo_task()) == Echo(text="hi")
    row = rows(conn, outcome="ok")[-1]
    assert 0 < json.loads(row["meta"])["estimate_usd"] < 0.5


def test_budget_counts_reservations_in_flight(ws, conn, key):
    """Two calls fit the cap; while they are in flight, the others are refused."""
    import litellm

    ws.settings.llm_concurrency = 4
    gw = Gateway(ws, conn, model=REAL)
    Script(gw, '{"text": "x"}', delay=0.2)
    sample = echo_task("t0", max_output_tokens=1000)
    from kompl import prompts

    system, user, _ = prompts.render("echo", sample.variables)
    system += "\n\n" + prompts.json_instruction(Echo.model_json_schema())
    estimate = llm.estimate_cost(litellm, REAL, [{"role": "system", "content": system}, {"role": "user", "content": user}], 1000)
    assert estimate > 0
    ws.settings.daily_budget_usd = estimate * 2.5
    results = gw.run_many([echo_task(f"t{i}", max_output_tokens=1000) for i in range(8)])
    assert sum(isinstance(r, Echo) for r in results) == 2
    assert sum(isinstance(r, BudgetExceededError) for r in results) == 6
    assert len(rows(conn, outcome="refused")) == 6 and len(rows(conn, outcome="ok")) == 2
    assert llm._reserved == {}  # every reservation released


# -- stats --------------------------------------------------------------------------------------------


def test_stats_json_matches_the_rows(ws, conn, kompl, key, fake_offline, sleeps):
    Gateway(ws, conn).run(echo_task(purpose="extract"))
    Gateway(ws, conn).run(echo_task(purpose="extract"))
    gw = Gateway(ws, conn, model=REAL)
    Script(gw, litellm_error("server"), '{"txt": 1}', '{"text": "ok"}')
    gw.run(echo_task(purpose="draft"))
    ws.settings.daily_budget_usd = 1e-9
    with pytest.raises(BudgetExceededError):
        Gateway(ws, conn, model=REAL).run(echo_task(purpose="draft"))

    result = kompl("stats", "--json")
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)
    for purpose in ("extract", "draft"):
        sent = conn.execute(
            "SELECT COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(cost_usd) FROM llm_calls"
            " WHERE purpose = ? AND outcome != 'refused'",
            (purpose,),
        ).fetchone()
        got = stats["by_purpose"][purpose]
        assert (got["calls"], got["prompt_tokens"], got["completion_tokens"]) == tuple(sent)[:3]
        assert got["cost_usd"] == pytest.approx(sent[3])
    assert stats["by_purpose"]["extract"]["calls"] == 2 and stats["by_purpose"]["extract"]["cost_usd"] == 0
    assert stats["by_purpose"]["draft"]["calls"] == 3
    assert stats["by_purpose"]["draft"]["failed"] == 2 and stats["by_purpose"]["draft"]["refused"] == 1
    assert stats["by_model"]["kompl/offline"]["calls"] == 2 and stats["by_model"][REAL]["calls"] == 3
    assert stats["total"]["calls"] == 5
    assert stats["total"]["cost_usd"] == pytest.approx(stats["by_purpose"]["draft"]["cost_usd"]) and stats["total"]["cost_usd"] > 0

    table = kompl("stats")
    assert table.exit_code == 0 and "extract" in table.output and "By model" in table.output
    assert json.loads(kompl("stats", "--json", "--since", "2999-01-01").output)["total"]["calls"] == 0


def test_stats_on_an_empty_workspace(kompl):
    result = kompl("stats", "--json")
    assert result.exit_code == 0
    stats = json.loads(result.output)
    assert stats["by_purpose"] == {} and stats["total"]["calls"] == 0


# -- staying light and offline ---------------------------------------------------------------------


def _python(code: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("KOMPL_", "LITELLM_"))}
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_help_and_an_offline_run_do_not_import_litellm(tmp_path):
    code = f"""
        import sys
        from typer.testing import CliRunner
        from kompl.cli.main import app
        assert CliRunner().invoke(app, ["--help"]).exit_code == 0
        assert "litellm" not in sys.modules, "kompl --help imported litellm"

        from pathlib import Path
        from pydantic import BaseModel
        from kompl import db, llm, offline
        from kompl.workspace import init_workspace
        class Echo(BaseModel):
            text: str
        offline.respond = lambda purpose, variables, schema: {{"text": variables["text"]}}
        ws, _ = init_workspace(Path({str(tmp_path / 'w')!r}))
        conn = db.connect(ws.db_path)
        gw = llm.Gateway(ws, conn)
        task = llm.Task("echo", "echo", {{"text": "hi", "language": "en"}}, Echo)
        assert gw.run(task).text == "hi"
        assert gw.run_many([task, task])[1].text == "hi"
        assert CliRunner().invoke(app, ["--home", str(ws.root), "stats", "--json"]).exit_code == 0
        assert conn.execute("SELECT COUNT(*) FROM llm_calls").fetchone()[0] == 3
        print("LITELLM" if "litellm" in sys.modules else "CLEAN")
    """
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("CLEAN")


def test_litellm_is_imported_offline_and_quiet():
    """The gateway sets the literal "true" flags (fixing a useless "1") and disables callbacks."""
    code = """
        import os, socket
        def refuse(self, address):
            raise OSError(f"network use at import: {address}")
        socket.socket.connect = refuse
        from kompl import llm
        litellm = llm._litellm()
        assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "true", os.environ["LITELLM_LOCAL_MODEL_COST_MAP"]
        assert os.environ["LITELLM_OFFLINE_MODE"] == "true"
        assert litellm.success_callback == [] and litellm.callbacks == [] and litellm.suppress_debug_info
        assert litellm.model_cost["gpt-4o-mini"]["input_cost_per_token"] > 0
        print("OK")
    """
    proc = _python(code, {"LITELLM_LOCAL_MODEL_COST_MAP": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "OK"


# -- embeddings ------------------------------------------------------------------------------------


def test_embeddings_in_order_with_retries_and_records(ws, conn, key, sleeps, monkeypatch):
    import litellm
    from litellm.types.utils import Embedding, EmbeddingResponse, Usage

    monkeypatch.setattr(llm, "EMBED_BATCH", 2)
    gw = Gateway(ws, conn, model="openai/text-embedding-3-small")
    calls = []

    async def fake(**kwargs):
        calls.append(kwargs)
        if len(calls) == 1:
            raise litellm_error("rate", headers={"retry-after": "2"})
        texts = kwargs["input"]
        data = [Embedding(embedding=[float(len(t)), 1.0], index=i, object="embedding") for i, t in enumerate(texts)]
        return EmbeddingResponse(model="text-embedding-3-small", data=list(reversed(data)), usage=Usage(prompt_tokens=3 * len(texts), completion_tokens=0))

    gw.aembedding = fake
    vectors = gw.embed(["a", "bb", "ccc"], meta={"why": "resolve"})
    assert vectors == [[1.0, 1.0], [2.0, 1.0], [3.0, 1.0]]
    assert sleeps == [2.0]
    got = rows(conn)
    assert sorted(r["outcome"] for r in got) == ["error", "ok", "ok"]
    assert {r["prompt_name"] for r in got} == {"(embedding)"} and {r["purpose"] for r in got} == {"embed"}
    assert sum(r["prompt_tokens"] for r in got) == 9 and sum(r["cost_usd"] for r in got) > 0
    assert all(c["num_retries"] == 0 and "response_format" not in c for c in calls)
    assert json.loads(got[-1]["meta"])["why"] == "resolve"
    with pytest.raises(UnknownModelError, match="no embeddings"):
        Gateway(ws, conn).embed(["x"])
