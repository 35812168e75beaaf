"""One launch of the simulated server, worked out before anything starts: GPUs, memory, plan, log text.

Besides the scenario's rules, the host itself can make a launch fail, as a real one would: a GPU held by
somebody else's process (CUDA OOM naming that process, at memory_alloc), weights that do not fit on a GPU
(CUDA OOM at model_load), no room left for the KV cache (kv_cache_too_small), more ranks than visible GPUs.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from orchestrator.matrix.flags import canonical_name
from orchestrator.matrix.grammar import FlagGrammar
from orchestrator.sim.argparser import given_flags, raw_values
from orchestrator.sim.failures import Context
from orchestrator.sim.gpu_state import Gpu, Holding
from orchestrator.sim.memory import CONTEXT_GIB, MemoryPlan, plan_memory
from orchestrator.sim.phases import Phase
from orchestrator.sim.plan import Failure, LaunchPlan, make_plan
from orchestrator.sim.rank import STARTUP_PHASES as RANK_PHASES
from orchestrator.sim.rank import RankConfig, StartupFailure
from orchestrator.sim.releases import Release, release_of
from orchestrator.sim.scenario import Scenario

_BATCH_SIZES = [1, 2, 4, 8, 12, 16, 24, *range(32, 257, 16)]


@dataclass(frozen=True)
class Launch:
    """Everything about one launch that does not change while it runs."""

    scenario: Scenario
    grammar: FlagGrammar
    release: Release
    values: dict[str, Any]
    """Every option by argparse dest, as parsed."""
    given: dict[str, str]
    plan: LaunchPlan
    memory: MemoryPlan
    rank_gpus: list[int | None]
    """The physical GPU of each TP rank (None: the rank has no visible GPU)."""
    foreign: dict[int, Holding] = field(default_factory=dict)
    """Rank -> the other process already holding its GPU."""

    @property
    def tp_size(self) -> int:
        """Number of scheduler ranks."""
        return len(self.rank_gpus)

    @property
    def host(self) -> str:
        """The address to listen on."""
        return str(self.values.get("host") or "127.0.0.1")

    @property
    def port(self) -> int:
        """The HTTP port."""
        return int(self.values.get("port") or 30000)

    @property
    def model_path(self) -> str:
        """The --model-path as given."""
        return str(self.values.get("model_path") or "")

    @property
    def graph_batch_sizes(self) -> list[int]:
        """The batch sizes CUDA graphs are captured for; empty when graphs are disabled."""
        if Phase.CUDA_GRAPH_CAPTURE in skipped_phases(self.given):
            return []
        limit = int(self.given.get("cuda-graph-max-bs-decode") or self.given.get("cuda-graph-max-bs") or 256)
        return [bs for bs in _BATCH_SIZES if bs <= limit] or [1]

    def context(self, failure: Failure) -> Context:
        """What the failure texts need for `failure`."""
        other = self.foreign.get(failure.rank) if failure.kind == "gpu_memory_in_use" else None
        if failure.kind == "gpu_memory_in_use" and other is None:
            # A rule asked for it without a real holder: name a made-up one, as torch would name the real one.
            other = Holding(
                pid=4100 + failure.rank,
                gpu=0,
                memory_mib=int(self.memory.total_gib * 700),
                server_pid=0,
                process_name="python",
            )
        used = CONTEXT_GIB + self.memory.weights_gib
        if failure.phase.order > Phase.MEMORY_ALLOC.order:
            used += self.memory.kv_gib
        used = min(used, self.memory.total_gib * 0.995)  # an OOM while loading leaves the GPU nearly full
        return Context(
            dsa_era=self.release.dsa_era,
            torch_version=self.scenario.packages.get("torch", "2.9.1"),
            gpu=self.rank_gpus[failure.rank] or 0,
            total_gib=self.memory.total_gib,
            used_gib=round(used, 2),
            mem_fraction=self.memory.mem_fraction,
            model_path=self.model_path,
            port=self.port,
            other_pid=other.pid if other else None,
            other_gib=round(other.memory_mib / 1024, 2) if other else 0.0,
            message=failure.message,
        )


def prepare(
    scenario: Scenario,
    grammar: FlagGrammar,
    namespace: argparse.Namespace,
    *,
    visible_devices: str | None,
    gpus: list[Gpu],
    holdings: list[Holding],
    launch_number: int,
) -> Launch:
    """Work out a launch from its parsed flags and the state of the host."""
    given = given_flags(grammar, namespace)
    values = raw_values(grammar, namespace)
    release = release_of(grammar)
    tp_size = max(1, int(given.get("tp-size", "1")))
    rank_gpus = _rank_gpus(visible_devices, gpus, tp_size, given)
    provisional = make_plan(scenario, given, launch_number=launch_number)
    fraction_text = provisional.resolved.get("mem-fraction-static")
    fraction = float(fraction_text) if fraction_text is not None else None
    memory = plan_memory(
        total_mib=gpus[0].memory_total_mib if gpus else scenario.gpu.memory_mib,
        weights_total_gib=scenario.model.weights_gib,
        tp_size=tp_size,
        kv_cache_dtype=provisional.resolved.get("kv-cache-dtype", "auto"),
        kv_bytes_per_token=scenario.model.kv_bytes_per_token,
        mem_fraction=fraction,
    )
    foreign = {
        rank: held for rank, gpu in enumerate(rank_gpus) for held in holdings if gpu is not None and held.gpu == gpu
    }
    host_failures = [Failure(Phase.MEMORY_ALLOC, "gpu_memory_in_use", rank=rank) for rank in sorted(foreign)[:1]]
    if None in rank_gpus:
        accelerator = Context(torch_version=scenario.packages.get("torch", "2.9.1")).accelerator_error
        message = f"{accelerator}: CUDA error: invalid device ordinal"
        host_failures.append(Failure(Phase.IMPORT, "python_exception_other", message, rank=rank_gpus.index(None)))
    if not memory.weights_fit:
        host_failures.append(Failure(Phase.MODEL_LOAD, "cuda_oom"))
    elif not memory.kv_fits:
        host_failures.append(Failure(Phase.MEMORY_ALLOC, "kv_cache_too_small"))
    plan = make_plan(scenario, given, launch_number=launch_number, extra=host_failures, skipped=skipped_phases(given))
    dests = dest_of(grammar)
    for name, (value, _line) in plan.overrides.items():
        if name in dests:  # what the server runs with: its server_args line and /server_info say so
            values[dests[name]] = _typed(value)
    return Launch(scenario, grammar, release, values, given, plan, memory, rank_gpus, foreign)


OVERRIDE_LINES = {
    "attention-backend": "Use {to} attention backend for DeepSeek with DSA.",
    "kv-cache-dtype": "Setting KV cache dtype to {to} for DeepSeek DSA on SM120 device.",
    "page-size": "Setting page size to {to} for DeepSeek DSA.",
    "sampling-backend": "Sampling backend is set to {to} for deterministic inference.",
    "moe-runner-backend": "Use {to} as MoE runner backend on sm100 for DeepseekV3ForCausalLM",
    "chunked-prefill-size": "The radix cache, chunked prefill, and overlap scheduler are disabled because of using "
    "eagle speculative decoding.",
    "disable-cuda-graph": "Cuda graph is disabled because of using torch native attention backend",
    "mem-fraction-static": "mem_fraction_static is adjusted to {to} to leave room for CUDA graphs.",
}
"""What SGLang's server_args.py logs when it changes a flag at start (by the flag it changes)."""


