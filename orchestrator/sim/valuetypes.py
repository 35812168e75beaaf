"""The value types of SGLang's numeric flags, which `--help` does not print.

argparse converts a value with the option's `type` before anything else and fails with
`argument --tp-size: invalid int value: 'abc'`; the help text only shows a metavar (`TP_SIZE`).
These flags are declared `type=int` / `type=float` in SGLang's server_args.py and have kept that
type across the releases read (0.5.9 to 0.5.23). A flag whose type changed is left out rather
than guessed: `--context-length` takes `32k` since SGLang added SI suffixes, so it is not here.
The simulated host keeps its own copy of the tool's table (matrix/valuetypes.py): it stands for SGLang, not for us.
"""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.sim.flags import canonical_name
from orchestrator.sim.grammar import FlagSpec

INT_FLAGS = frozenset({
    "port", "tp-size", "dp-size", "pp-size", "ep-size", "base-gpu-id", "gpu-id-step", "nccl-port",
    "max-running-requests", "max-total-tokens", "max-prefill-tokens", "chunked-prefill-size",
    "cuda-graph-max-bs", "cuda-graph-max-bs-decode", "cuda-graph-bs", "cuda-graph-bs-decode",
    "cuda-graph-bs-prefill", "page-size", "random-seed", "nnodes", "node-rank",
    "speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens",
})  # fmt: skip
FLOAT_FLAGS = frozenset({"mem-fraction-static", "watchdog-timeout"})


def value_type(spec: FlagSpec) -> Callable[[str], object] | None:
    """`int` or `float` for a numeric flag (any of its spellings), else None (any text is accepted)."""
    if not spec.takes_value or spec.choices is not None:
        return None
    names = {canonical_name(n) for n in spec.names}
    if names & INT_FLAGS:
        return int
    if names & FLOAT_FLAGS:
        return float
    return None
