"""The simulator's errors (a scenario or grammar it cannot use, with file, line and fix): the tool's own classes."""

from __future__ import annotations

from orchestrator.errors import ConfigError, ConfigErrors

__all__ = ["ConfigError", "ConfigErrors"]
