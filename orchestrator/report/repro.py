"""A standalone bash script that reproduces one stored run, to hand to someone or attach to an SGLang issue.

Pure: a run, its cell and its sweep in, script text out. The script needs only bash, coreutils, curl
and python3 >= 3.7 (stdlib). It launches the run's exact command line (on a free port, or PORT=...) with the
run's environment (plain values written, secrets required from the caller's environment, never
written), in a process group of its own; waits for `/health_generate` (polled at most 1 s apart while
checking the process is alive, up to the sweep's `ready` deadline); sends the probes the run sent, in
order, up to the one that failed (earlier answers can be what breaks a server); prints what happened
(HTTP status and body excerpt, whether the process died, the last 40 log lines, the first lines
matching error patterns); stops the whole process group; and exits with:

- 0: no failure: the server got ready and every probe sent passed (a passing run still passes);
- 1: the failure reproduced: it failed where the run failed (not ready, the same probe, or died after);
- 2: the script could not run (a secret or tool missing, no free port);
- 3: it failed, but not where the run failed (or a passing run now fails).

Overrides: PORT, GPUS (CUDA_VISIBLE_DEVICES), READY_TIMEOUT, PROBE_TIMEOUT, PROBES ("greedy sampled").
"""

from __future__ import annotations

import inspect
import json
import math
import re
import shlex
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import StoreError
from orchestrator.model import Cell, Status
from orchestrator.probe.decode import MIN_SAMPLED_TOKENS, PROBE_ORDER
from orchestrator.report import repro_probe
from orchestrator.secret import MASK, SecretRef
from orchestrator.settings import Deadlines, ProbeSettings
from orchestrator.store.records import RunRecord, SweepRecord
from orchestrator.textsafe import visible

LOG_TAIL_LINES = 40
API_KEY_FLAG = "--api-key"
API_KEY_ENV = "REPRO_API_KEY"
"""Where the embedded probe reads the server's key (set for its process only, never on a command line)."""
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_REFERENCE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
"""A secret flag value as the launch passed it: `"${ORCH_API_KEY}"`, expanded by the launch's shell."""
ERROR_PATTERN = (
    r"Traceback|Error|error:|Exception|CUDA error|NCCL|Killed|SIGQUIT|Received sigquit|Segmentation fault"
    r"|device-side assert|out of memory|\bnan\b|NaN|WARNING|Warning|might cause|[Dd]eprecat|[Ff]alling back"
)
"""Lines worth showing first: errors, tracebacks, and warnings (the decisive clue is often a startup warning)."""

_FREE_PORT_PY = """import random, socket
for port in random.sample(range(30000, 60000, 100), 64):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port)); print(port); break
    except OSError:
        pass
    finally:
        s.close()
"""

_CURL_AUTH_PY = (
    "import json, os; "
    f'print("header = " + json.dumps("Authorization: Bearer " + os.environ["{API_KEY_ENV}"], ensure_ascii=False))'
)
"""curl's config line for the key (its quoting is JSON's), made from the environment, never from an argument."""

_VISIBLE_PY = (
    "from __future__ import annotations\nimport re\n"
    + "\n".join(line for line in inspect.getsource(repro_probe).splitlines() if line.startswith("CONTROL = "))
    + "\n\n"
    + inspect.getsource(repro_probe.visible)
    + "\n"
)
"""The probe's `visible`, for the script's other snippets that print server text."""

_SHOW_PY = (
    _VISIBLE_PY
    + """import io, sys
for line in io.TextIOWrapper(sys.stdin.buffer, errors="replace"):
    sys.stdout.write(visible(line))
"""
)
"""stdin to stdout, control characters shown: the log's tail as the user's terminal may receive it."""

_ERRORS_PY = """import re, sys
pattern = re.compile(sys.argv[2])
with open(sys.argv[1], errors="replace") as log:
    hits = [f"{n}: {visible(line.rstrip()[:300])}" for n, line in enumerate(log, 1) if pattern.search(line)]
print("\\n".join(hits[:20]) or "(none)")
"""


