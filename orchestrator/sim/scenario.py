"""The simulator's scenario file: which SGLang release it imitates and how launches behave.

```yaml
version: 0.5.9                  # release: flag grammar, program name, reported version
gpus: 8
gpu: {name: NVIDIA RTX PRO 6000 Blackwell Server Edition, memory_mib: 97887, compute_capability: "12.0"}
packages: {torch: 2.9.1, flashinfer-python: 0.5.3}
model: {architecture: GlmMoeDsaForCausalLM, weights_gib: 440}
timing: {load_weights_s: 1.0, capture_cuda_graph_s: 0.5}
auto: {attention-backend: flashinfer}       # what an unset or `auto` flag resolves to
perf: {tok_s: 1000, noise: 0.03, rules: [{when: {attention-backend: fa3}, factor: 1.25}]}   # serving speed
rules:
  - when: {fp8-gemm-backend: [auto, deep_gemm]}
    warn: "DeepGemm is enabled but ..."
    fail: {at: sampled_decode, kind: nan_in_probs}
```
Errors name the file, the line and the key, and are raised as ConfigError(s).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from orchestrator.matrix.flags import canonical_name, canonical_value
from orchestrator.matrix.grammar import FlagGrammar
from orchestrator.sim.argparser import load_grammar
from orchestrator.sim.errors import ConfigError, ConfigErrors
from orchestrator.sim.gpu_state import DEFAULT_COMPUTE_CAP, DEFAULT_MEMORY_MIB, DEFAULT_NAME
from orchestrator.sim.phases import FAILURE_KINDS, Phase
from orchestrator.sim.schema import (
    Bad,
    Invalid,
    build,
    checked,
    integer,
    list_of,
    mapping_of,
    number,
    one_of,
    optional,
    record_of,
    scalar,
    text,
    text_or_texts,
)

Scalar = str | int | float | bool | None
DEFAULT_AUTO: dict[str, str] = {"attention-backend": "flashinfer", "sampling-backend": "flashinfer"}
"""What SGLang resolves these to on an SM120 host for an ordinary (MHA) model, unless the scenario says otherwise."""
KINDS = FAILURE_KINDS | {"hang", "garbage", "drift", "flaky"}
_SECONDS = number(ge=0)


class _Record:
    def validate(self) -> None:
        """Checks across fields, after each field passed its own; raises schema.Bad."""


@dataclass(frozen=True, kw_only=True)
class Timing(_Record):
    """Seconds each phase takes; small defaults so a launch is ready in well under a second."""

    import_s: float = checked(_SECONDS, 0.02)
    init_s: float = checked(_SECONDS, 0.02)
    load_weights_s: float = checked(_SECONDS, 0.05)
    memory_alloc_s: float = checked(_SECONDS, 0.02)
    capture_cuda_graph_s: float = checked(_SECONDS, 0.05)
    warmup_s: float = checked(_SECONDS, 0.02)
    prefill_s: float = checked(_SECONDS, 0.005)
    decode_token_s: float = checked(_SECONDS, 0.002)
    after_decode_s: float = checked(_SECONDS, 0.3)
    """How long after the first good answer an `after_decode` failure strikes."""


@dataclass(frozen=True, kw_only=True)
class GpuSpec(_Record):
    """The host's GPU model."""

    name: str = checked(text(), DEFAULT_NAME)
    memory_mib: int = checked(integer(gt=0), DEFAULT_MEMORY_MIB)
    compute_capability: str = checked(text(numbers_too=True), DEFAULT_COMPUTE_CAP)


@dataclass(frozen=True, kw_only=True)
class ModelSpec(_Record):
    """The served model, as far as logs and memory arithmetic need it."""

    architecture: str = checked(text(), "LlamaForCausalLM")
    model_type: str = checked(text(), "llama")
    weights_gib: float = checked(number(ge=0), 16.0)
    context_len: int = checked(integer(gt=0), 131072)
    kv_bytes_per_token: int = checked(integer(gt=0), 131072)
    """KV cache bytes per token and rank in bf16."""


_KIND = one_of("kind", sorted(KINDS))


