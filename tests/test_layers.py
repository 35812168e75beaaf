"""Imports only go down the data flow of DESIGN.md: no module imports a folder that comes after its own."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "orchestrator"

LAYERS: dict[str, int] = {
    "model": 0, "secret": 0, "errors": 0, "settings": 0, "textsafe": 0, "safeconsole": 0, "retries": 0, "__init__": 0,
    "knowledge": 1, "transport": 1, "store": 1, "probe": 1,
    "matrix": 2, "config": 3,
    "harvest": 3, "host": 3, "sim": 3, "planning": 3, "slurm": 3,
    "classify": 4,
    "sweep": 5,
    "analysis": 6,
    "report": 7,
    "cli": 8,
    "__main__": 9,
}  # fmt: skip
"""Where each folder sits in the data flow (failure knowledge below both harvest and classify)."""


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
        if isinstance(node, ast.Import):
            names = [n.name for n in node.names]
        found |= {n.split(".")[1] for n in names if n.startswith("orchestrator.")}
    return found


def test_every_folder_has_a_layer() -> None:
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert folders | modules <= set(LAYERS), (folders | modules) - set(LAYERS)


def test_no_upward_import() -> None:
    upward = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        own = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        for target in _imports(path):
            if target != own and LAYERS[target] > LAYERS[own]:
                upward.append(f"{rel} imports orchestrator.{target}")
    assert not upward, upward


def test_failure_knowledge_stands_alone() -> None:
    for path in (PACKAGE / "knowledge").glob("*.py"):
        assert _imports(path) <= {"knowledge", "model"}, path


SIM_MAY_IMPORT = {"orchestrator.matrix.grammar", "orchestrator.matrix.flags", "orchestrator.matrix.valuetypes",
                  "orchestrator.model", "orchestrator.errors"}  # fmt: skip
"""The tool's pure pieces the simulator shares (the generated grammar's format, the renames table, the value
types, the phases and taxonomy, the error classes), instead of keeping hand copies of them."""


def _module_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {n.name for n in node.names}
    return {name for name in found if name.startswith("orchestrator.")}


def test_the_simulator_shares_only_the_tools_pure_pieces() -> None:
    # It stands for SGLang on a GPU host: it may read the tool's data formats and vocabulary, never its logic.
    for path in (PACKAGE / "sim").rglob("*.py"):
        outside = {m for m in _module_imports(path) if not m.startswith("orchestrator.sim")}
        assert outside <= SIM_MAY_IMPORT, (path, outside - SIM_MAY_IMPORT)
