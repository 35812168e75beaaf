"""The vocabulary of DESIGN.md as small typed values shared by every layer.

Only plain data lives here: no I/O, no parsing. Each layer adds its own richer objects
(Evidence in harvest/, LaunchSpec in host/), but statuses, phases, categories, probe
results and verdicts are one vocabulary for the whole tool, the store and the JSON contracts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Literal, Union

from orchestrator.secret import SecretRef
from orchestrator.settings import Deadlines, ProbeSettings, RetryPolicy, Stall


class FlagList(tuple[str | int | float, ...]):
    """The values of a flag that takes several (`--cuda-graph-bs 1 2 4`): one argument each, in order.

    Its items keep the types the matrix gave them (as scalar flag values do); a tuple, so it hashes
    and compares like any other flag value. Never equal to a string: `[1, 2, 4]` (three arguments)
    and `"1 2 4"` (one argument, which SGLang rejects) stay two launches.
    """

    __slots__ = ()

    def __new__(cls, values: Iterable[object] = ()) -> FlagList:
        return super().__new__(cls, (v if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)
                                     for v in values))  # fmt: skip

    @property
    def arguments(self) -> tuple[str, ...]:
        """The command-line arguments, one per value."""
        return tuple(str(v) for v in self)

    def __str__(self) -> str:
        return "[" + ", ".join(self.arguments) + "]"

    def __repr__(self) -> str:
        return f"FlagList({list(self)!r})"


FlagValue = Union[str, int, float, bool, None, FlagList, SecretRef]  # noqa: UP007 (a runtime alias: Python 3.10 evaluates it)
"""A flag's value as a matrix gives it: True = bare flag, False/None = omitted, a FlagList = several arguments,
SecretRef = `{secret: VAR}`."""


Bundle = dict[str, FlagValue]
"""Flags that go together as one value of an axis (GitHub Actions' objects in a matrix axis):
`quant: [{quantization: fp8, kv-cache-dtype: fp8_e4m3}, ...]`. A cell carries each of its flags."""

AxisValue = Union[FlagValue, Bundle]  # noqa: UP007 (a runtime alias, as FlagValue)
"""One value of a matrix axis, or of an include/exclude entry: a flag value or a bundle of flags."""


class Status(str, Enum):
    """What became of one run."""

    PASS = "pass"
    FAIL = "fail"
    INVALID = "invalid"
    INFRA = "infra"
    SKIPPED = "skipped"


class Phase(str, Enum):
    """Where a launch stopped, in the order a launch goes through them."""

    PREFLIGHT = "preflight"
    ARG_PARSE = "arg_parse"
    IMPORT = "import"
    MODEL_LOAD = "model_load"
    MEMORY_ALLOC = "memory_alloc"
    CUDA_GRAPH_CAPTURE = "cuda_graph_capture"
    WARMUP = "warmup"
    READY = "ready"
    GREEDY_DECODE = "greedy_decode"
    SAMPLED_DECODE = "sampled_decode"
    CONCURRENT_DECODE = "concurrent_decode"
    AFTER_DECODE = "after_decode"
    SHUTDOWN = "shutdown"
    SERVING = "serving"

    @property
    def order(self) -> int:
        """Position in the launch sequence (serving sorts with the decode phases)."""
        if self is Phase.SERVING:
            return _PHASE_ORDER.index(Phase.GREEDY_DECODE)
        return _PHASE_ORDER.index(self)


_PHASE_ORDER: list[Phase] = [p for p in Phase if p is not Phase.SERVING]

STARTUP_PHASES: tuple[Phase, ...] = (
    Phase.ARG_PARSE,
    Phase.IMPORT,
    Phase.MODEL_LOAD,
    Phase.MEMORY_ALLOC,
    Phase.CUDA_GRAPH_CAPTURE,
    Phase.WARMUP,
)


class Category(str, Enum):
    """The fixed failure taxonomy of DESIGN.md (extend only with care)."""

    INVALID_ARGUMENT = "invalid_argument"
    UNSUPPORTED_CONFIG = "unsupported_config"
    IMPORT_ERROR = "import_error"
    CUDA_OOM = "cuda_oom"
    KV_CACHE_TOO_SMALL = "kv_cache_too_small"
    CUDA_DEVICE_ASSERT = "cuda_device_assert"
    NAN_IN_PROBS = "nan_in_probs"
    ILLEGAL_MEMORY_ACCESS = "illegal_memory_access"
    NCCL_ERROR = "nccl_error"
    CUDA_GRAPH_CAPTURE_FAILED = "cuda_graph_capture_failed"
    KERNEL_NOT_SUPPORTED_ON_ARCH = "kernel_not_supported_on_arch"
    WEIGHTS_LOAD_ERROR = "weights_load_error"
    HANG_OR_TIMEOUT = "hang_or_timeout"
    TOKENIZER_OR_TEMPLATE_ERROR = "tokenizer_or_template_error"
    PORT_IN_USE = "port_in_use"
    PROCESS_KILLED = "process_killed"
    KERNEL_JIT_ERROR = "kernel_jit_error"
    GPU_MEMORY_IN_USE = "gpu_memory_in_use"
    WARMUP_REQUEST_FAILED = "warmup_request_failed"
    WRONG_OUTPUT = "wrong_output"
    PYTHON_EXCEPTION_OTHER = "python_exception_other"
    UNKNOWN = "unknown"
    HEALTHY = "healthy"


PROBE_PHASES: dict[str, Phase] = {
    "greedy": Phase.GREEDY_DECODE,
    "sampled": Phase.SAMPLED_DECODE,
    "stream": Phase.SAMPLED_DECODE,
    "concurrent": Phase.CONCURRENT_DECODE,
    "alive_after": Phase.AFTER_DECODE,
}
"""Probe name -> the phase a failure of that probe is reported in."""


@dataclass(frozen=True)
class ProbeResult:
    """One probe sent to a ready server and what came back."""

    name: str
    ok: bool
    latency_s: float | None = None
    tokens: int | None = None
    text_excerpt: str | None = None
    error: str | None = None
    request: dict[str, Any] = field(default_factory=dict)
    timed_out: bool = False
    wrong_answer: bool = False
    tokens_each: tuple[int, ...] = ()
    """For a probe of several requests side by side (concurrent): each answer's completion tokens, in order."""

    @property
    def phase(self) -> Phase:
        """The phase a failure of this probe belongs to."""
        return PROBE_PHASES.get(self.name, Phase.SERVING)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeResult:
        """Rebuild from `to_dict` output (a JSON list where the field is a tuple)."""
        return cls(**{**data, "tokens_each": tuple(data.get("tokens_each", ()))})


@dataclass(frozen=True)
class SchedulerEnd:
    """How a batch scheduler ended a launch, not the server itself (a time limit, a preemption, an outside scancel)."""

    job_state: str
    """Slurm's end state of the job (JobState): TIMEOUT, PREEMPTED, NODE_FAIL, OUT_OF_MEMORY, CANCELLED, ..."""
    reason: str
    """In words, with Slurm's JobState and Reason: `Slurm job 9 on n1 reached its time limit (JobState=TIMEOUT, ...)`"""


@dataclass(frozen=True)
class ProbeOutcome:
    """What the readiness wait and the probes saw of one launch."""

    reached_ready: bool
    ready_s: float | None = None
    probes: tuple[ProbeResult, ...] = ()
    process_died: bool = False
    deadline_phase: Phase | None = None
    """Set when a per-phase deadline expired, or its stall window passed with no progress: where it was stuck."""
    exit_code: int | None = None
    stalled_s: float | None = None
    """Cut for no progress: the seconds since the log last showed any (a new line, a bar that advanced)."""
    last_progress: str | None = None
    """Cut for no progress: the last line of the log that showed progress."""
    speed: dict[str, Any] | None = None
    """The standard load's measurement after every probe passed (probe/speed.py reads it); None: not measured."""
    drift: dict[str, dict[str, str]] = field(default_factory=dict)
    """Flag -> {asked, used, evidence}: flags the server ran with another value than the launch asked for."""
    scheduler_end: SchedulerEnd | None = None
    """Set when the batch scheduler ended the launch (classify names that, whatever the log or the probes say)."""

    @property
    def failed_probe(self) -> ProbeResult | None:
        """The first probe that failed, if any."""
        return next((p for p in self.probes if not p.ok), None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (`speed`, `drift`, `scheduler_end` only where set, so older readers see the same keys)."""
        data: dict[str, Any] = {
            "reached_ready": self.reached_ready,
            "ready_s": self.ready_s,
            "probes": [p.to_dict() for p in self.probes],
            "process_died": self.process_died,
            "deadline_phase": self.deadline_phase.value if self.deadline_phase else None,
            "exit_code": self.exit_code,
            "stalled_s": self.stalled_s,
            "last_progress": self.last_progress,
        }
        if self.speed is not None:
            data["speed"] = self.speed
        if self.drift:
            data["drift"] = self.drift
        if self.scheduler_end is not None:
            data["scheduler_end"] = asdict(self.scheduler_end)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeOutcome:
        """Rebuild from `to_dict` output."""
        return cls(
            reached_ready=bool(data["reached_ready"]),
            ready_s=data.get("ready_s"),
            probes=tuple(ProbeResult.from_dict(p) for p in data.get("probes", [])),
            process_died=bool(data.get("process_died", False)),
            deadline_phase=Phase(data["deadline_phase"]) if data.get("deadline_phase") else None,
            exit_code=data.get("exit_code"),
            stalled_s=data.get("stalled_s"),
            last_progress=data.get("last_progress"),
            speed=data.get("speed"),
            drift=dict(data.get("drift") or {}),
            scheduler_end=SchedulerEnd(**data["scheduler_end"]) if data.get("scheduler_end") else None,
        )


@dataclass(frozen=True)
class Verdict:
    """The named outcome of one run: status, where it stopped, why, and the line that says so."""

    status: Status
    phase: Phase | None
    category: Category
    root_cause_line: str | None = None
    reason: str = ""
    failed_probe: str | None = None
    evidence: dict[str, Any] | None = field(default=None, compare=False)
    """Why the category: the rule that decided, the exception type and frame it read, a close runner-up."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "status": self.status.value,
            "phase": self.phase.value if self.phase else None,
            "category": self.category.value,
            "root_cause_line": self.root_cause_line,
            "reason": self.reason,
            "failed_probe": self.failed_probe,
            "evidence": self.evidence,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        """Rebuild from `to_dict` output."""
        return cls(
            status=Status(data["status"]),
            phase=Phase(data["phase"]) if data.get("phase") else None,
            category=Category(data["category"]),
            root_cause_line=data.get("root_cause_line"),
            reason=data.get("reason", ""),
            failed_probe=data.get("failed_probe"),
            evidence=data.get("evidence"),
        )


@dataclass(frozen=True)
class Cell:
    """One flag combination of a matrix; `cell_id` is stable across sweeps and SGLang versions."""

    cell_id: str
    flags: dict[str, FlagValue]
    """Canonical flag names without leading dashes (`attention-backend`), base flags included."""
    axes: tuple[str, ...] = ()
    """The flag names that vary across the matrix, in matrix order (what the table shows)."""
    env: dict[str, str] = field(default_factory=dict)
    install: str | None = None
    """Name of the SGLang install (environment axis) this cell runs with, if the matrix has one."""
    host: str | None = None
    """The pool lane (host, or `a+b` for alike hosts) this cell runs on when a pool's hosts differ (host axis)."""

    def __post_init__(self) -> None:
        # Cells rebuilt from JSON (the store, reports) carry lists where a flag has several values.
        for name, value in self.flags.items():
            if isinstance(value, list):
                self.flags[name] = FlagList(value)

    @property
    def label(self) -> str:
        """A human signature: `attention-backend=triton, kv-cache-dtype=fp8_e4m3`."""
        parts = [f"{name}={_shown(self.flags[name])}" for name in self.axes if name in self.flags]
        if self.install:
            parts.insert(0, f"install={self.install}")
        if self.host:
            parts.insert(0, f"host={self.host}")
        return ", ".join(parts) or self.cell_id

    @property
    def tp_size(self) -> int:
        """GPUs this cell needs (SGLang's --tp-size, default 1)."""
        value = self.flags.get("tp-size", 1)
        if isinstance(value, (bool, FlagList, SecretRef)) or value is None:
            return 1
        try:
            return max(1, int(value))
        except ValueError:
            return 1


UNSET = "(unset)"
"""How every human-readable output shows a flag a cell leaves out (JSON and CSV keep null / empty)."""


def _shown(value: FlagValue) -> str:
    return UNSET if value is None else str(value)


DEFAULT_MAX_CELLS = 5000
OnInfra = Literal["continue", "stop"]
"""What a sweep does after an infra verdict (SSH lost, disk full): go on with the other cells, or stop."""
EnvValue = Union[str, SecretRef]  # noqa: UP007 (a runtime alias, as FlagValue)
"""A literal value, or a reference to a secret held in the orchestrator's environment."""


@dataclass(frozen=True)
class Matrix:
    """A validated matrix file: base flags, axes, GitHub-Actions-style include/exclude, settings."""

    name: str
    path: str
    text: str
    """The YAML exactly as given, stored with the sweep."""
    host: str | None = None
    base_flags: dict[str, FlagValue] = field(default_factory=dict)
    env: dict[str, EnvValue] = field(default_factory=dict)
    axes: dict[str, list[AxisValue]] = field(default_factory=dict)
    """Flag name (as written) -> its values, in file order; the first axis varies slowest."""
    include: list[dict[str, AxisValue]] = field(default_factory=list)
    exclude: list[dict[str, AxisValue]] = field(default_factory=list)
    installs: list[str] = field(default_factory=list)
    """Names of SGLang installs defined on the host; each multiplies the cells (environment axis)."""
    deadlines: Deadlines = field(default_factory=Deadlines)
    """The defaults with this file's overrides applied (see `effective_deadlines` for the host's)."""
    deadline_overrides: dict[str, float] = field(default_factory=dict)
    probes: ProbeSettings = field(default_factory=ProbeSettings)
    retries: int = 0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    """Retries by failure class; `retries` is the default of a class the file does not name."""
    stall: Stall = field(default_factory=Stall)
    """How long each startup phase may show no progress before a launch is a hang."""
    max_cells: int = DEFAULT_MAX_CELLS
    on_infra: OnInfra = "continue"
    """`stop`: after an infra verdict start nothing more; the cells left are recorded as skipped."""
