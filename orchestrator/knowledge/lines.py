"""One log line taken apart: ANSI colour codes, then the timestamp/rank/level prefix, then the message.

The prefixes met in SGLang logs and in the vLLM/PyTorch/Ray logs that fail the same way:
`[2025-05-09 19:11:16 TP0] `, `[11:19:46 TP0] `, `[ts] INFO server_args.py:1974: `, `INFO:     ` (uvicorn),
`(EngineCore_DP0 pid=123) ERROR 09-27 11:31:49 [core.py:718] `, `ERROR 12-05 20:24:46 engine.py:366] `,
`2025-03-27 21:33:31,320 - INFO - `, `[rank0]:`, `[gpu_id=0] ` (old SGLang), glog `W0101 12:00:00.1 42 x.cc:12] `,
syslog and journalctl `Aug 19 18:34:27 node vllm[8727]: `.
Excerpts pasted into issues lose characters (`RROR 12-18 ...`), so the level word is optional and any upper-case
run is accepted.

Around those, whatever carried the log adds its own decoration, stripped wherever it sits between the layers:
a container runtime's stream tag (`<ISO time> stderr F `), a compose service gutter (`svc-1  | `), quote marks
(`> `), markdown backticks or bold, and tags in brackets or parentheses (a pod, a Ray actor, a rank, a glog
`[E socket.cpp:12]`) when a timestamp, a level or the message's own start (an exception, a traceback, a frame)
follows them. The message decides, not the prefix: no prefix is listed one by one.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

ANSI_RE = re.compile(
    r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|#033\[[0-9;?]*[ -/]*[@-~]|#015$"
)
"""Terminal colour and cursor codes, also as syslog writes control characters (`#033[1;36m`, a trailing `#015`)."""

_LEVELS = {"WARN": "WARNING", "E": "ERROR", "W": "WARNING", "I": "INFO", "F": "FATAL", "D": "DEBUG", "TRACE": "DEBUG"}
_LEVEL = r"DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL"
_LOWER_LEVEL = r"trace|debug|info|warning|warn|error|critical|fatal"

_PAREN = re.compile(r"\(([^()]{0,80}?\bpid=\d+[^()]{0,60})\)\s?")
_SGL = re.compile(r"\[((?:\d{4}-\d\d-\d\d[ T])?\d\d:\d\d:\d\d(?:[.,]\d+)?)((?: (?:DP|TP|EP|PP|CP|PD|ATTN)\d+)*)\] ?")
_RANK = re.compile(r"\[(rank\d+|default\d+|gpu_id=\d+)\]:?\s?")
_BRACKET_LEVEL = re.compile(rf"\[[\w.\-]+\] ({_LEVEL}):? ")
_VLLM = re.compile(r"(?:([A-Z]{1,8}) )?(\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? \[?[\w.\-]+(?:/[\w.\-]+)*:\d+\]? ?")
"""vLLM's own prefix; newer releases name the file by its path in the package
(`[v1/executor/multiproc_executor.py:824]`, a plugin's shortened `[vllm_ascend/.../platform.py:58]`), older ones by
its base name (`[core.py:718]`, `engine.py:366]`)."""
_ISO = re.compile(r"\[?(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d))\]?\s")
"""A CI runner's or container runtime's own timestamp in front of the server's line (`[2025-11-06T02:10:00.702Z] `)."""
_SYSLOG = re.compile(r"([A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d(?:\.\d+)?) [\w.\-]+ [\w.\-/@]+(?:\[\d+\])?: ?")
"""syslog's and journalctl's own prefix: time, host, program and pid (`Aug 19 18:34:27 node vllm[8727]: `)."""
_SYSLOG_TAIL = re.compile(r"[\w.\-]+ [\w.\-/@]+\[\d+\]: ?")
"""The host and program[pid] that follow an ISO time in rsyslog's precise form (`<ISO time> node vllm[8727]: `)."""
_LEVEL_ISO = re.compile(rf"({_LEVEL})\s+(\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\s")
"""A cloud logging export: severity, then the ISO timestamp (`ERROR 2025-04-07T19:13:52.317869663Z ...`)."""
_PYLOG = re.compile(
    rf"(\d{{4}}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\s*[-|]\s*(?:[\w.]+\s*[-|]\s*)?({_LEVEL})\s*[-|:] ?"
)
_GLOG = re.compile(r"\[?([IWEF])(\d{4} \d\d:\d\d:\d\d(?:\.\d+)?)\s+\d+ [\w.\-/\\]+:\d+\]\s?(?:\[\d+/\d+(?:_\d+)?\]\s)?")
_LEVEL_AFTER = re.compile(rf"({_LEVEL})(?::\s+| [\w.\-]+:\d+:? ?(?:--? )?)")
_STAMP = (r"\[?(?:\d{4}[-/]\d\d[-/]\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?|\d\d:\d\d:\d\d(?:[.,]\d+)?)"
          r"(?:Z|[+-]\d\d:?\d\d)?\]?")
_LOOSE = re.compile(
    rf"({_STAMP})(?:[ \t]+(?!(?:{_LEVEL})\b)\S{{1,60}}){{0,4}}?[ \t]+({_LEVEL})\b(?![ \t]+\d\d-\d\d[ T]\d)[ \t]*"
    r"(?:\[[^\[\]]{0,160}\][ \t]*|[\w.\-/<>]+(?:\(\))?:\d+(?::\d+)?:?[ \t]+)?(?:--?[ \t]+|\|[ \t]+)?"
)
"""Any other logger's prefix: a time, up to four words (a pid, a logger's or host's name), a level, then perhaps the
source location and a separator (`2024-07-01 07:28:04.488 1 kserve ERROR [__main__.py:<module>():254] `,
`2025-06-30 06:18:36,801 app.core.worker 113 ERROR    `, Ray's `<time>\tERROR worker.py:12 -- `). Tried after the
known layouts: a time and a level word a few words apart are a prefix, whatever sits between them."""
_RAY_NATIVE = re.compile(
    r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?) ([IWEFD]) \d+ \d+\] (?:\([\w.\-]+\) )?[\w.\-/]+:\d+: ?"
)
"""Ray's own C++ components (raylet, GCS, core worker): `[<time> E 123 456] (raylet) node_manager.cc:12: `."""
_STAMP_SEP = re.compile(rf"({_STAMP})[ \t]+(?:(?:-{{1,2}}|\||>|:)[ \t]+)?")
"""A time and perhaps a separator (a harness's progress log `16:53:24 - `, an app's `<time> [Error] (Process) `
before the server's own prefix): the tags after it are stripped as tags."""
_TOKENS_BEFORE_EXCEPTION = re.compile(
    r"(?:(?=[^\s]*[\d\[\]()<>|=@#/:_\-])\S{1,80}[ \t]+){1,4}"
    r"(?=(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b(?::[ \t]|\(|\s*$))"
)
"""Words that are no prose before an exception (each has a digit or punctuation: a pod `vllm-0`, a host `node-3:`,
a path, a bracketed tag): whoever wrote them, the exception is the message."""

