"""The simulated SGLang host as a real server process: launches, HTTP, logs, GPUs, failures, shutdown.

Every test starts `python -m orchestrator.sim` in its own session on a free port, with its own GPU state
directory, and kills that session (by its process group id) whatever happens.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.paths import FIXTURES, REPO, require_fixtures

require_fixtures()

GLM = REPO / "configs" / "sim" / "glm5-nvfp4-sm120.yaml"
GLM_0523 = REPO / "configs" / "sim" / "glm5-nvfp4-sm120-0.5.23.yaml"
NVIDIA_SMI = REPO / "orchestrator" / "sim" / "bin" / "nvidia-smi"
FAST = """
version: {version}
gpus: 4
model: {{weights_gib: 8}}
timing: {{import_s: 0.01, init_s: 0.01, load_weights_s: 0.02, memory_alloc_s: 0.01, capture_cuda_graph_s: 0.01,
          warmup_s: {warmup_s}, prefill_s: 0.001, decode_token_s: {decode_s}, after_decode_s: 0.2}}
auto: {{attention-backend: flashinfer}}
rules:
{rules}
"""
FRANCE = "The capital city of France is"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Sim:
    """One simulated server started by a test."""

    def __init__(self, tmp: Path, scenario: Path, args: list[str], port: int | None, env: dict[str, str]) -> None:
        self.port = port or free_port()
        self.state = tmp / "gpus"
        self.log_path = tmp / f"server-{self.port}.log"
        self.env = {**os.environ, "ORCH_SIM_GPU_STATE": str(self.state)}
        self.env.pop("CUDA_VISIBLE_DEVICES", None)
        self.env.update(env)
        with open(self.log_path, "wb") as log:
            command = [sys.executable, "-m", "orchestrator.sim", "--scenario", str(scenario), *args]
            self.proc = subprocess.Popen(
                [*command, "--port", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=REPO, start_new_session=True,
            )
        self.url = f"http://127.0.0.1:{self.port}"
        self.http = httpx.Client(base_url=self.url, timeout=10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def health(self) -> int | None:
        try:
            return httpx.get(f"{self.url}/health_generate", timeout=2).status_code
        except httpx.TransportError:
            return None

    def wait_healthy(self, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"server exited with {self.proc.returncode}:\n{self.log()}"
            if self.health() == 200:
                return
            time.sleep(0.05)
        raise AssertionError(f"not healthy after {timeout} s:\n{self.log()}")

    def wait_exit(self, timeout: float = 10) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running after {timeout} s:\n{self.log()}") from None

    def wait_log(self, text: str, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log():
            assert time.monotonic() < deadline, f"{text!r} not logged:\n{self.log()}"
            time.sleep(0.05)

    def smi(self, *args: str) -> list[list[str]]:
        out = subprocess.run([str(NVIDIA_SMI), *args], env=self.env, capture_output=True, text=True, check=True,
                             timeout=10).stdout
        return [line.split(", ") for line in out.splitlines() if line.strip()]

    def gpu_holders(self) -> list[tuple[int, int]]:
        """(pid, GPU index) pairs from the fake nvidia-smi."""
        index = {uuid: int(i) for i, uuid in self.smi("--query-gpu=index,uuid", "--format=csv,noheader")}
        apps = self.smi("--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits")
        return [(int(pid), index[uuid]) for pid, uuid, _ in apps]

    def generate(self, text: str, temperature: float = 0, **extra: Any) -> httpx.Response:
        params = {"temperature": temperature, "max_new_tokens": 32, **extra}
        return self.http.post("/generate", json={"text": text, "sampling_params": params})

    def chat(self, content: str, temperature: float) -> httpx.Response:
        body = {"model": "m", "messages": [{"role": "user", "content": content}], "temperature": temperature}
        return self.http.post("/v1/chat/completions", json=body)

    def kill(self) -> None:
        self.http.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(5)


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Any]:
    started: list[Sim] = []

    def start(scenario: Path, *args: str, port: int | None = None, env: dict[str, str] | None = None) -> Sim:
        sim = Sim(tmp_path, scenario, list(args), port, env or {})
        started.append(sim)
        return sim

    yield start
    for sim in started:
        sim.kill()


def scenario(tmp_path: Path, rules: str = "  []", warmup_s: float = 0.01, decode_s: float = 0.001) -> Path:
    path = tmp_path / f"scenario-{len(list(tmp_path.glob('scenario-*')))}.yaml"
    path.write_text(FAST.format(version="0.5.9", rules=rules, warmup_s=warmup_s, decode_s=decode_s))
    return path


def test_incident_deep_gemm_dies_on_first_sampled_request(launch: Any) -> None:
    sim = launch(GLM, "--model-path", "/models/GLM-5-NVFP4", "--tp-size", "8", "--attention-backend", "flashinfer",
                 "--kv-cache-dtype", "fp8_e4m3", "--fp8-gemm-backend", "deep_gemm")
    sim.wait_healthy()
    greedy = sim.generate(FRANCE)
    assert greedy.status_code == 200 and "Paris" in greedy.json()["text"]
    holders = sim.gpu_holders()
    assert sorted(gpu for _, gpu in holders) == list(range(8))
    parents = {int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) for pid, _ in holders}
    assert parents == {sim.proc.pid}  # the scheduler ranks are the server's own children
    with pytest.raises(httpx.TransportError):
        sim.chat("Tell me about Paris.", temperature=0.7)
    assert sim.wait_exit() != 0
    log = sim.log()
    warning = log.index("DeepGemm is enabled but the scale_fmt of checkpoint is not ue8m0.")
    crash = log.index("Scheduler hit an exception: Traceback (most recent call last):")
    assert warning < log.index("Load weight begin") < crash
    assert "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0" in log[crash:]
    assert "Assertion `cumdist[size - 1] > static_cast<scalar_t>(0)` failed." in log
    assert "CUDA error: device-side assert triggered" in log
    assert "For debugging consider passing CUDA_LAUNCH_BLOCKING=1" in log
    assert log.rstrip().endswith("Received sigquit from a child process. It usually means the child failed.")
    assert sim.gpu_holders() == []


def test_incident_cutlass_answers_and_stops_cleanly(launch: Any) -> None:
    sim = launch(GLM, "--model-path", "/models/GLM-5-NVFP4", "--tp-size", "8", "--attention-backend", "flashinfer",
                 "--kv-cache-dtype", "fp8_e4m3", "--fp8-gemm-backend", "cutlass")
    sim.wait_healthy()
    assert "Paris" in sim.generate(FRANCE).json()["text"]
    answer = sim.chat("What is 2+3?", temperature=0.7)
    assert answer.status_code == 200 and "5" in answer.json()["choices"][0]["message"]["content"]
    time.sleep(0.3)
    assert sim.health() == 200 and len(sim.gpu_holders()) == 8
    assert "DeepGemm" not in sim.log()
    sim.proc.send_signal(signal.SIGTERM)
    assert sim.wait_exit() == 0
    assert "INFO:     Shutting down" in sim.log()
    assert sim.gpu_holders() == []


def test_health_is_503_until_the_warmup_finishes(launch: Any, tmp_path: Path) -> None:
    sim = launch(scenario(tmp_path, warmup_s=0.6), "--model-path", "/m")
    seen = set()
    deadline = time.monotonic() + 15
    while sim.health() != 200:
        assert time.monotonic() < deadline, sim.log()
        seen.add(sim.health())
        time.sleep(0.05)
    assert 503 in seen
    log = sim.log()
    assert log.index("Uvicorn running on") < log.index('"POST /generate HTTP/1.1" 200 OK') < log.index("fired up")


def test_invalid_choice_is_sglangs_argparse_error(tmp_path: Path) -> None:
    fixture = (FIXTURES / "sglang" / "0.5.9" / "invalid-choice.txt").read_text().splitlines()
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator.sim", "--scenario", str(GLM), "--model-path", "/nonexistent",
         "--attention-backend", "not_a_backend"],
        capture_output=True, text=True, cwd=REPO, timeout=30,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("usage: launch_server.py [-h] --model-path MODEL_PATH")
    assert result.stderr.splitlines()[-1] == fixture[-1]


def test_0_5_23_rejects_nsa_flags_and_recommends_sglang_serve(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator.sim", "--scenario", str(GLM_0523), "--model-path", "/nonexistent",
         "--nsa-decode-backend", "x"],
        capture_output=True, text=True, cwd=REPO, timeout=30,
    )
    assert result.returncode == 2
    assert "UserWarning: 'python -m sglang.launch_server' is still supported, but 'sglang serve'" in result.stderr
    assert result.stderr.splitlines()[-1] == "sglang serve: error: unrecognized arguments: --nsa-decode-backend x"


def test_0_5_23_flashmla_sparse_with_fp8_kv_passes_greedy_and_dies_on_the_first_sampled_request(launch: Any) -> None:
    sim = launch(GLM_0523, "--model-path", "/models/GLM-5-NVFP4", "--tp-size", "8", "--attention-backend", "nsa",
                 "--dsa-decode-backend", "flashmla_sparse", "--kv-cache-dtype", "fp8_e4m3",
                 "--fp8-gemm-backend", "cutlass")
    sim.wait_healthy()
    assert "Paris" in sim.generate(FRANCE).json()["text"]
    with pytest.raises(httpx.TransportError):
        sim.chat("Write two sentences about the ocean.", temperature=0.7)
    assert sim.wait_exit() != 0
    assert "CUDA error: an illegal memory access was encountered" in sim.log()


def test_hang_at_model_load_never_turns_healthy(launch: Any, tmp_path: Path) -> None:
    rules = "  - when: {attention-backend: flashinfer}\n    fail: {at: model_load, kind: hang}"
    sim = launch(scenario(tmp_path, rules), "--model-path", "/m", "--tp-size", "2", env={"CUDA_VISIBLE_DEVICES": "3,1"})
    sim.wait_log("TP1] Load weight begin")
    sim.wait_log("TP0] Load weight begin")
    time.sleep(0.4)
    assert sim.proc.poll() is None and sim.health() is None
    log = sim.log()
    assert "Load weight end" not in log and "Traceback" not in log
    index = {uuid: int(i) for i, uuid in sim.smi("--query-gpu=index,uuid", "--format=csv,noheader")}
    apps = sim.smi("--query-compute-apps=process_name,gpu_uuid", "--format=csv,noheader")
    assert {name: index[uuid] for name, uuid in apps} == {"sglang::scheduler_TP0": 3, "sglang::scheduler_TP1": 1}


def test_startup_failure_takes_the_whole_server_down(launch: Any, tmp_path: Path) -> None:
    rules = "  - when: {kv-cache-dtype: fp8_e4m3}\n    fail: {at: cuda_graph_capture, kind: cuda_graph_capture_failed}"
    sim = launch(scenario(tmp_path, rules), "--model-path", "/m", "--tp-size", "2", "--kv-cache-dtype", "fp8_e4m3")
    assert sim.wait_exit() != 0
    log = sim.log()
    assert "Capture cuda graph begin" in log and "Capture cuda graph end" not in log
    assert "TP0] Scheduler hit an exception: Traceback (most recent call last):" in log
    assert "Exception: Capture cuda graph failed: CUDA error: operation not permitted when stream is capturing" in log
    assert "Possible solutions:" in log
    assert "Received sigquit from a child process. It usually means the child failed." in log
    assert "Uvicorn running" not in log
    assert sim.gpu_holders() == []


def test_garbage_answers_arrive_but_are_wrong(launch: Any, tmp_path: Path) -> None:
    rules = "  - when: {attention-backend: flashinfer}\n    fail: {at: greedy_decode, kind: garbage}"
    sim = launch(scenario(tmp_path, rules), "--model-path", "/m")
    sim.wait_healthy()
    greedy = sim.generate(FRANCE)
    assert greedy.status_code == 200 and greedy.json()["text"] and "Paris" not in greedy.json()["text"]
    arithmetic = sim.generate("2 + 3 =")
    assert "5" not in arithmetic.json()["text"]
    assert "Paris" in sim.generate(FRANCE, temperature=0.8).json()["text"]
    assert sim.health() == 200
    info = sim.http.get("/server_info").json()
    assert info["version"] == "0.5.9" and info["internal_states"][0]["attention_backend"] == "flashinfer"
    assert info["model_path"] == "/m" and info["tp_size"] == 1
    assert sim.http.get("/model_info").json()["architectures"] == ["LlamaForCausalLM"]
    assert sim.http.get("/v1/models").json()["data"][0]["id"] == "/m"


def test_after_decode_the_server_dies_shortly_after_its_first_answer(launch: Any, tmp_path: Path) -> None:
    rules = "  - when: {}\n    fail: {at: after_decode, kind: process_killed}"
    sim = launch(scenario(tmp_path, rules), "--model-path", "/m", "--tp-size", "2")
    sim.wait_healthy()
    assert sim.generate("What is 2+3?").status_code == 200
    assert sim.wait_exit() != 0
    assert sim.log().rstrip().endswith("Killed") and "Traceback" not in sim.log()
    assert sim.gpu_holders() == []


def test_on_request_crashes_on_the_nth_request(launch: Any, tmp_path: Path) -> None:
    rules = "  - when: {}\n    fail: {on_request: 2, kind: nccl_error}"
    sim = launch(scenario(tmp_path, rules), "--model-path", "/m", "--tp-size", "2")
    sim.wait_healthy()
    assert sim.generate("What is 7*6?").json()["text"] == "7 * 6 = 42."
    with pytest.raises(httpx.TransportError):
        sim.generate("Hello")
    assert sim.wait_exit() != 0
    assert "RuntimeError: NCCL error: unhandled system error" in sim.log()
    assert sim.gpu_holders() == []


def test_concurrent_and_streaming_requests(launch: Any, tmp_path: Path) -> None:
    rules = "  - when: {}\n    fail: {at: concurrent_decode, kind: cuda_device_assert}"
    sim = launch(scenario(tmp_path, rules, decode_s=0.01), "--model-path", "/m")
    sim.wait_healthy()
    body = {"messages": [{"role": "user", "content": "What is 2+3?"}], "temperature": 0.5, "stream": True}
    with sim.http.stream("POST", "/v1/chat/completions", json=body) as response:
        events = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]" and len(events) > 3
    streams = [httpx.Client(base_url=sim.url, timeout=10) for _ in range(3)]
    try:
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            outcomes = list(pool.map(lambda c: _try(lambda: c.post("/generate", json={"text": "x" * 50})), streams))
    finally:
        for client in streams:
            client.close()
    assert any(isinstance(o, httpx.TransportError) for o in outcomes)
    assert sim.wait_exit() != 0
    assert "CUDA error: device-side assert triggered" in sim.log()


def test_foreign_gpu_holder_makes_the_launch_run_out_of_memory(launch: Any, tmp_path: Path) -> None:
    env = {**os.environ, "ORCH_SIM_GPU_STATE": str(tmp_path / "gpus")}
    holder = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.sim.hold_gpu", "--gpus", "1", "--seconds", "30"],
        stdout=subprocess.PIPE, env=env, cwd=REPO, start_new_session=True,
    )
    try:
        assert holder.stdout is not None and "holding GPUs 1" in holder.stdout.readline().decode()
        sim = launch(scenario(tmp_path), "--model-path", "/m", "--tp-size", "2")
        assert sim.wait_exit() != 0
        log = sim.log()
        assert f"Process {holder.pid} has 68.36 GiB memory in use." in log
        assert "TP1] Scheduler hit an exception" in log and "torch.OutOfMemoryError: CUDA out of memory." in log
        assert [pid for pid, _ in sim.gpu_holders()] == [holder.pid]
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(5)


def test_port_in_use_fails_like_uvicorn(launch: Any, tmp_path: Path) -> None:
    path = scenario(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        sim = launch(path, "--model-path", "/m", port=port)
        assert sim.wait_exit() == 1
    bind = f"ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', {port})"
    assert f"{bind}: address already in use" in sim.log()
    assert sim.gpu_holders() == []


def test_invalid_scenario_names_file_line_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 0.5.9\nrules:\n  - when: {attention-backend: triton}\n    fail: {at: warmup, kind: nan}\n")
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator.sim", "--scenario", str(bad), "--model-path", "/m"],
        capture_output=True, text=True, cwd=REPO, timeout=30,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert f"{bad}:4: rules[0].fail.kind" in result.stderr and "unknown kind 'nan'" in result.stderr


def _try(call: Any) -> Any:
    try:
        return call()
    except httpx.TransportError as exc:
        return exc
