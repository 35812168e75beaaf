"""Per-run settings shared by config loading, the readiness wait, the probes and repro.

Plain frozen values: config/ builds them from YAML, the run loop reads them, and a copy is
stored with every run so that `repro` re-runs with exactly the same limits and prompts.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

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


@dataclass(frozen=True)
class KnownAnswer:
    """A prompt whose correct greedy answer is known, and words the answer must contain."""

    prompt: str
    expect_any: tuple[str, ...]


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
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown probe setting(s) {unknown}; known: {sorted(known)}")
        return cls(**values)
