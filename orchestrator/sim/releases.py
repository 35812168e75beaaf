"""What differs between the SGLang releases the simulator imitates, beyond their flag grammars.

Each difference is read off the grammar itself (does it know `--dsa-decode-backend`? is its prog
`sglang serve`?), so a grammar for another release gets the matching behaviour without a version table.
Texts are the real ones, from ../shared/fixtures/sglang/0.5.23/*.txt and reference/sglang-facts.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.matrix.grammar import FlagGrammar

SITE = "/usr/local/lib/python3.12/dist-packages"
SGLANG = f"{SITE}/sglang"

_LAUNCHER_WARNING = (
    f"{SGLANG}/launch_server.py:71: UserWarning: 'python -m sglang.launch_server' is still supported, "
    "but 'sglang serve' is the recommended entrypoint.",
    "  Example: sglang serve --model-path <model> [options]",
    "  warnings.warn(",
)
_DEPRECATED_FLAGS = {
    "disable-cuda-graph": "--cuda-graph-backend-{decode,prefill}=disabled",
    "enable-dp-attention": "--attn-dp-size <dp-size>",
}
_DEPRECATED_VALUES = {"compressed": "dsv4", "tokenspeed_mla": "cutedsl_mla"}
_GRAPH_SOLUTIONS_OLD = (
    "Possible solutions:",
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)",
    "3. disable torch compile by not using --enable-torch-compile",
    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)",
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ",
)
_GRAPH_SOLUTIONS_NEW = (
    "Possible solutions:",
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
    "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)",
    "3. disable torch compile by not using --enable-torch-compile",
    "4. disable CUDA graph by --cuda-graph-backend-decode=disabled. (Not recommended. Huge performance loss)",
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ",
)


@dataclass(frozen=True)
class Release:
    """Release-specific texts and behaviour."""

    version: str
    prog: str
    dsa_era: bool
    """True once `--nsa-*` became `--dsa-*` (DIFF.md); log lines and assert names follow."""

    @property
    def launcher_warning(self) -> tuple[str, ...]:
        """The UserWarning `python -m sglang.launch_server` prints on stderr before parsing (serve era only)."""
        return _LAUNCHER_WARNING if self.prog == "sglang serve" else ()

    @property
    def sparse_word(self) -> str:
        """`NSA` or `DSA`, as the release's log lines say it."""
        return "DSA" if self.dsa_era else "NSA"

    @property
    def announces_kill(self) -> bool:
        """Newer releases log `kill_process_tree called: ...` before a fatal traceback of the main process."""
        return self.dsa_era

    def flag_deprecations(self, given: set[str]) -> list[str]:
        """Parse-time deprecation warnings (ANSI bold yellow, as 0.5.23 prints them) for the given flags."""
        if not self.dsa_era:
            return []
        return [
            f"\x1b[1;33m'--{flag}' is deprecated and will be removed in a future release. Use '{new}' instead.\x1b[0m"
            for flag, new in _DEPRECATED_FLAGS.items()
            if flag in given
        ]

    def value_deprecations(self, values: dict[str, str]) -> list[str]:
        """Resolution-time warnings for deprecated attention backend aliases (`compressed` -> `dsv4`)."""
        if not self.dsa_era:
            return []
        return [
            f"--{flag}={value} is deprecated; use '{_DEPRECATED_VALUES[value]}' instead."
            for flag, value in values.items()
            if flag.endswith("attention-backend") and value in _DEPRECATED_VALUES
        ]


def graph_solutions(dsa_era: bool) -> tuple[str, ...]:
    """The `Possible solutions:` block after `Capture cuda graph failed`, naming the era's flags."""
    return _GRAPH_SOLUTIONS_NEW if dsa_era else _GRAPH_SOLUTIONS_OLD


def release_of(grammar: FlagGrammar) -> Release:
    """The release behaviour that goes with a flag grammar."""
    return Release(grammar.version, grammar.prog, grammar.lookup("--dsa-decode-backend") is not None)