def override_lines(launch: Launch) -> list[str]:
    """The lines the server logs for each flag it changed from what it was asked."""
    lines = []
    for name, (value, line) in launch.plan.overrides.items():
        template = line or OVERRIDE_LINES.get(name, "{dest} is set to {to}.")
        lines.append(template.replace("{to}", value).replace("{dest}", name.replace("-", "_")))
    return lines


def _typed(text: str) -> Any:
    """A scenario's override value as argparse would have parsed it: numbers, booleans, else the text."""
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def skipped_phases(given: dict[str, str]) -> set[Phase]:
    """The startup phases a launch's flags leave out (no graph capture, no warm-up)."""
    skipped = set()
    if given.get("disable-cuda-graph") == "true" or given.get("cuda-graph-backend-decode") == "disabled":
        skipped.add(Phase.CUDA_GRAPH_CAPTURE)
    if given.get("skip-server-warmup") == "true":
        skipped.add(Phase.WARMUP)
    return skipped


def _rank_gpus(visible: str | None, gpus: list[Gpu], tp_size: int, given: dict[str, str]) -> list[int | None]:
    """Rank i takes the (base-gpu-id + i * gpu-id-step)-th GPU listed in CUDA_VISIBLE_DEVICES."""
    by_uuid = {gpu.uuid: gpu.index for gpu in gpus}
    if visible is None:
        listed: list[int | None] = [gpu.index for gpu in gpus]
    else:
        listed = []
        for item in (part.strip() for part in visible.split(",") if part.strip()):
            index = int(item) if item.isdigit() else by_uuid.get(item)
            listed.append(index if index is not None and index < len(gpus) else None)
    base, step = int(given.get("base-gpu-id", "0")), int(given.get("gpu-id-step", "1"))
    slots = [base + rank * step for rank in range(tp_size)]
    return [listed[slot] if slot < len(listed) else None for slot in slots]


