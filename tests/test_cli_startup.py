"""`kompl --help` stays fast: the CLI module imports no heavy library at start-up."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = {"litellm", "sklearn", "markitdown", "spacy", "chromadb", "mcp"}

PROBE = f"""
import json, sys
from typer.testing import CliRunner
from kompl.cli.main import app
result = CliRunner().invoke(app, sys.argv[1:])
assert result.exit_code == 0, result.output
heavy = {sorted(HEAVY)!r}
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))
"""


def loaded_after(*args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_help_imports_no_heavy_library():
    assert loaded_after("--help") == []


def test_subcommand_help_imports_no_heavy_library():
    assert loaded_after("ingest", "--help") == []


def test_help_as_a_user_runs_it():
    out = subprocess.run([sys.executable, "-m", "kompl", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    assert "ingest" in out.stdout and "init" in out.stdout
