"""The simulated host's pure parts: scenario files, rule matching, failure texts, answers, flags, GPU state."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.model import Category
from orchestrator.sim import answers, check_env, gpu_state
from orchestrator.sim import rank as rank_module
from orchestrator.sim.argparser import build_parser, given_flags, load_grammar
from orchestrator.sim.errors import ConfigError
from orchestrator.sim.failures import NAN_TEXT, Context, main_process_failure, scheduler_failure
from orchestrator.sim.launch import prepare, rank_configs
from orchestrator.sim.phases import Phase
from orchestrator.sim.plan import LaunchPlan, make_plan
from orchestrator.sim.scenario import Scenario, load_scenario
from tests.paths import FIXTURES, REPO, require_fixtures

require_fixtures()

GLM = REPO / "configs" / "sim" / "glm5-nvfp4-sm120.yaml"
GLM_0523 = REPO / "configs" / "sim" / "glm5-nvfp4-sm120-0.5.23.yaml"
NVIDIA_SMI = REPO / "orchestrator" / "sim" / "bin" / "nvidia-smi"


def flags(version: str, *argv: str) -> dict[str, str]:
    grammar = load_grammar(version)
    return given_flags(grammar, build_parser(grammar).parse_args(["--model-path", "/m", *argv]))


def glm_plan(path: Path, *argv: str, launch_number: int = 1) -> LaunchPlan:
    scenario, grammar = load_scenario(path)
    return make_plan(scenario, flags(grammar.version, *argv), launch_number=launch_number)


# --- scenario files -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [GLM, GLM_0523])
def test_incident_scenarios_load(path: Path) -> None:
    scenario, grammar = load_scenario(path)
    assert grammar.version == scenario.version and scenario.gpus == 8 and len(scenario.rules) >= 3


@pytest.mark.parametrize(
    ("text", "line", "needle"),
    [
        ("version: 0.5.9\ntimming: {}\n", 2, "timming: Extra inputs are not permitted"),
        ("version: 0.5.9\nrules:\n  - when: {attention-backend: triton}\n    fail: {at: nowhere, kind: hang}\n", 4,
         "rules[0].fail.at"),
        ("version: 0.5.9\nrules:\n  - when: {no-such-flag: 1}\n", 3, "no flag --no-such-flag in SGLang 0.5.9"),
        ("version: 0.5.9\nrules:\n  - when: {attention-backend: [triton, tritn]}\n", 3, "'tritn' is not a choice"),
        ("version: 0.5.9\nrules:\n  - fail: {at: model_load, kind: warmup_request_failed}\n", 3, "use `at: warmup`"),
        ("version: 9.9.9\n", 1, "no flag grammar for SGLang 9.9.9"),
        ("gpus: 8\n", 1, "version: Field required"),
        ("version: 0.5.9\ntiming: {load_weights_s: -1}\n", 2,
         "timing.load_weights_s: Input should be greater than or equal to 0"),
        ("version: 0.5.9\ngpus: eight\n", 2, "gpus: Input should be a valid integer"),
        ("version: 0.5.9\ngpu: {memory_mib: 0}\n", 2, "gpu.memory_mib: Input should be greater than 0"),
        ("version: 0.5.9\nrules:\n  - fail: {at: warmup, kind: flaky, p: 2}\n", 3,
         "rules[0].fail.p: Input should be less than or equal to 1"),
        ("version: 0.5.9\nrules:\n  - fail: {at: warmup, kind: flaky, then: flaky}\n", 3,
         "rules[0].fail: Value error, `then` cannot be flaky"),
        ("version: 0.5.9\nrules:\n  - fail: {kind: hang}\n", 3, "`at` is required unless `on_request` is given"),
        ("version: 0.5.9\nrules:\n  - warn: [fine, {no: text}]\n", 3, "rules[0].warn: Input should be a valid string"),
        ("version: 0.5.9\nrules:\n  - when: {attention-backend: {a: b}}\n", 3,
         "rules[0].when.attention-backend: Input should be a string, number, boolean or null or a list of them"),
        ("version: 0.5.9\nrules: {a: 1}\n", 2, "rules: Input should be a valid list"),
        ("version: 0.5.9\ntiming: fast\n", 2, "timing: Input should be a mapping of Timing fields"),
        ("version: [0.5.9\n", 2, "not valid YAML: while parsing a flow sequence expected ',' or ']'"),
    ],
)
def test_invalid_scenarios_name_line_and_key(tmp_path: Path, text: str, line: int, needle: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_scenario(path)
    assert f"{path}:{line}: " in str(caught.value) and needle in str(caught.value)


def test_every_problem_of_a_scenario_is_listed_with_its_own_line(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("version: 0.5.9\ngpus: 0\ntiming:\n  warmup_s: fast\n  extra_s: 1\n")
    with pytest.raises(ConfigError) as caught:
        load_scenario(path)
    lines = str(caught.value).splitlines()
    assert any(f"{path}:2: gpus: Input should be greater than 0" in line for line in lines), lines
    assert any(f"{path}:4: timing.warmup_s: Input should be a valid number" in line for line in lines), lines
    assert any(f"{path}:5: timing.extra_s: Extra inputs are not permitted" in line for line in lines), lines


def test_numbers_written_bare_are_text_where_text_is_meant(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("version: 0.5.9\npackages: {torch: 2.9, flashinfer-python: 1}\nrules:\n")
    scenario, _ = load_scenario(path)
    assert scenario.packages == {"torch": "2.9", "flashinfer-python": "1"} and scenario.rules == []
    assert scenario.timing.load_weights_s == 0.05 and scenario.gpu.memory_mib > 0


def test_rule_keys_match_under_either_release_spelling(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("version: 0.5.9\nrules:\n  - when: {dsa-decode-backend: fa3, attention-backend: dsa}\n"
                    "    fail: {at: cuda_graph_capture, kind: kernel_not_supported_on_arch}\n")
    scenario, _ = load_scenario(path)
    plan = make_plan(scenario, flags("0.5.9", "--nsa-decode-backend", "fa3", "--attention-backend", "nsa"),
                     launch_number=1)
    assert plan.startup is not None and plan.startup.kind == "kernel_not_supported_on_arch"


# --- launch plans of the incident ----------------------------------------------------------------------------


def test_deep_gemm_warns_and_dies_on_sampling_whether_auto_or_explicit() -> None:
    for argv in ([], ["--fp8-gemm-backend", "deep_gemm"], ["--fp8-gemm-backend", "auto"]):
        plan = glm_plan(GLM, "--attention-backend", "flashinfer", *argv)
        assert plan.warnings and "DeepGemm is enabled" in plan.warnings[0]
        assert plan.startup is None and [(f.phase, f.kind) for f in plan.serving] == [
            (Phase.SAMPLED_DECODE, "nan_in_probs")
        ]


def test_cutlass_passes_and_triton_with_fp8_kv_is_rejected_first() -> None:
    assert not glm_plan(GLM, "--fp8-gemm-backend", "cutlass").serving
    plan = glm_plan(GLM, "--attention-backend", "triton")  # KV dtype auto resolves to fp8_e4m3 on this host
    assert plan.startup is not None and (plan.startup.phase, plan.startup.kind) == (
        Phase.MEMORY_ALLOC, "unsupported_config"
    )
    assert plan.startup.message and "not supported by the triton attention backend" in plan.startup.message


def test_flashmla_sparse_with_fp8_kv_dies_on_the_first_sampled_request_on_both_releases() -> None:
    old = glm_plan(GLM, "--attention-backend", "nsa", "--nsa-decode-backend", "flashmla_sparse",
                   "--kv-cache-dtype", "fp8_e4m3", "--fp8-gemm-backend", "cutlass")
    new = glm_plan(GLM_0523, "--attention-backend", "dsa", "--dsa-decode-backend", "flashmla_sparse",
                   "--kv-cache-dtype", "fp8_e4m3", "--fp8-gemm-backend", "cutlass")
    assert [(f.phase, f.kind) for f in old.serving] == [(f.phase, f.kind) for f in new.serving] == [
        (Phase.SAMPLED_DECODE, "illegal_memory_access")
    ]
    other_backend = glm_plan(GLM, "--attention-backend", "flashinfer", "--nsa-decode-backend", "flashmla_sparse",
                             "--kv-cache-dtype", "fp8_e4m3", "--fp8-gemm-backend", "cutlass")
    assert other_backend.serving == ()


def test_earliest_failure_wins_and_flaky_draws_depend_on_the_launch() -> None:
    scenario = Scenario.from_data({
        "version": "0.5.9",
        "rules": [
            {"when": {}, "fail": {"at": "warmup", "kind": "cuda_oom"}},
            {"when": {}, "fail": {"at": "model_load", "kind": "weights_load_error"}},
            {"when": {"tp-size": 1}, "fail": {"at": "import", "kind": "flaky", "p": 0.5, "seed": 3}},
        ],
    })
    kinds = [make_plan(scenario, {}, launch_number=n).startup.kind for n in range(1, 21)]  # type: ignore[union-attr]
    assert set(kinds) == {"cuda_device_assert", "weights_load_error"}
    assert kinds == [make_plan(scenario, {}, launch_number=n).startup.kind for n in range(1, 21)]  # type: ignore[union-attr]
    assert make_plan(scenario, {"tp-size": "2"}, launch_number=1).startup.kind == "weights_load_error"  # type: ignore[union-attr]


def test_phases_a_launch_skips_cannot_fail(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("version: 0.5.9\nrules:\n  - fail: {at: cuda_graph_capture, kind: cuda_graph_capture_failed}\n"
                    "  - fail: {at: warmup, kind: cuda_oom}\n")
    scenario, _ = load_scenario(path)
    grammar = load_grammar("0.5.9")
    namespace = build_parser(grammar).parse_args(["--model-path", "/m", "--disable-cuda-graph"])
    launch = prepare(scenario, grammar, namespace, visible_devices=None, gpus=gpu_state.gpus(tmp_path), holdings=[],
                     launch_number=1)
    assert launch.graph_batch_sizes == [] and launch.plan.startup is not None
    assert (launch.plan.startup.phase, launch.plan.startup.kind) == (Phase.WARMUP, "cuda_oom")


def test_a_ranks_startup_phases_end_on_the_schedule_from_the_process_start_absorbing_a_late_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("version: 0.5.9\ntiming: {import_s: 0.05, init_s: 0.04, load_weights_s: 0.3}\n")
    scenario, grammar = load_scenario(path)
    namespace = build_parser(grammar).parse_args(["--model-path", "/m", "--tp-size", "2"])
    launch = prepare(scenario, grammar, namespace, visible_devices=None, gpus=gpu_state.gpus(tmp_path), holdings=[],
                     launch_number=1)
    config = rank_configs(launch, server_pid=1, state_dir=str(tmp_path), began=100.0)[1]
    assert config.began == 100.0 and config.timing.import_s == 0.05

    class Clock:
        def __init__(self) -> None:
            self.now = 100.08  # the rank got going 80 ms after the process started: past its import phase's end
            self.slept: list[float] = []

        def monotonic(self) -> float:
            return self.now

        def sleep(self, seconds: float) -> None:
            self.slept.append(round(seconds, 6))
            self.now += seconds + 0.001  # every sleep overshoots a little, as a real one does

    clock = Clock()
    monkeypatch.setattr(rank_module, "time", clock)
    sink = socket.socketpair()
    rank = rank_module.Rank(config, sink[0])
    for seconds in (0.05, 0.04, 0.3):
        rank._phase_for(seconds)
    # Import ended late (no sleep), init took up the lateness, and the overshoots never add up.
    assert clock.slept == [0.0, pytest.approx(0.009), pytest.approx(0.299)]
    assert clock.now == pytest.approx(100.0 + 0.05 + 0.04 + 0.3 + 0.001)
    for end in sink:
        end.close()


def test_the_process_start_is_never_put_before_the_process_began() -> None:
    code = "import time; from orchestrator.sim.started import process_started as p; print(p(), time.monotonic())"
    before = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    after = time.monotonic()
    started, now = map(float, out.split())
    # One clock tick (10 ms) late at most, and never earlier than the spawn: the age is never overstated.
    assert before <= started <= now <= after
    assert started - before <= 0.011 + (after - before)


def test_host_failures_come_from_flags_and_gpus(tmp_path: Path) -> None:
    scenario, grammar = load_scenario(GLM)

    def startup(visible: str | None, *argv: str) -> tuple[Phase, str] | None:
        namespace = build_parser(grammar).parse_args(["--model-path", "/m", *argv])
        gpus = gpu_state.gpus(tmp_path)
        launch = prepare(scenario, grammar, namespace, visible_devices=visible, gpus=gpus, holdings=[], launch_number=1)
        return (launch.plan.startup.phase, launch.plan.startup.kind) if launch.plan.startup else None

    assert startup(None, "--tp-size", "8", "--fp8-gemm-backend", "cutlass") is None
    assert startup(None, "--tp-size", "2", "--fp8-gemm-backend", "cutlass") == (Phase.MODEL_LOAD, "cuda_oom")
    assert startup(None, "--tp-size", "8", "--mem-fraction-static", "0.5") == (Phase.MEMORY_ALLOC, "kv_cache_too_small")
    assert startup("0,1,2,3", "--tp-size", "8") == (Phase.IMPORT, "python_exception_other")


# --- failure texts ---------------------------------------------------------------------------------------------

TEXT_KINDS = {
    "nan_in_probs": NAN_TEXT,
    "cuda_device_assert": "CUDA error: device-side assert triggered",
    "illegal_memory_access": "CUDA error: an illegal memory access was encountered",
    "cuda_oom": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate",
    "kv_cache_too_small": "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    "unsupported_config": "ValueError: ",
    "kernel_not_supported_on_arch": "no kernel image is available for execution on the device",
    "cuda_graph_capture_failed": "Exception: Capture cuda graph failed: ",
    "nccl_error": "RuntimeError: NCCL error: ",
    "weights_load_error": "KeyError: 'model.layers.",
    "import_error": "ImportError: ",
    "tokenizer_or_template_error": "OSError: Can't load tokenizer for '/models/model'",
    "kernel_jit_error": "RuntimeError: Ninja build failed.",
    "port_in_use": "zmq.error.ZMQError: Address already in use",
    "python_exception_other": "AttributeError: ",
    "gpu_memory_in_use": "Process 4242 has 70.00 GiB memory in use.",
}


@pytest.mark.parametrize("kind", sorted(TEXT_KINDS))
@pytest.mark.parametrize("phase", ["model_load", "sampled_decode"])
def test_every_kind_prints_its_root_cause_in_a_traceback(kind: str, phase: str) -> None:
    text = scheduler_failure(kind, phase, Context(other_pid=4242, other_gib=70.0))
    assert text.traceback[0] == "Traceback (most recent call last):"
    assert any(TEXT_KINDS[kind] in line for line in text.traceback)


def test_kinds_cover_the_taxonomy() -> None:
    silent_or_special = {"hang_or_timeout", "wrong_output", "healthy", "invalid_argument", "process_killed",
                         "unknown", "warmup_request_failed"}
    assert {c.value for c in Category} - silent_or_special == set(TEXT_KINDS)


def test_message_overrides_the_root_cause_and_release_wording() -> None:
    assert "ValueError: no" in main_process_failure("unsupported_config", Context(message="no"))[-1]
    old = scheduler_failure("cuda_graph_capture_failed", "cuda_graph_capture", Context(dsa_era=False)).traceback
    new = scheduler_failure("cuda_graph_capture_failed", "cuda_graph_capture", Context(dsa_era=True)).traceback
    assert any("--disable-cuda-graph" in line for line in old)
    assert any("--cuda-graph-backend-decode=disabled" in line for line in new)
    old_torch = scheduler_failure("cuda_device_assert", "warmup", Context(torch_version="2.6.0")).traceback
    assert "RuntimeError: CUDA error: device-side assert triggered" in old_torch


# --- the model -------------------------------------------------------------------------------------------------


def test_known_prompts_are_answered_right_and_greedy_is_deterministic() -> None:
    def ask(prompt: str, temperature: float = 0.0, seed: int | None = None, garbage: bool = False) -> str:
        return answers.generate(prompt, max_new_tokens=64, temperature=temperature, seed=seed, garbage=garbage).text

    assert ask("The capital city of France is").startswith(" Paris")
    assert ask("The capital city of France is") == ask("The capital city of France is")
    assert ask("What is 2+3?") == "2 + 3 = 5." and ask("2 + 3 =") == " 5"
    assert all("Paris" in ask("What is the capital of France?", 0.9, seed) for seed in range(10))
    assert "Paris" not in ask("The capital city of France is", garbage=True)
    assert "5" not in ask("2 + 3 =", garbage=True)
    assert ask("Tell me a story.") == ask("Tell me a story.") != ask("Tell me a story.", 1.0, 1)
    short = answers.generate("Tell me a story.", max_new_tokens=3, temperature=0, seed=None, garbage=False)
    assert short.finish == "length" and short.completion_tokens == 3


# --- flags -----------------------------------------------------------------------------------------------------


def test_given_flags_are_canonical_and_negatable_switches_parse() -> None:
    assert flags("0.5.9", "--nsa-decode-backend", "fa3", "--attention-backend", "nsa", "--tp", "2") == {
        "model-path": "/m", "dsa-decode-backend": "fa3", "attention-backend": "dsa", "tp-size": "2"
    }
    assert flags("0.5.23", "--no-enable-tf32-matmul")["enable-tf32-matmul"] == "false"
    assert flags("0.5.23", "--disable-cuda-graph")["disable-cuda-graph"] == "true"


def test_parser_uses_the_release_prog_and_fixture_choices() -> None:
    for version in ("0.5.9", "0.5.23"):
        parser = build_parser(load_grammar(version))
        choices = json.loads((FIXTURES / "sglang" / version / "choices.json").read_text())
        actions = {opt: a for a in parser._actions for opt in a.option_strings}
        for flag, expected in choices.items():
            assert set(actions[flag].choices or ()) == set(expected), flag
    assert build_parser(load_grammar("0.5.23")).prog == "sglang serve"


# --- GPU state and nvidia-smi ----------------------------------------------------------------------------------


def smi(state: Path, *args: str) -> str:
    env = {**os.environ, "ORCH_SIM_GPU_STATE": str(state), "ORCH_SIM_GPUS": "4"}
    return subprocess.run([str(NVIDIA_SMI), *args], env=env, capture_output=True, text=True, check=True,
                          timeout=10).stdout


def test_nvidia_smi_formats(tmp_path: Path) -> None:
    gpu3 = smi(tmp_path, "-L").splitlines()[3]
    assert gpu3.startswith("GPU 3: NVIDIA RTX PRO 6000 Blackwell Server Edition (UUID: GPU-")
    assert smi(tmp_path, "--query-gpu=index,memory.used,memory.total", "--format=csv").splitlines() == [
        "index, memory.used [MiB], memory.total [MiB]", "0, 0 MiB, 97887 MiB", "1, 0 MiB, 97887 MiB",
        "2, 0 MiB, 97887 MiB", "3, 0 MiB, 97887 MiB",
    ]
    assert "No running processes found" in smi(tmp_path)
    gpu_state.write_config(tmp_path, gpus=2, name="X", memory_mib=100, compute_cap="10.0")
    assert smi(tmp_path, "--query-gpu=index,name,compute_cap", "--format=csv,noheader").splitlines() == [
        "0, X, 10.0", "1, X, 10.0"
    ]


def test_holders_that_die_or_turn_zombie_stop_holding(tmp_path: Path) -> None:
    code = (
        "import sys, time; from pathlib import Path; from orchestrator.sim import gpu_state; "
        "gpu_state.hold(Path(sys.argv[1]), {1: 1234}); print('held', flush=True); "
        "time.sleep(float(sys.argv[2]))"
    )
    zombie = subprocess.Popen([sys.executable, "-c", code, str(tmp_path), "0"], stdout=subprocess.PIPE, cwd=REPO)
    alive = subprocess.Popen([sys.executable, "-c", code, str(tmp_path), "30"], stdout=subprocess.PIPE, cwd=REPO)
    try:
        for proc in (zombie, alive):
            assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
        deadline = 50
        while Path(f"/proc/{zombie.pid}/stat").read_text().split(") ")[1][0] != "Z" and deadline:
            deadline -= 1
            subprocess.run(["sleep", "0.05"], check=True)
        apps = smi(tmp_path, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits")
        assert apps.splitlines() == [f"{alive.pid}, 1234"]
        assert smi(tmp_path, "--query-gpu=memory.used", "--format=csv,noheader,nounits").splitlines()[1] == "1234"
    finally:
        alive.kill()
        alive.wait(5)
        zombie.wait(5)
    assert smi(tmp_path, "--query-compute-apps=pid", "--format=csv,noheader") == ""


def test_launch_counter_counts_per_state_dir(tmp_path: Path) -> None:
    assert [gpu_state.next_launch(tmp_path) for _ in range(3)] == [1, 2, 3]
    (tmp_path / "other").mkdir()
    assert gpu_state.next_launch(tmp_path / "other") == 1


def test_check_env_reports_the_scenario_packages(tmp_path: Path) -> None:
    scenario, _ = load_scenario(GLM)
    gpus = gpu_state.gpus(tmp_path)
    lines = check_env.report(scenario, gpus)
    assert "GPU 0,1,2,3,4,5,6,7: NVIDIA RTX PRO 6000 Blackwell Server Edition" in lines
    assert "PyTorch: 2.9.1" in lines and "flashinfer_python: 0.5.3" in lines and "sglang: 0.5.9" in lines


def test_gpu_uuids_are_the_uuid5_of_the_state_directory_as_before(tmp_path: Path) -> None:
    import uuid

    anchor = os.path.realpath(tmp_path)
    found = [g.uuid for g in gpu_state.gpus(tmp_path)]
    assert found == [f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'{anchor}#{i}')}" for i in range(len(found))]
    assert found == [g.uuid for g in gpu_state.gpus(str(tmp_path))]


def test_a_holding_keeps_its_process_name_and_a_broken_file_is_no_holder(tmp_path: Path) -> None:
    gpu_state.hold(tmp_path, {0: 100, 3: 2048}, server_pid=7, name="sglang::scheduler TP0\nsecond line")
    (tmp_path / "hold-1").write_text("pid one\nstart x\n")  # by hand, or cut short: skipped, not a crash
    mine = os.getpid()
    assert gpu_state.holdings(tmp_path) == [
        gpu_state.Holding(mine, 0, 100, 7, "sglang::scheduler TP0 second line"),
        gpu_state.Holding(mine, 3, 2048, 7, "sglang::scheduler TP0 second line"),
    ]
    gpu_state.release(tmp_path)
    assert gpu_state.holdings(tmp_path) == []
