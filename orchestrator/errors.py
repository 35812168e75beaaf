"""The orchestrator's own failures. A server's failure is never an exception: it is a Verdict.

OrchestratorError
├── ConfigError            bad matrix / hosts / scenario file: file, line, fix
├── TransportError         the host could not be reached or driven (seam 1)
│   ├── ConnectFailed      could not connect or authenticate
│   ├── HostKeyRejected    unknown or changed host key
│   ├── ConnectionLost     an established connection dropped
│   └── CommandTimeout     a remote command outlived its timeout
├── ProbeError             the HTTP probe client itself failed (seam 2)
├── StoreError             the SQLite store failed or holds something unexpected (seam 3)
├── HostBusy               GPUs held by others, or another sweep holds the host lock
└── LaunchError            a launch could not be started (run dir unwritable, disk full)
"""

from __future__ import annotations


class OrchestratorError(Exception):
    """Base of every error the orchestrator raises on purpose."""


class ConfigError(OrchestratorError):
    """A configuration file is invalid; says where and how to fix it."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None, fix: str | None = None):
        self.message = message
        self.file = file
        self.line = line
        self.fix = fix
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.file or "<config>"
        if self.line is not None:
            where = f"{where}:{self.line}"
        text = f"{where}: {self.message}"
        if self.fix:
            text += f" (fix: {self.fix})"
        return text


class ConfigErrors(ConfigError):
    """Several configuration errors found in one pass, reported together."""

    def __init__(self, errors: list[ConfigError]):
        self.errors = errors
        first = errors[0]
        super().__init__(first.message, file=first.file, line=first.line, fix=first.fix)

    def __str__(self) -> str:
        return "\n".join(ConfigError.__str__(e) for e in self.errors)


class TransportError(OrchestratorError):
    """The host could not be reached or driven."""


class ConnectFailed(TransportError):
    """Could not connect to or authenticate with the host."""


class HostKeyRejected(ConnectFailed):
    """The host's key is unknown or changed; nothing was sent to it."""


class ConnectionLost(TransportError):
    """An established connection dropped."""


class CommandTimeout(TransportError):
    """A remote command ran past its timeout."""


class ProbeError(OrchestratorError):
    """The HTTP probe client failed in a way that is not the server's answer."""


class StoreError(OrchestratorError):
    """The result store failed or holds something unexpected."""


class HostBusy(OrchestratorError):
    """The host's GPUs are held by processes that are not ours, or another sweep holds its lock."""

    def __init__(self, message: str, *, run_ids: tuple[str, ...] = (), pgids: dict[str, int] | None = None):
        super().__init__(message)
        self.run_ids = run_ids
        """Runs of an earlier sweep whose servers hold the GPUs (the store names their sweep)."""
        self.pgids = pgids or {}
        """Run id -> the process group its server runs in on the host, as the host reports it."""


class LaunchError(OrchestratorError):
    """A launch could not be started on the host (an infra failure, not SGLang's)."""