def dest_of(grammar: FlagGrammar) -> dict[str, str]:
    """Canonical flag name -> argparse dest."""
    return {canonical_name(spec.primary): spec.dest for spec in grammar.flags}


def startup_lines(launch: Launch) -> list[str]:
    """What the main process logs before it starts the schedulers, in SGLang's order."""
    values = dict(launch.values)
    values["tokenizer_path"] = values.get("tokenizer_path") or launch.model_path
    values.update(host=launch.host, port=launch.port, tp_size=launch.tp_size)
    args = ", ".join(f"{dest}={value!r}" for dest, value in values.items())
    lines = [*override_lines(launch), f"server_args=ServerArgs({args})"]
    auto = launch.scenario.autos()
    unset = [name for name in auto if launch.given.get(name, "auto") == "auto"]
    if "attention-backend" in unset:
        lines.append(f"Attention backend not specified. Use {auto['attention-backend']} backend by default.")
    sparse = ("dsa-prefill-backend", "dsa-decode-backend")
    if any(name in unset for name in sparse):
        kv = launch.plan.resolved.get("kv-cache-dtype", "auto")
        prefill, decode = (launch.plan.resolved.get(name, "auto") for name in sparse)
        lines.append(
            f"Set {launch.release.sparse_word} backends for {kv} KV Cache: prefill={prefill}, decode={decode}."
        )
    lines += launch.release.value_deprecations(launch.given)
    lines += launch.plan.warnings
    return lines


def server_info(launch: Launch, *, throughput: float) -> dict[str, Any]:
    """The /server_info document: server args with `auto` resolved, scheduler info, version."""
    info: dict[str, Any] = dict(launch.values)
    dests = dest_of(launch.grammar)
    for name, value in launch.plan.resolved.items():
        if name in dests and launch.given.get(name, "auto") == "auto" and name not in launch.plan.overrides:
            info[dests[name]] = value
    memory = launch.memory
    info.update(host=launch.host, port=launch.port, tp_size=launch.tp_size)
    info.update(
        status="ready",
        max_total_num_tokens=memory.tokens,
        max_req_input_len=launch.scenario.model.context_len - 1,
        internal_states=[
            {
                "attention_backend": str(info.get("attention_backend") or "")
                if "attention-backend" in launch.plan.overrides
                else launch.plan.resolved.get("attention-backend", "flashinfer"),
                "last_gen_throughput": round(throughput, 2),
                "memory_usage": {
                    "weight": memory.weights_gib,
                    "kvcache": memory.kv_gib,
                    "token_capacity": memory.tokens,
                    "graph": memory.graph_gib,
                },
            }
        ],
        version=launch.scenario.version,
    )
    return info


def model_info(launch: Launch) -> dict[str, Any]:
    """The /model_info document."""
    model = launch.scenario.model
    return {
        "model_path": launch.model_path,
        "tokenizer_path": launch.values.get("tokenizer_path") or launch.model_path,
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": "default",
        "has_image_understanding": False,
        "has_audio_understanding": False,
        "model_type": model.model_type,
        "architectures": [model.architecture],
    }


def rank_configs(launch: Launch, *, server_pid: int, state_dir: str, began: float) -> list[RankConfig]:
    """The config each scheduler rank starts with; `began` (time.monotonic) is when the server's process started."""
    startup = launch.plan.startup
    failure = None
    if startup is not None and startup.phase.value in RANK_PHASES:
        failure = StartupFailure(
            startup.phase.value, startup.kind, startup.rank, launch.context(startup), startup.after_progress
        )
    return [
        RankConfig(
            rank=rank,
            tp_size=launch.tp_size,
            gpu=gpu,
            server_pid=server_pid,
            state_dir=state_dir,
            timing=launch.scenario.timing,
            began=began,
            memory=launch.memory,
            arch=launch.scenario.model.architecture,
            context_len=launch.scenario.model.context_len,
            cuda_graph_bs=launch.graph_batch_sizes,
            chunked_prefill_size=int(launch.values.get("chunked_prefill_size") or 8192),
            failure=failure,
            slow=dict(launch.plan.slow),
            linger=launch.plan.hangs_on_shutdown,
        )
        for rank, gpu in enumerate(launch.rank_gpus)
    ]
