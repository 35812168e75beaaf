"""Which scenario rules a launch matches, and what that launch will therefore do. Pure: no I/O.

Every matching rule applies: its warnings are all printed, and of its failures the earliest startup phase
happens. Failures in the serving phases stay armed together; the first request that meets one's condition
sets it off. `garbage` and `drift` are not failures but ways of answering, `flaky` becomes its `then` kind (or
nothing) by a draw seeded with the rule's seed and the host's launch counter.
"""

from __future__ import annotations

import random
import re
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from orchestrator.matrix.flags import canonical_name, canonical_value
from orchestrator.sim.phases import Phase
from orchestrator.sim.scenario import FailSpec, PerfRule, Rule, Scalar, Scenario

STARTUP = (Phase.ARG_PARSE, Phase.IMPORT, Phase.MODEL_LOAD, Phase.MEMORY_ALLOC, Phase.CUDA_GRAPH_CAPTURE, Phase.WARMUP)
ALIASES = {"wrong_output": "garbage", "hang_or_timeout": "hang"}
UNSET_DEFAULTS = {"tp-size": "1", "dp-size": "1", "host": "127.0.0.1", "port": "30000"}
"""What an unset flag counts as besides `auto`, where its default is not `auto` or off."""
_PLACEMENT_FLAGS = frozenset({"host", "port", "base-gpu-id", "nccl-port", "dist-init-addr", "gpu-id-step"})


@dataclass(frozen=True)
class Failure:
    """One way the launch will fail: where, how, and what it says."""

    phase: Phase
    kind: str
    message: str | None = None
    on_request: int | None = None
    rank: int = 0
    """The scheduler rank that reports a startup failure (the others stall)."""
    after_progress: float | None = None
    """A hang: the share of its phase's progress printed before it stops (None: all of it)."""


@dataclass(frozen=True)
class LaunchPlan:
    """What one launch does, decided before it starts."""

    warnings: tuple[str, ...] = ()
    startup: Failure | None = None
    serving: tuple[Failure, ...] = ()
    garbage: frozenset[Phase] = frozenset()
    resolved: dict[str, str] = field(default_factory=dict)
    drift: frozenset[Phase] = frozenset()
    """Phases whose answers drift: fluent and wrong (another number, another city), never a crash."""
    slow: dict[str, float] = field(default_factory=dict)
    """Startup phase -> how many times its timing it takes (every matching `slow:` rule multiplies)."""
    overrides: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    """Canonical flag -> (the value the server runs with instead of the asked one, the log line to say it in)."""
    tok_s: float | None = None
    """Output tokens/s of the whole server (`perf:` times the matching rules' factors); None: no `perf:`."""
    noise: float = 0.0
    noise_seed: int = 0
    honours_ignore_eos: bool = True
    """Seeds the speed's draw for each burst of requests: the same flags draw the same sequence every launch."""

    @property
    def hangs_on_shutdown(self) -> bool:
        """Whether the ranks survive SIGTERM (a rule `fail: {at: shutdown, kind: hang}`)."""
        return any(f.phase is Phase.SHUTDOWN for f in self.serving)