@dataclass(frozen=True)
class ReproLaunch:
    """A stored run's launch, ready to be replayed: its command words and environment, secrets by name only."""

    words: tuple[str, ...]
    port_index: int | None
    """Index in `words` of the `--port` value (replaced by the new port)."""
    masked_args: dict[int, str]
    """Index in `words` of a masked flag value (`***` or `--flag=***`) -> the variable that must supply it."""
    env: dict[str, str]
    """Plain environment values as the run had them."""
    secret_names: tuple[str, ...]

    def argv(self, port: str) -> list[str | SecretRef]:
        """The command words with the new port; each masked flag value a reference to its variable."""
        words: list[str | SecretRef] = []
        for index, word in enumerate(self.words):
            if index == self.port_index:
                words.append(port)
            elif index in self.masked_args and word.startswith("--") and word.endswith(f"={MASK}"):
                words += [word[: -len(MASK) - 1], SecretRef(self.masked_args[index])]
            elif index in self.masked_args:
                words.append(SecretRef(self.masked_args[index]))
            else:
                words.append(word)
        return words

    @property
    def api_key_variable(self) -> str | None:
        """The variable holding the server's `--api-key`, which the script's requests must then carry."""
        for index, name in self.masked_args.items():
            word = self.words[index]
            if word.startswith(f"{API_KEY_FLAG}=") or (index > 0 and self.words[index - 1] == API_KEY_FLAG):
                return name
        return None

    @property
    def needed_secrets(self) -> tuple[str, ...]:
        """Every variable the replay reads a secret from, each once: the run's secret environment, its masked flags."""
        return tuple(dict.fromkeys((*self.secret_names, *self.masked_args.values())))

    def shell_words(self) -> str:
        """The command for bash: every word quoted, the port and masked values read from variables."""
        out = [shell_quote(w) for w in self.words]
        if self.port_index is not None:
            out[self.port_index] = '"$PORT"'
        for index, name in self.masked_args.items():
            word = self.words[index]
            prefix = "" if _REFERENCE.match(word) else word[: -len(MASK)]
            out[index] = f'{shell_quote(prefix) if prefix else ""}"${name}"'
        return " ".join(out)


def repro_launch(run: RunRecord) -> ReproLaunch:
    """Read a run's command and masked environment back; raises StoreError for a run never launched."""
    if not run.command:
        reason = run.verdict.reason if run.verdict else run.state
        raise StoreError(f"run {run.run_id} was never launched ({reason}): there is no command to reproduce")
    words = tuple(shlex.split(run.command))
    port_index = next((i + 1 for i, w in enumerate(words[:-1]) if w == "--port"), None)
    masked: dict[int, str] = {}
    for i, word in enumerate(words):
        reference = _REFERENCE.match(word)
        if reference is not None:
            masked[i] = reference.group(1)
        elif word == MASK and i > 0 and words[i - 1].startswith("--"):
            masked[i] = _flag_variable(words[i - 1])
        elif word.startswith("--") and word.endswith(f"={MASK}"):
            masked[i] = _flag_variable(word.split("=", 1)[0])
    env = {k: v for k, v in run.env_masked.items() if v != MASK}
    secrets = tuple(sorted(k for k, v in run.env_masked.items() if v == MASK))
    odd = sorted(n for n in (*env, *secrets, *masked.values()) if not _IDENTIFIER.match(n))
    if odd:
        raise StoreError(f"run {run.run_id}: {odd} cannot be environment variable names; the run cannot be replayed")
    return ReproLaunch(words, port_index, masked, env, secrets)


def _flag_variable(flag: str) -> str:
    """`--api-key` -> `API_KEY`: where a masked flag value is read from."""
    return flag.lstrip("-").upper().replace("-", "_")


def run_settings(sweep: SweepRecord) -> tuple[Deadlines, ProbeSettings]:
    """The deadlines and probe settings a sweep stored, as far as this release knows them (defaults for the rest)."""
    stored = sweep.settings or {}
    deadlines, probes = ({k: v for k, v in dict(stored.get(n) or {}).items() if k in t.__dataclass_fields__}
                         for n, t in (("deadlines", Deadlines), ("probes", ProbeSettings)))  # fmt: skip
    return Deadlines().with_overrides(deadlines), ProbeSettings.from_dict(probes)


