"""explain and compare on random small sweeps: they never crash and their counts add up."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.analysis.compare import compare
from orchestrator.analysis.explain import MIN_LISTED, explain, group_of
from orchestrator.analysis.inputs import CellOutcome, SweepView
from orchestrator.analysis.predicates import MIN_SUPPORT
from orchestrator.analysis.render import render_comparison, render_explanation
from orchestrator.model import Category, FlagValue, Phase, Status
from tests.analysis.test_inputs import view

FLAGS = ("attention-backend", "nsa-decode-backend", "kv-cache-dtype")
WARNINGS = ("w-deepgemm", "w-common", "w-rare")


@st.composite
def cells(draw: st.DrawFn) -> CellOutcome:
    flags: dict[str, FlagValue] = {name: draw(st.sampled_from(["a", "b", "c", None])) for name in FLAGS}
    attempts = draw(st.integers(1, 3))
    return CellOutcome(
        cell_id=draw(st.sampled_from(["c1", "c2", "c3", "c4"])),
        flags=flags,
        axes=FLAGS,
        install=draw(st.sampled_from([None, "stable", "nightly"])),
        status=draw(st.sampled_from(list(Status))),
        phase=draw(st.sampled_from([None, *Phase])),
        category=draw(st.sampled_from([Category.NAN_IN_PROBS, Category.CUDA_OOM, Category.HEALTHY])),
        root_cause_line=draw(st.sampled_from([None, "error 1 at 0x10", "error 2 at 0x20", "other"])),
        ready_s=draw(st.one_of(st.none(), st.floats(0, 100))),
        warnings=tuple(draw(st.sets(st.sampled_from(WARNINGS)))),
        attempts=attempts,
        passes=draw(st.integers(0, attempts)),
    )


views = st.lists(cells(), max_size=14).map(view)


def _holds(cell: CellOutcome, flags: dict[str, tuple[FlagValue, ...]], with_install: bool) -> bool:
    values: dict[str, FlagValue] = dict(cell.canonical_flags)
    if with_install:
        values["install"] = cell.install
    return all(values.get(name) in allowed for name, allowed in flags.items())


@settings(max_examples=150, deadline=None)
@given(views)
def test_explain_never_crashes_and_its_counts_add_up(sweep: SweepView) -> None:
    result = explain(sweep)
    with_install = len(sweep.installs) > 1
    clean = [c for c in sweep.cells if c.status in (Status.PASS, Status.FAIL, Status.INVALID) and not c.flaky]
    passing = [c for c in clean if c.status is Status.PASS]
    assert result.pass_total == len(passing)
    sizes = [len(g.failing) for g in result.groups]
    assert sizes == sorted(sizes, reverse=True)
    assert sum(sizes) == len(clean) - len(passing)
    for group in result.groups:
        members = [c for c in clean if c.status is not Status.PASS and group_of(c) == group.category]
        assert len(members) == len(group.failing)
        scores = [f.score for f in group.findings]
        assert scores == sorted(scores, reverse=True)
        for f in group.findings:
            assert MIN_SUPPORT <= f.fail_with <= f.fail_total == len(group.failing)
            assert 0 <= f.pass_with <= f.pass_total == len(passing)
            assert f.separation >= MIN_LISTED
            if f.warning is None:
                assert f.fail_with == sum(_holds(c, f.flags, with_install) for c in members)
                assert f.pass_with == sum(_holds(c, f.flags, with_install) for c in passing)
        if not group.findings:
            assert group.notes
    for fmt in ("term", "md"):
        assert render_explanation(result, fmt)
    assert json.loads(render_explanation(result, "json"))["findings"] == [f.to_dict() for f in result.findings]


@settings(max_examples=100, deadline=None)
@given(views, views)
def test_compare_accounts_for_every_cell_once(a: SweepView, b: SweepView) -> None:
    result = compare(a, b)
    assert result.matched + len(result.added) == len(b.cells)
    assert result.matched + len(result.removed) == len(a.cells)
    buckets = result.regressions + result.fixes + result.changed + result.unverified
    assert len(buckets) <= result.matched
    json.loads(render_comparison(result, "json"))
    assert render_comparison(result, "md") and render_comparison(result, "term")
    same = compare(a, a)
    assert not (same.regressions or same.fixes or same.changed or same.added or same.removed or same.env_diff)