FRAME_RE = re.compile(r'", line (\d+), in (\S+)')
"""A Python traceback frame (`File "x.py", line 3, in f`), also when a paste dropped the `File "` part."""

EXCEPTION_START_RE = re.compile(
    r"(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*)?(?:Error|Exception|Interrupt|Exit|Failure|Failed|Fault)\b(?:\(|:|\s*$)"
)
"""A message that begins with a Python exception: `KeyError: 'x'`, `torch.OutOfMemoryError: ...`, `AssertionError`."""

_MARKUP = re.compile(
    r"(?:\*\*|__)_?(?=[A-Z\[(\d])|[*_]{1,3}(?=(?:ERROR|WARNING|INFO|CRITICAL|\[)\b)|\s*\|\s(?=\s*\[?\d{4}-\d\d-\d\dT)"
)
"""Markdown emphasis a paste into an issue wrapped around a log line (`**_ERROR 11-25 ...`), and a CI viewer's
gutter before its own timestamp (`  | [2024-09-05T00:38:34Z] ...`)."""
_DECORATION = re.compile(
    r"(?:stdout|stderr)\s+[FP]\s|>+(?!>)[ \t]?|\[\d{1,3}(?:;\d{1,3})*m[ \t]?|`{1,3}(?=[ \t]*\S)|\*\*(?=[ \t]*\S)"
    r"|\|[ \t](?=[ \t]*\S)"
    r"|[A-Za-z0-9][\w.\-]{0,62}[ \t]*\|(?:[ \t]|$)|<(?:stdout|stderr)>:[ \t]?"
    r"|\{[\w.\-]+=\"[^\"]*\"(?:,\s*[\w.\-]+=\"[^\"]*\")*\}[ \t]+"
    r"|(?=[\w.]*[\d\-])[A-Za-z0-9][\w.\-/]{0,120}[ \t]+>>[ \t]"
    r"|[\"'\u201c\u2018](?=(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b)"
)
"""What a carrier adds around a line: CRI stream tag, quote mark, markdown, a compose service gutter, a colour code
whose escape byte a paste lost (`[36m`), an MPI launcher's `<stderr>:`, a log store's label set (`{pod="vllm-0"}`), a
log viewer's source before `>>` (`my-pod-0 >> `), a quote mark that opens a quoted exception (`"RuntimeError: ...`)."""
_TASK_LABEL = re.compile(r"(?:\d{1,5}|(?=[a-z0-9.\-/]*[\d\-])[a-z][a-z0-9.\-]{0,62}(?:/[a-z][a-z0-9.\-]{0,62})?): "
                         r"(?=\S|[ \t]+\S)")
