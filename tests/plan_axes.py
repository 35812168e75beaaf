"""The 648-cell matrix shape the planning tests share (3*3*4*3*3*2 values)."""

from __future__ import annotations

AXES: dict[str, list[str]] = {
    "a": ["1", "2", "3"],
    "b": ["x", "y", "z"],
    "c": ["p", "q", "r", "s"],
    "d": ["u", "v", "w"],
    "e": ["m", "n", "o"],
    "f": ["g", "h"],
}
