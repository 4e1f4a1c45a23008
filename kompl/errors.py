"""The one exception hierarchy of kompl, and the exit codes it maps to.

Every error a user can cause or fix derives from `KomplError`. Each carries a
message that says what was being done, what failed and how to fix it; the CLI
turns it into one line on stderr and the error's exit code, never a traceback
(set KOMPL_DEBUG=1 to re-raise instead).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURES = 1  # the command ran, but some items failed (or lint found problems)
EXIT_ERROR = 2  # the command could not run: bad usage, no workspace, locked database


class KomplError(Exception):
    """Base of every error kompl reports to a person."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class WorkspaceError(KomplError):
    """No workspace where one was expected, or a workspace that cannot be used."""


class ConfigError(KomplError):
    """A setting in kompl.toml or a KOMPL_* variable is invalid."""


class DatabaseError(KomplError):
    """The database is locked, damaged, or from a newer kompl."""


class IngestError(KomplError):
    """One input could not be ingested. `code` is a stable machine-readable reason."""

    def __init__(self, code: str, message: str, *, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.code = code


class NotFoundError(KomplError):
    """A named source, page or draft does not exist."""
