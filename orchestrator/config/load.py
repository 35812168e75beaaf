"""Load a matrix file into a frozen `Matrix`, reporting every problem of the file at once.

Nothing is launched from an invalid file: shape and types (pydantic), whole-file checks
(config/checks.py) and the size of the expansion are all checked here, and every error
names the file, the line and the fix. The hosts file is loaded by config/hosts.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestrator.config.checks import matrix_checks
from orchestrator.config.diagnostics import error_at, from_pydantic
from orchestrator.config.hosts import builtin_sim_host, load_hosts
from orchestrator.config.model import Matrix
from orchestrator.config.schema import LoadEntry, MatrixFile, RetryEntry
from orchestrator.config.secret_flags import masked_text, protect_entry, protect_flags
from orchestrator.config.yamlpos import LoadedYaml, YamlPath, load_yaml
from orchestrator.errors import ConfigError, ConfigErrors
from orchestrator.matrix.expand import count_cells, size_bounds
from orchestrator.settings import STALL_PHASES, Deadlines, KnownAnswer, LoadSettings, ProbeSettings, RetryPolicy, Stall

__all__ = ["builtin_sim_host", "load_hosts", "load_matrix", "matrix_from_yaml"]


def require_mapping(doc: LoadedYaml, what: str, example: str) -> dict[Any, Any]:
    """The document's top level as a mapping, or a ConfigError saying what was expected."""
    if isinstance(doc.data, dict):
        return doc.data
    found = "the file is empty" if doc.data is None else f"its top level is a {type(doc.data).__name__}"
    message = f"expected {what} (a mapping of keys), but {found}"
    raise ConfigError(message, file=doc.file, line=1, fix=f"start with `{example}`")


_SECTION_KEYS: dict[YamlPath, tuple[str, ...]] = {
    (): tuple(MatrixFile.model_fields),
    ("probes",): tuple(f.name for f in fields(ProbeSettings)),
    ("probes", "greedy"): tuple(f.name for f in fields(KnownAnswer)),
    ("stall",): STALL_PHASES,
    ("retry",): tuple(RetryEntry.model_fields),
    ("load",): tuple(LoadEntry.model_fields),
}
"""Section -> the keys allowed in it, for "did you mean"."""


def load_matrix(path: str | Path) -> Matrix:
    """Read and validate a matrix file; raises ConfigErrors listing every problem, with file and line."""
    return matrix_from_yaml(load_yaml(path))


def matrix_from_yaml(doc: LoadedYaml) -> Matrix:
    """Validate a parsed matrix document (see `load_matrix`)."""
    data = require_mapping(doc, "a matrix file", "name: my-sweep")
    errors = matrix_checks(doc)
    model: MatrixFile | None = None
    try:
        model = MatrixFile.model_validate(data)
    except ValidationError as exc:
        errors += from_pydantic(exc, doc, lambda section: _SECTION_KEYS.get(section, ()))
    if errors or model is None or model.matrix is None:
        raise ConfigErrors(sorted(errors, key=lambda e: e.line or 0))
    section = model.matrix

    def where(*path: str | int) -> Callable[[str], str]:
        return lambda name: f"{doc.file}:{doc.line_of((*path, name)) or '?'}"

    axes = {name: list(values) for name, values in (section.model_extra or {}).items()}
    matrix = Matrix(
        name=model.name or Path(doc.file).stem,
        path=doc.file,
        text=masked_text(doc),
        host=model.host,
        base_flags=protect_flags(model.flags, where("flags")),
        env=dict(model.env),
        axes={name: [protect_entry({name: v}, where("matrix"))[name] for v in vs] for name, vs in axes.items()},
        include=[protect_entry(e, where("matrix", "include", i)) for i, e in enumerate(section.include)],
        exclude=[dict(entry) for entry in section.exclude],
        installs=list(model.installs),
        deadlines=Deadlines().with_overrides(model.deadlines),
        deadline_overrides=dict(model.deadlines),
        probes=_with_load(model),
        retries=model.retries,
        retry=RetryPolicy(model.retry.deterministic, model.retry.transient, model.retry.flaky),
        stall=Stall().with_overrides(model.stall.given()),
        max_cells=model.max_cells,
        on_infra=model.on_infra,
    )
    _check_size(matrix, doc)
    return matrix


def _with_load(model: MatrixFile) -> ProbeSettings:
    """The probes with the matrix's `load:` (`off`: none; not given: the standard load, or `probes: {load: ...}`)."""
    if "load" not in model.model_fields_set:
        return model.probes
    load = None if model.load is None else LoadSettings(**model.load.model_dump())
    return replace(model.probes, load=load)


def _check_size(matrix: Matrix, doc: LoadedYaml) -> None:
    # Bounds first: a 10^12-combination matrix is refused without enumerating anything.
    lower, upper = size_bounds(matrix)
    count = count_cells(matrix, limit=matrix.max_cells)
    if count > matrix.max_cells:
        size = str(count) if lower == upper else f"at least {count}"
        where: YamlPath = ("max_cells",) if doc.line_of(("max_cells",)) else ("matrix",)
        raise error_at(
            doc,
            where,
            f"the matrix expands to {size} cells, more than max_cells ({matrix.max_cells})",
            "narrow the axes or add exclude entries; raise `max_cells:` only if you mean to run them all",
        )
    if count == 0:
        raise error_at(
            doc,
            ("matrix", "exclude"),
            "exclude removes every combination of the matrix and no include entry adds one: nothing would run",
            "remove or narrow exclude entries",
        )
