"""The simulator's scenario file: which SGLang release it imitates and how launches behave.

```yaml
version: 0.5.9                  # release: flag grammar, program name, reported version
gpus: 8
gpu: {name: NVIDIA RTX PRO 6000 Blackwell Server Edition, memory_mib: 97887, compute_capability: "12.0"}
packages: {torch: 2.9.1, flashinfer-python: 0.5.3}
model: {architecture: GlmMoeDsaForCausalLM, weights_gib: 440}
timing: {load_weights_s: 1.0, capture_cuda_graph_s: 0.5}
auto: {attention-backend: flashinfer}       # what an unset or `auto` flag resolves to
rules:
  - when: {fp8-gemm-backend: [auto, deep_gemm]}
    warn: "DeepGemm is enabled but ..."
    fail: {at: sampled_decode, kind: nan_in_probs}
```
Errors name the file, the line and the key, and are raised as ConfigError(s).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from orchestrator.sim.argparser import load_grammar
from orchestrator.sim.errors import ConfigError, ConfigErrors
from orchestrator.sim.flags import canonical_name, canonical_value
from orchestrator.sim.gpu_state import DEFAULT_COMPUTE_CAP, DEFAULT_MEMORY_MIB, DEFAULT_NAME
from orchestrator.sim.grammar import FlagGrammar
from orchestrator.sim.phases import FAILURE_KINDS, Phase

Scalar = str | int | float | bool | None
DEFAULT_AUTO: dict[str, str] = {"attention-backend": "flashinfer", "sampling-backend": "flashinfer"}
"""What SGLang resolves these to on an SM120 host for an ordinary (MHA) model, unless the scenario says otherwise."""
KINDS = FAILURE_KINDS | {"hang", "garbage", "drift", "flaky"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Timing(_Strict):
    """Seconds each phase takes; small defaults so a launch is ready in well under a second."""

    import_s: float = Field(default=0.02, ge=0)
    init_s: float = Field(default=0.02, ge=0)
    load_weights_s: float = Field(default=0.05, ge=0)
    memory_alloc_s: float = Field(default=0.02, ge=0)
    capture_cuda_graph_s: float = Field(default=0.05, ge=0)
    warmup_s: float = Field(default=0.02, ge=0)
    prefill_s: float = Field(default=0.005, ge=0)
    decode_token_s: float = Field(default=0.002, ge=0)
    after_decode_s: float = Field(default=0.3, ge=0)
    """How long after the first good answer an `after_decode` failure strikes."""


class GpuSpec(_Strict):
    """The host's GPU model."""

    name: str = DEFAULT_NAME
    memory_mib: int = Field(default=DEFAULT_MEMORY_MIB, gt=0)
    compute_capability: str = DEFAULT_COMPUTE_CAP


class ModelSpec(_Strict):
    """The served model, as far as logs and memory arithmetic need it."""

    architecture: str = "LlamaForCausalLM"
    model_type: str = "llama"
    weights_gib: float = Field(default=16.0, ge=0)
    context_len: int = Field(default=131072, gt=0)
    kv_bytes_per_token: int = Field(default=131072, gt=0)
    """KV cache bytes per token and rank in bf16."""