"""A task or host label of srun --label, pdsh or a parallel shell (`3: `, `gpu-node-3: `, a pod and its container
`vllm-0/server: `): digits, or a host name with
a digit or a hyphen, so that neither a word nor an exception's name is taken for one. Only where a line starts or
after another layer: after indentation, `0: x` is code or a listing."""
_TAB_TS = re.compile(r"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)\t")
"""A log store's export: its own timestamp, then a tab (`2025-01-01 10:00:00.000\t...`)."""
_EPOCH_CSV = re.compile(r"\d{10}(?:\d{3}){0,2}(?:\.\d+)?,")
"""A log store's CSV export: the entry's epoch time (seconds, milliseconds or microseconds), a comma, then the line as
a CSV field (quoted, with its quotes doubled, where it holds a quote or a comma)."""
_JSON_FIELDS = ("log", "message", "msg", "textPayload", "MESSAGE")
"""Where a JSON log record (docker's json-file, a cloud logging export, journalctl -o json) keeps the line."""
_TAGS = re.compile(r"(?:\[[^\[\]]{1,80}\]:?[ \t]*|\([^()]{1,120}\)[ \t]*)+")
"""Tags in brackets or parentheses; stripped only when what follows them is recognisably a line's start."""
_MESSAGE_START = re.compile(
    r"Traceback \(most recent call last\)|File \"|(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*)?(?:Error|Exception)\b(?:\(|:|\s*$)"
    rf"|(?:{_LEVEL})\b"
)
_TAGS_BEFORE_INDENT = re.compile(
    r"(?:\[[^\[\]]{1,80}\]:?[ \t]*|\([^()]{1,120}\)[ \t]*)*(?:\[[^\[\]]{1,80}\]:?|\([^()]{1,120}\))[ \t](?=[ \t]+\S)"
)
"""Tags before indented text (a traceback's frame or code line under a worker's tag): stripped up to the
indentation, which is the message's own."""
_TAG_LEVEL = re.compile(rf"[\[(]({_LEVEL}|{_LOWER_LEVEL})[\])]")
"""A level as a tag of its own: `[ERROR]`, and the lower-case `[error]` of spdlog's default layout."""
_LOWER_TAG_LEVEL = re.compile(rf"\[(?:{_LOWER_LEVEL})\]")
"""spdlog's level tag (`[<time>][<component>][error][tid:<id>] ...`, the loggers built on it): tags that hold one are
the line's prefix, whatever follows them."""
_CLOSING = re.compile(r"(?:`{1,3}|\*\*)\s*$")
_FLAT_TAG = re.compile(r" \[(?:rank|default)\d+\]: ")
"""A rank tag inside a line: a paste that lost its line breaks joined a rank's traceback into one line."""
_FLAT_MIN_TAGS = 3
_FLAT_EXCEPTION = re.compile(
    r"\s((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Failure|Failed|Fault)(?:\(\w+\))?: \S.*)$"
)
"""An exception statement after a frame on the same line: a traceback whose line breaks were lost."""
_TB_EXCEPTION = re.compile(r"((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)(:\s.*|:)?\s*$")
_EXC_SUFFIXES = ("Error", "Exception", "Interrupt", "Exit", "Iteration", "Failed", "Failure", "Fault", "Warning")


@dataclass(frozen=True, slots=True)
class Parsed:
    """A line split into its prefix fields and its message."""

    body: str
    ts: str | None = None
    level: str | None = None
    key: str = ""
    """The writing process when the prefix names it (`EngineCore_DP0 pid=6106`, `rank0`), else empty."""
    style: str | None = None
    """`sglang` or `vllm` when the prefix is that engine's own."""

    @property
    def prefixed(self) -> bool:
        """Whether anything was stripped in front of the message."""
        return self.ts is not None or self.level is not None or bool(self.key)


def strip_ansi(text: str) -> str:
    """The text without terminal colour and cursor codes."""
    return ANSI_RE.sub("", text) if "\x1b" in text or "#0" in text else text


