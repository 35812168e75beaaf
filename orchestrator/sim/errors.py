"""The simulator's own errors: a scenario file or a flag grammar it cannot use, said with file, line and fix."""

from __future__ import annotations


class ConfigError(Exception):
    """A scenario (or grammar) file is invalid; says where and how to fix it."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None, fix: str | None = None):
        self.message = message
        self.file = file
        self.line = line
        self.fix = fix
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.file or "<scenario>"
        if self.line is not None:
            where = f"{where}:{self.line}"
        return f"{where}: {self.message}" + (f" (fix: {self.fix})" if self.fix else "")


class ConfigErrors(ConfigError):
    """Several errors of one file, reported together."""

    def __init__(self, errors: list[ConfigError]):
        self.errors = errors
        first = errors[0]
        super().__init__(first.message, file=first.file, line=first.line, fix=first.fix)

    def __str__(self) -> str:
        return "\n".join(ConfigError.__str__(e) for e in self.errors)
