"""Candidate explanations of a failure group and how well each separates failing from passing cells.

The separation of a predicate is Youden's J: the share of failing cells where it holds minus
the share of passing cells where it holds. It is 1 for a perfect separator, 0 for something
equally common on both sides (a warning every cell prints) and does not depend on how many
cells each side has, so groups of different sizes rank on one scale.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

from orchestrator.model import UNSET, FlagValue

PAIR_PENALTY = 0.05
"""A pair is one more condition than a single flag: it must separate this much better to rank above."""
MIN_SUPPORT = 2
"""A predicate that holds in fewer failing cells than this names a coincidence, not a pattern."""

KIND_ORDER = {"flag": 0, "warning": 1, "flags": 2}
"""Tie order: a flag value is what the user can change; a warning at equal score is its symptom."""


@dataclass(frozen=True)
class Row:
    """One cell as the predicates see it: its varying flag values and its warnings."""

    cell_id: str
    label: str
    values: dict[str, FlagValue]
    warnings: frozenset[str]


@dataclass(frozen=True)
class Predicate:
    """A condition on a cell: flag values (all must hold), or a warning's presence or absence."""

    kind: str
    flags: tuple[tuple[str, frozenset[FlagValue]], ...] = ()
    warning: str | None = None
    present: bool = True

    def holds(self, row: Row) -> bool:
        """Whether the condition is true of this cell."""
        if self.warning is not None:
            return (self.warning in row.warnings) is self.present
        return all(row.values.get(name) in allowed for name, allowed in self.flags)

    def implies(self, other: Predicate) -> bool:
        """Whether every cell this holds for is one `other` holds for, judged on the flags alone."""
        if self.warning is not None or other.warning is not None:
            return False
        mine = dict(self.flags)
        return all(name in mine and mine[name] <= allowed for name, allowed in other.flags)

    @property
    def size(self) -> int:
        """How many flag values it names (the smaller, the more specific)."""
        return sum(len(allowed) for _, allowed in self.flags)

    @property
    def text(self) -> str:
        """A stable, human-readable form, also used to break the last ties."""
        if self.warning is not None:
            return f"{'' if self.present else 'no '}warning {self.warning}"
        return " and ".join(flag_text(name, sorted(vals, key=str)) for name, vals in self.flags)


@dataclass(frozen=True)
class Scored:
    """A predicate with its counts on the failing and passing sides."""

    predicate: Predicate
    fail_with: int
    fail_total: int
    pass_with: int
    pass_total: int

    @property
    def separation(self) -> float:
        """Youden's J: failing share minus passing share, from -1 to 1."""
        return self.fail_with / self.fail_total - self.pass_with / self.pass_total

    @property
    def score(self) -> float:
        """Separation less the complexity penalty, rounded so equal evidence ties exactly."""
        penalty = PAIR_PENALTY if self.predicate.kind == "flags" else 0.0
        return round(self.separation - penalty, 6)


def shown_value(value: FlagValue) -> str:
    """A flag value as text; an omitted flag shows as (unset)."""
    return UNSET if value is None else str(value)


def flag_text(name: str, values: Sequence[FlagValue]) -> str:
    """`name=value` for one value, `name in {a, b}` for several."""
    shown = [shown_value(v) for v in values]
    return f"{name}={shown[0]}" if len(shown) == 1 else f"{name} in {{{', '.join(shown)}}}"


def score(predicate: Predicate, fails: Sequence[Row], passes: Sequence[Row]) -> Scored:
    """Count where the predicate holds on each side."""
    return Scored(
        predicate,
        sum(predicate.holds(r) for r in fails),
        len(fails),
        sum(predicate.holds(r) for r in passes),
        len(passes),
    )


def rank(
    fails: Sequence[Row], passes: Sequence[Row], *, absence: bool = True, prefer: Sequence[str] = ()
) -> list[Scored]:
    """Every candidate with enough support and positive separation, best first, redundant pairs dropped.

    `absence=False` leaves out "warning absent" predicates, for groups that died before the
    phases whose warnings passing cells print. `prefer` lists the flags (the matrix axes) to name
    first when two findings hold in the same cells.
    """
    if not fails or not passes:
        return []
    rows = [*fails, *passes]
    names = sorted({n for r in rows for n in r.values}, key=str)
    names = [n for n in names if len({r.values.get(n) for r in rows}) > 1]
    singles = [score(p, fails, passes) for p in _flag_candidates(names, fails, passes)]
    pairs = [score(p, fails, passes) for p in _pair_candidates(names, fails)]
    texts = sorted({w for r in rows for w in r.warnings})
    warnings = [_warning(w, fails, passes, absence) for w in texts]
    kept = [s for s in singles + warnings if _useful(s)]
    kept += [p for p in pairs if _useful(p) and _beats_its_parts(p, singles)]
    outside = frozenset(names) - frozenset(prefer)

    def order(s: Scored) -> tuple[float, int, int, int, str]:
        # Best first: score, flag before warning before pair, the matrix's own axes, fewer values.
        p = s.predicate
        return (-s.score, KIND_ORDER[p.kind], sum(n in outside for n, _ in p.flags), p.size, p.text)

    return _distinct(sorted(kept, key=order), rows)