class FailSpec(_Strict):
    """How a matching launch fails."""

    at: Phase | None = None
    kind: str
    message: str | None = None
    """Replaces the kind's root-cause line; `{flag-name}` is replaced by the launch's value."""
    on_request: int | None = Field(default=None, gt=0)
    p: float = Field(default=0.5, ge=0, le=1)
    seed: int = 0
    then: str = "cuda_device_assert"

    @field_validator("kind", "then")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in KINDS:
            raise ValueError(f"unknown kind {value!r}; expected one of {', '.join(sorted(KINDS))}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> FailSpec:
        if self.at is None and self.on_request is None:
            raise ValueError("`at` is required unless `on_request` is given")
        if self.then == "flaky":
            raise ValueError("`then` cannot be flaky")
        kind = self.then if self.kind == "flaky" else self.kind
        if self.at is Phase.PREFLIGHT:
            raise ValueError("nothing of SGLang runs at preflight; use arg_parse or a later phase")
        if kind == "invalid_argument" and self.at is not Phase.ARG_PARSE:
            raise ValueError("invalid_argument is an argparse error: use `at: arg_parse`")
        if kind == "warmup_request_failed" and self.at is not Phase.WARMUP:
            raise ValueError("warmup_request_failed happens at warmup: use `at: warmup`")
        if self.at is Phase.SHUTDOWN and kind not in ("hang", "hang_or_timeout"):
            raise ValueError("only `kind: hang` is supported at shutdown (ranks that survive SIGTERM)")
        return self


class Rule(_Strict):
    """Conditions on flags, and what a launch meeting all of them does."""

    when: dict[str, Scalar | list[Scalar]] = Field(default_factory=dict)
    warn: str | list[str] | None = None
    fail: FailSpec | None = None


class Scenario(_Strict):
    """A whole scenario file."""

    version: str
    gpus: int = Field(default=8, gt=0)
    gpu: GpuSpec = Field(default_factory=GpuSpec)
    packages: dict[str, str] = Field(default_factory=dict)
    model: ModelSpec = Field(default_factory=ModelSpec)
    timing: Timing = Field(default_factory=Timing)
    auto: dict[str, Scalar] = Field(default_factory=dict)
    rules: list[Rule] = Field(default_factory=list)

    def autos(self) -> dict[str, str]:
        """Canonical flag -> what it resolves to when unset or `auto`: DEFAULT_AUTO overlaid with `auto:`."""
        given = {
            canonical_name(k): str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in self.auto.items()
            if v is not None
        }
        return {**DEFAULT_AUTO, **given}

    @model_validator(mode="before")
    @classmethod
    def _empty_sections(cls, data: Any) -> Any:
        # `rules:` with nothing under it is YAML null; it means no rules, not an error.
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None or k == "version"}
        return data

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, (int, float)) else value

    @field_validator("packages", mode="before")
    @classmethod
    def _package_versions_text(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: str(v) if isinstance(v, (int, float)) else v for k, v in value.items()}
        return value


def load_scenario(path: str | Path) -> tuple[Scenario, FlagGrammar]:
    """Read, validate and check a scenario against its release's flag grammar."""
    file = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read scenario: {exc.strerror}", file=file) from None
    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = " ".join(filter(None, [getattr(exc, "context", None), getattr(exc, "problem", None)])) or str(exc)
        raise ConfigError(f"not valid YAML: {problem}", file=file, line=mark.line + 1 if mark else None) from None
    if not isinstance(data, dict):
        raise ConfigError("a scenario is a mapping with at least `version:`", file=file, line=1)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ConfigErrors(
            [
                ConfigError(f"{_dotted(err['loc'])}: {err['msg']}", file=file, line=_line_of(root, err["loc"]))
                for err in exc.errors()
            ]
        ) from None
    try:
        grammar = load_grammar(scenario.version)
    except ConfigError as exc:
        raise ConfigError(exc.message, file=file, line=_line_of(root, ("version",)), fix=exc.fix) from None
    problems = _check_flags(scenario, grammar)
    if problems:
        raise ConfigErrors([ConfigError(msg, file=file, line=_line_of(root, loc)) for loc, msg in problems])
    return scenario, grammar


def _check_flags(scenario: Scenario, grammar: FlagGrammar) -> list[tuple[tuple[Any, ...], str]]:
    """Rule and auto keys must be flags of the release (under any spelling), values among its choices."""
    choices: dict[str, set[str] | None] = {}
    for spec in grammar.flags:
        name = canonical_name(spec.primary)
        for alias in spec.names:
            choices[canonical_name(alias)] = (
                {str(canonical_value(name, c)) for c in spec.choices} if spec.choices is not None else None
            )
    problems: list[tuple[tuple[Any, ...], str]] = []
    checks: list[tuple[tuple[Any, ...], str, Scalar | list[Scalar]]] = [
        (("auto", k), k, v) for k, v in scenario.auto.items()
    ]
    for i, rule in enumerate(scenario.rules):
        checks += [(("rules", i, "when", k), k, v) for k, v in rule.when.items()]
    for loc, key, value in checks:
        name = canonical_name(key)
        if name not in choices:
            problems.append((loc, f"{_dotted(loc)}: no flag --{key} in SGLang {scenario.version}"))
            continue
        allowed = choices[name]
        for item in value if isinstance(value, list) else [value]:
            text = str(canonical_value(name, str(item)))
            if allowed is not None and item is not None and text != "auto" and text not in allowed:
                problems.append((loc, f"{_dotted(loc)}: {item!r} is not a choice of --{key} in {scenario.version}"))
    return problems


def _dotted(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text


def _line_of(root: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """The 1-based line of the deepest node of `loc` that exists in the YAML tree."""
    node = root
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if k.value == str(part)), None)
            if match is None:
                break
            line, node = match[0].start_mark.line + 1, match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line
