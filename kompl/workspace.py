"""Find and create workspaces; load settings from kompl.toml and KOMPL_* variables.

A workspace is a folder holding `schema.md`, an optional `kompl.toml` and
`data/` (the SQLite database, converted sources, originals, pages, history and
vectors). Commands find it from `--home`, then `KOMPL_HOME`, then the current
directory.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kompl.errors import ConfigError, WorkspaceError

DB_NAME = "kompl.db"
SUBDIRS = ("raw", "originals", "pages", "history", "vectors")
OFFLINE_MODEL = "kompl/offline"


@dataclass
class Settings:
    """Every tunable of a workspace, with its default.

    Read from `kompl.toml` (top-level keys or a `[kompl]` table), then overridden
    by environment variables named `KOMPL_<KEY>` in upper case.
    """

    model: str = OFFLINE_MODEL
    max_input_mb: float = 100.0
    fetch_timeout_s: float = 20.0
    fetch_max_redirects: int = 5
    allow_private_urls: bool = False
    auto_approve: bool = False
    entity_promotion_threshold: int = 2
    lint_interval_hours: float = 36.0
    llm_concurrency: int = 4
    llm_max_retries: int = 3
    llm_timeout_s: float = 120.0
    daily_budget_usd: float = 0.0  # 0 = no cap
    embedder: str = "hashing"
    extract_chunk_tokens: int = 0  # source tokens per extraction call (0 = a default per model)
    draft_input_tokens: int = 0  # prompt budget of one drafting call (0 = a default per model)
    db_busy_timeout_s: float = 0.0  # how long to wait for another command's write lock (0 = 30 s)

    @classmethod
    def load(cls, root: Path | None, env: dict[str, str] | None = None) -> "Settings":
        env = dict(os.environ) if env is None else env
        values: dict[str, Any] = {}
        origin: dict[str, str] = {}  # where each value came from, for error messages
        if root is not None:
            path = root / "kompl.toml"
            if path.exists():
                try:
                    data = tomllib.loads(path.read_text(encoding="utf-8"))
                except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                    raise ConfigError(
                        f"Could not read {path}: {exc}", hint="fix the TOML syntax or remove the file"
                    ) from None
                values.update({k: v for k, v in data.items() if not isinstance(v, dict)})
                values.update(data.get("kompl", {}))
                origin.update((name, f"in {path}") for name in values)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        for name in fields:
            raw = env.get(f"KOMPL_{name.upper()}")
            if raw is not None and raw != "":
                values[name] = raw
                origin[name] = f"from KOMPL_{name.upper()}"
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise ConfigError(
                f"Unknown setting(s) in kompl.toml: {', '.join(unknown)}",
                hint=f"known settings: {', '.join(sorted(fields))}",
            )
        kwargs = {
            name: _coerce(name, fields[name].type, value, origin.get(name, ""))
            for name, value in values.items()
        }
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _coerce(name: str, type_name: Any, value: Any, origin: str = "") -> Any:
    kind = str(type_name)
    where = f" ({origin})" if origin else ""
    try:
        if kind == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in {"1", "true", "yes", "on"}:
                return True
            if text in {"0", "false", "no", "off"}:
                return False
            raise ValueError(value)
        if kind in ("int", "float"):
            if isinstance(value, bool) or (kind == "int" and isinstance(value, float)):
                raise ValueError(value)  # TOML `true` is not a number, 2.5 is not a count
            number = int(value) if kind == "int" else float(value)
            # Sizes, timeouts, counts and budgets: a negative value is always a mistake.
            if number < 0 or number != number:
                raise ConfigError(f"Setting {name!r}{where} must not be negative, got {value!r}")
            return number
        return str(value)
    except (TypeError, ValueError):
        expected = {"bool": "true or false", "int": "a whole number", "float": "a number"}.get(kind, f"a {kind}")
        raise ConfigError(f"Setting {name!r}{where} must be {expected}, got {value!r}") from None


@dataclass
class Workspace:
    """Paths of one workspace, and its settings."""

    root: Path
    settings: Settings = field(default_factory=Settings)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def db_path(self) -> Path:
        return self.data / DB_NAME

    @property
    def raw_dir(self) -> Path:
        return self.data / "raw"

    @property
    def originals_dir(self) -> Path:
        return self.data / "originals"

    @property
    def pages_dir(self) -> Path:
        return self.data / "pages"

    @property
    def history_dir(self) -> Path:
        return self.data / "history"

    @property
    def vectors_dir(self) -> Path:
        return self.data / "vectors"

    @property
    def schema_path(self) -> Path:
        return self.root / "schema.md"


def default_schema_path() -> Path:
    """The shipped default `schema.md` (inside the wheel, or at the repository root)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "schema.md", here.parent / "schema.md"):
        if candidate.exists():
            return candidate
    raise WorkspaceError("The default schema.md is missing from this kompl installation", hint="reinstall kompl")


def is_workspace(path: Path) -> bool:
    return (path / "data" / DB_NAME).exists()


def resolve_home(home: str | os.PathLike | None) -> Path:
    """Where the workspace should be: --home, then KOMPL_HOME, then the current directory."""
    if home:
        return Path(home).expanduser().resolve()
    env = os.environ.get("KOMPL_HOME")
    if env:
        return Path(env).expanduser().resolve()
    return Path.cwd().resolve()


def find_workspace(home: str | os.PathLike | None = None) -> Workspace:
    root = resolve_home(home)
    if not is_workspace(root):
        raise WorkspaceError(
            f"No kompl workspace at {root}",
            hint=f"create one with `kompl init {root}` or point at one with --home DIR / KOMPL_HOME",
        )
    from kompl import db

    settings = Settings.load(root)
    db.set_busy_timeout(settings.db_busy_timeout_s or None)
    return Workspace(root=root, settings=settings)


def init_workspace(root: Path) -> tuple[Workspace, bool]:
    """Create (or complete) a workspace at `root`. Returns (workspace, created)."""
    from kompl import db

    root = root.expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise WorkspaceError(f"{root} exists and is not a folder", hint="choose another path")
    created = not is_workspace(root)
    ws = Workspace(root=root)
    for sub in SUBDIRS:
        (ws.data / sub).mkdir(parents=True, exist_ok=True)
    if not ws.schema_path.exists():
        shutil.copyfile(default_schema_path(), ws.schema_path)
    ws.settings = Settings.load(root)
    conn = db.connect(ws.db_path)
    try:
        if created:
            with db.transaction(conn, "init", target=str(root), details={"schema": "schema.md"}):
                pass
    finally:
        conn.close()
    return ws, created