def expected_failure(run: RunRecord) -> tuple[str, str]:
    """Where the run failed, as the script compares it: (`pass`|`not_ready`|`probe`|`died`|`unknown`, probe)."""
    verdict, outcome = run.verdict, run.outcome
    if verdict is not None and verdict.status == Status.PASS:
        return "pass", ""
    if outcome is None:
        return "unknown", ""
    if not outcome.reached_ready:
        return "not_ready", ""
    failed = outcome.failed_probe
    return ("probe", failed.name) if failed is not None else ("died", "")


def _probes_sent(run: RunRecord) -> list[str]:
    """The probes the run sent, in order (all of them when it did not record any)."""
    outcome = run.outcome
    if outcome is not None and not outcome.reached_ready:
        return []
    return [p.name for p in outcome.probes] if outcome is not None and outcome.probes else list(PROBE_ORDER)


def _probe_conf(probes: ProbeSettings) -> dict[str, Any]:
    return {
        "model": probes.model,
        "greedy_prompt": probes.greedy.prompt,
        "expect_any": list(probes.greedy.expect_any),
        "greedy_tokens": probes.greedy_max_tokens,
        "sampled_prompt": probes.sampled_prompt,
        "stream_prompt": probes.stream_prompt,
        "temperature": probes.sampled_temperature,
        "top_p": probes.sampled_top_p,
        "sampled_tokens": max(MIN_SAMPLED_TOKENS, probes.sampled_max_tokens),
        "concurrent": probes.concurrent_requests,
        "concurrent_tokens": max(MIN_SAMPLED_TOKENS, probes.concurrent_max_tokens),
        "settle_s": probes.settle_s,
    }


