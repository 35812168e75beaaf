"""Which process holds which simulated GPU, kept as small files in a state directory.

Stdlib only and free of package imports: the fake `nvidia-smi` loads this file by path with whatever
python3 the host has. Every holder writes `hold-<pid>`. A holder that dies, even by SIGKILL, stops
counting because readers check that its pid is alive, not a zombie, and still has the start time it had
when it wrote the file (so a recycled pid does not inherit a dead holder's GPUs).

Both files are lines of `key value` (a `gpu` line is `gpu <index> <MiB>`), not JSON: `json` brings `re`
and `enum`, a quarter of a fake nvidia-smi call, and that call runs before and after every launch.
"""

from __future__ import annotations

import os

# The fake nvidia-smi imports this module on every call, before and after every launch: no `typing`,
# `dataclasses`, `tempfile`, `uuid`, `hashlib`, `pathlib` or `contextlib` at import (together most of a call).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    StatePath = str | os.PathLike[str]

STATE_ENV = "ORCH_SIM_GPU_STATE"
GPUS_ENV = "ORCH_SIM_GPUS"
CONFIG_FILE = "config"
HOLD_PREFIX = "hold-"
DEFAULT_GPUS = 8
DEFAULT_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
DEFAULT_MEMORY_MIB = 97887
DEFAULT_COMPUTE_CAP = "12.0"


class _Record:
    """A small immutable record compared by its fields (what a frozen dataclass gives, without its import)."""

    __slots__: tuple[str, ...] = ()
    _FIELDS: tuple[str, ...] = ()
    """The fields in their order (`__slots__` holds the same names, sorted)."""

    def __init__(self, *values: Any) -> None:
        if len(values) != len(self._FIELDS):
            raise TypeError(f"{type(self).__name__} takes {len(self._FIELDS)} fields, got {len(values)}")
        for name, value in zip(self._FIELDS, values, strict=True):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._FIELDS)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self._FIELDS)})"


class Gpu(_Record):
    """One simulated GPU."""

    _FIELDS = ("index", "uuid", "name", "memory_total_mib", "compute_cap")
    __slots__ = ("compute_cap", "index", "memory_total_mib", "name", "uuid")
    index: int
    uuid: str
    name: str
    memory_total_mib: int
    compute_cap: str

    def __init__(self, index: int, uuid: str, name: str, memory_total_mib: int, compute_cap: str) -> None:
        super().__init__(index, uuid, name, memory_total_mib, compute_cap)


class Holding(_Record):
    """Memory one live process holds on one GPU."""

    _FIELDS = ("pid", "gpu", "memory_mib", "server_pid", "process_name")
    __slots__ = ("gpu", "memory_mib", "pid", "process_name", "server_pid")
    pid: int
    gpu: int
    memory_mib: int
    server_pid: int
    process_name: str

    def __init__(self, pid: int, gpu: int, memory_mib: int, server_pid: int, process_name: str) -> None:
        super().__init__(pid, gpu, memory_mib, server_pid, process_name)


def state_dir() -> str:
    """The state directory named by ORCH_SIM_GPU_STATE (created if missing), else a per-user default."""
    raw = os.environ.get(STATE_ENV)
    if not raw:
        import tempfile

        raw = os.path.join(tempfile.gettempdir(), f"orchestrator-sim-gpus-{os.getuid()}")
    os.makedirs(raw, exist_ok=True)
    return raw


def read_config(state: StatePath) -> dict[str, str]:
    """The host description written by whoever set the state directory up ({} if none)."""
    try:
        with open(os.path.join(state, CONFIG_FILE)) as handle:
            return dict(_pairs(handle.read()))
    except OSError:
        return {}


def write_config(
    state: StatePath, *, gpus: int, name: str, memory_mib: int, compute_cap: str, overwrite: bool = False
) -> None:
    """Describe the simulated host's GPUs; an existing description wins unless `overwrite`."""
    path = os.path.join(state, CONFIG_FILE)
    if os.path.exists(path) and not overwrite:
        return
    _write_atomic(path, [("gpus", gpus), ("name", name), ("memory_mib", memory_mib), ("compute_cap", compute_cap)])


def gpus(state: StatePath) -> list[Gpu]:
    """The GPUs of the simulated host: count from the config file, else ORCH_SIM_GPUS, else 8."""
    config = read_config(state)
    count = int(config.get("gpus") or os.environ.get(GPUS_ENV) or DEFAULT_GPUS)
    name = config.get("name") or DEFAULT_NAME
    memory = int(config.get("memory_mib") or DEFAULT_MEMORY_MIB)
    cap = config.get("compute_cap") or DEFAULT_COMPUTE_CAP
    # UUIDs derive from the state directory so that two simulated hosts never share one.
    anchor = os.path.realpath(state)
    return [Gpu(i, f"GPU-{_uuid5_url(f'{anchor}#{i}')}", name, memory, cap) for i in range(count)]


