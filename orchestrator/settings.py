"""Per-run settings shared by config loading, the readiness wait, the probes and repro.

Plain frozen values: config/ builds them from YAML, the run loop reads them, and a copy is
stored with every run so that `repro` re-runs with exactly the same limits and prompts.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(text: str | float | int) -> float:
    """`30m` / `90s` / `1.5h` / `250ms` / 12 -> seconds; raises ValueError on anything else."""
    if isinstance(text, bool):
        raise ValueError(f"not a duration: {text!r}")
    if isinstance(text, (int, float)):
        if text < 0:
            raise ValueError(f"a duration cannot be negative: {text!r}")
        return float(text)
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"not a duration: {text!r} (write e.g. 90s, 30m, 1.5h)")
    return float(match.group(1)) * _UNIT_S[match.group(2)]


@dataclass(frozen=True)
class Deadlines:
    """How long each startup phase and each probe may take before the launch is cut (seconds).

    A real 400B launch legitimately spends tens of minutes loading weights or JIT-compiling
    DeepGEMM kernels, so the defaults are generous; the simulated host overrides them.
    """

    model_load: float = 1800.0
    memory_alloc: float = 600.0
    cuda_graph_capture: float = 900.0
    ready: float = 2700.0
    """Whole startup, from launch to `/health_generate` 200."""
    probe: float = 120.0
    """One probe request."""
    stop_grace: float = 15.0
    """SIGTERM -> SIGKILL grace when stopping a launch."""
    gpu_release: float = 60.0
    """How long to wait for `nvidia-smi` to show the launch's GPUs free after it stopped."""

    def with_overrides(self, values: dict[str, Any]) -> Deadlines:
        """A copy with some deadlines replaced (values are durations: `30m`, `90s`, numbers)."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown deadline(s) {unknown}; known: {sorted(known)}")
        return replace(self, **{k: parse_duration(v) for k, v in values.items()})

    def to_dict(self) -> dict[str, float]:
        """A JSON-ready form."""
        return asdict(self)

    def __repr__(self) -> str:
        values = set(self.to_dict().values())
        if len(values) == 1:
            return f"Deadlines({values.pop()})"
        return "Deadlines(" + ", ".join(f"{k}={v:g}" for k, v in self.to_dict().items()) + ")"


STALL_PHASES = ("import", "model_load", "memory_alloc", "cuda_graph_capture", "warmup")
"""The startup phases a stall window can be set for (a matrix's `stall:` keys)."""


@dataclass(frozen=True)
class Stall:
    """How long each startup phase may go without progress before the launch is called hung (seconds).

    Progress is a new log line or a progress bar that advanced (probe/progress.py); the phase deadlines
    stay as hard caps. The defaults are set from real SGLang start-ups of large models, with room:
    - import 10m: a first launch may JIT-build or load kernel caches (FlashInfer, sgl-kernel) for minutes
      without a line;
    - model_load 10m: the checkpoint-shard bar moves once per shard (~5 GB); a 400B checkpoint read from
      network storage at ~100 MB/s moves it about once a minute;
    - memory_alloc 5m: profiling memory and allocating the KV cache take seconds;
    - cuda_graph_capture 10m: the batch-size bar moves every few seconds, but the first capture may JIT
      DeepGEMM or CuTe kernels for minutes before it moves;
    - warmup 10m: the server's own warm-up request, which may JIT kernels on its first forward pass.
    A hang then costs about 10 GPU-minutes instead of the 30-45 of the phase deadlines, and a slow but
    healthy load that keeps printing is never cut before its deadline.
    """

    windows: dict[str, float] = field(
        default_factory=lambda: {
            "import": 600.0, "model_load": 600.0, "memory_alloc": 300.0, "cuda_graph_capture": 600.0,
            "warmup": 600.0,
        }
    )  # fmt: skip

    def window(self, phase: str) -> float | None:
        """The phase's window, or None when no-progress in that phase is never a hang by itself."""
        return self.windows.get(phase)

    def with_overrides(self, values: dict[str, Any]) -> Stall:
        """A copy with some windows replaced (durations: `10m`, `90s`, numbers; `off` or 0 turns one off)."""
        unknown = sorted(set(values) - set(STALL_PHASES))
        if unknown:
            raise ValueError(f"unknown stall phase(s) {unknown}; known: {list(STALL_PHASES)}")
        windows = dict(self.windows)
        for phase, value in values.items():
            seconds = 0.0 if value in ("off", False, None) else parse_duration(value)
            if seconds > 0:
                windows[phase] = seconds
            else:
                windows.pop(phase, None)
        return Stall(windows)

    def to_dict(self) -> dict[str, float]:
        """A JSON-ready form."""
        return dict(self.windows)


RetryClass = Literal["deterministic", "transient", "flaky"]


@dataclass(frozen=True)
class RetryPolicy:
    """Retries by failure class (a matrix's `retry:`); a class left None takes the matrix's `retries:`.

    Deterministic failures (a flag the build rejects, a kernel missing for the GPU, weights that do not
    load) cost a full model load to relaunch and cannot change: not retried unless asked. Transient ones
    (the host, the orchestrator, a port or GPU someone else took) are retried once the GPUs are free again;
    flaky ones (NaN, illegal memory access, a hang) are retried to measure how often they happen.
    """

    deterministic: int | None = None
    transient: int | None = None
    flaky: int | None = None

    def retries(self, kind: RetryClass, default: int) -> int:
        """The retries a failure of this class earns (deterministic: 0 unless the matrix says otherwise)."""
        given = {"deterministic": self.deterministic, "transient": self.transient, "flaky": self.flaky}[kind]
        if given is not None:
            return given
        return 0 if kind == "deterministic" else default

    def to_dict(self) -> dict[str, int | None]:
        """A JSON-ready form."""
        return asdict(self)


@dataclass(frozen=True)
class KnownAnswer:
    """A prompt whose correct greedy answer is known, and words the answer must contain."""

    prompt: str
    expect_any: tuple[str, ...]


@dataclass(frozen=True)
class LoadSettings:
    """The short standard load run on a passing launch to measure its speed (a matrix's `load:`).

    The defaults finish in about a minute on a real host (32 requests of 128 output tokens at
    concurrency 8, three times), as a short `sglang.bench_serving` run; `repeat` gives the noise band.
    """

    requests: int = 32
    concurrency: int = 8
    input_len: int = 256
    """Prompt length in tokens (about: words of a fixed text, as bench_serving's random dataset)."""
    output_len: int = 128
    """Tokens every answer must have (asked with `max_tokens` and `ignore_eos`)."""
    repeat: int = 3

    def to_dict(self) -> dict[str, int]:
        """A JSON-ready form."""
        return asdict(self)


@dataclass(frozen=True)
class ProbeSettings:
    """What the probes send and how they judge the answers."""

    greedy: KnownAnswer = KnownAnswer("The capital city of France is", ("Paris",))
    greedy_max_tokens: int = 16
    sampled_prompt: str = "Write two sentences about the ocean."
    sampled_temperature: float = 0.7
    sampled_top_p: float = 0.95
    sampled_max_tokens: int = 48
    stream_prompt: str = "Count from one to five in words."
    concurrent_requests: int = 8
    concurrent_max_tokens: int = 32
    settle_s: float = 1.0
    """Pause before the liveness check after the answers, so a crash that follows them shows."""
    model: str | None = None
    """The served model name for chat requests; None asks `/v1/models`."""
    extra: dict[str, Any] = field(default_factory=dict)
    load: LoadSettings | None = field(default_factory=LoadSettings)
    """The speed measurement after the probes passed (a matrix's top-level `load:`); None: `load: off`."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeSettings:
        """Rebuild from `to_dict` output (or a matrix's `probes:` section)."""
        values = dict(data)
        greedy = values.pop("greedy", None)
        if isinstance(greedy, dict):
            values["greedy"] = KnownAnswer(str(greedy["prompt"]), tuple(greedy.get("expect_any", ())))
        if isinstance(values.get("load"), dict):
            values["load"] = LoadSettings(**values["load"])
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown probe setting(s) {unknown}; known: {sorted(known)}")
        return cls(**values)
