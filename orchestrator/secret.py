"""What is secret, decided once: secret names, secret references, and masking of text and values.

Every layer asks this module: config (which env entries and flags are secret), the launch (which
argv words are references), harvest (the server's own log lines, `api_key='...'` in `server_args`),
and the store (its last line of defence). A value is never a secret because of how it looks, only
because of its name (`HF_TOKEN`, `--api-key`), because it was given as `{secret: VAR}`, or because
it is the value of one of those for the launch at hand (then it is masked wherever it appears).

Names: split at `_` and `-`; a name is secret when its last part is token, secret, password,
passwd, passphrase, credential(s), key or apikey, or any part is `secret`. So `HF_TOKEN`,
`OPENAI_API_KEY`, `SSH_KEY`, `api-key`, `AWS_SECRET_ACCESS_KEY` are; `MAX_TOKENS`,
`max_new_tokens`, `skip-tokenizer-init`, `TOKENIZERS_PARALLELISM` are not. A `token` that a word
before it makes a count or a vocabulary entry is a text token, not a credential: SGLang's
`#new-token: 896`, `#cached-token: 0`, `#pending-token: 55747` and a tokenizer's `eos_token` are not.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

log = logging.getLogger("orchestrator")

MASK = "***"
MIN_MASKED_VALUE = 4
"""Shorter secret values are not searched for in text: masking every `1` would destroy a log."""

_LAST = frozenset({"token", "secret", "password", "passwd", "passphrase", "credential", "credentials", "key", "apikey"})
_PARTS = re.compile(r"[_\-]+")
_TEXT_TOKEN = frozenset(
    {
        # how many tokens: the counters of serving logs (SGLang's `#new-token: 896`, `#cached-token: 0`)
        "new", "cached", "pending", "input", "output", "prompt", "completion", "generated", "total", "num",
        "max", "min", "prefill", "decode", "extend", "draft", "accepted", "running", "queued", "per",
        # which token: a tokenizer's vocabulary entries (`eos_token: </s>`)
        "bos", "eos", "pad", "unk", "sep", "cls", "mask", "special", "image", "video", "audio", "stop",
    }
)  # fmt: skip
"""Words that, right before a last part `token`, make it a token of text rather than a credential."""
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def is_secret_name(name: str) -> bool:
    """Whether a variable, flag or key name holds a secret by its name (`HF_TOKEN`, `api-key`)."""
    parts = [p for p in _PARTS.split(name.strip("-#").lower()) if p]
    if "secret" in parts:
        return True
    if len(parts) >= 2 and parts[-1] == "token" and parts[-2] in _TEXT_TOKEN:
        return False
    return bool(parts) and parts[-1] in _LAST


class SecretRef(str):
    """A secret by reference: the orchestrator's environment variable `name` holds its value.

    Its text is the reference, `{secret: NAME}`, so wherever a flag value is shown, stored or
    serialised the reference appears and never the value (and `parse_ref` reads it back). `value` is
    set only for a secret given in clear text (a plain `--api-key VALUE`, converted with a warning):
    held in memory for the launch, never part of the text.
    """

    name: str
    value: str | None

    def __new__(cls, name: str, value: str | None = None) -> SecretRef:
        self = super().__new__(cls, f"{{secret: {name}}}")
        self.name = name
        self.value = value
        return self

    def __getnewargs__(self) -> tuple[str, str | None]:  # type: ignore[override]
        return (self.name, self.value)

    def __repr__(self) -> str:
        return f"SecretRef({self.name!r})"

    def resolve(self, environ: Mapping[str, str]) -> str | None:
        """The value: the one held, else the variable's from `environ` (None when unset)."""
        return self.value if self.value is not None else environ.get(self.name)

    def shell_ref(self) -> str:
        """How a launch script refers to it: the variable, expanded by the shell, never the value."""
        return f'"${{{self.name}}}"'


def parse_ref(value: object) -> SecretRef | None:
    """`{secret: VAR}` (a YAML mapping) or the text `{secret:VAR}` as a SecretRef; None for anything else."""
    if isinstance(value, SecretRef):
        return value
    if isinstance(value, Mapping) and set(value) == {"secret"}:
        name = str(value["secret"])
        return SecretRef(name) if ENV_NAME.match(name) else None
    if isinstance(value, str):
        found = _REF_TEXT.fullmatch(value.strip())
        return SecretRef(found.group(1)) if found else None
    return None


_REF_TEXT = re.compile(r"\{\s*secret\s*:\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}")


def var_for_flag(flag: str) -> str:
    """The variable a clear-text secret flag is passed in (`api-key` -> `ORCH_API_KEY`)."""
    return "ORCH_" + re.sub(r"[^A-Za-z0-9]+", "_", flag.strip("-")).upper()


