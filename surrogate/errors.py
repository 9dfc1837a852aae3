"""Errors that say which file, episode and field is wrong.

Every user-facing failure on bad input goes through these so that messages
have one shape: ``<file>: episode <id>: field '<field>': <what is wrong>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class SurrogateError(Exception):
    """Base class of the project's own errors."""


class LocatedError(SurrogateError):
    """An error at a ``Location``: its message reads ``<location>: <reason>``."""

    def __init__(self, message: str, *, file=None, episode=None, field=None):
        self.location = Location(file, episode, field)
        self.reason = message
        where = str(self.location)
        super().__init__(f"{where}: {message}" if where else message)


@dataclass
class Location:
    """Where a problem is: any of the parts may be unknown (None)."""

    file: str | Path | None = None
    episode: str | int | None = None
    field: str | None = None

    def __str__(self) -> str:
        parts = []
        if self.file is not None:
            parts.append(str(self.file))
        if self.episode is not None:
            parts.append(f"episode {self.episode}")
        if self.field is not None:
            parts.append(f"field '{self.field}'")
        return ": ".join(parts)


class CaptureError(LocatedError, ValueError):
    """Bad capture data (a file, an episode or one field of it)."""

    @property
    def file(self):
        return self.location.file

    @property
    def episode(self):
        return self.location.episode

    @property
    def field(self):
        return self.location.field


class AssetError(LocatedError, ValueError):
    """Bad object asset: mesh, URDF or procedural parameters."""

    def __init__(self, message: str, *, file=None, field=None):
        super().__init__(message, file=file, field=field)


class ConfigError(LocatedError, ValueError):
    """Bad configuration value: names the key and what is allowed. ``keys``: every key of a refused combination
    (``key`` among them), so that a config check can say where any of them was set."""

    def __init__(self, message: str, *, file=None, key=None, keys: tuple = ()):
        super().__init__(message, file=file, field=key)
        self.keys = tuple(keys)


class OutputError(SurrogateError):
    """An output location that cannot be written: names the path and why."""

    def __init__(self, message: str, *, file=None):
        self.location = Location(file, None, None)
        self.reason = message
        super().__init__(f"{file}: {message}" if file is not None else message)

    @property
    def file(self):
        return self.location.file


class ForeignOutputError(OutputError, FileExistsError):
    """``--overwrite`` was asked for a folder this project did not write (never deleted)."""


class LockedError(OutputError):
    """Another live process is writing the same output."""