def render_repro_script(run: RunRecord, cell: Cell, sweep: SweepRecord) -> str:
    """A standalone bash script that relaunches this run and re-sends its probes (see the module docstring)."""
    launch = repro_launch(run)
    deadlines, probes = run_settings(sweep)
    expect, expect_probe = expected_failure(run)
    q = shlex.quote
    lines = [
        "#!/usr/bin/env bash",
        *(f"# {_one_line(text)}" for text in _header(run, cell, sweep)),
        "# Needs bash, coreutils, curl and python3. Secrets come from your environment and are never written here.",
        *_secrets_said(launch),
        "# Overrides: PORT=... GPUS=... READY_TIMEOUT=... PROBE_TIMEOUT=... PROBES='greedy sampled' (names, in order)",
        "# Exit: 0 no failure; 1 the failure reproduced; 2 could not run; 3 failed, but not where the run failed.",
        "set -u",
        "for tool in curl python3; do",
        '  command -v "$tool" >/dev/null 2>&1 || { echo "repro: $tool is required" >&2; exit 2; }',
        "done",
        # Found before the run's environment (its PATH included) is exported.
        "PY3=$(command -v python3); CURL=$(command -v curl)",
    ]
    for name in launch.needed_secrets:
        lines.append(f'( : "${{{name}:?{name} must be set: a secret, never written here}}" ) || exit 2')
    lines += [f"export {name}" for name in launch.secret_names]
    key = launch.api_key_variable
    # The server demands its key of every request: curl reads the header from its config on stdin, the
    # probe from its environment; neither ever has it as an argument (ps shows arguments to everyone).
    lines += [
        f'{API_KEY_ENV}="${{{key}}}"' if key else f"{API_KEY_ENV}=",
        "CURL_AUTH=",
        f'[ -z "${API_KEY_ENV}" ] || CURL_AUTH=$({API_KEY_ENV}="${API_KEY_ENV}" "$PY3" -c {q(_CURL_AUTH_PY)})',
    ]
    lines += [f"export {name}={shell_quote(value)}" for name, value in sorted(launch.env.items())]
    lines += [
        '[ -z "${GPUS:-}" ] || export CUDA_VISIBLE_DEVICES="$GPUS"',
        f'[ -n "${{READY_TIMEOUT:-}}" ] || READY_TIMEOUT={math.ceil(deadlines.ready)}',
        f'[ -n "${{PROBE_TIMEOUT:-}}" ] || PROBE_TIMEOUT={q(str(deadlines.probe))}',
        f'[ -n "${{PROBES+x}}" ] || PROBES={q(" ".join(_probes_sent(run)))}',
        'if [ -z "${PORT:-}" ]; then',
        f'  PORT=$("$PY3" -c {q(_FREE_PORT_PY)})',
        '  [ -n "$PORT" ] || { echo "repro: no free port found; set PORT=..." >&2; exit 2; }',
        "fi",
        'BASE="http://127.0.0.1:$PORT"',
        f'WORK=$(mktemp -d "${{TMPDIR:-/tmp}}"/{q(f"repro-{run.run_id}.XXXXXX")}) || exit 2',
        'LOG="$WORK/server.log"',
        'cd "$WORK" || exit 2',
        "PID=",
        *_STOP.replace("GRACE_TENTHS", str(max(1, math.ceil(deadlines.stop_grace * 10)))).splitlines(),
        'echo "repro: starting the server on port $PORT; its log and files are in $WORK"',
        "# A session (and process group) of its own, so that stopping it stops every process it started.",
        f'"$PY3" -c {q(_SETSID_EXEC)} {launch.shell_words()} >"$LOG" 2>&1 </dev/null &',
        "PID=$!",
        *_WAIT.splitlines(),
        'if [ "$READY" = 1 ] && [ -n "$PROBES" ]; then',
        "  # PROBES is a list of probe names: split on purpose.",
        f"  PROBE_CONF={q(json.dumps(_probe_conf(probes)))}",
        f'  {API_KEY_ENV}="${API_KEY_ENV}" "$PY3" - "$BASE" "$PID" "$PROBE_TIMEOUT" "$PROBE_CONF" \\',
        """    "$WORK/failed_probe" $PROBES <<'PY'""",
        *inspect.getsource(repro_probe).splitlines(),
        "PY",
        '  [ "$?" != 2 ] || exit 2',
        '  [ ! -f "$WORK/failed_probe" ] || FAILED_PROBE=$(cat "$WORK/failed_probe")',
        "fi",
        *_REPORT.replace("TAIL_LINES", str(LOG_TAIL_LINES)).replace("SHOW_PY", q(_SHOW_PY)).splitlines(),
        f'"$PY3" -c {q(_VISIBLE_PY + _ERRORS_PY)} "$LOG" {q(ERROR_PATTERN)}',
        f"EXPECT={q(expect)}; EXPECT_PROBE={q(expect_probe)}",
        *_RESULT.splitlines(),
    ]
    return "\n".join(lines) + "\n"


def _secrets_said(launch: ReproLaunch) -> list[str]:
    """Header lines naming each variable the script reads a secret from, and what for."""
    if not launch.needed_secrets:
        return ["# It reads no secret."]
    uses = {name: "the run's environment" for name in launch.secret_names}
    for index, name in launch.masked_args.items():
        flag = launch.words[index].split("=", 1)[0] if "=" in launch.words[index] else launch.words[index - 1]
        uses[name] = f"{flag}" + (", sent as Authorization: Bearer" if name == launch.api_key_variable else "")
    return [f"# Secrets it reads (export them first): {', '.join(f'{n} ({u})' for n, u in uses.items())}."]


def _header(run: RunRecord, cell: Cell, sweep: SweepRecord) -> list[str]:
    versions = sweep.versions or {}
    sglang = versions.get(f"sglang[{run.install}]" if run.install else "sglang")
    verdict = run.verdict
    phase = verdict.phase.value if verdict and verdict.phase else "-"
    said = "no verdict" if verdict is None else f"{verdict.status.value} at {phase}"
    lines = [
        f"Reproduces orchestrator run {run.run_id} (sweep {sweep.sweep_id} on host {sweep.host}, SGLang {sglang});",
        "run it on that host (or one set up like it): the command below is the one launched there.",
        f"Cell {cell.cell_id}: {cell.label}",
        f"Original verdict: {said}: {verdict.category.value if verdict else '-'}"
        + (f"; probe {verdict.failed_probe} failed" if verdict and verdict.failed_probe else ""),
    ]
    if verdict is not None and verdict.root_cause_line:
        lines.append(f"Root cause: {verdict.root_cause_line}")
    return lines