def _distinct(ranked: list[Scored], rows: Sequence[Row]) -> list[Scored]:
    """One finding per set of cells among flag findings: the first, which names the most axes.

    A flag an include sets for one backend holds wherever that backend does; listed twice it
    would read as a second, independent finding. A warning that holds in the same cells as a
    flag is kept: it is evidence of a different kind.
    """
    seen: set[tuple[bool, ...]] = set()
    kept: list[Scored] = []
    for scored in ranked:
        cells = tuple(scored.predicate.holds(r) for r in rows)
        if scored.predicate.warning is None and cells in seen:
            continue
        if scored.predicate.warning is None:
            seen.add(cells)
        kept.append(scored)
    return kept


def same_cells_flags(best: Scored, fails: Sequence[Row], passes: Sequence[Row]) -> list[Predicate]:
    """Other flag values that hold in exactly the cells a single-flag finding holds in.

    A bundle (`{quantization: fp8, kv-cache-dtype: fp8_e4m3}`) or an include sets its flags together,
    so the matrix cannot tell them apart; `_distinct` keeps one, and these are the ones it hid.
    """
    if best.predicate.kind != "flag":
        return []
    rows = [*fails, *passes]
    cells = tuple(best.predicate.holds(r) for r in rows)
    own = {name for name, _ in best.predicate.flags}
    names = sorted({n for r in rows for n in r.values if n not in own}, key=str)
    names = [n for n in names if len({r.values.get(n) for r in rows}) > 1]
    return [
        p for p in _flag_candidates(names, fails, passes) if tuple(p.holds(r) for r in rows) == cells
    ]


def _flag_candidates(names: list[str], fails: Sequence[Row], passes: Sequence[Row]) -> list[Predicate]:
    """Per flag: the value set that separates best, and the values never seen passing.

    Separation is additive over a flag's values, so the best set is exactly the values whose
    share among failing cells exceeds their share among passing cells; single values either
    belong to it (and separate less) or separate nothing. Each value needs support of its own,
    or a flag with a distinct value per cell (a seed, a port) would just list the failing cells.
    """
    found: list[Predicate] = []
    for name in names:
        on_fail = Counter(r.values.get(name) for r in fails)
        on_pass = Counter(r.values.get(name) for r in passes)
        supported = [v for v in on_fail if on_fail[v] >= MIN_SUPPORT]
        best = frozenset(v for v in supported if on_fail[v] / len(fails) > on_pass[v] / len(passes))
        pure = frozenset(v for v in supported if on_pass[v] == 0)
        for values in dict.fromkeys(s for s in (best, pure) if s):
            found.append(Predicate("flag", ((name, values),)))
    return found


def _pair_candidates(names: list[str], fails: Sequence[Row]) -> list[Predicate]:
    found: list[Predicate] = []
    for first, second in combinations(names, 2):
        seen = Counter((r.values.get(first), r.values.get(second)) for r in fails)
        for (a, b), count in seen.items():
            if count >= MIN_SUPPORT:
                found.append(Predicate("flags", ((first, frozenset({a})), (second, frozenset({b})))))
    return found


def _warning(text: str, fails: Sequence[Row], passes: Sequence[Row], absence: bool) -> Scored:
    """A warning's presence, or its absence when that is what failing cells have in common."""
    present = score(Predicate("warning", warning=text), fails, passes)
    if present.separation >= 0 or not absence:
        return present
    return score(Predicate("warning", warning=text, present=False), fails, passes)


def _useful(scored: Scored) -> bool:
    return scored.fail_with >= MIN_SUPPORT and scored.separation > 0


def _beats_its_parts(pair: Scored, singles: list[Scored]) -> bool:
    """A pair earns its place only by separating better than any single flag it narrows."""
    return all(pair.score > single.score for single in singles if pair.predicate.implies(single.predicate))
