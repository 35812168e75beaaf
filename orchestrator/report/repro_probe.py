"""The probes of a repro script: embedded verbatim in it and run by the user's python3 (stdlib only).

`python3 - BASE_URL PID TIMEOUT_S CONF_JSON FAILED_FILE PROBE...` sends the named probes in order,
as the orchestrator's own probes do (probe/decode.py), prints each request and what came back, and
stops at the first failure: its name goes to FAILED_FILE and the exit status is 1. A server launched
with `--api-key` demands it of every request: the script sets REPRO_API_KEY in this process's
environment (never an argument, which anyone on the host can read), and each request carries it.
Nothing here may import the orchestrator: the script must run where it is not installed.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

CONTROL = re.compile("\r(?=\n)|[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """Text from the server shown, not obeyed, on the user's terminal: control characters as `^[`, `\\x9b`.

    The same rule as orchestrator/textsafe.py (a test holds them equal); here because this file runs alone.
    """

    def shown(match: re.Match[str]) -> str:
        code = ord(match.group())
        if code == 0x0D and match.string[match.end() : match.end() + 1] == "\n":
            return ""  # CR LF: the CR moves nothing the LF does not
        if code < 0x20:
            return "^" + chr(code + 0x40)
        if code == 0x7F:
            return "^?"
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return CONTROL.sub(shown, text)


class Failed(Exception):
    """A probe failed; the message says how."""


class Probes:
    """The five probes against one server."""

    def __init__(self, base: str, pid: int, timeout: float, conf: dict[str, Any]):
        self.base = base
        self.pid = pid
        self.timeout = timeout
        self.conf = conf
        self.model: str | None = conf.get("model")
        self.api_key = os.environ.get("REPRO_API_KEY") or None
        # No proxies: an http_proxy answering for 127.0.0.1 is a known way to get a wrong verdict.
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> str:
        """The answer's body; Failed on an HTTP error status or no complete answer."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with self.opener.open(request, timeout=self.timeout) as response:
                return str(response.read().decode("utf-8", "replace"))
        except urllib.error.HTTPError as exc:
            raise Failed(f"{method} {path}: HTTP {exc.code}: {exc.read().decode('utf-8', 'replace')[:300]}") from exc
        except Exception as exc:  # every way of getting no answer is one finding
            raise Failed(f"{method} {path}: no complete answer ({type(exc).__name__}: {exc})") from exc

    def chat_body(self, prompt: str, max_tokens: int, stream: bool = False) -> dict[str, Any]:
        """A sampled chat request, for the served model (asked of /v1/models once)."""
        if self.model is None:
            ids = [m.get("id") for m in json.loads(self.call("GET", "/v1/models")).get("data", [])]
            if not ids:
                raise Failed("GET /v1/models lists no model")
            self.model = str(ids[0])
        return {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": self.conf["temperature"],
            "top_p": self.conf["top_p"],
            "max_tokens": max_tokens,
            "stream": stream,
        }

    def chat(self, body: dict[str, Any]) -> str:
        """The text of one non-streamed chat answer."""
        raw = self.call("POST", "/v1/chat/completions", body)
        try:
            text = json.loads(raw)["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise Failed(f"POST /v1/chat/completions: not an answer: {raw[:300]}") from exc
        if not str(text).strip():
            raise Failed("POST /v1/chat/completions: empty answer")
        return str(text)

    def greedy(self) -> str:
        """`/generate` at temperature 0; the answer must contain the known word."""
        params = {"temperature": 0, "max_new_tokens": self.conf["greedy_tokens"]}
        body = {"text": self.conf["greedy_prompt"], "sampling_params": params}
        print("  request: POST /generate " + json.dumps(body))
        text = str(json.loads(self.call("POST", "/generate", body)).get("text", ""))
        if not any(word.lower() in text.lower() for word in self.conf["expect_any"]):
            raise Failed(f"expected one of {self.conf['expect_any']} in the answer, got {text[:120]!r}")
        return text

    def sampled(self) -> str:
        """One sampled chat completion."""
        body = self.chat_body(self.conf["sampled_prompt"], self.conf["sampled_tokens"])
        print("  request: POST /v1/chat/completions " + json.dumps(body))
        return self.chat(body)

    def stream(self) -> str:
        """One sampled, streamed chat completion, read to `data: [DONE]`."""
        body = self.chat_body(self.conf["stream_prompt"], self.conf["sampled_tokens"], stream=True)
        print("  request: POST /v1/chat/completions (streamed) " + json.dumps(body))
        raw = self.call("POST", "/v1/chat/completions", body)
        events = [line[5:].strip() for line in raw.splitlines() if line.startswith("data:")]
        if "[DONE]" not in events:
            raise Failed(f"the stream ended without data: [DONE] after {len(events)} events")
        parts = [
            (choice.get("delta") or {}).get("content") or ""
            for event in events
            if event != "[DONE]"
            for choice in json.loads(event).get("choices", [])
        ]
        if not "".join(parts).strip():
            raise Failed("empty streamed answer")
        return "".join(parts)

    def concurrent(self) -> str:
        """Several sampled chat completions at once; all must answer."""
        count = int(self.conf["concurrent"])
        body = self.chat_body(self.conf["sampled_prompt"], self.conf["concurrent_tokens"])
        print(f"  request: {count} x POST /v1/chat/completions at once " + json.dumps(body))

        def one(_: int) -> str | Failed:
            try:
                return self.chat(body)
            except Failed as exc:
                return exc

        with ThreadPoolExecutor(max_workers=max(1, count)) as pool:
            answers = list(pool.map(one, range(count)))
        errors = [a for a in answers if isinstance(a, Failed)]
        if errors:
            raise Failed(f"{len(errors)} of {count} concurrent requests failed; first: {errors[0]}")
        return str(answers[0])

    def alive_after(self) -> str:
        """After a short settle, the process alive and `/health_generate` 200."""
        print(f"  request: GET /health_generate after {self.conf['settle_s']} s")
        time.sleep(float(self.conf["settle_s"]))
        try:
            os.kill(self.pid, 0)
        except OSError as exc:
            raise Failed("the server process exited after answering") from exc
        self.call("GET", "/health_generate")
        return "alive"


def main(argv: list[str]) -> int:
    """Send the named probes in order; 0 when all pass, 1 at the first failure (named in FAILED_FILE), 2 on misuse."""
    base, pid, timeout, conf, failed_file, names = argv[1], int(argv[2]), float(argv[3]), argv[4], argv[5], argv[6:]
    probes = Probes(base, pid, timeout, json.loads(conf))
    steps: dict[str, Callable[[], str]] = {
        "greedy": probes.greedy,
        "sampled": probes.sampled,
        "stream": probes.stream,
        "concurrent": probes.concurrent,
        "alive_after": probes.alive_after,
    }
    unknown = [name for name in names if name not in steps]
    if unknown:
        print(f"unknown probe(s) {unknown}; known: {list(steps)}", file=sys.stderr)
        return 2
    for name in names:
        print(f"probe {name}:", flush=True)
        started = time.monotonic()
        try:
            answer = steps[name]()
        except Failed as exc:
            print(f"  FAILED after {time.monotonic() - started:.2f} s: {visible(str(exc))}", flush=True)
            with open(failed_file, "w") as out:
                out.write(name)
            return 1
        print(f"  ok after {time.monotonic() - started:.2f} s: {answer[:120]!r}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