def _one_line(text: str) -> str:
    return " ".join(visible(text).split())


def shell_quote(word: str) -> str:
    """`word` quoted for bash; one holding a control character as `$'...'`, each such character's UTF-8 bytes
    escaped: the script passes the very same bytes, and printing it sends nothing a terminal obeys."""
    if visible(word) == word:
        return shlex.quote(word)
    return "$'" + "".join(map(_ansi_c, word)) + "'"


def _ansi_c(char: str) -> str:
    if char in "\\'":
        return "\\" + char
    if char != "\n" and visible(char) == char:
        return char
    return "".join(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogateescape"))


_SETSID_EXEC = "import os, sys; os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])"

_STOP = """stop_server() {
  [ -n "$PID" ] || return 0
  kill -TERM -- "-$PID" 2>/dev/null || return 0
  for _ in $(seq 1 GRACE_TENTHS); do
    kill -0 -- "-$PID" 2>/dev/null || return 0
    sleep 0.1
  done
  echo "repro: the server outlived SIGTERM: SIGKILL to its process group" >&2
  kill -KILL -- "-$PID" 2>/dev/null
  return 0
}
trap stop_server EXIT
trap 'exit 2' INT TERM"""

_WAIT = """echo "repro: waiting for /health_generate (up to $READY_TIMEOUT s)"
READY=0; FAILED_PROBE=; STARTED=$SECONDS
while kill -0 "$PID" 2>/dev/null; do
  CODE=$(printf '%s\n' "${CURL_AUTH:-}" | "$CURL" -K - -s -o /dev/null -w '%{http_code}' --noproxy '*' --max-time 0.7 \
    "$BASE/health_generate")
  if [ "$CODE" = 200 ]; then READY=1; break; fi
  [ $((SECONDS - STARTED)) -lt "$READY_TIMEOUT" ] || break
  sleep 0.25
done
if [ "$READY" = 1 ]; then
  echo "repro: ready after $((SECONDS - STARTED)) s"
elif kill -0 "$PID" 2>/dev/null; then
  echo "repro: NOT READY within $READY_TIMEOUT s (the process is still running)"
else
  echo "repro: NOT READY: the server process exited after $((SECONDS - STARTED)) s"
fi"""

_REPORT = """DIED=0
sleep 1  # a crash caused by the answers can land just after them
if kill -0 "$PID" 2>/dev/null; then
  echo "repro: the server process $PID is alive"
else
  DIED=1; wait "$PID" 2>/dev/null; echo "repro: the server process $PID DIED (exit status $?)"
fi
echo "--- last TAIL_LINES lines of $LOG ---"
tail -n TAIL_LINES "$LOG" | "$PY3" -c SHOW_PY
echo "--- first lines of the log matching error patterns ---"
"""

_RESULT = """if [ "$READY" != 1 ]; then OBSERVED=not_ready; WHAT="not ready"
elif [ -n "$FAILED_PROBE" ]; then OBSERVED=probe; WHAT="probe $FAILED_PROBE failed"
elif [ "$DIED" = 1 ]; then OBSERVED=died; WHAT="the server died after its answers"
else OBSERVED=pass; WHAT="ready, and every probe sent passed"
fi
if [ "$DIED" = 1 ] && [ "$OBSERVED" != died ]; then WHAT="$WHAT; the server died"; fi
if [ "$OBSERVED" = pass ]; then echo "repro: no failure: $WHAT"; exit 0; fi
if [ "$OBSERVED" = "$EXPECT" ] && [ "$FAILED_PROBE" = "$EXPECT_PROBE" ]; then
  echo "repro: the failure REPRODUCED: $WHAT"; exit 1
fi
echo "repro: it failed ($WHAT), but not where the original run failed ($EXPECT $EXPECT_PROBE)"
exit 3"""
