"""At the end of a sweep: compare the passing cells' greedy answers, fail those that disagree (classify/agreement.py).

The comparison is pure; this reads the sweep's finished runs from the store and writes back the
revised verdicts. It runs after every cell has its verdict, and again after a resumed sweep.
"""

from __future__ import annotations

from orchestrator.classify.agreement import GreedyAnswer, Revision, disagreeing
from orchestrator.model import Status
from orchestrator.settings import ProbeSettings
from orchestrator.store.records import RunRecord
from orchestrator.store.sqlite import Store


def greedy_answers(store: Store, sweep_id: str, probes: ProbeSettings) -> list[GreedyAnswer]:
    """The greedy answer of each cell whose latest finished run passed."""
    labels = {c.cell_id: c.label for c in store.get_cells(sweep_id)}
    latest: dict[str, RunRecord] = {}
    for run in store.runs(sweep_id):  # in attempt order: the last one stays
        if run.state == "done" and run.verdict is not None:
            latest[run.cell_id] = run
    found: list[GreedyAnswer] = []
    for run in latest.values():
        if run.verdict is None or run.verdict.status is not Status.PASS or run.outcome is None:
            continue
        greedy = next((p for p in run.outcome.probes if p.name == "greedy" and p.ok), None)
        if greedy is None or not greedy.text_excerpt:
            continue
        prompt = str(greedy.request.get("text", ""))
        known = probes.greedy.expect_any if prompt == probes.greedy.prompt else ()
        found.append(
            GreedyAnswer(
                run.run_id, run.cell_id, labels.get(run.cell_id, run.cell_id), prompt, greedy.text_excerpt,
                run.verdict, tuple(known),
            )
        )  # fmt: skip
    return found


def review_answers(store: Store, sweep_id: str, probes: ProbeSettings) -> list[Revision]:
    """Fail the passing runs whose greedy answer disagrees with most cells; returns what was revised."""
    revisions = disagreeing(greedy_answers(store, sweep_id, probes))
    for revision in revisions:
        store.revise_verdict(revision.run_id, revision.verdict)
    return revisions
