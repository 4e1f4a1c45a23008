"""Prompt templates: files under `kompl/prompts/`, rendered with their version.

A template is a small text file `<name>.md`:

    version: 2
    description: what the prompt is for (optional; any `key: value` header line is kept)
    ---system---
    The system part.
    ---user---
    The user part, with {{variables}}. Source text goes in a fence: {{source|fence}}.

Placeholders are `{{name}}` (strings as they are, anything else as JSON),
`{{name|json}}` (always JSON) and `{{name|fence}}` (the value wrapped in a data
fence labelled with the variable's name; see `fence`). A placeholder without
a value is an error, never an empty string. Values are inserted in one pass,
so a value that contains `{{...}}` is not expanded again.

Every rendered system part starts with `_base_system.md`, which tells the
model that fenced text is data and that instructions inside sources are not
instructions. Files whose name starts with `_` are shared pieces, not prompts.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kompl.errors import KomplError

PROMPTS_DIR = Path(__file__).resolve().parent
BASE_SYSTEM = "_base_system"
JSON_REPLY = "_json_reply"
RETRY_INVALID = "_retry_invalid"

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_HEADER_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*:\s*(.*)$")
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\|\s*([a-z]+)\s*)?\}\}")
_SYSTEM_MARK = "---system---"
_USER_MARK = "---user---"
_FILTERS = ("fence", "json")


class PromptError(KomplError):
    """A prompt template is missing or malformed, or a variable it needs was not given."""


@dataclass(frozen=True)
class Template:
    name: str
    version: str
    system: str
    user: str
    header: dict[str, str]

    @property
    def variables(self) -> set[str]:
        """Names of the placeholders used in the system and user parts."""
        return {m.group(1) for m in _PLACEHOLDER.finditer(self.system + "\n" + self.user)}


def render(name: str, variables: dict[str, Any]) -> tuple[str, str, str]:
    """Render template `name` with `variables`: returns (system, user, version).

    The system part is the shared base rules followed by the template's own system text.
    """
    template = load(name)
    system = _fill(template, template.system, variables)
    user = _fill(template, template.user, variables)
    base = _piece(BASE_SYSTEM)
    system = f"{base}\n\n{system}".strip() if system else base
    return system, user, template.version


def json_instruction(json_schema: dict[str, Any]) -> str:
    """The system-prompt paragraph asking for JSON that matches `json_schema`."""
    return _substitute(_piece(JSON_REPLY), {"schema": json.dumps(json_schema, ensure_ascii=False, indent=1)})


def retry_instruction(error: str) -> str:
    """The user message sent after an invalid reply, quoting what was wrong with it."""
    return _substitute(_piece(RETRY_INVALID), {"error": error})


def fence(text: str, label: str = "source") -> str:
    """Wrap `text` in a data fence the text itself cannot close.

    The fence id is derived from a hash of the text. A text can only contain its
    own closing line by containing its own hash, and should it happen anyway the
    id is re-derived until the closing line is absent, so the fence always holds.
    """
    text = str(text)
    label = re.sub(r"[^A-Za-z0-9_.-]+", "_", label).strip("_") or "data"
    salt = 0
    while True:
        digest = hashlib.sha256(f"{salt}:{text}".encode("utf-8", "surrogatepass")).hexdigest()[:16]
        end = f"<<<END DATA id={digest}>>>"
        if end not in text:
            break
        salt += 1
    body = text if text.endswith("\n") else text + "\n"
    return f"<<<DATA {label} id={digest}>>>\n{body}{end}"


def available() -> list[str]:
    """Names of the prompt templates shipped (shared `_` pieces excluded)."""
    return sorted(p.stem for p in PROMPTS_DIR.glob("*.md") if not p.name.startswith("_"))


def load(name: str) -> Template:
    """Parse template `name` (cached per file modification time)."""
    if not _NAME.match(name or ""):
        raise PromptError(f"Invalid prompt name {name!r}", hint="prompt names are lower-case file stems like 'extract'")
    path = PROMPTS_DIR / f"{name}.md"
    if not path.is_file():
        raise PromptError(
            f"No prompt template {name!r} (looked for {path})",
            hint=f"known prompts: {', '.join(available()) or 'none'}",
        )
    return _parse(path, path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=128)
def _parse(path: Path, _mtime: int) -> Template:
    text = path.read_text(encoding="utf-8")
    name = path.stem
    if text.count(_SYSTEM_MARK) != 1 or text.count(_USER_MARK) != 1 or text.index(_SYSTEM_MARK) > text.index(_USER_MARK):
        raise PromptError(f"Prompt {name!r} must have one {_SYSTEM_MARK} section followed by one {_USER_MARK} section")
    head, rest = text.split(_SYSTEM_MARK, 1)
    system, user = rest.split(_USER_MARK, 1)
    header: dict[str, str] = {}
    for line in head.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _HEADER_LINE.match(line.strip())
        if not match:
            raise PromptError(f"Prompt {name!r}: bad header line {line!r} (expected `key: value`)")
        header[match.group(1).lower()] = match.group(2).strip()
    if not header.get("version"):
        raise PromptError(f"Prompt {name!r} has no `version:` line in its header")
    template = Template(name=name, version=header["version"], system=system.strip(), user=user.strip(), header=header)
    for match in _PLACEHOLDER.finditer(template.system + template.user):
        if match.group(2) and match.group(2) not in _FILTERS:
            raise PromptError(f"Prompt {name!r}: unknown filter |{match.group(2)} (known: {', '.join(_FILTERS)})")
    return template


def _fill(template: Template, text: str, variables: dict[str, Any]) -> str:
    missing = sorted(template.variables - set(variables))
    if missing:
        raise PromptError(
            f"Prompt {template.name!r} needs variable(s) {', '.join(missing)}, which were not given",
            hint="pass every placeholder of the template in Task.variables",
        )
    return _substitute(text, variables)


def _substitute(text: str, variables: dict[str, Any]) -> str:
    def value(match: re.Match) -> str:
        name, flt = match.group(1), match.group(2)
        if name not in variables:
            raise PromptError(f"Prompt variable {name!r} was not given")
        raw = variables[name]
        if flt == "fence":
            return fence(raw if isinstance(raw, str) else _json(raw), name)
        if flt == "json" or not isinstance(raw, str):
            return _json(raw)
        return raw

    return _PLACEHOLDER.sub(value, text)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


@functools.lru_cache(maxsize=8)
def _piece_cached(name: str, _mtime: int) -> str:
    return (PROMPTS_DIR / f"{name}.md").read_text(encoding="utf-8").strip()


def _piece(name: str) -> str:
    path = PROMPTS_DIR / f"{name}.md"
    return _piece_cached(name, path.stat().st_mtime_ns)


__all__ = ["PromptError", "Template", "available", "fence", "json_instruction", "load", "render", "retry_instruction"]