def parse(text: str) -> Parsed:
    """Split an (ANSI-free) line into timestamp, level, writing process and message.

    Prefixes can nest (a launcher that logs SGLang's output through its own logger:
    `2025-03-08 02:04:48,693 - __main__ - INFO - [2025-03-08 02:04:48 TP0] ...`); the innermost
    timestamp and level are the server's own.
    """
    if text[:2] == '{"':
        carried = _json_line(text)
        if carried is not None:
            return parse(strip_ansi(carried))
    if text[:1].isdigit() and (epoch := _EPOCH_CSV.match(text)):
        return parse(strip_ansi(_csv_field(text[epoch.end() :])))
    pos, ts, level, key, style = 0, None, None, "", None
    decoration = _MARKUP.match(text)
    if decoration:
        pos = decoration.end()
    decorated = decoration is not None and decoration.group(0)[:1] in "*_"
    lead = len(text) - len(text.lstrip(" \t"))
    if lead and pos == 0 and (_layer(text, lead) is not None or _DECORATION.match(text, lead)):
        pos = lead  # a paste's stray indentation before a prefix: the prefix still leads
    indented_at = pos if lead and pos == lead else -1
    for _ in range(8):
        layer = _layer(text, pos)
        if layer is None:
            labelled = _TASK_LABEL.match(text, pos) if pos != indented_at else None
            d = _DECORATION.match(text, pos) or labelled or _tags(text, pos)
            if d is None or d.end() == pos:
                break
            decorated = decorated or d.group(0)[:1] in "`*"
            tagged = _TAG_LEVEL.search(d.group(0))
            level = tagged.group(1).upper() if tagged else level
            pos = d.end()
            continue
        pos, layer_ts, layer_level, layer_key, layer_style = layer
        ts, level = _inner_time(ts, layer_ts), layer_level
        key, style = key or layer_key, layer_style or style
    if level is not None:
        level = _LEVELS.get(level, level)
    if (pos != indented_at and text[pos : pos + 1] != "#" and not _MESSAGE_START.match(text, pos)
            and (tokens := _TOKENS_BEFORE_EXCEPTION.match(text, pos))):
        pos = tokens.end()
    body = text[pos:]
    if decorated:
        body = _CLOSING.sub("", body)
    if "]: " in body:
        body = _unflattened(body)
    if '", line ' in body:
        body = _after_frames(body)
    return Parsed(body, ts, level, key, style)


def _inner_time(outer: str | None, inner: str | None) -> str | None:
    """The server's own (inner) timestamp, unless it says less than the carrier's: a year-less `05-08 11:47:02` inside
    `2026-05-08 11:47:02.257 ...` would sort before every line that carries the full date."""
    if inner is None:
        return outer
    if outer is None:
        return inner
    return inner if _date_parts(inner) >= _date_parts(outer) else outer


def _date_parts(ts: str) -> int:
    date, _, _ = ts.replace("T", " ").rpartition(" ")
    return len([p for p in re.split(r"[-/]", date) if p.isdigit()])


def _unflattened(body: str) -> str:
    """Of a traceback whose line breaks a paste lost (`... [rank0]: File "x.py", line 3 ... [rank0]: ValueError: x
    [rank0]: <hint>`), the message is its exception statement, the last piece that opens with an exception."""
    tags = list(_FLAT_TAG.finditer(body))
    if len(tags) < _FLAT_MIN_TAGS:
        return body
    end = len(body)
    for tag in reversed(tags):
        piece = body[tag.end() : end].strip()
        if EXCEPTION_START_RE.match(piece):
            return piece
        end = tag.start()
    return body


def _after_frames(body: str) -> str:
    """The exception statement that follows a traceback's last frame on the same line, else the body."""
    ends = [m.end() for m in FRAME_RE.finditer(body)]
    if not ends:
        return body
    stated = _FLAT_EXCEPTION.search(body, ends[-1])
    return stated.group(1) if stated else body


def _csv_field(field: str) -> str:
    """The text of one CSV field: a quoted one loses its quotes and has its doubled quotes made single again."""
    if field[:1] != '"':
        return field
    out, i = [], 1
    while i < len(field):
        ch = field[i]
        if ch == '"':
            if field[i + 1 : i + 2] != '"':
                break  # the closing quote (a cut line has none)
            i += 1
        out.append(ch)
        i += 1
    return "".join(out)


def _json_line(text: str) -> str | None:
    """The line a JSON log record carries (`{"log":"...","stream":"stderr"}`), else None."""
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    nested = record.get("jsonPayload")
    for holder in (record, nested if isinstance(nested, dict) else {}):
        for field in _JSON_FIELDS:
            value = holder.get(field)
            if isinstance(value, str):
                return value.rstrip("\r\n")
    return None


