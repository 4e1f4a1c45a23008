"""`kompl init`, finding the workspace, and settings from kompl.toml and KOMPL_* variables."""

from __future__ import annotations

import json
import sqlite3

import pytest
from typer.testing import CliRunner

from kompl.workspace import Settings, SUBDIRS


def cli(*args: str, input: str | None = None):
    from kompl.cli.main import app

    return CliRunner().invoke(app, [str(a) for a in args], input=input, catch_exceptions=False)


def flat(text: str) -> str:
    """Output with line wrapping undone, for substring checks."""
    return " ".join(text.split())


def assert_workspace(root):
    assert (root / "schema.md").is_file()
    for sub in SUBDIRS:
        assert (root / "data" / sub).is_dir(), sub
    assert (root / "data" / "kompl.db").is_file()


def init_rows(root) -> list[tuple]:
    with sqlite3.connect(root / "data" / "kompl.db") as c:
        return c.execute("SELECT action, target FROM activity WHERE action = 'init'").fetchall()


def test_init_with_home_creates_everything(tmp_path):
    root = tmp_path / "wiki"
    result = cli("--home", root, "init")
    assert result.exit_code == 0, result.output
    assert "Created" in result.stdout and str(root) in flat(result.stdout)
    assert_workspace(root)
    from kompl.workspace import default_schema_path

    assert (root / "schema.md").read_text() == default_schema_path().read_text()
    assert init_rows(root) == [("init", str(root))]


def test_init_with_directory_argument_and_json(tmp_path):
    root = tmp_path / "deep" / "wiki"
    result = cli("init", root, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"workspace": str(root), "created": True}
    assert_workspace(root)


def test_init_via_kompl_home(tmp_path, monkeypatch):
    root = tmp_path / "from-env"
    monkeypatch.setenv("KOMPL_HOME", str(root))
    result = cli("init")
    assert result.exit_code == 0, result.output
    assert_workspace(root)
    # and every later command finds it the same way
    result = cli("status", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["workspace"] == str(root)


def test_init_in_current_folder(tmp_path):
    # conftest chdirs into tmp_path
    result = cli("init")
    assert result.exit_code == 0, result.output
    assert_workspace(tmp_path)
    assert cli("sources", "--json").stdout.strip() == "[]"


def test_init_is_idempotent_and_keeps_edits(tmp_path):
    root = tmp_path / "wiki"
    assert cli("--home", root, "init").exit_code == 0
    (root / "schema.md").write_text("my own conventions\n")
    (root / "data" / "pages").rmdir()  # a missing folder is restored
    result = cli("--home", root, "init", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["created"] is False
    assert (root / "schema.md").read_text() == "my own conventions\n"
    assert_workspace(root)
    assert len(init_rows(root)) == 1
    result = cli("--home", root, "init")
    assert "already exists" in result.stdout


def test_init_on_a_file_is_a_clear_error(tmp_path):
    target = tmp_path / "afile"
    target.write_text("x")
    result = cli("init", target)
    assert result.exit_code == 2
    assert "exists and is not a folder" in flat(result.stderr)
    assert "Traceback" not in result.output


@pytest.mark.parametrize("args", [
    ["sources"], ["sources", "--failed", "--json"], ["status"], ["status", "--json"],
    ["ingest", "notes.md"], ["ingest", "--retry-failed"],
])
def test_commands_outside_a_workspace_say_how_to_make_one(tmp_path, args):
    result = cli(*args)
    assert result.exit_code == 2, result.output
    message = flat(result.stderr)
    assert f"No kompl workspace at {tmp_path}" in message
    assert "kompl init" in message and "--home" in message
    assert "Traceback" not in result.output
    assert result.stdout == ""
    assert not (tmp_path / "data").exists()  # nothing was created by accident


def test_home_pointing_at_a_plain_folder(tmp_path):
    (tmp_path / "plain").mkdir()
    result = cli("--home", tmp_path / "plain", "sources")
    assert result.exit_code == 2
    assert "No kompl workspace" in result.stderr


def test_home_option_wins_over_kompl_home(tmp_path, monkeypatch):
    assert cli("init", tmp_path / "a").exit_code == 0
    monkeypatch.setenv("KOMPL_HOME", str(tmp_path / "nowhere"))
    result = cli("--home", tmp_path / "a", "status", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["workspace"] == str(tmp_path / "a")


def test_status_json(kompl, ws):
    result = kompl("status", "--json")
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["workspace"] == str(ws.root)
    assert info["sources"] == {"active": 0, "archived": 0, "total": 0}
    assert info["failed_inputs"] == 0
    assert "model" in info


# --- settings ---------------------------------------------------------------------------

def test_settings_defaults(tmp_path):
    s = Settings.load(tmp_path, env={})
    assert s.max_input_mb == 100.0 and s.fetch_timeout_s == 20.0 and s.allow_private_urls is False


def test_settings_from_toml_and_env_overrides(tmp_path):
    (tmp_path / "kompl.toml").write_text(
        'max_input_mb = 5\nallow_private_urls = true\n[kompl]\nfetch_timeout_s = 3.5\nfetch_max_redirects = 2\n'
    )
    s = Settings.load(tmp_path, env={})
    assert (s.max_input_mb, s.allow_private_urls, s.fetch_timeout_s, s.fetch_max_redirects) == (5.0, True, 3.5, 2)
    s = Settings.load(tmp_path, env={"KOMPL_MAX_INPUT_MB": "0.5", "KOMPL_ALLOW_PRIVATE_URLS": "no",
                                     "KOMPL_FETCH_MAX_REDIRECTS": "", "KOMPL_UNRELATED": "x"})
    assert s.max_input_mb == 0.5 and s.allow_private_urls is False
    assert s.fetch_max_redirects == 2  # an empty variable does not override


def test_workspace_settings_reach_commands(kompl, ws, tmp_path, monkeypatch):
    (ws.root / "kompl.toml").write_text("max_input_mb = 0.00001\n")  # 10 bytes
    doc = tmp_path / "big.md"
    doc.write_text("# Too big for ten bytes\n")
    result = kompl("ingest", doc, "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["failed"][0]["code"] == "too_large"
    monkeypatch.setenv("KOMPL_MAX_INPUT_MB", "1")  # the variable overrides the file
    result = kompl("ingest", doc, "--json")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("toml, env, expected", [
    ("", {"KOMPL_MAX_INPUT_MB": "lots"}, "Setting 'max_input_mb' (from KOMPL_MAX_INPUT_MB) must be a number, got 'lots'"),
    ('max_input_mb = "big"\n', {}, "Setting 'max_input_mb' (in "),
    ("fetch_max_redirects = 2.5\n", {}, "must be a whole number"),
    ("allow_private_urls = \"maybe\"\n", {}, "must be true or false, got 'maybe'"),
    ("max_input_mb = -1\n", {}, "must not be negative"),
    ("max_input_mb = true\n", {}, "must be a number"),
    ("bogus = 1\n", {}, "Unknown setting(s) in kompl.toml: bogus"),
    ("max_input_mb = [\n", {}, "Could not read"),
])
def test_bad_setting_is_a_clear_error(kompl, ws, monkeypatch, toml, env, expected):
    if toml:
        (ws.root / "kompl.toml").write_text(toml)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    result = kompl("sources")
    assert result.exit_code == 2
    assert expected in flat(result.stderr)
    assert "Traceback" not in result.output
