"""Crash consistency: SIGKILL at each named fault point, run the command again, check the invariants.

One trial per fault point of compile, approve, delete and import (ingest's own
points are tested in tests/test_ingest_crash.py); the long run with random-time
kills is `bench/reliability.py` and the `slow` test below.
"""

from __future__ import annotations

import random
import shutil
import sqlite3

import pytest

from reliability import harness
from reliability.invariants import check_invariants

FAST = [(cmd, point) for cmd, points in harness.POINTS.items() if cmd != "ingest" for point in points]


@pytest.mark.parametrize(("cmd", "point"), FAST, ids=[f"{c}:{p}" for c, p in FAST])
def test_crash_at_fault_point_then_rerun_keeps_every_invariant(stages, tmp_path, cmd, point):
    result = harness.trial(cmd, stages, tmp_path, fault=point)
    assert result.crashed, result
    assert result.violations == [], result.violations
    assert result.lost == [] and result.duplicated == [], result


def _single_plan_workspace(stages, tmp_path):
    home = tmp_path / "w"
    shutil.copytree(stages["compiled"], home)
    conn = sqlite3.connect(home / "data" / "kompl.db")
    plan_id = conn.execute("SELECT plan_id FROM page_plans WHERE status = 'drafted' AND page_type = 'entity'"
                           " ORDER BY plan_id LIMIT 1").fetchone()[0]
    conn.close()
    return home, plan_id


def test_recovered_approval_embeds_the_page(stages, tmp_path):
    """Bug found here: a crash after the page commit of a one-plan approve left the page without
    vectors, because the re-run recognised the commit but skipped the vector sync (kompl/review.py)."""
    home, plan_id = _single_plan_workspace(stages, tmp_path)
    assert harness.run(home, "approve", str(plan_id), fault="page.after_file_write").killed
    again = harness.kompl_inproc(home, "approve", str(plan_id))
    assert again.returncode == 0, again.stderr
    assert check_invariants(home, completed=["approve"]) == []


def test_doctor_as_the_next_command(stages, tmp_path):
    """After a crash between the page commit and its file, `kompl doctor` says what is left, `--fix`
    repairs it, and the next approve marks the plan without committing it twice."""
    home, plan_id = _single_plan_workspace(stages, tmp_path)
    assert harness.run(home, "approve", str(plan_id), fault="page.after_db_commit").killed
    found = harness.kompl_inproc(home, "doctor")
    assert found.returncode == 1 and "doctor --fix" in found.stdout, found.stdout
    assert "Traceback" not in found.stderr
    assert harness.kompl_inproc(home, "doctor", "--fix").returncode == 0
    assert harness.kompl_inproc(home, "doctor").returncode == 0
    pending = check_invariants(home)
    assert pending == [f"plan still open but its version is committed: {plan_id}"]
    assert harness.kompl_inproc(home, "approve", str(plan_id)).returncode == 0
    assert check_invariants(home, completed=["approve"]) == []


def test_the_checker_sees_what_it_checks(stages, tmp_path):
    """A green suite means something only if the checker catches broken workspaces."""
    home = tmp_path / "broken"
    shutil.copytree(stages["approved"], home)
    assert check_invariants(home) == []
    raw = sorted((home / "data" / "raw").glob("*.md.gz"))
    raw[0].unlink()
    (home / "data" / "raw" / "src-ffffffffffff.md.gz").write_bytes(b"")
    page = sorted((home / "data" / "pages").glob("*.md"))[0]
    page.write_text(page.read_text() + "\nedited\n")
    conn = sqlite3.connect(home / "data" / "kompl.db")
    conn.execute("INSERT INTO pages_fts (title, body, page_id) VALUES ('x', 'y', 999)")
    plan = conn.execute("SELECT plan_id FROM page_plans WHERE status = 'approved' LIMIT 1").fetchone()[0]
    conn.execute("UPDATE page_versions SET plan_id = ? WHERE plan_id IS NULL OR plan_id != ?", (plan, plan))
    conn.commit()
    conn.close()
    problems = "\n".join(check_invariants(home, completed=["nothing_like_this"]))
    for expected in ("source rows without raw file", "raw files without a source row", "edited_by_hand",
                     "FTS row of a deleted or unknown page", "draft committed twice", "audit: no 'nothing_like_this'"):
        assert expected in problems, (expected, problems)


@pytest.mark.slow
def test_random_time_kills(stages, tmp_path):
    """SIGKILL at random moments of every command (the long run is bench/reliability.py)."""
    rng = random.Random(7)
    failures = []
    for cmd in ("ingest", "compile", "approve", "delete", "import"):
        for _ in range(3):
            seconds = stages["refs"][cmd].seconds
            kill_after = rng.uniform(0.8, 2.0 + 1.5 * seconds)
            result = harness.trial(cmd, stages, tmp_path, kill_after=kill_after)
            if result.violations or result.lost or result.duplicated:
                failures.append(result)
    assert failures == []