def normalize(name: str, value: Scalar) -> str:
    """A flag value as rules and launches compare it: `true`/`false`, `auto` for null, canonical spelling."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "auto"
    return str(canonical_value(name, str(value)))


def resolve(scenario: Scenario, given: Mapping[str, str]) -> dict[str, str]:
    """The given flags plus what each `auto:` entry resolves an unset or `auto` flag to."""
    resolved = dict(given)
    for key, value in scenario.autos().items():
        if given.get(key, "auto") == "auto":
            resolved[key] = normalize(key, value)
    return resolved


def rule_matches(rule: Rule | PerfRule, given: Mapping[str, str], resolved: Mapping[str, str]) -> bool:
    """Whether every `when` condition holds; an unset flag matches `auto`, `false`, its default or resolution."""
    for name, wanted in rule.when.items():
        key = canonical_name(name)
        values = wanted if isinstance(wanted, list) else [wanted]
        accepted = {normalize(key, v) for v in values}
        have = given.get(key)
        if have is None or have == "auto":
            candidates = {"auto", "false", UNSET_DEFAULTS.get(key), resolved.get(key)}
        else:
            candidates = {have}
        if not accepted & candidates:
            return False
    return True


def make_plan(
    scenario: Scenario,
    given: Mapping[str, str],
    *,
    launch_number: int,
    extra: Iterable[Failure] = (),
    skipped: Iterable[Phase] = (),
) -> LaunchPlan:
    """Apply the scenario's rules to a launch's canonical flags.

    `extra` adds failures of the host itself; failures at `skipped` phases (CUDA graphs disabled, warm-up
    skipped) cannot happen, because the launch never goes through them.
    """
    resolved = resolve(scenario, given)
    warnings: list[str] = []
    failures = list(extra)
    garbage: set[Phase] = set()
    drift: set[Phase] = set()
    slow: dict[str, float] = {}
    overrides: dict[str, tuple[str, str | None]] = {}
    for index, rule in enumerate(scenario.rules):
        if not rule_matches(rule, given, resolved):
            continue
        warnings.extend([rule.warn] if isinstance(rule.warn, str) else rule.warn or [])
        if rule.slow is not None:
            slow[rule.slow.at] = slow.get(rule.slow.at, 1.0) * rule.slow.factor
        if rule.override is not None:
            name = canonical_name(rule.override.flag)
            overrides[name] = (normalize(name, rule.override.to), rule.override.log)
        failure = _failure(rule.fail, index, launch_number, resolved) if rule.fail else None
        if failure is not None and failure.kind == "garbage":
            garbage.add(failure.phase)
        elif failure is not None and failure.kind == "drift":
            drift.add(failure.phase)
        elif failure is not None:
            failures.append(failure)
    failures = [f for f in failures if f.phase not in set(skipped)]
    startup = [f for f in failures if f.phase in STARTUP and f.on_request is None]
    first = min(startup, key=lambda f: f.phase.order) if startup else None
    serving = tuple(f for f in failures if f not in startup)
    plan = LaunchPlan(tuple(warnings), first, serving, frozenset(garbage), resolved, frozenset(drift), slow, overrides)
    return _with_speed(plan, scenario, given, resolved)


def _with_speed(
    plan: LaunchPlan, scenario: Scenario, given: Mapping[str, str], resolved: Mapping[str, str]
) -> LaunchPlan:
    """The plan with the launch's serving speed: `perf.tok_s` times the factor of every matching perf rule."""
    perf = scenario.perf
    if perf is None:
        return plan
    tok_s = perf.tok_s
    for rule in perf.rules:
        if rule_matches(rule, given, resolved):
            tok_s *= rule.factor
    # Where it listens and which GPUs it got change every launch; the speed's draws stay those of its flags.
    flags = sorted((k, v) for k, v in given.items() if k not in _PLACEMENT_FLAGS)
    seed = zlib.crc32(repr((perf.seed, flags)).encode())
    return replace(plan, tok_s=tok_s, noise=perf.noise, noise_seed=seed, honours_ignore_eos=perf.ignore_eos)


def _failure(spec: FailSpec, index: int, launch_number: int, resolved: Mapping[str, str]) -> Failure | None:
    kind = spec.kind
    if kind == "flaky":
        draw = random.Random(f"{spec.seed}:{index}:{launch_number}").random()
        if draw >= spec.p:
            return None
        kind = spec.then
    kind = ALIASES.get(kind, kind)
    if kind == "healthy":
        return None
    message = _fill(spec.message, resolved) if spec.message else None
    return Failure(spec.at or Phase.SERVING, kind, message, spec.on_request, after_progress=spec.after_progress)


def _fill(template: str, resolved: Mapping[str, str]) -> str:
    """Substitute `{flag-name}` placeholders with the launch's (resolved) flag values."""
    return re.sub(r"\{([a-z0-9-]+)\}", lambda m: resolved.get(canonical_name(m.group(1)), m.group(0)), template)