def _tags(text: str, pos: int) -> re.Match[str] | None:
    """Tags at `pos` that a recognisable line start (a layer, a decoration, the message's own head) follows."""
    m = _TAGS.match(text, pos)
    if m is None:
        return None
    end = m.end()
    tight = _TAGS_BEFORE_INDENT.match(text, pos)
    if (_MESSAGE_START.match(text, end) or _layer(text, end) is not None or _DECORATION.match(text, end)
            or _LOWER_TAG_LEVEL.search(m.group(0))):
        if tight is not None and text.startswith('File "', end):
            return tight  # a frame keeps its indentation: the traceback tells code from message by it
        key = m.group(0).strip()
        return m if key else None
    return tight


_Layer = tuple[int, "str | None", "str | None", str, "str | None"]


def _layer(text: str, pos: int) -> _Layer | None:
    """One prefix at `pos`: (end, timestamp, level, process key, style), or None."""
    head = text[pos : pos + 1]
    if head == "(":
        m = _PAREN.match(text, pos)
        return (m.end(), None, None, m.group(1), None) if m else None
    if (head == "[" or head.isdigit()) and (m := _ISO.match(text, pos)):
        tail = _SYSLOG_TAIL.match(text, m.end())
        return (tail or m).end(), m.group(1).replace("T", " ").rstrip("Z"), None, "", None
    if head == "[":
        if m := _SGL.match(text, pos):
            m2 = _LEVEL_AFTER.match(text, m.end())
            if m2:
                return m2.end(), m.group(1), m2.group(1), "", "sglang"
            return m.end(), m.group(1), None, "", "sglang"
        if m := _RANK.match(text, pos):
            m2 = _GLOG.match(text, m.end())
            if m2:
                return m2.end(), m2.group(2), m2.group(1), m.group(1), None
            return m.end(), None, None, m.group(1), None
        if m := _GLOG.match(text, pos):
            return m.end(), m.group(2), m.group(1), "", None
        if m := _BRACKET_LEVEL.match(text, pos):
            return m.end(), None, m.group(1), "", None
        if m := _RAY_NATIVE.match(text, pos):
            return m.end(), m.group(1), m.group(2), "", None
    elif head.isdigit():
        if m := _TAB_TS.match(text, pos):
            return m.end(), m.group(1).replace("T", " ").rstrip("Z"), None, "", None
        if m := _PYLOG.match(text, pos):
            return m.end(), m.group(1), m.group(2), "", None
        if m := _VLLM.match(text, pos):
            return m.end(), m.group(2), m.group(1), "", "vllm"
    if head == "[" or head.isdigit():
        if m := _LOOSE.match(text, pos):
            return m.end(), m.group(1).strip("[]"), m.group(2), "", None
        if m := _STAMP_SEP.match(text, pos):
            return m.end(), m.group(1).strip("[]"), None, "", None
    elif head.isupper():
        if m := _SYSLOG.match(text, pos):
            return m.end(), m.group(1), None, "", None
        if m := _LEVEL_ISO.match(text, pos):
            return m.end(), m.group(2).replace("T", " ").rstrip("Z"), m.group(1), "", None
        if m := _VLLM.match(text, pos):
            return m.end(), m.group(2), m.group(1), "", "vllm"
        if m := _GLOG.match(text, pos):
            return m.end(), m.group(2), m.group(1), "", None
        if m := _LEVEL_AFTER.match(text, pos):
            return m.end(), None, m.group(1), "", None
    return None


def ts_key(ts: str | None) -> tuple[int, ...]:
    """A sort key for the timestamp forms above (missing date parts count as 0)."""
    if not ts:
        return ()
    date, _, clock = ts.replace("T", " ").rpartition(" ")
    parts = [int(p) for p in re.split(r"[-:.,]", clock) if p.isdigit()]
    frac = re.search(r"[.,](\d+)$", clock)
    day = [int(p) for p in date.split("-") if p.isdigit()]
    day = [0] * (3 - len(day)) + day[-3:]
    return (*day, *parts[:3], int(frac.group(1)[:3].ljust(3, "0")) if frac else 0)


def looks_like_exception(body: str) -> bool:
    """Whether the line after a traceback's frames is its exception line (`KeyError: 'x'`, `AssertionError`)."""
    m = _TB_EXCEPTION.match(body)
    if not m:
        return False
    name = m.group(1)
    return bool(m.group(2)) or "." in name or name.endswith(_EXC_SUFFIXES)
