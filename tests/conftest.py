"""Test fixtures: every test gets its own workspace, and no test can reach the network."""

from __future__ import annotations

import ipaddress
import os
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "true")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# Property tests explore new examples on every local run, but CI runs a fixed,
# reproducible set (a red CI must mean a change broke something, not a new draw).
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    _hypothesis_settings.load_profile("ci")


class NetworkBlocked(RuntimeError):
    pass


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _guard(address) -> None:
    host = address[0] if isinstance(address, tuple) else None
    if host is None:  # unix sockets
        return
    try:
        ip = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        raise NetworkBlocked(f"test tried to connect to {host!r}") from None
    if not ip.is_loopback:
        raise NetworkBlocked(f"test tried to connect to {host}: tests never touch the network")


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    """Any connection to a non-loopback address fails the test loudly."""

    def connect(self, address):
        _guard(address)
        return _real_connect(self, address)

    def connect_ex(self, address):
        _guard(address)
        return _real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch, tmp_path):
    for key in list(os.environ):
        if key.startswith("KOMPL_"):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def ws(tmp_path):
    """A fresh, initialised workspace."""
    from kompl.workspace import init_workspace

    workspace, _ = init_workspace(tmp_path / "wiki")
    return workspace


@pytest.fixture
def conn(ws):
    from kompl import db

    connection = db.connect(ws.db_path)
    yield connection
    connection.close()


class Kompl:
    """Runs the CLI in-process, the way a user would type it."""

    def __init__(self, home: Path):
        self.home = home
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | bytes | None = None, home: bool = True):
        from kompl.cli.main import app

        argv = (["--home", str(self.home)] if home else []) + [str(a) for a in args]
        return self.runner.invoke(app, argv, input=input, catch_exceptions=False)


@pytest.fixture
def kompl(ws):
    return Kompl(ws.root)
