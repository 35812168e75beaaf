"""Pure planning: which cells a host can accept, in its own flag spelling, and which GPUs each may use.

Nothing here touches the host: the host's grammar (read from its `--help` by preflight) comes in,
decisions come out, so `validate` and `sweep` reject the same cells for the same reasons.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from orchestrator.errors import ConfigError, ConfigErrors
from orchestrator.matrix.grammar import FlagGrammar
from orchestrator.matrix.validate import translate_cell
from orchestrator.model import Cell, FlagValue
from orchestrator.secret import SecretRef

RESERVED_FLAGS = ("host", "port")
"""Chosen per launch by the orchestrator (loopback, and a port spaced from other live launches)."""


@dataclass(frozen=True)
class CellPlan:
    """A cell as this host will launch it, or why it cannot."""

    cell: Cell
    argv: tuple[str | SecretRef, ...]
    """The cell's flags in the host's spelling; a secret's value is a SecretRef word, never its text."""
    problems: tuple[str, ...] = ()
    renamed: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    """How the host's spelling differs from the matrix's (a renamed flag, a prefix read as a flag)."""

    @property
    def ok(self) -> bool:
        """Whether the host's launcher would accept this cell."""
        return not self.problems

    @property
    def reason(self) -> str:
        """All problems, one sentence each."""
        return "; ".join(self.problems)


def plan_cell(cell: Cell, grammar: FlagGrammar, host_gpus: int) -> CellPlan:
    """Translate one cell into the host's spelling and check it against the host's grammar."""
    # A secret is checked against the grammar as a stand-in word, then put back as its reference.
    refs: dict[str, SecretRef] = {}
    flags: dict[str, FlagValue] = {}
    for name, value in cell.flags.items():
        if name in RESERVED_FLAGS:
            continue
        if isinstance(value, SecretRef):
            refs[f"<secret {value.name}>"] = value
            value = f"<secret {value.name}>"
        flags[name] = value
    translation = translate_cell(grammar, flags)
    problems = list(translation.problems)
    # argparse takes any int; a server given 0 or -1 would fail at startup, after its GPUs were booked.
    asked = cell.flags.get("tp-size")
    if isinstance(asked, (int, str)) and not isinstance(asked, bool) and re.fullmatch(r"-?\d+", str(asked).strip()):
        problems += [f"tp-size {asked} is below 1: a server needs at least one GPU"] if int(asked) < 1 else []
    if cell.tp_size > host_gpus:
        problems.append(f"tp-size {cell.tp_size} needs more GPUs than the host has ({host_gpus})")
    argv = tuple(refs.get(word, word) for word in translation.argv)
    return CellPlan(cell, argv, tuple(problems), dict(translation.renamed), tuple(translation.notes))


def plan_cells(
    cells: Iterable[Cell], grammar_for: Callable[[str | None], FlagGrammar], host_gpus: int
) -> list[CellPlan]:
    """Plan every cell with the grammar of its install."""
    return [plan_cell(cell, grammar_for(cell.install), host_gpus) for cell in cells]


def launch_argv(launcher: list[str], plan: CellPlan, port: int) -> tuple[str | SecretRef, ...]:
    """The full launch command: launcher words, the cell's flags, then loopback host and port."""
    return (*launcher, *plan.argv, "--host", "127.0.0.1", "--port", str(port))


def flag_secrets(argv: Iterable[str | SecretRef], environ: Mapping[str, str]) -> dict[str, str]:
    """Variable -> value of every secret on a command line, read now; ConfigErrors naming those unset."""
    values: dict[str, str] = {}
    missing: list[ConfigError] = []
    for ref in (w for w in argv if isinstance(w, SecretRef)):
        value = ref.resolve(environ)
        if not value:  # an empty key would switch the server's authentication off
            missing.append(
                ConfigError(
                    f"environment variable {ref.name} is not set (or empty); a secret flag of the launch reads it",
                    fix=f"export {ref.name}=... in the shell that runs the orchestrator",
                )
            )
        else:
            values[ref.name] = value
    if missing:
        raise ConfigErrors(missing)
    return values


def check_flag_secrets(cells: Iterable[Cell], environ: Mapping[str, str]) -> None:
    """ConfigErrors naming every secret flag variable the cells need and `environ` lacks (before any launch)."""
    refs = {v.name: v for c in cells for v in c.flags.values() if isinstance(v, SecretRef)}
    flag_secrets(refs.values(), environ)


class GpuPool:
    """Which of the host's GPUs are free for the next launch (packing cells on disjoint GPU sets)."""

    def __init__(self, total: int, unavailable: Iterable[int] = ()):
        self.total = total
        self._free = [g for g in range(total) if g not in set(unavailable)]

    @property
    def free(self) -> tuple[int, ...]:
        """GPUs not given to a launch."""
        return tuple(self._free)

    def take(self, count: int) -> tuple[int, ...] | None:
        """The lowest `count` free GPUs, or None if not enough are free."""
        if count > len(self._free):
            return None
        taken, self._free = self._free[:count], self._free[count:]
        return tuple(taken)

    def give_back(self, gpus: Iterable[int]) -> None:
        """Return GPUs once their launch is stopped and nvidia-smi shows them free."""
        self._free = sorted(set(self._free) | set(gpus))
