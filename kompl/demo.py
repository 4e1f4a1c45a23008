"""The bundled example: a small corpus about penicillin, and the main job run on it."""

from __future__ import annotations

from pathlib import Path

from kompl.errors import KomplError


def example_dir() -> Path:
    """The bundled example corpus (inside the wheel, or data/example in a checkout)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "example", here.parent / "data" / "example"):
        if candidate.is_dir():
            return candidate
    raise KomplError("The bundled example corpus is missing from this installation", hint="reinstall kompl")
