"""`--json` beside `--format term|json`: one reconciliation for every command that offers both.

Kept apart from cli/common (hosts, the store, rich): `classify` uses it and must start without those.
"""

from __future__ import annotations

import typer

FORMAT_HELP = "Output format: term (for people), json (the same as --json)."


def json_wanted(as_json: bool, fmt: str | None) -> bool:
    """`--json`, or `--format json`: one spelling of output formats across commands, `--json` kept where documented."""
    if as_json and fmt == "term":
        raise typer.BadParameter("--json asks for JSON and --format term for people: pass one", param_hint="--json")
    return as_json or fmt == "json"
