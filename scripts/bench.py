"""Measure the per-launch path on the simulated host, ours and a naive baseline side by side, in one run.

Ours is `orchestrator sweep` as users run it (a child process), over a throwaway loopback sshd when OpenSSH is
here (else the local transport), read back from its store. The baseline is SGLang's own launcher helper done
over SSH (bench_naive.py). Prints how each figure was measured, why a goal missed, then the figures with goals.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench_adaptive
import bench_cli
import bench_load
import bench_pool
import bench_report as report
import bench_stall
from bench_env import BenchEnv, free_local_port, scenario
from bench_naive import NaiveHost, NaiveResult
from bench_ours import SweepRun, cli_sweep, connect, died_at, harvest, ssh_round_trips

from orchestrator.settings import ProbeSettings
from orchestrator.sim.scenario import Timing

SWEEP_TIMING = {"import_s": 0.05, "init_s": 0.05, "load_weights_s": 0.6, "memory_alloc_s": 0.2,
                "capture_cuda_graph_s": 0.2, "warmup_s": 0.1, "prefill_s": 0.005, "decode_token_s": 0.002}  # fmt: skip
SWEEP_RULES = [
    {"when": {"attention-backend": "triton", "kv-cache-dtype": "fp8_e4m3"},
     "fail": {"at": "memory_alloc", "kind": "unsupported_config"}},
    {"when": {"fp8-gemm-backend": "deep_gemm"}, "fail": {"at": "sampled_decode", "kind": "nan_in_probs"}},
]  # fmt: skip
SWEEP_AXES = {"attention-backend": ["flashinfer", "triton", "fa3"], "kv-cache-dtype": ["bf16", "fp8_e4m3"],
              "fp8-gemm-backend": ["auto", "deep_gemm", "cutlass", "triton"]}  # fmt: skip
NAIVE_SWEEP_CELLS = [("flashinfer", "bf16", "auto"), ("triton", "fp8_e4m3", "auto"),
                     ("fa3", "bf16", "deep_gemm"), ("fa3", "fp8_e4m3", "cutlass")]  # fmt: skip
"""4 of the 24 (2 pass, 1 fails at memory_alloc, 1 at sampled_decode: the sweep's mix); 24 at 10 s each do not fit."""
CRASH_TIMING = {"import_s": 0.05, "init_s": 0.05, "load_weights_s": 0.6}
CRASH_RULES = [{"when": {"attention-backend": "triton"}, "fail": {"at": "model_load", "kind": "cuda_oom"}}]
PACK_TIMING = {"import_s": 0.05, "init_s": 0.05, "load_weights_s": 2.0, "memory_alloc_s": 0.2,
               "capture_cuda_graph_s": 0.3, "warmup_s": 0.1, "prefill_s": 0.005, "decode_token_s": 0.002}  # fmt: skip
MODEL = "/models/bench"
PROBES = {"settle_s": 0.0}
"""The probes' settle pause is a configured wait, not decode time: 0 here, for us and the baseline alike."""
CRASHES = 5
SERIAL_PACK_CELLS = 4
INVALID_TRIES = 3
HARVEST_TRIES = 3
ALL_GPUS = "0,1,2,3,4,5,6,7"


def matrix(name: str, flags: dict[str, Any], axes: dict[str, list[Any]]) -> dict[str, Any]:
    """A matrix file's content (no speed load: these figures time the launch path, as the baseline's do)."""
    return {"name": name, "host": "bench", "flags": {"model-path": MODEL, **flags}, "matrix": axes, "probes": PROBES,
            "load": "off"}  # fmt: skip


def measure_ours(env: BenchEnv, repeat: int) -> report.Ours:
    """Every figure of ours, one after another; the sweep and packing figures `repeat` times."""
    crash_scenario = env.write("crash.scenario.yaml", scenario(CRASH_TIMING, CRASH_RULES))
    crash_axes = {"mem-fraction-static": [round(0.80 + i / 100, 2) for i in range(CRASHES)]}
    crash_matrix = env.write("crash/matrix.yaml", matrix("crash", {"tp-size": 1, "attention-backend": "triton"},
                                                         crash_axes))  # fmt: skip
    crash = cli_sweep(env, "crash", crash_matrix, env.hosts_file("crash", crash_scenario), serial=True)
    report.progress(f"ours: {CRASHES} crashes in {crash.wall_s:.1f}s")

    sweep_scenario = env.write("sweep.scenario.yaml", scenario(SWEEP_TIMING, SWEEP_RULES))
    sweep_matrix = env.write("sweep/matrix.yaml", matrix("sweep", {"tp-size": 8}, SWEEP_AXES))
    pack_scenario = env.write("pack.scenario.yaml", scenario(PACK_TIMING, []))
    pack_axes = {"mem-fraction-static": [round(0.80 + i / 100, 2) for i in range(8)]}
    pack_matrix = env.write("pack.matrix.yaml", matrix("pack", {"tp-size": 2}, pack_axes))
    # The serial reference runs half of the 8 cells: one after another their durations do not depend on each other,
    # so 8 take twice as long as 4 (less one gap between cells, which only lowers the speedup).
    half = {"mem-fraction-static": pack_axes["mem-fraction-static"][:SERIAL_PACK_CELLS]}
    serial_matrix = env.write("pack-serial.matrix.yaml", matrix("pack-serial", {"tp-size": 2}, half))
    sweeps, serials, packeds = [], [], []
    for rep in range(repeat):
        # Each repetition on a host of its own (fresh workdir and GPU state), the three runs interleaved so that
        # a burst of load on this shared machine spreads over all three figures rather than one.
        name = f"sweep{rep}"
        sweeps.append(cli_sweep(env, name, sweep_matrix, env.hosts_file(name, sweep_scenario), serial=True))
        report.progress(f"ours: 24-cell serial sweep {rep + 1}/{repeat} in {sweeps[-1].wall_s:.1f}s")
        name = f"serial{rep}"
        serials.append(cli_sweep(env, name, serial_matrix, env.hosts_file(name, pack_scenario), serial=True))
        name = f"packed{rep}"
        packeds.append(cli_sweep(env, name, pack_matrix, env.hosts_file(name, pack_scenario), serial=False))
        report.progress(f"ours: packing {rep + 1}/{repeat}, {serials[-1].wall_s:.1f}s serial and "
                        f"{packeds[-1].wall_s:.1f}s packed")  # fmt: skip

    invalid_matrix = env.write("invalid.matrix.yaml", matrix("invalid", {"tp-size": 8}, {"kv-cache-dtype": ["fp9"]}))
    invalid: list[SweepRun] = [
        # Exit 1: every cell of the matrix is invalid, which the command reports as an error once it is recorded.
        cli_sweep(env, f"invalid{i}", invalid_matrix, env.hosts_file(f"invalid{i}", sweep_scenario), serial=True,
                  exit_codes=(0, 1))
        for i in range(INVALID_TRIES)
    ]
    report.progress(f"ours: {INVALID_TRIES} invalid cells")

    transport = connect(env)
    try:
        harvests = [harvest(transport, env.huge_log) for _ in range(HARVEST_TRIES)]
    finally:
        transport.close()
    report.progress("ours: 1 GB harvests")
    ssh = ssh_round_trips(env)
    return report.Ours(
        crash=[(r.ended_at or 0) - died for r in crash.runs if (died := died_at(r)) is not None],
        crash_verdicts=sorted({str(r.verdict.category) for r in crash.runs if r.verdict}),
        sweeps=sweeps,
        serials=serials,
        packeds=packeds,
        invalid=[(run.runs[0].ended_at or 0) - run.started for run in invalid],
        invalid_preflight=invalid[-1].preflight_s,
        harvest=harvests,
        ssh=ssh,
    )


def measure_naive(env: BenchEnv) -> report.Naive:
    """Every figure of the baseline; its sleep-bound parts side by side, on simulated hosts of their own."""
    probes = ProbeSettings.from_dict(PROBES)
    ports: set[int] = set()
    lock = threading.Lock()

    def port() -> int:
        with lock:
            chosen = free_local_port(ports)
            ports.add(chosen)
            return chosen

    crash_host = NaiveHost(env, "naive-crash", env.root / "crash.scenario.yaml", probes)
    base = ["--model-path", MODEL]

    def crash(i: int) -> NaiveResult:
        flags = [*base, "--tp-size", "1", "--attention-backend", "triton", "--mem-fraction-static", f"0.8{i}"]
        return crash_host.run_cell(f"crash{i}", flags, str(i), port())

    def cell(n: int) -> NaiveResult:
        # Each cell on a simulated host of its own: the baseline runs them one after another on one host, and a
        # cell's duration does not depend on the cells before it, so side by side they give the same durations.
        attention, kv, gemm = NAIVE_SWEEP_CELLS[n]
        flags = [*base, "--tp-size", "8", "--attention-backend", attention, "--kv-cache-dtype", kv,
                 "--fp8-gemm-backend", gemm]  # fmt: skip
        host = NaiveHost(env, f"naive-sweep{n}", env.root / "sweep.scenario.yaml", probes)
        return host.run_cell(f"cell{n}", flags, ALL_GPUS, port())

    def invalid() -> NaiveResult:
        host = NaiveHost(env, "naive-invalid", env.root / "sweep.scenario.yaml", probes)
        return host.run_cell("invalid", [*base, "--tp-size", "8", "--kv-cache-dtype", "fp9"], ALL_GPUS, port())

    jobs: dict[str, Callable[[], Any]] = {f"crash{i}": functools.partial(crash, i) for i in range(CRASHES)}
    jobs |= {f"cell{n}": functools.partial(cell, n) for n in range(len(NAIVE_SWEEP_CELLS))} | {"invalid": invalid}
    results = side_by_side(jobs)
    crashes: list[NaiveResult] = [results[f"crash{i}"] for i in range(CRASHES)]
    report.progress("naive: crashes, sweep and invalid cell")
    harvested = NaiveHost(env, "naive-harvest", env.root / "sweep.scenario.yaml", probes).harvest(env.huge_log)
    report.progress("naive: 1 GB copy and classify")
    return report.Naive(
        crash=[r.verdict_at - r.died_at for r in crashes if r.died_at is not None],
        crash_verdicts=sorted({str(r.verdict.category) for r in crashes}),
        sweep=[results[f"cell{n}"] for n in range(len(NAIVE_SWEEP_CELLS))],
        invalid=results["invalid"].verdict_at - results["invalid"].started,
        harvest=harvested,
        copy_tool="OpenSSH scp" if env.sshd is not None else "cp",
    )


def side_by_side(jobs: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """Run the jobs in threads; re-raise the first failure."""
    results: dict[str, Any] = {}
    errors: list[BaseException] = []

    def work(name: str, job: Callable[[], Any]) -> None:
        try:
            results[name] = job()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=item) for item in jobs.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def main() -> int:
    """Set up, measure ours, measure the baseline, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--local", action="store_true", help="use the local transport even when sshd is available")
    parser.add_argument("--repeat", type=int, default=3, metavar="N",
                        help="repetitions of the sweep and packing measurements (default 3; each figure is their "
                        "median, printed with the min and max)")  # fmt: skip
    args = parser.parse_args()
    began = time.time()
    env = BenchEnv.start(want_ssh=not args.local)
    report.header(env)
    try:
        report.make_huge_log(Path(env.huge_log))
        ours = measure_ours(env, max(args.repeat, 1))
        naive = measure_naive(env)
        pool = bench_pool.measure(env)
        report.progress("ours: the demo matrix on one host and on a pool of two")
    finally:
        env.close()
    setup = report.Setup(Timing(**SWEEP_TIMING), Timing(**CRASH_TIMING), Timing(**PACK_TIMING))
    mine, theirs = report.figures(ours, naive, setup)
    report.details(ours, naive, setup, mine)
    report.print_figures(mine, theirs, report.samples(ours, setup))
    bench_pool.report(pool)
    for key, value in bench_cli.cli_start().items():
        print(f"{key}: {value}")
    for key, value in bench_adaptive.adaptive_cells().items():
        print(f"{key}: {value}")
    for name, text in bench_stall.measure().items():
        print(f"{name}: {text}")
    for name, text in bench_load.measure().items():
        print(f"{name}: {text}")
    report.progress(f"bench done in {time.time() - began:.0f}s (load average now {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
