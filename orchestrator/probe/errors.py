"""How a probe request can fail, as seen from the client side of seam 2.

    ProbeError (orchestrator.errors)
    ├── ServerUnreachable   connection refused: nothing listens (not started yet, or dead)
    ├── ConnectionDropped   reset or closed before the answer was complete
    ├── ProbeTimeout        no complete answer within the timeout
    ├── HttpStatusError     an HTTP error status, with an excerpt of the body
    └── BadAnswer           a 2xx answer SGLang would not send (not JSON, error event, no [DONE])

The client raises them; `run_probes` turns them into ProbeResult data, because they say what
the server did, not that the orchestrator failed.
"""

from __future__ import annotations

from orchestrator.errors import OrchestratorError, ProbeError

AUTH_STATUSES = (401, 403)


class ServerUnreachable(ProbeError):
    """Nothing accepted the connection: the server is not listening yet, or is gone."""


class ConnectionDropped(ProbeError):
    """The connection was reset or closed before the answer was complete."""


class ProbeTimeout(ProbeError):
    """No complete answer arrived within the timeout."""


class HttpStatusError(ProbeError):
    """The server answered with an HTTP error status."""

    def __init__(self, where: str, status: int, body: str) -> None:
        self.status = status
        self.body = body
        super().__init__(f"{where}: HTTP {status}" + (f": {body}" if body else ""))


class BadAnswer(ProbeError):
    """A successful status, but a body that is not what SGLang sends."""


class CredentialsRefused(OrchestratorError):
    """The server refused the orchestrator's own credentials (HTTP 401/403).

    Not a ProbeError: the server the tool launched with a key rejects the key the tool sends, which says
    nothing about the cell (its flags, its kernels). The attempt is `infra`, never a cell's failure.
    """

    def __init__(self, where: str, status: int) -> None:
        self.status = status
        super().__init__(
            f"{where}: HTTP {status}: the server refused the orchestrator's credentials (the key its probes send "
            "is not the one it was launched with: check the api-key's variable); not a failure of the cell"
        )
