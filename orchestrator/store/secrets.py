"""The store's last line of defence against secrets: every record is scrubbed again on its way in.

Callers already mask (ShellCommand, masked env, harvest), but a token written to the database once
stays in its pages and backups. What counts as secret is decided in orchestrator/secret.py, once.
"""

from __future__ import annotations

from orchestrator.secret import MASK, is_secret_name, scrub, scrub_text

__all__ = ["MASK", "is_secret_name", "scrub", "scrub_text"]
