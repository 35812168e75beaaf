"""Prefixes of loggers no layout names: a time and a level a few words apart, words that are no prose."""

from __future__ import annotations

import pytest

from orchestrator.knowledge.lines import parse


@pytest.mark.parametrize(
    ("line", "level", "body"),
    [
        ("2024-07-01 07:28:04.488 1 modelsrv ERROR [__main__.py:<module>():254] Failed to start: x", "ERROR",
         "Failed to start: x"),
        ("2025-06-30 06:18:36,801 app.core.worker 113 ERROR    [request 0a1b] Leave launch, error: x", "ERROR",
         "Leave launch, error: x"),
        ("2025-06-30 06:18:36,801 app.core.tracker 113 DEBUG    Setting progress: 1.0", "DEBUG",
         "Setting progress: 1.0"),
        ("2025-01-01 00:00:00,000\tERROR worker.py:12 -- Actor died", "ERROR", "Actor died"),
        ("[2025-01-01 00:00:00,000 E 123 456] (raylet) node_manager.cc:123: Worker exited", "ERROR", "Worker exited"),
        ("16:53:24 - Crashed container in pod: x", None, "Crashed container in pod: x"),
        ("2026-05-08 11:47:02.257 [Error] (Process) (EngineCore pid=1) ERROR 05-08 11:47:02 [core.py:1] boom",
         "ERROR", "boom"),
    ],
)
def test_a_time_then_a_level_a_few_words_on_is_a_prefix(line: str, level: str | None, body: str) -> None:
    p = parse(line)
    assert (p.level, p.body) == (level, body)


def test_the_carriers_full_date_outranks_a_yearless_inner_time() -> None:
    p = parse("2026-05-08 11:47:02.257 [Error] (Process) (EngineCore pid=1) ERROR 05-08 11:47:02 [core.py:1] boom")
    assert p.ts == "2026-05-08 11:47:02.257"
    assert parse("ERROR 05-08 11:47:02 [core.py:1] boom").ts == "05-08 11:47:02"


@pytest.mark.parametrize(
    ("line", "body"),
    [
        ("vllm-0 ZeroDivisionError: division by zero", "ZeroDivisionError: division by zero"),
        ("node-3:1234 [0] RuntimeError('boom')", "RuntimeError('boom')"),
        ("pod/vllm-0/server torch.OutOfMemoryError: CUDA out of memory.",
         "torch.OutOfMemoryError: CUDA out of memory."),
    ],
)
def test_words_that_are_no_prose_before_an_exception_are_a_prefix(line: str, body: str) -> None:
    assert parse(line).body == body


@pytest.mark.parametrize(
    "line",
    [
        "Failed to start model server: ZeroDivisionError: x",
        "# [Bug]: ValueError: x",
        "  x-1 ValueError: x",
    ],
)
def test_prose_a_heading_or_code_before_an_exception_stays_the_message(line: str) -> None:
    assert parse(line).body == line


@pytest.mark.parametrize(
    ("line", "body"),
    [
        ('[worker-0]   File "a.py", line 1, in f', '  File "a.py", line 1, in f'),
        ("[worker-0]     x = 1", "    x = 1"),
        ('[a] (b) File "a.py", line 1, in f', 'File "a.py", line 1, in f'),
        ("[worker-0] KeyError: 1", "KeyError: 1"),
        ("[x]  ERROR foo", "ERROR foo"),
    ],
)
def test_tags_before_indented_text_leave_the_indentation(line: str, body: str) -> None:
    assert parse(line).body == body


@pytest.mark.parametrize(
    ("line", "key", "body"),
    [
        ('1756144012376,"(EngineCore_0 pid=75) ERROR 08-25 10:46:52 [core.py:700]   File ""/x/core.py"", line 80, in '
         '__init__"', "EngineCore_0 pid=75", '  File "/x/core.py", line 80, in __init__'),
        ("1756144014882,(APIServer pid=1) RuntimeError: Engine core initialization failed.", "APIServer pid=1",
         "RuntimeError: Engine core initialization failed."),
        ('1700000000,"ValueError: bad value ""x"", see above"', "", 'ValueError: bad value "x", see above'),
    ],
)
def test_a_log_stores_csv_row_carries_the_line_as_its_field(line: str, key: str, body: str) -> None:
    p = parse(line)
    assert (p.key, p.body) == (key, body)


@pytest.mark.parametrize(
    ("line", "level", "body"),
    [
        ("[19:08:34.164951][GC          ][error][tid:44F8A] Failed to load the kernel for node 12", "ERROR",
         "Failed to load the kernel for node 12"),
        ("[2024-01-01 10:00:00.123] [engine] [warning] queue is slow", "WARNING", "queue is slow"),
        ("[2024-01-01 10:00:00.123] [engine] [trace] step 3", "DEBUG", "step 3"),
    ],
)
def test_spdlogs_lower_case_level_tag_makes_the_tags_a_prefix(line: str, level: str, body: str) -> None:
    p = parse(line)
    assert (p.level, p.body) == (level, body)


def test_a_bracketed_word_that_is_no_level_stays_in_the_message() -> None:
    assert parse("[2024-01-01 10:00:00.123] [engine] [errors] 3 so far").body == "[engine] [errors] 3 so far"