def _uuid5_url(name: str) -> str:
    """uuid.uuid5(uuid.NAMESPACE_URL, name) as text, without `uuid`'s imports (platform, hashlib's OpenSSL)."""
    try:
        from _sha1 import sha1  # type: ignore[import-not-found]  # CPython's own, no OpenSSL to load
    except ImportError:  # pragma: no cover - other interpreters
        from hashlib import sha1
    namespace_url = bytes.fromhex("6ba7b8119dad11d180b400c04fd430c8")
    raw = bytearray(sha1(namespace_url + name.encode()).digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x50  # version 5
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def hold(
    state: StatePath, memory_by_gpu: dict[int, int], *, server_pid: int | None = None, name: str = "python"
) -> None:
    """Record (or update) what the calling process holds: GPU index -> MiB."""
    pid = os.getpid()
    lines: list[tuple[str, object]] = [
        ("pid", pid),
        ("start", _start_time(pid) or ""),
        ("server_pid", server_pid if server_pid is not None else pid),
        ("name", name),
    ]
    lines += [("gpu", f"{gpu} {mib}") for gpu, mib in memory_by_gpu.items()]
    _write_atomic(os.path.join(state, f"{HOLD_PREFIX}{pid}"), lines)


def release(state: StatePath) -> None:
    """Forget what the calling process holds."""
    _unlink_quietly(os.path.join(state, f"{HOLD_PREFIX}{os.getpid()}"))


def holdings(state: StatePath) -> list[Holding]:
    """What live processes hold, by GPU then pid; files of dead holders are removed on the way."""
    found: list[Holding] = []
    try:
        names = os.listdir(state)
    except OSError:
        names = []
    holders = (n for n in names if n.startswith(HOLD_PREFIX) and n[len(HOLD_PREFIX) :].isdigit())
    for path in (os.path.join(state, n) for n in holders):
        try:
            with open(path) as handle:
                found += _holding_of(path, handle.read())
        except (OSError, ValueError):  # not in this format (written by hand): not a holder
            continue
    return sorted(found, key=lambda h: (h.gpu, h.pid))


def _holding_of(path: str, text: str) -> list[Holding]:
    """The holdings one file records, [] (and the file removed) when its process is gone."""
    pairs = _pairs(text)
    record = dict(pairs)
    pid = int(record["pid"]) if "pid" in record else -1
    if pid < 0 or not record.get("start") or _start_time(pid) != record["start"]:
        _unlink_quietly(path)
        return []
    server_pid = int(record.get("server_pid") or pid)
    name = record.get("name", "")
    found: list[Holding] = []
    for key, value in pairs:
        if key == "gpu":
            gpu, mib = value.split()
            found.append(Holding(pid, int(gpu), int(mib), server_pid, name))
    return found


def next_launch(state: StatePath) -> int:
    """Count one more launch on this simulated host and return its number (1, 2, ...)."""
    import fcntl  # here, not at the top: the fake nvidia-smi never counts launches

    with open(os.path.join(state, "launches"), "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        text = handle.read().strip()
        number = (int(text) if text.isdigit() else 0) + 1
        handle.seek(0)
        handle.truncate()
        handle.write(f"{number}\n")
    return number


def _start_time(pid: int) -> str | None:
    """The pid's start time from /proc, or None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses; the fields after the last ')' do not.
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


def _pairs(text: str) -> list[tuple[str, str]]:
    """The `key value` lines of a state file, in order (a key may repeat; the value is the rest of the line)."""
    pairs: list[tuple[str, str]] = []
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key:
            pairs.append((key, value))
    return pairs


def _write_atomic(path: str, lines: list[tuple[str, object]]) -> None:
    head, name = os.path.split(path)
    tmp = os.path.join(head, f".{name}.{os.getpid()}.tmp")
    # A value never spans lines: a process name with a newline in it is kept on one.
    text = "".join(f"{key} {' '.join(str(value).splitlines())}\n" for key, value in lines)
    with open(tmp, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


def _unlink_quietly(path: str) -> None:
    try:  # noqa: SIM105 - contextlib costs the fake nvidia-smi more than the rest of this module
        os.unlink(path)
    except OSError:
        pass