@dataclass(frozen=True, kw_only=True)
class FailSpec(_Record):
    """How a matching launch fails."""

    at: Phase | None = checked(optional(one_of("phase", [p.value for p in Phase], Phase)), None)
    kind: str = checked(_KIND)
    message: str | None = checked(optional(text()), None)
    """Replaces the kind's root-cause line; `{flag-name}` is replaced by the launch's value."""
    on_request: int | None = checked(optional(integer(gt=0)), None)
    p: float = checked(number(ge=0, le=1), 0.5)
    seed: int = checked(integer(), 0)
    then: str = checked(_KIND, "cuda_device_assert")
    after_progress: float | None = checked(optional(number(ge=0, le=1)), None)
    """A hang: the phase prints its progress for this fraction of its time, then nothing (a stuck load)."""

    def validate(self) -> None:
        if self.at is None and self.on_request is None:
            raise Bad("`at` is required unless `on_request` is given")
        if self.after_progress is not None and self.kind not in ("hang", "hang_or_timeout"):
            raise Bad("`after_progress` is for `kind: hang` (a launch that stops making progress)")
        if self.then == "flaky":
            raise Bad("`then` cannot be flaky")
        kind = self.then if self.kind == "flaky" else self.kind
        if self.at is Phase.PREFLIGHT:
            raise Bad("nothing of SGLang runs at preflight; use arg_parse or a later phase")
        if kind == "invalid_argument" and self.at is not Phase.ARG_PARSE:
            raise Bad("invalid_argument is an argparse error: use `at: arg_parse`")
        if kind == "warmup_request_failed" and self.at is not Phase.WARMUP:
            raise Bad("warmup_request_failed happens at warmup: use `at: warmup`")
        if self.at is Phase.SHUTDOWN and kind not in ("hang", "hang_or_timeout"):
            raise Bad("only `kind: hang` is supported at shutdown (ranks that survive SIGTERM)")


SLOW_PHASES = ("import", "model_load", "memory_alloc", "cuda_graph_capture", "warmup")


@dataclass(frozen=True, kw_only=True)
class SlowSpec(_Record):
    """A startup phase that takes `factor` times its timing, printing its progress throughout."""

    at: str = checked(one_of("phase", list(SLOW_PHASES)))
    factor: float = checked(number(gt=0))


@dataclass(frozen=True, kw_only=True)
class OverrideSpec(_Record):
    """A flag the server changes at start: it runs with `to`, and says so in SGLang's words (or `log`)."""

    flag: str = checked(text())
    to: str = checked(text(numbers_too=True))
    log: str | None = checked(optional(text()), None)


@dataclass(frozen=True, kw_only=True)
class Rule(_Record):
    """Conditions on flags, and what a launch meeting all of them does."""

    when: dict[str, Scalar | list[Scalar]] = checked(mapping_of(scalar(lists=True)), factory=dict)
    warn: str | list[str] | None = checked(optional(text_or_texts()), None)
    fail: FailSpec | None = checked(optional(record_of(FailSpec)), None)
    slow: SlowSpec | None = checked(optional(record_of(SlowSpec)), None)
    override: OverrideSpec | None = checked(optional(record_of(OverrideSpec)), None)


def _boolean(value: Any, loc: Any, problems: Any) -> bool:
    if not isinstance(value, bool):
        raise Bad("Input should be a valid boolean (true or false)")
    return value


@dataclass(frozen=True, kw_only=True)
class PerfRule(_Record):
    """Launches matching `when` serve `factor` times as fast (every matching rule multiplies)."""

    when: dict[str, Scalar | list[Scalar]] = checked(mapping_of(scalar(lists=True)), factory=dict)
    factor: float = checked(number(gt=0))


