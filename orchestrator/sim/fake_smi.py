"""The fake nvidia-smi's work (bin/nvidia-smi is its 5-line start): the GPUs and the processes holding them.

Kept apart from the script so that Python caches its bytecode: a script is compiled on every start, and
this one starts before and after every launch. Stdlib only, any python3 from 3.7 on: bin/nvidia-smi loads
it by path, beside gpu_state.py, without the orchestrator package. Supports -L, -i/--id, --query-gpu=...,
--query-compute-apps=..., --format=csv[,noheader][,nounits], and a short table when called bare.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # `typing` costs ~10 ms of a call
if TYPE_CHECKING:
    from typing import Any

if __package__:  # imported as orchestrator.sim.fake_smi (the tests, the type checker)
    from orchestrator.sim import gpu_state
else:  # loaded by path by bin/nvidia-smi
    import gpu_state  # type: ignore[import-not-found, no-redef]

DRIVER = "580.95.05"
CUDA = "13.0"
# query field -> (header, unit); several fields share a column under different names.
GPU_FIELDS: dict[str, tuple[str, str | None]] = {
    "index": ("index", None),
    "uuid": ("uuid", None),
    "gpu_uuid": ("uuid", None),
    "name": ("name", None),
    "gpu_name": ("name", None),
    "memory.used": ("memory.used [MiB]", "MiB"),
    "memory.total": ("memory.total [MiB]", "MiB"),
    "memory.free": ("memory.free [MiB]", "MiB"),
    "utilization.gpu": ("utilization.gpu [%]", "%"),
    "pci.bus_id": ("pci.bus_id", None),
    "driver_version": ("driver_version", None),
    "compute_cap": ("compute_cap", None),
    "count": ("count", None),
}
APP_FIELDS: dict[str, tuple[str, str | None]] = {
    "pid": ("pid", None),
    "process_name": ("process_name", None),
    "name": ("process_name", None),
    "gpu_uuid": ("gpu_uuid", None),
    "gpu_name": ("gpu_name", None),
    "gpu_bus_id": ("gpu_bus_id", None),
    "used_memory": ("used_gpu_memory [MiB]", "MiB"),
    "used_gpu_memory": ("used_gpu_memory [MiB]", "MiB"),
}
_OPTIONS = {"--query-gpu": "gpu", "--query-compute-apps": "apps", "--format": "format", "--id": "id", "-i": "id"}


def main(argv: list[str]) -> int:
    """Run one nvidia-smi invocation; returns the exit code."""
    opts = _parse(argv)
    if opts is None:
        sys.stderr.write("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n")
        return 2
    state = gpu_state.state_dir()
    gpus = gpu_state.gpus(state)
    if "id" in opts:
        wanted = {int(i) for i in opts["id"].split(",") if i.strip().isdigit()}
        gpus = [g for g in gpus if g.index in wanted]
    held = gpu_state.holdings(state)
    if "list" in opts:
        for gpu in gpus:
            print(f"GPU {gpu.index}: {gpu.name} (UUID: {gpu.uuid})")
        return 0
    if "gpu" in opts:
        return _csv(opts["gpu"], opts.get("format", ""), GPU_FIELDS, [_gpu_row(g, len(gpus), held) for g in gpus])
    if "apps" in opts:
        by_index = {g.index: g for g in gpus}
        rows = [_app_row(h, by_index[h.gpu]) for h in held if h.gpu in by_index]
        return _csv(opts["apps"], opts.get("format", ""), APP_FIELDS, rows)
    _table(gpus, held)
    return 0


def _parse(argv: list[str]) -> dict[str, str] | None:
    opts: dict[str, str] = {}
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, _, value = arg.partition("=")
        if arg in ("-L", "--list-gpus"):
            opts["list"] = ""
        elif name in _OPTIONS and value:
            opts[_OPTIONS[name]] = value
        elif arg in _OPTIONS and args:
            opts[_OPTIONS[arg]] = args.pop(0)
        else:
            return None
    return opts


def _gpu_row(gpu: Any, count: int, held: list[Any]) -> dict[str, Any]:
    used = sum(h.memory_mib for h in held if h.gpu == gpu.index)
    return {
        "index": gpu.index,
        "uuid": gpu.uuid,
        "name": gpu.name,
        "memory.used [MiB]": used,
        "memory.total [MiB]": gpu.memory_total_mib,
        "memory.free [MiB]": max(0, gpu.memory_total_mib - used),
        "utilization.gpu [%]": 0,
        "pci.bus_id": _bus_id(gpu.index),
        "driver_version": DRIVER,
        "compute_cap": gpu.compute_cap,
        "count": count,
    }


def _app_row(holding: Any, gpu: Any) -> dict[str, Any]:
    return {
        "pid": holding.pid,
        "process_name": holding.process_name,
        "gpu_uuid": gpu.uuid,
        "gpu_name": gpu.name,
        "gpu_bus_id": _bus_id(gpu.index),
        "used_gpu_memory [MiB]": holding.memory_mib,
    }


def _csv(query: str, fmt: str, fields: dict[str, tuple[str, str | None]], rows: list[dict[str, Any]]) -> int:
    names = [q.strip() for q in query.split(",") if q.strip()]
    for name in names:
        if name not in fields:
            sys.stderr.write(f'Field "{name}" is not a valid field to query.\n\n')
            return 2
    options = {part.strip() for part in fmt.split(",")}
    if "csv" not in options:
        sys.stderr.write(f'"{fmt}" is not a valid format.\n')
        return 2
    columns = [fields[name] for name in names]
    if "noheader" not in options:
        print(", ".join(header for header, _ in columns))
    for row in rows:
        cells = [
            str(row[header]) if unit is None or "nounits" in options else f"{row[header]} {unit}"
            for header, unit in columns
        ]
        print(", ".join(cells))
    return 0


def _table(gpus: list[Any], held: list[Any]) -> None:
    import time  # only the bare table prints a date

    line = "+" + "-" * 89 + "+"
    rule = "+-----------------------------------------+------------------------+----------------------+"
    print(time.strftime("%a %b %d %H:%M:%S %Y"))
    print(line)
    print(f"| NVIDIA-SMI {DRIVER:<22} Driver Version: {DRIVER:<14} CUDA Version: {CUDA:<9}|")
    print(rule)
    print("| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |")
    print("| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |")
    print(rule.replace("-", "="))
    for gpu in gpus:
        used = sum(h.memory_mib for h in held if h.gpu == gpu.index)
        memory = f"{used}MiB / {gpu.memory_total_mib}MiB"
        print(f"| {gpu.index:>3}  {gpu.name[:28]:<28}  On  | {_bus_id(gpu.index):<16} Off |                  Off |")
        print(f"| 30%   35C    P8            30W /  600W | {memory:>22} |      0%      Default |")
        print(rule)
    print()
    print(line)
    print("| Processes:" + " " * 78 + "|")
    print("|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |")
    print("|" + "=" * 89 + "|")
    if not held:
        print("|  No running processes found" + " " * 61 + "|")
    for h in held:
        print(f"|  {h.gpu:>3}   N/A  N/A  {h.pid:>15}      C   {h.process_name[:34]:<34} {h.memory_mib:>7}MiB |")
    print(line)


def _bus_id(index: int) -> str:
    return f"00000000:{0x18 + index * 0x10:02X}:00.0"

