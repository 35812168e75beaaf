"""pydantic models of the matrix file and the hosts file: the only pydantic in the package.

They check shape and types; config/load.py adds the checks that need the whole file
(flag-name spelling, duplicate axes after canonicalisation, exclude keys) and turns every
error into `file:line: message (fix: ...)`. Custom validators carry their fix in the
error context under "fix".
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainValidator, StrictBool, StrictInt, TypeAdapter
from pydantic_core import PydanticCustomError

from orchestrator.config.model import DEFAULT_MAX_CELLS, EnvValue, OnInfra
from orchestrator.model import AxisValue, FlagList, FlagValue
from orchestrator.secret import parse_ref
from orchestrator.settings import ProbeSettings, parse_duration

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def kind_of(value: object) -> str:
    """A YAML-flavoured name for a value's type, for error messages."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    return f"{value!r} ({type(value).__name__})"


def _scalar(value: object) -> FlagValue:
    # `{secret: VAR}` is a secret's reference, never a value (nor a bundle of flags).
    ref = parse_ref(value)
    if ref is not None:
        return ref
    if isinstance(value, dict) and "secret" in value:
        raise PydanticCustomError(
            "secret_ref",
            "a secret is written {secret: VAR}, VAR an environment variable's name; got {kind}",
            {"kind": kind_of(value), "fix": "write e.g. api-key: {secret: ORCH_API_KEY} and export ORCH_API_KEY"},
        )
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise PydanticCustomError(
        "scalar",
        "expected one value (a string, number, true/false, null or {secret: VAR}), got {kind}",
        {"kind": kind_of(value), "fix": "write a single value, quoted if it contains ': ' or starts with '[' or '{'"},
    )


def _flag_value(value: object) -> FlagValue:
    """One flag value; a YAML list is the values of a flag that takes several (`cuda-graph-bs: [1, 2, 4]`)."""
    if not isinstance(value, list):
        return _scalar(value)
    for item in value:
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise PydanticCustomError(
                "flag_list",
                "a list of values for one flag may hold only strings and numbers, got {kind} in it",
                {"kind": kind_of(item), "fix": "write the values as a flat list, e.g. `cuda-graph-bs: [1, 2, 4]`"},
            )
    return FlagList(value)


def _axis_value(value: object) -> AxisValue:
    """A value of an axis or of an include/exclude entry: a flag value, or a bundle (a mapping of flags).

    `{secret: NAME}` is a flag value (a secret read at launch), never a bundle of one flag named `secret`.
    """
    if not isinstance(value, dict) or set(value) == {"secret"}:
        return _flag_value(value)
    bundle: dict[str, FlagValue] = {}
    for name, item in value.items():
        if not isinstance(name, str):
            raise PydanticCustomError(
                "bundle_key", "a bundle's keys are flag names, got {kind}", {"kind": kind_of(name), "fix": "quote it"}
            )
        try:
            bundle[name] = _flag_value(item)
        except PydanticCustomError as exc:
            context = dict(exc.context or {})
            raise PydanticCustomError(exc.type, f"{name}: {exc.message()}", context) from None
    return bundle


def _env_value(value: object) -> EnvValue:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    ref = parse_ref(value) if isinstance(value, dict) else None
    if ref is not None:
        return ref
    raise PydanticCustomError(
        "env_value",
        "expected a string or {secret: NAME}, got {kind}",
        {"kind": kind_of(value), "fix": 'quote the value ("1", "true"), or write {secret: ORCH_VAR_NAME}'},
    )


def _duration(value: object) -> float:
    if isinstance(value, (str, int, float)):
        try:
            return parse_duration(value)
        except ValueError as exc:
            message = str(exc).split(" (write", 1)[0]  # settings' own hint: the fix below says it once
    else:
        message = f"not a duration: got {kind_of(value)}"
    raise PydanticCustomError("duration", "{error}", {"error": message, "fix": "write e.g. 90s, 30m or 1.5h"})


