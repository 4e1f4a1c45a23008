"""Crash trials: run `python -m kompl ...` in a subprocess, crash it, run it again, check the invariants.

A trial starts from a copy of a prepared workspace ("stage"), runs one command
with `KOMPL_FAULT=<point>` (the process SIGKILLs itself there) or kills it with
SIGKILL after a random delay, then runs the same command again and compares
the result with a fault-free reference run of that command: the invariants
hold, the same sources and pages exist (nothing lost, nothing duplicated) and
the audit log has the actions the reference run wrote. Shared by
tests/reliability/test_crash.py (one trial per fault point) and
bench/reliability.py (the long run).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from reliability.invariants import actions_since, check_invariants, last_activity_id, signature

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "data" / "example"
CORPUS = ["01-fleming-discovery.md", "04-albert-alexander.txt", "06-window-myth.md"]

# Fault points per command (the ingest ones are in kompl/ingest/store.py).
POINTS = {
    "ingest": ["ingest.after_raw_write", "ingest.after_original_write", "ingest.before_commit", "ingest.after_commit"],
    "compile": ["draft.after_store"],
    "approve": ["approve.after_page_commit", "page.after_db_commit", "page.after_file_write"],
    "delete": ["delete.after_archive", "delete.after_pages", "delete.after_replan", "delete.after_row",
               "page.after_db_commit"],
    "import": ["import.after_files", "import.after_commit"],
}
# The stage each command starts from.
STAGE_OF = {"ingest": "init", "compile": "ingested", "approve": "compiled", "delete": "approved",
            "import": "init"}


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("KOMPL_")}
    base |= {"LITELLM_LOCAL_MODEL_COST_MAP": "true", "LITELLM_OFFLINE_MODE": "true",
             "ANONYMIZED_TELEMETRY": "False", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    return base | extra


def command(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "kompl", "--home", str(home), *map(str, args)]


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL


def start(home: Path, *args: str, **extra_env: str) -> subprocess.Popen:
    return subprocess.Popen(command(home, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env(**extra_env), cwd=Path(home).parent)


def finish(proc: subprocess.Popen, started: float, timeout: float = 300) -> Run:
    out, err = proc.communicate(timeout=timeout)
    return Run(proc.returncode, out, err, time.perf_counter() - started)


def run(home: Path, *args: str, fault: str | None = None, kill_after: float | None = None,
        timeout: float = 300) -> Run:
    """Run one command; `fault` names a fault point, `kill_after` SIGKILLs it after that many seconds."""
    started = time.perf_counter()
    proc = start(home, *args, **({"KOMPL_FAULT": fault} if fault else {}))
    if kill_after is not None:
        try:
            proc.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
    return finish(proc, started, timeout)


# --- stages ------------------------------------------------------------------------------------

def corpus(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in CORPUS:
        shutil.copyfile(EXAMPLE / name, folder / name)
        paths.append(folder / name)
    return paths


def kompl_inproc(home: Path, *args: str) -> Run:
    """Run one command in this process (the imports are paid once); exceptions become a traceback text."""
    import traceback

    from typer.testing import CliRunner

    from kompl.cli.main import app

    started = time.perf_counter()
    result = CliRunner().invoke(app, ["--home", str(home), *map(str, args)])
    err = result.stderr if result.stderr_bytes is not None else ""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        err += "".join(traceback.format_exception(result.exception))
    return Run(result.exit_code, result.stdout, err, time.perf_counter() - started)


@dataclass
class Reference:
    signature: dict
    actions: set[str]
    seconds: float


def _ref_run(home: Path, args: list[str]) -> Reference:
    since = last_activity_id(home)
    done = kompl_inproc(home, *args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    problems = check_invariants(home, since=since)
    assert not problems, (args, problems)
    return Reference(signature(home), actions_since(home, since), done.seconds)


def build_stages(base: Path) -> dict:
    """Workspaces at each stage (init, ingested, compiled, approved), an export of the last one,
    and the fault-free reference result of every command, all built in this process."""
    inputs = corpus(base / "inputs")
    stages: dict = {"inputs": inputs, "archive": base / "approved.zip", "refs": {}}
    home = base / "stage-init"
    assert kompl_inproc(home, "init").returncode == 0
    stages["init"] = previous = home
    for name, cmd in (("ingested", "ingest"), ("compiled", "compile"), ("approved", "approve")):
        home = base / f"stage-{name}"
        shutil.copytree(previous, home)
        stages["refs"][cmd] = _ref_run(home, args_for(cmd, stages))
        stages[name] = previous = home
    assert kompl_inproc(stages["approved"], "export", stages["archive"]).returncode == 0
    conn = sqlite3.connect(stages["approved"] / "data" / "kompl.db")
    # The source whose delete touches the most: one sharing pages with the others.
    stages["delete_target"] = conn.execute(
        "SELECT s.source_id FROM sources s JOIN page_sources ps ON ps.source_id = s.source_id"
        " GROUP BY s.source_id ORDER BY COUNT(*) DESC, s.source_id LIMIT 1").fetchone()[0]
    conn.close()
    for cmd in ("delete", "import"):
        home = base / f"reference-{cmd}"
        shutil.copytree(stages[STAGE_OF[cmd]], home)
        stages["refs"][cmd] = _ref_run(home, args_for(cmd, stages))
    return stages


def args_for(cmd: str, stages: dict) -> list[str]:
    return {
        "ingest": lambda: ["ingest", *stages["inputs"]],
        "compile": lambda: ["compile"],
        "approve": lambda: ["approve", "--all"],
        "delete": lambda: ["delete", stages["delete_target"], "--yes"],
        "import": lambda: ["import", stages["archive"]],
    }[cmd]()


# --- trials ------------------------------------------------------------------------------------

@dataclass
class Trial:
    cmd: str
    how: str  # a fault point, or "random@<seconds>"
    crashed: bool = False
    violations: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)


def trial(cmd: str, stages: dict, folder: Path, *, fault: str | None = None, kill_after: float | None = None,
          rerun_in_process: bool = True, keep: bool = False) -> Trial:
    """Crash `cmd` once (at `fault`, or after `kill_after` s), run it again, compare with its reference.

    The crash is always a real process; the next run is in this process unless `rerun_in_process` is
    False (then a subprocess too)."""
    ref: Reference = stages["refs"][cmd]
    how = fault or f"random@{kill_after:.2f}s"
    home = folder / f"{cmd}-{how.replace('@', '-').replace('.', '_')}-{random.randrange(10**6)}"
    shutil.copytree(stages[STAGE_OF[cmd]], home)
    since = last_activity_id(home)
    args = args_for(cmd, stages)
    first = run(home, *args, fault=fault, kill_after=kill_after)
    result = Trial(cmd, how, crashed=first.killed)
    if fault and not first.killed:
        result.violations.append(f"fault point {fault} was never reached (exit {first.returncode}): "
                                 f"{first.stderr[-500:]}")
    if not first.killed and (first.returncode != 0 or "Traceback" in first.stderr):
        result.violations.append(f"first run failed with {first.returncode}: {first.stderr[-500:]}")
    again = kompl_inproc(home, *args) if rerun_in_process else run(home, *args)
    if again.returncode != 0 or "Traceback" in again.stderr:
        result.violations.append(f"the next run exited {again.returncode}: {again.stdout[-300:]} {again.stderr[-800:]}")
    result.violations += check_invariants(home, completed=sorted(ref.actions), since=since)
    got = signature(home)
    for kind in ("sources", "pages"):
        want, have = ref.signature[kind], got[kind]
        result.lost += [f"{kind}: {k}" for k in sorted(set(want) - set(have))]
        result.duplicated += [f"{kind}: {k}" for k in sorted(set(have) - set(want))]
    if not keep:
        shutil.rmtree(home, ignore_errors=True)
    return result


__all__ = ["POINTS", "STAGE_OF", "Reference", "Run", "Trial", "args_for", "build_stages", "command", "env",
           "finish", "kompl_inproc", "run", "start", "trial"]