@dataclass(frozen=True, kw_only=True)
class Perf(_Record):
    """How fast a launch serves: output tokens/s of the whole server, shared by the requests in flight.

    Without `perf:` each request decodes at `timing.decode_token_s` a token whatever else runs.
    """

    tok_s: float = checked(number(gt=0))
    noise: float = checked(number(ge=0, le=0.5), 0.0)
    """Relative spread of the speed between bursts of requests (a repeat of a load), seeded per launch's flags."""
    seed: int = checked(integer(), 0)
    rules: list[PerfRule] = checked(list_of(record_of(PerfRule)), factory=list)
    ignore_eos: bool = checked(_boolean, True)
    """Whether the server honours a request's `ignore_eos` (false: answers end at their end of sequence, short of
    `max_tokens`, as a server that does not know the key)."""


@dataclass(frozen=True, kw_only=True)
class Scenario(_Record):
    """A whole scenario file."""

    version: str = checked(text(numbers_too=True))
    gpus: int = checked(integer(gt=0), 8)
    gpu: GpuSpec = checked(record_of(GpuSpec), factory=GpuSpec)
    packages: dict[str, str] = checked(mapping_of(text(numbers_too=True)), factory=dict)
    model: ModelSpec = checked(record_of(ModelSpec), factory=ModelSpec)
    timing: Timing = checked(record_of(Timing), factory=Timing)
    auto: dict[str, Scalar] = checked(mapping_of(scalar()), factory=dict)
    rules: list[Rule] = checked(list_of(record_of(Rule)), factory=list)
    perf: Perf | None = checked(optional(record_of(Perf)), None)

    def autos(self) -> dict[str, str]:
        """Canonical flag -> what it resolves to when unset or `auto`: DEFAULT_AUTO overlaid with `auto:`."""
        given = {
            canonical_name(k): str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in self.auto.items()
            if v is not None
        }
        return {**DEFAULT_AUTO, **given}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Scenario:
        """A scenario from a file's mapping; raises schema.Invalid listing every problem."""
        # `rules:` with nothing under it is YAML null; it means no rules, not an error.
        return build(cls, {k: v for k, v in data.items() if v is not None or k == "version"})


DEFAULT_SCENARIO = Path(__file__).resolve().parent / "scenarios" / "default.yaml"
"""The scenario of a simulated host given none: the demo's incident (configs/sim/glm5-nvfp4-sm120.yaml), shipped
with the package so that `--host sim` works from any directory."""


def load_scenario(path: str | Path) -> tuple[Scenario, FlagGrammar]:
    """Read, validate and check a scenario against its release's flag grammar."""
    file = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read scenario: {exc.strerror}", file=file) from None
    try:
        # libyaml where installed: a launch reads its scenario on every start. The messages, and the line
        # numbers an error needs (a second parse, into nodes), come from PyYAML's own parser, the same everywhere.
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        data = _pure_yaml(text, file)
    if not isinstance(data, dict):
        raise ConfigError("a scenario is a mapping with at least `version:`", file=file, line=1)
    try:
        scenario = Scenario.from_data(data)
    except Invalid as exc:
        root = yaml.compose(text)
        raise ConfigErrors(
            [ConfigError(f"{_dotted(loc)}: {msg}", file=file, line=_line_of(root, loc)) for loc, msg in exc.problems]
        ) from None
    try:
        grammar = load_grammar(scenario.version)
    except ConfigError as exc:
        line = _line_of(yaml.compose(text), ("version",))
        raise ConfigError(exc.message, file=file, line=line, fix=exc.fix) from None
    problems = _check_flags(scenario, grammar)
    if problems:
        root = yaml.compose(text)
        raise ConfigErrors([ConfigError(msg, file=file, line=_line_of(root, loc)) for loc, msg in problems])
    return scenario, grammar


def _pure_yaml(text: str, file: str) -> Any:
    """PyYAML's own parse: its error, with the problem and the line, as a ConfigError."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = " ".join(filter(None, [getattr(exc, "context", None), getattr(exc, "problem", None)])) or str(exc)
        raise ConfigError(f"not valid YAML: {problem}", file=file, line=mark.line + 1 if mark else None) from None


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
        if rule.override is not None:
            checks.append((("rules", i, "override", "flag"), rule.override.flag, None))
    for i, perf_rule in enumerate(scenario.perf.rules if scenario.perf else []):
        checks += [(("perf", "rules", i, "when", k), k, v) for k, v in perf_rule.when.items()]
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