Scalar = Annotated[FlagValue, PlainValidator(_scalar)]
Flag = Annotated[FlagValue, PlainValidator(_flag_value)]
AxisField = Annotated[AxisValue, PlainValidator(_axis_value)]
EnvField = Annotated[EnvValue, PlainValidator(_env_value)]
Duration = Annotated[float, PlainValidator(_duration)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MatrixSection(BaseModel):
    """`matrix:`: every key but include/exclude is an axis (a flag name -> list of values)."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, list[AxisField]] = Field(init=False)

    include: list[dict[str, AxisField]] = Field(default_factory=list)
    exclude: list[dict[str, AxisField]] = Field(default_factory=list)


class StallEntry(_Strict):
    """`stall:`: per startup phase, how long without progress is a hang (0 turns a phase's window off)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    import_: Duration | None = Field(default=None, alias="import")
    model_load: Duration | None = None
    memory_alloc: Duration | None = None
    cuda_graph_capture: Duration | None = None
    warmup: Duration | None = None

    def given(self) -> dict[str, float]:
        """The windows the file set, by phase name."""
        return {k: v for k, v in self.model_dump(by_alias=True).items() if v is not None}


class RetryEntry(_Strict):
    """`retry:`: retries by failure class (a class not given takes `retries:`; deterministic defaults to 0)."""

    deterministic: StrictInt | None = Field(default=None, ge=0, le=10)
    transient: StrictInt | None = Field(default=None, ge=0, le=10)
    flaky: StrictInt | None = Field(default=None, ge=0, le=10)


class LoadEntry(_Strict):
    """`load:`: the short standard load on every passing cell (`load: off` skips it); defaults in LoadSettings."""

    requests: StrictInt = Field(default=32, ge=1, le=100_000)
    concurrency: StrictInt = Field(default=8, ge=1, le=4096)
    input_len: StrictInt = Field(default=256, ge=1, le=1_000_000)
    output_len: StrictInt = Field(default=128, ge=1, le=1_000_000)
    repeat: StrictInt = Field(default=3, ge=1, le=50)


def _load_off(value: object) -> object:
    # `load: off` (or false) skips the load; an empty `load:` is the standard one.
    if value == "off" or value is False:
        return None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PydanticCustomError(
            "load",
            "expected the load's settings or `off`, got {kind}",
            {"kind": kind_of(value), "fix": "write `load: off`, or e.g. `load: {requests: 32, concurrency: 8}`"},
        )
    return value


class MatrixFile(_Strict):
    """The whole matrix file."""

    name: str | None = None
    host: str | None = None
    flags: dict[str, Flag] = Field(default_factory=dict)
    env: dict[str, EnvField] = Field(default_factory=dict)
    matrix: MatrixSection | None = None
    installs: list[str] = Field(default_factory=list)
    deadlines: dict[str, Duration] = Field(default_factory=dict)
    probes: ProbeSettings = Field(default_factory=ProbeSettings)
    retries: StrictInt = Field(default=0, ge=0, le=10)
    retry: RetryEntry = Field(default_factory=RetryEntry)
    stall: StallEntry = Field(default_factory=StallEntry)
    load: Annotated[LoadEntry | None, BeforeValidator(_load_off)] = Field(default_factory=LoadEntry)
    """None: `load: off`."""
    max_cells: StrictInt = Field(default=DEFAULT_MAX_CELLS, ge=1)
    on_infra: OnInfra = "continue"


class InstallEntry(_Strict):
    """One SGLang install of a host (`installs: {after: {launcher: ..., env: ...}}`)."""

    launcher: str
    env: dict[str, EnvField] = Field(default_factory=dict)


class SlurmEntry(_Strict):
    """`slurm:` of a Slurm host: the sbatch options of its jobs."""

    partition: str = Field(min_length=1)
    account: str | None = None
    qos: str | None = None
    time: str | None = None
    sbatch_args: list[str] = Field(default_factory=list)


class HostEntry(_Strict):
    """One host of hosts.yaml."""

    ssh: str | None = None
    transport: Literal["ssh", "local", "sim", "slurm"] | None = None
    slurm: SlurmEntry | None = None
    launcher: str | None = None
    workdir: str | None = None
    gpus: StrictInt = Field(default=8, ge=1)
    env: dict[str, EnvField] = Field(default_factory=dict)
    secrets: list[str] = Field(default_factory=list)
    installs: dict[str, InstallEntry] = Field(default_factory=dict)
    deadlines: dict[str, Duration] = Field(default_factory=dict)
    kill_foreign_gpu_holders: StrictBool = False
    known_hosts: str | None = None
    accept_new_host_keys: StrictBool = False
    identity_file: str | None = None
    ssh_config: str | None = None
    python: str | None = None
    port_base: StrictInt = Field(default=30000, ge=1024, le=65000)
    scenario: str | None = None


HOSTS_FILE: TypeAdapter[dict[str, HostEntry]] = TypeAdapter(dict[str, HostEntry])

EXAMPLES: dict[str, str] = {
    "name": "name: glm5-nvfp4-sm120",
    "host": "host: blackwell",
    "flags": "flags: {model-path: /models/GLM-5, tp-size: 8, api-key: {secret: ORCH_API_KEY}}",
    "env": 'env: {SGLANG_ENABLE_JIT_DEEPGEMM: "1", HF_TOKEN: {secret: ORCH_HF_TOKEN}}',
    "matrix": "matrix: {attention-backend: [triton, dsa]}",
    "installs": "installs: [before, after]",
    "deadlines": "deadlines: {model_load: 30m, ready: 45m}",
    "retries": "retries: 1",
    "retry": "retry: {deterministic: 0, transient: 2, flaky: 1}",
    "stall": "stall: {model_load: 10m, cuda_graph_capture: 5m, warmup: 5m}",
    "max_cells": "max_cells: 5000",
    "on_infra": "on_infra: stop",
    "ssh": "ssh: user@gpu-host:22",
    "transport": "transport: local",
    "slurm": "slurm: {partition: gpu, time: '2:00:00'}",
    "partition": "partition: gpu",
    "sbatch_args": "sbatch_args: [--constraint=b200]",
    "gpus": "gpus: 8",
    "port_base": "port_base: 30000",
    "secrets": "secrets: [MY_PRIVATE_URL]",
    "installs.launcher": "launcher: /opt/sglang-after/bin/python -m sglang.launch_server",
}
"""Key -> a correct line to show in the fix of a type error."""
