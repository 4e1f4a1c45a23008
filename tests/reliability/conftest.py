"""Shared fixtures of the reliability suite: the prepared stage workspaces (built once per session)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def stages(tmp_path_factory):
    from reliability.harness import build_stages

    return build_stages(tmp_path_factory.mktemp("stages"))
