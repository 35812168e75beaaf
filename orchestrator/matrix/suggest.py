"""What to tell a user whose flag the host does not know, or spells differently. Pure, on a FlagGrammar.

A near miss gets the host's closest flags ("did you mean --attention-backend?"); a prefix of several
flags gets those flags; a typo of an old spelling gets the host's name with the rename; a flag that a
later release split in two gets both of its successors. validate.py adds argparse's own message.
"""

from __future__ import annotations

import difflib
import functools

from orchestrator.matrix.flags import FLAG_RENAMES, related_flags, spellings
from orchestrator.matrix.grammar import FlagGrammar

CUTOFF = 0.6
"""difflib's usual similarity floor for a suggestion."""
NEAR = 0.03
"""Suggestions within this similarity of the best one are shown with it."""


def rename_note(grammar: FlagGrammar, canonical: str, spelling: str) -> str:
    """How the host's spelling of a cell's flag differs from the matrix's: a rename, or a prefix completed."""
    if spelling.lstrip("-") in spellings(canonical):
        return f"--{canonical} is {spelling} in {grammar.release}"
    return f"--{canonical} is read as {spelling}, the one {grammar.release} flag it begins (write it in full)"


def unknown_flag_hint(grammar: FlagGrammar, canonical: str) -> str:
    """`; did you mean ...?` and the like for a flag the host lacks under every spelling (may be empty)."""
    hint = ""
    others = [f"--{s}" for s in spellings(canonical) if s != canonical]
    if others:
        hint += f", nor under its other name {', '.join(others)}"
    successors = [f"--{n}" for n in related_flags(canonical) if grammar.lookup(n) is not None]
    if successors:
        return hint + f"; {grammar.release} has {' and '.join(successors)} in its place: choose the one you mean"
    close = suggestions(grammar, canonical)
    return hint + (f"; did you mean {' or '.join(close)}?" if close else "")


def suggestions(grammar: FlagGrammar, name: str, limit: int = 3) -> list[str]:
    """The host's flags a misspelt one most likely meant, best first (only the near-best, at most `limit`).

    A prefix of several flags means one of those (argparse's "could match"). A typo of an old spelling
    (`--nsa-decode-backnd` where the release says `--dsa-decode-backend`) gets the new name and the rename.
    """
    # Every cell of a matrix repeats the same unknown flag: one search each.
    return list(_suggestions(grammar, name, limit))


@functools.lru_cache(maxsize=256)
def _suggestions(grammar: FlagGrammar, name: str, limit: int) -> tuple[str, ...]:
    given = f"--{name.lstrip('-')}"
    prefixed = [n for n in grammar.names() if n.startswith(given)]
    if len(prefixed) > 1:
        return tuple(prefixed[:limit])
    # Candidate spelling -> (the host's flag, how to show it).
    shown: dict[str, tuple[str, str]] = {}
    for option in grammar.names():
        if not option.startswith("--no-") or given.startswith("--no-"):
            shown[option] = (option, option)
    for old, new in FLAG_RENAMES.items():
        spelled = next((f"--{s}" for s in spellings(new) if grammar.lookup(s) is not None), None)
        if spelled is not None and f"--{old}" not in shown:
            shown[f"--{old}"] = (spelled, f"{spelled} (--{old} is {spelled} in {grammar.release})")
    matcher = difflib.SequenceMatcher()
    matcher.set_seq2(given)
    scored: list[tuple[float, str]] = []
    for candidate in shown:
        matcher.set_seq1(candidate)
        # difflib's own cheap upper bounds first, as get_close_matches does: ratio() is the slow one.
        if matcher.real_quick_ratio() >= CUTOFF and matcher.quick_ratio() >= CUTOFF:
            ratio = matcher.ratio()
            if ratio >= CUTOFF:
                scored.append((ratio, candidate))
    scored.sort(key=lambda t: (-t[0], t[1]))
    found: dict[str, str] = {}
    for ratio, candidate in scored:
        flag, text = shown[candidate]
        if ratio >= scored[0][0] - NEAR and flag not in found and len(found) < limit:
            found[flag] = text
    return tuple(found.values())
