"""Fault injection for crash tests: `KOMPL_FAULT=<point>` kills the process at that point.

`point(name)` is a no-op unless the environment variable names exactly that
point; then the process dies at once with SIGKILL, like a power cut or an OOM
kill, so no `finally` block, atexit hook or buffered write gets to run. Tests use
it to prove that a crash anywhere leaves the workspace consistent.
"""

from __future__ import annotations

import os
import signal


def point(name: str) -> None:
    if os.environ.get("KOMPL_FAULT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