# Text scrubbing: the values of secret-named assignments and flags, whatever else the text is.
_WORD = (
    r"(?:token|secret|password|passwd|passphrase|credentials?|api[_-]?key|access[_-]?key|private[_-]?key|apikey"
    r"|(?<=[_-])key)"
)
_VALUE = r"(?P<value>'[^']*'|\"[^\"]*\"|[^\s,;)\]}]+)"
# `--api-key sk-1` and `--hf-token=x` on a command line: a flag, then its value.
_FLAG_ASSIGN = re.compile(rf"(?<![\w-])(?P<name>--(?:[a-z0-9]+-)*(?i:{_WORD}))(?P<sep>=|\s+){_VALUE}")
# `HF_TOKEN=x`, `api_key='x'`, `HF_TOKEN: x`, and a matrix file's `api-key: x` (flag names are dashed).
# A bare lower-case `token:` is left alone: in log lines it is prose far more often than a secret.
_NAME_ASSIGN = re.compile(
    rf"(?<![\w-])(?P<name>(?:[A-Za-z0-9]+[_-])+(?i:{_WORD})|(?i:(?:api|access|secret|private)[_-]key)|TOKEN|PASSWORD|SECRET)"
    rf"(?P<sep>['\"]?\s*[=:]\s*){_VALUE}"
)
_KEEP = {MASK, "None", "null", "''", '""'}


def _mask_match(match: re.Match[str]) -> str:
    value = match.group("value")
    # The patterns find candidates; whether the name holds a secret is is_secret_name's decision alone.
    if not is_secret_name(match.group("name")):
        return match.group(0)
    # An empty or already-masked value and a reference such as ${HF_TOKEN} or {secret: X} reveal nothing.
    if value.strip("'\"") in _KEEP or value in _KEEP or value.lstrip("'\"").startswith(("$", "{")):
        return match.group(0)
    quote = value[0] if value[0] in "'\"" and len(value) > 1 and value[-1] == value[0] else ""
    return f"{match.group('name')}{match.group('sep')}{quote}{MASK}{quote}"


def scrub_text(text: str) -> str:
    """The text with values of secret-named assignments and flags replaced by `***`."""
    return _NAME_ASSIGN.sub(_mask_match, _FLAG_ASSIGN.sub(_mask_match, text))


def _reveals(value: Any) -> bool:
    # A bare flag (True), an unset value or a reference under a secret name says nothing; keep it.
    if isinstance(value, SecretRef) or (isinstance(value, str) and parse_ref(value) is not None):
        return False
    return value is not None and not isinstance(value, bool) and value != ""


def scrub(value: Any) -> Any:
    """A JSON-like value with secret-named keys masked and every string scrubbed, recursively."""
    if isinstance(value, SecretRef):
        return str(value)  # `{secret: VAR}`: the variable's name, which parse_ref reads back
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, Mapping):
        if set(value) == {"secret"}:
            return dict(value)  # a reference: a variable's name, never a value
        return {k: (MASK if is_secret_name(str(k)) and _reveals(v) else scrub(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v) for v in value]
    return value


class Masker:
    """Masks the known secret values of a launch (wherever they appear) and every secret-named assignment."""

    def __init__(self, values: Iterable[str] = ()):
        # Longest first, so a secret containing another is masked whole.
        self._values = sorted({v for v in values if len(v) >= MIN_MASKED_VALUE}, key=len, reverse=True)
        self._bytes = [v.encode() for v in self._values]

    def text(self, text: str) -> str:
        """One line or document, masked."""
        for value in self._values:
            text = text.replace(value, MASK)
        return scrub_text(text) if _MAYBE_TEXT.search(text) else text

    def line(self, raw: bytes) -> bytes:
        """One raw log line, masked (decoded only when it may hold something to mask)."""
        for value in self._bytes:
            raw = raw.replace(value, MASK.encode())
        if _MAYBE.search(raw) is None:
            return raw
        return scrub_text(raw.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


_MAYBE = re.compile(rb"(?i)token|secret|passw|passphrase|credential|key")
_MAYBE_TEXT = re.compile(r"(?i)token|secret|passw|passphrase|credential|key")


def masked_names(env: Mapping[str, object], secret_names: Iterable[str] = ()) -> dict[str, str]:
    """Names -> values safe to show or store: `***` for references, named secrets and secret-looking names."""
    marked = set(secret_names)
    return {
        name: MASK if isinstance(value, SecretRef) or name in marked or is_secret_name(name) else str(value)
        for name, value in env.items()
    }


def protect(name: str, value: Any, where: str, warn: Callable[[str], None] | None = None) -> Any:
    """The value, or a SecretRef holding it when `name` is a secret flag given in clear text (with a warning)."""
    if isinstance(value, (bool, SecretRef)) or not isinstance(value, (str, int, float)) or not is_secret_name(name):
        return value
    var = var_for_flag(name)
    (warn or log.warning)(
        f"{where}: --{name.lstrip('-')} is given in clear text; it is passed as a secret (over the launch's stdin, "
        f"masked everywhere). Write `{name.lstrip('-')}: {{secret: {var}}}` (or `{{secret:{var}}}` after --) and "
        f"export {var}, so that the file holds no secret and repro and --resume can read it again."
    )
    return SecretRef(var, str(value))
