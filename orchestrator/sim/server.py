"""The main process of the simulated server: start the ranks, serve HTTP, warm up, and go down like SGLang.

Going down, as SGLang does it:
- a rank that fails sends SIGQUIT; the main process logs `Received sigquit from a child process. It usually
  means the child failed.`, SIGKILLs every rank and then itself (kill_process_tree), so the port closes;
- a rank that dies otherwise: `Killed` for SIGKILL, `Child process unexpectedly failed with an exit code N`
  for anything else, then the same kill;
- SIGTERM/SIGINT once serving: uvicorn's shutdown lines, ranks terminated, exit 0 (during startup the
  default action: killed by the signal, ranks with it).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

from orchestrator.sim import failures
from orchestrator.sim.argparser import build_parser
from orchestrator.sim.launch import Launch, model_info, rank_configs, server_info, startup_lines
from orchestrator.sim.logfmt import STDERR, LogWriter, rank_tag
from orchestrator.sim.phases import Phase
from orchestrator.sim.plan import Failure
from orchestrator.sim.ranks import RankSet

if TYPE_CHECKING:
    from orchestrator.sim.engine import Engine
    from orchestrator.sim.http11 import HttpServer

WARMUP_PROMPT = "The capital city of France is"
WARMUP_TIMEOUT_S = 600


class SimServer:
    """One running simulated server."""

    def __init__(self, launch: Launch, state: str, *, began: float | None = None) -> None:
        self.launch = launch
        began = began if began is not None else time.monotonic()
        self.log = LogWriter()
        configs = rank_configs(launch, server_pid=os.getpid(), state_dir=state, began=began)
        self.ranks = RankSet(configs, self._rank_exited)
        self.httpd: HttpServer | None = None
        self._going_down = threading.Lock()

    def run(self) -> int:
        """Run until shut down; returns the exit code when it ends by returning."""
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        signal.signal(signal.SIGQUIT, self._on_sigquit)
        startup = self.launch.plan.startup
        if startup is not None and startup.phase is Phase.ARG_PARSE:
            return self._fail_in_main(startup)
        self.log.info(*startup_lines(self.launch))
        self.ranks.start()
        # The serving side is imported only now, while the forked ranks start up: off the way to ready, as a
        # real SGLang's HTTP server is, and the bench's whole simulated import phase is 50 ms.
        from orchestrator.sim.engine import Engine

        engine = Engine(self.launch.plan, self.launch.scenario.timing, LogWriter(rank_tag(0, self.launch.tp_size)),
                        self._crash)  # fmt: skip
        self.ranks.wait_ready()
        engine.warmup_began = time.monotonic()
        if not self._serve(engine):
            self.ranks.kill()
            return 1
        self._warmup()
        self.log.info("The server is fired up and ready to roll!")
        engine.mark_ready()
        while True:
            time.sleep(3600)

    def _fail_in_main(self, failure: Failure) -> int:
        """A failure while the arguments are checked: argparse's error, or a plain traceback, before any rank."""
        if failure.kind == "invalid_argument":
            build_parser(self.launch.grammar).error(failure.message or "invalid argument combination")
        if failure.kind == "hang":
            _block()
        if failure.kind == "process_killed":
            self.log.raw(failures.KILLED, fd=STDERR)
            os.kill(os.getpid(), signal.SIGKILL)
        if failure.kind != "unknown":
            if self.launch.release.announces_kill:
                self.log.info(failures.KILL_TREE.format(pid=os.getpid()))
            self.log.raw(*failures.main_process_failure(failure.kind, self.launch.context(failure)), fd=STDERR)
        return 1

    def _serve(self, engine: Engine) -> bool:
        from orchestrator.sim.endpoints import Api, make_handler
        from orchestrator.sim.http11 import HttpServer

        host, port = self.launch.host, self.launch.port
        self.log.info(f"INFO:     Started server process [{os.getpid()}]", "INFO:     Waiting for application startup.")
        self.log.info("INFO:     Application startup complete.")
        api = Api(
            engine=engine,
            log=self.log,
            model_name=str(self.launch.values.get("served_model_name") or self.launch.model_path),
            model_info=model_info(self.launch),
            server_info=lambda: server_info(self.launch, throughput=engine.last_throughput),
            max_model_len=self.launch.scenario.model.context_len,
            api_key=self._api_key(),
        )
        try:
            self.httpd = HttpServer((host, port), make_handler(api))
        except OSError as exc:
            reason = (exc.strerror or str(exc)).lower()
            self.log.info(
                failures.BIND_FAILED.format(errno=exc.errno, host=host, port=port, reason=reason),
                "INFO:     Waiting for application shutdown.",
                "INFO:     Application shutdown complete.",
            )
            return False
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.log.info(f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)")
        return True

    def _api_key(self) -> str | None:
        return str(self.launch.values.get("api_key") or "") or None

    def _warmup(self) -> None:
        """The server's own greedy request (8 new tokens), as `_execute_server_warmup` sends it."""
        if self.launch.given.get("skip-server-warmup") == "true":
            return
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self.launch.host, self.launch.host)
        startup = self.launch.plan.startup
        try:
            key = self._api_key()
            _request(host, self.launch.port, "GET", "/model_info", None, key)
            if startup is not None and startup.kind == "warmup_request_failed":
                self._warmup_failed(startup)
            body = {"text": WARMUP_PROMPT, "sampling_params": {"temperature": 0, "max_new_tokens": 8}}
            status, text = _request(host, self.launch.port, "POST", "/generate", body, key)
        except OSError as exc:
            status, text = 0, f"{type(exc).__name__}: {exc}"
        if status != 200:
            message = f"AssertionError: res=<Response [{status}]>, res.text={text!r}"
            self._warmup_failed(Failure(Phase.WARMUP, "warmup_request_failed", message))

    def _warmup_failed(self, failure: Failure) -> NoReturn:
        lines = failures.warmup_failure(self.launch.context(failure))
        self.log.info(f"{failures.WARMUP_FAILED}{lines[0]}")
        self.log.raw(*lines[1:])
        self._die()

    def _crash(self, failure: Failure) -> None:
        """Hand a serving-phase failure to rank 0, which reports it and SIGQUITs us."""
        command = {
            "op": "fail",
            "kind": failure.kind,
            "phase": failure.phase.value,
            "ctx": self.launch.context(failure).to_dict(),
        }
        if not self.ranks.send(0, command):
            self._die()

    def _on_sigquit(self, signum: int, frame: FrameType | None) -> None:
        self.log.info(failures.SIGQUIT_RECEIVED)
        self._die()

    def _rank_exited(self, pid: int, code: int) -> None:
        if code in (0, -signal.SIGTERM):
            self._shutdown()  # the whole process group got SIGTERM; ours is on its way
            return
        if code == -signal.SIGKILL:
            self.log.raw(failures.KILLED, fd=STDERR)
        else:
            self.log.info(failures.CHILD_FAILED.format(code=code, pid=pid))
        self._die()

    def _on_term(self, signum: int, frame: FrameType | None) -> None:
        self._shutdown()

    def _shutdown(self) -> None:
        if not self._going_down.acquire(blocking=False):
            return
        if self.httpd is None:
            self.ranks.kill()
            if threading.current_thread() is not threading.main_thread():
                # A rank's watcher saw the group's SIGTERM first; only the main thread may reset a handler.
                os._exit(128 + signal.SIGTERM)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            _block()
        self.log.info(
            "INFO:     Shutting down",
            "INFO:     Waiting for application shutdown.",
            "INFO:     Application shutdown complete.",
            f"INFO:     Finished server process [{os.getpid()}]",
        )
        self.httpd.socket.close()
        if not self.launch.plan.hangs_on_shutdown:
            self.ranks.terminate(grace=2.0)
        os._exit(0)

    def _die(self) -> NoReturn:
        """kill_process_tree: every rank, then this process, by SIGKILL."""
        self.ranks.kill()
        os.kill(os.getpid(), signal.SIGKILL)
        _block()


def _request(host: str, port: int, method: str, path: str, body: object, api_key: str | None) -> tuple[int, str]:
    from orchestrator.sim.http11 import request

    payload = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if payload else {}
    if api_key:  # as SGLang's warm-up does: its own middleware demands the key
        headers["Authorization"] = f"Bearer {api_key}"
    return request(host, port, method, path, payload, headers, WARMUP_TIMEOUT_S)


def _block() -> NoReturn:
    while True:
        time.sleep(3600)
