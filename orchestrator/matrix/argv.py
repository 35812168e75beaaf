"""Turn a command line of SGLang flags (`orchestrator run -- ...`) into a cell, using the host's grammar.

The grammar says which flags take a value, so `--trust-remote-code --tp 8` parses as SGLang
would parse it, abbreviations included; flags the host does not know are kept as given, and
preflight then rejects them with SGLang's own message.
"""

from __future__ import annotations

from orchestrator.matrix.expand import cell_id
from orchestrator.matrix.flags import canonical_name, canonicalize
from orchestrator.matrix.grammar import FlagGrammar, FlagSpec
from orchestrator.model import Cell, FlagList, FlagValue
from orchestrator.secret import parse_ref, protect


def _spec_for(grammar: FlagGrammar, option: str) -> tuple[str, FlagSpec | None]:
    """The option's full spelling and spec, resolving a unique prefix as argparse does."""
    exact = grammar.lookup(option)
    if exact is not None:
        return option, exact
    matches = [n for n in grammar.names() if n.startswith(option)]
    if len(matches) == 1:
        return matches[0], grammar.lookup(matches[0])
    return option, None


def flags_from_argv(argv: list[str], grammar: FlagGrammar) -> dict[str, FlagValue]:
    """`["--tp", "8", "--trust-remote-code"]` -> {"tp-size": "8", "trust-remote-code": True}."""
    flags: dict[str, FlagValue] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if not token.startswith("--"):
            flags.setdefault("_positional", token)
            continue
        option, _, inline = token.partition("=")
        name, spec = _spec_for(grammar, option)
        if spec is not None and spec.negatable and name.startswith("--no-"):
            flags[canonical_name(spec.primary)] = False
            continue
        key = canonical_name(spec.primary if spec else name)
        takes_value = spec.takes_value if spec else (i < len(argv) and not argv[i].startswith("--"))
        if inline:
            flags[key] = parse_ref(inline) or inline
        elif takes_value and i < len(argv):
            values = [argv[i]]
            i += 1
            while spec is not None and spec.nargs in ("*", "+") and i < len(argv) and not argv[i].startswith("--"):
                values.append(argv[i])
                i += 1
            flags[key] = FlagList(values) if len(values) > 1 else (parse_ref(values[0]) or values[0])
        else:
            flags[key] = True
    return flags


def cell_from_argv(argv: list[str], grammar: FlagGrammar) -> Cell:
    """A one-off cell from a command line; every given flag counts as an axis for display."""
    flags = flags_from_argv(argv, grammar)
    flags.pop("_positional", None)
    canonical = {k: protect(k, v, "the command line") for k, v in canonicalize(flags).items()}
    return Cell(cell_id=cell_id(canonical), flags=canonical, axes=tuple(canonical))
