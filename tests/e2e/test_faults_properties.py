"""Properties the other property tests leave out: hostile text through the matrix loader and expansion, and
arbitrary log bytes through the whole harvest -> classify -> store path, the live tail and the huge-log grep.

tests/matrix/test_expand_properties.py already checks expansion against GitHub's rules with a small vocabulary;
tests/harvest/test_evidence.py checks the evidence builder on arbitrary bytes (without probe outcomes).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import replace
from itertools import product
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.classify.verdict import classify
from orchestrator.cli.classify import payload
from orchestrator.config.load import matrix_from_yaml
from orchestrator.config.model import Matrix
from orchestrator.config.yamlpos import parse_yaml
from orchestrator.errors import ConfigError
from orchestrator.harvest.evidence import EvidenceBuilder
from orchestrator.harvest.fetch import LogTail, _parse_grep, harvest_huge
from orchestrator.harvest.live import LiveLog
from orchestrator.harvest.needles import HOST_GREP_REGEX
from orchestrator.knowledge.fatal import is_fatal_line
from orchestrator.knowledge.markers import phase_of_line
from orchestrator.matrix.expand import expand
from orchestrator.model import AxisValue, Category, Phase, ProbeOutcome, ProbeResult, Status
from orchestrator.secret import Masker
from orchestrator.store.secrets import scrub
from orchestrator.transport.local import LocalTransport
from tests.matrix.test_expand_properties import matrices

# Text a user may put in a value: any character but NUL (refused by the loader) and lone surrogates.
VALUE = st.text(st.characters(codec="utf-8", blacklist_characters="\0"), min_size=1, max_size=12)
FREE_TEXT_FLAGS = ["served-model-name", "revision", "download-dir"]


@st.composite
def hostile_matrices(draw: st.DrawFn) -> dict[str, object]:
    """A valid matrix document whose axes are free-text flags with arbitrary values, and excludes among them."""
    names = draw(st.lists(st.sampled_from(FREE_TEXT_FLAGS), min_size=1, max_size=3, unique=True))
    axes = {n: draw(st.lists(VALUE, min_size=1, max_size=3, unique=True)) for n in names}
    combos = [dict(zip(axes, values, strict=True)) for values in product(*axes.values())]
    # Never every combination: a matrix that excludes everything is refused, rightly.
    exclude = draw(st.lists(st.sampled_from(combos), max_size=len(combos) - 1, unique_by=lambda c: tuple(c.values())))
    include = draw(st.lists(st.fixed_dictionaries({"model-path": VALUE}), max_size=2))
    return {"name": draw(VALUE), "flags": {"tp-size": 1}, "matrix": {**axes, "exclude": exclude, "include": include}}


@settings(max_examples=100, deadline=None)
@given(hostile_matrices())
def test_hostile_values_survive_the_yaml_file_and_expansion_unchanged(doc: dict[str, object]) -> None:
    # Escaped (\\x85...): written raw, PyYAML's own dumper emits line-break characters its loader folds.
    text = yaml.safe_dump(doc, allow_unicode=False, sort_keys=False)
    loaded = matrix_from_yaml(parse_yaml(text, "m.yaml"))
    section = dict(doc["matrix"])  # type: ignore[call-overload]
    direct = Matrix(
        name=str(doc["name"]),
        path="m.yaml",
        text=text,
        base_flags={"tp-size": 1},
        axes={k: v for k, v in section.items() if k not in ("exclude", "include")},
        exclude=section["exclude"],
        include=section["include"],
    )
    assert loaded.name == doc["name"]
    cells = expand(loaded)
    assert [c.flags for c in cells] == [c.flags for c in expand(direct)]
    assert [c.cell_id for c in cells] == [c.cell_id for c in expand(loaded)]
    for cell in cells:
        for name, values in direct.axes.items():
            assert name not in cell.flags or cell.flags[name] in values


@settings(max_examples=150, deadline=None)
@given(matrices(), st.data())
def test_an_include_never_removes_cells_and_without_includes_an_exclude_never_adds_any(
    m: Matrix, data: st.DataObject
) -> None:
    count = len(expand(m))
    extra: dict[str, AxisValue] = data.draw(
        st.dictionaries(st.sampled_from(["a", "d", "model-path"]), st.sampled_from(["x", "q"]), max_size=2)
    )
    assert len(expand(replace(m, include=[*m.include, extra]))) >= count
    if m.axes:
        # With include entries an exclude can add cells: an entry that no longer fits any combination becomes
        # one of its own (GitHub's rule), so the claim holds only without them.
        bare = replace(m, include=[])
        names = data.draw(st.sets(st.sampled_from(list(m.axes)), min_size=1))
        entry = {n: data.draw(st.sampled_from(m.axes[n])) for n in sorted(names)}
        assert len(expand(replace(bare, exclude=[*m.exclude, entry]))) <= len(expand(bare))


YAMLISH = st.text(st.sampled_from([*"ab:-[]{}&*!|>'\"#,? \n\t\\0x%@`", "\0", "\x07", "\ufeff", "é"]), max_size=80)


@settings(max_examples=300, deadline=None)
@given(YAMLISH)
def test_any_text_is_a_matrix_or_a_config_error_with_a_line(text: str) -> None:
    try:
        matrix_from_yaml(parse_yaml(text, "m.yaml"))
    except ConfigError as exc:
        for error in getattr(exc, "errors", [exc]):
            assert error.file == "m.yaml"
            assert error.line is None or 1 <= error.line <= text.count("\n") + 2, (error, text)


LOG_LINES = st.one_of(
    st.sampled_from(
        [
            b"[2026-01-02 03:04:05] server_args=ServerArgs(model_path='/m', api_key='sk-x')",
            b"[2026-01-02 03:04:05 TP0] Load weight begin. avail mem=9 GB",
            b"[2026-01-02 03:04:06 TP0] Load weight end. type=X, avail mem=1 GB",
            b"[2026-01-02 03:04:07 TP0] Capture cuda graph begin. This can take up to several minutes.",
            b"[2026-01-02 03:04:08] The server is fired up and ready to roll!",
            b"[2026-01-02 03:04:09 TP0] Scheduler hit an exception: Traceback (most recent call last):",
            b'  File "/s/x.py", line 3, in forward',
            b"RuntimeError: CUDA error: an illegal memory access was encountered",
            b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
            b"Killed",
            b"HF_TOKEN=hf_abc123 WARNING: token in the log",
            b"\x1b[31mERROR\x1b[0m \r progress 50%\r",
        ]
    ),
    st.binary(max_size=120).map(lambda b: b.replace(b"\n", b" ")),
)


def _outcomes() -> st.SearchStrategy[ProbeOutcome]:
    probe = st.builds(
        ProbeResult,
        name=st.sampled_from(["greedy", "sampled", "stream", "concurrent", "alive_after", "other"]),
        ok=st.booleans(),
        error=st.none() | st.text(max_size=40),
        timed_out=st.booleans(),
        wrong_answer=st.booleans(),
    )
    return st.builds(
        ProbeOutcome,
        reached_ready=st.booleans(),
        probes=st.lists(probe, max_size=5).map(tuple),
        process_died=st.booleans(),
        deadline_phase=st.none() | st.sampled_from(list(Phase)),
        exit_code=st.none() | st.integers(-15, 255),
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(LOG_LINES, max_size=30), _outcomes())
def test_any_log_and_any_probe_outcome_classify_store_and_print(lines: list[bytes], outcome: ProbeOutcome) -> None:
    builder = EvidenceBuilder()
    builder.feed(b"\n".join(lines))
    evidence = builder.finish()
    verdict = classify(evidence, outcome)
    assert verdict.status in Status and verdict.category in Category
    if verdict.root_cause_line is not None:
        text = b"\n".join(lines).decode("utf-8", "replace")
        plain = re.sub(r"\x1b\[[0-9;]*m", "", text).replace("\r", "\n")
        # A verbatim line of the log, as harvest keeps it: secret-named values masked.
        assert verdict.root_cause_line.strip() in "\n".join(Masker().text(line) for line in plain.split("\n"))
    stored = json.dumps(scrub({"evidence": evidence.to_dict(), "verdict": verdict.to_dict()}), ensure_ascii=False)
    assert "hf_abc123" not in stored
    stored.encode("utf-8")
    json.dumps(payload(evidence, verdict), ensure_ascii=False).encode("utf-8")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(LOG_LINES, max_size=20), st.lists(st.integers(1, 200), max_size=8))
def test_the_live_tail_sees_phases_in_order_and_the_first_fatal_line(lines: list[bytes], cuts: list[int]) -> None:
    data = b"\n".join(lines)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "server.log")
        Path(path).write_bytes(b"")
        live = LiveLog(LogTail(LocalTransport(), path), started=0.0)
        seen: list[Phase] = []
        written = 0
        for cut in [*cuts, len(data)]:
            with open(path, "ab") as log:
                log.write(data[written : written + cut])
            written = min(len(data), written + cut)
            progress = live.poll()
            if progress.phase is not None:
                seen.append(progress.phase)
        live.drain()
    assert [p.order for p in seen] == sorted(p.order for p in seen)
    texts = [line.decode("utf-8", "replace") for line in data.split(b"\n")]
    fatal = [t for t in texts if is_fatal_line(t)]
    assert live.fatal_line == (fatal[0] if fatal else None)
    phases = [p for p in map(phase_of_line, texts) if p is not None]
    assert live.phase == (max(phases, key=lambda p: p.order) if phases else None)
    whole = EvidenceBuilder()
    whole.feed(data)
    # The live tail counts a newline after a last line that had none: one byte of difference, nothing else.
    assert {**live.builder.finish().to_dict(), "bytes": 0} == {**whole.finish().to_dict(), "bytes": 0}


GREP_LINE = st.builds(
    lambda n, b, sep, text: b"%d%s%d%s%s" % (n, sep, b, sep, text),
    st.integers(0, 10**6),
    st.integers(0, 10**12),
    st.sampled_from([b":", b"-"]),
    st.binary(max_size=40),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(GREP_LINE, st.just(b"--"), st.binary(max_size=60)), max_size=12))
def test_the_grep_parser_takes_any_bytes(parts: list[bytes]) -> None:
    output = b"\n".join(parts)
    found = _parse_grep(output)
    for line_no, offset, line in found:
        assert line_no >= 0 and offset >= 0 and b"\n" not in line
    # Every well-formed `N:B:text` line of the output is parsed, whatever surrounds it.
    assert len(found) >= sum(1 for part in parts if re.match(rb"^\d+([:-])\d+\1", part) and b"\n" not in part)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(LOG_LINES, min_size=1, max_size=60))
def test_a_huge_log_harvest_keeps_head_tail_and_every_matching_line_in_order(lines: list[bytes]) -> None:
    data = b"\n".join(lines) + b"\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "server.log")
        Path(path).write_bytes(data)
        harvested = harvest_huge(LocalTransport(), path, HOST_GREP_REGEX, head_bytes=64, tail_bytes=64)
    assert harvested.total_bytes == len(data)
    file_lines = data.split(b"\n")
    position = 0
    for line in harvested.lines:
        # Every harvested line is a line of the file (the tail's first may be cut), in file order.
        found = next((i for i in range(position, len(file_lines)) if line == file_lines[i]), None)
        if found is None:
            assert any(f.endswith(line) for f in file_lines), line
            continue
        position = found
    needle = re.compile(HOST_GREP_REGEX.encode())
    if len(data) > 128:
        matching = [f for f in file_lines if needle.search(f)]
        assert all(m in harvested.lines for m in matching)
