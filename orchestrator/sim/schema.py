"""Strict records from YAML data for the simulator: unknown keys, wrong types and out-of-range numbers are
collected with where they are, in the words pydantic uses, without pydantic.

The simulated server reads its scenario on every launch; pydantic and its model construction were 0.14 s of
each start, time a real SGLang does not spend. A record is a keyword-only dataclass whose fields say how they
are checked (`checked(...)`); `build(Record, data)` makes one or lists every problem found.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

Loc = tuple[str | int, ...]
"""Where a value is: keys and list indexes from the file's top."""
Problems = list[tuple[Loc, str]]


class Bad(Exception):
    """A value's own problem, raised by a check and recorded at the value's location."""


Check = Callable[[Any, Loc, Problems], Any]
"""Returns the checked value; raises Bad, or records the problems of its parts and returns what it could."""
T = TypeVar("T")
R = TypeVar("R")


def checked(check: Check, default: T = dataclasses.MISSING, *, factory: Callable[[], T] | None = None) -> T:  # type: ignore[assignment]
    """A record's field: how its value is checked, and its default (none: the field is required)."""
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata={"check": check})
    return dataclasses.field(default=default, metadata={"check": check})


def build(cls: type[R], data: Any, loc: Loc = (), problems: Problems | None = None) -> R:
    """`cls` from a mapping: every field checked, unknown keys refused, then the record's own `validate()`."""
    collected: Problems = [] if problems is None else problems
    record = record_of(cls)(data, loc, collected)
    if problems is None and collected:
        raise Invalid(collected)
    return record  # type: ignore[no-any-return]


class Invalid(Exception):
    """Every problem `build` found."""

    def __init__(self, problems: Problems) -> None:
        super().__init__("; ".join(f"{'.'.join(map(str, loc))}: {msg}" for loc, msg in problems))
        self.problems = problems


def record_of(cls: type[Any]) -> Check:
    """The check of a nested record."""

    def check(value: Any, loc: Loc, problems: Problems) -> Any:
        if not isinstance(value, Mapping):
            raise Bad(f"Input should be a mapping of {cls.__name__} fields")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        before = len(problems)
        problems.extend(((*loc, key), "Extra inputs are not permitted") for key in value if key not in fields)
        given: dict[str, Any] = {}
        for name, spec in fields.items():
            if name not in value:
                if spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
                    problems.append(((*loc, name), "Field required"))
                continue
            try:
                given[name] = spec.metadata["check"](value[name], (*loc, name), problems)
            except Bad as exc:
                problems.append(((*loc, name), str(exc)))
        if len(problems) > before:
            return None
        record = cls(**given)
        try:
            record.validate()
        except Bad as exc:
            problems.append((loc, f"Value error, {exc}"))
        return record

    return check


def number(*, ge: float | None = None, gt: float | None = None, le: float | None = None) -> Check:
    """A float (an int is one too; a bool is not), within bounds."""

    def check(value: Any, loc: Loc, problems: Problems) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Bad("Input should be a valid number")
        _bounds(value, ge, gt, le)
        return float(value)

    return check


def integer(*, gt: int | None = None) -> Check:
    """A whole number, above `gt`."""

    def check(value: Any, loc: Loc, problems: Problems) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise Bad("Input should be a valid integer")
        _bounds(value, None, gt, None)
        return value

    return check


def _bounds(value: float, ge: float | None, gt: float | None, le: float | None) -> None:
    if ge is not None and value < ge:
        raise Bad(f"Input should be greater than or equal to {ge}")
    if gt is not None and value <= gt:
        raise Bad(f"Input should be greater than {gt}")
    if le is not None and value > le:
        raise Bad(f"Input should be less than or equal to {le}")


def text(*, numbers_too: bool = False) -> Check:
    """A string; with `numbers_too`, a number written bare (`version: 0.5`, `torch: 2.9`) as its text."""

    def check(value: Any, loc: Loc, problems: Problems) -> str:
        if numbers_too and isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if not isinstance(value, str):
            raise Bad("Input should be a valid string")
        return value

    return check


def one_of(what: str, options: Collection[str], convert: Callable[[str], Any] = str) -> Check:
    """One of `options` (a string), converted (an enum's value to the enum); `what` names it in the error."""

    def check(value: Any, loc: Loc, problems: Problems) -> Any:
        if not isinstance(value, str) or value not in options:
            raise Bad(f"unknown {what} {value!r}; expected one of {', '.join(options)}")
        return convert(value)

    return check


def scalar(*, lists: bool = False) -> Check:
    """A YAML scalar (string, number, boolean or null) as written; with `lists`, or a list of them."""

    def check(value: Any, loc: Loc, problems: Problems) -> Any:
        if lists and isinstance(value, list):
            return [scalar()(item, (*loc, i), problems) for i, item in enumerate(value)]
        if value is not None and not isinstance(value, (str, int, float, bool)):
            raise Bad("Input should be a string, number, boolean or null" + (" or a list of them" if lists else ""))
        return value

    return check


def optional(inner: Check) -> Check:
    """None, or what `inner` accepts."""
    return lambda value, loc, problems: None if value is None else inner(value, loc, problems)


def text_or_texts() -> Check:
    """A string or a list of strings."""

    def check(value: Any, loc: Loc, problems: Problems) -> str | list[str]:
        if isinstance(value, list):
            return [text()(item, (*loc, i), problems) for i, item in enumerate(value)]
        return text()(value, loc, problems)  # type: ignore[no-any-return]

    return check


def mapping_of(values: Check) -> Check:
    """A mapping of string keys to values `values` accepts."""

    def check(value: Any, loc: Loc, problems: Problems) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise Bad("Input should be a valid dictionary")
        found = {}
        for key, item in value.items():
            try:
                found[str(key)] = values(item, (*loc, str(key)), problems)
            except Bad as exc:
                problems.append(((*loc, str(key)), str(exc)))
        return found

    return check


def list_of(items: Check) -> Check:
    """A list of items `items` accepts."""

    def check(value: Any, loc: Loc, problems: Problems) -> list[Any]:
        if not isinstance(value, list):
            raise Bad("Input should be a valid list")
        found = []
        for index, item in enumerate(value):
            try:
                found.append(items(item, (*loc, index), problems))
            except Bad as exc:
                problems.append(((*loc, index), str(exc)))
        return found

    return check
