"""Regenerate sim/grammars/<version>.json from the captured `--help` of each pinned release.

The simulated host rejects exactly what these grammars reject, so they are generated from
the real captures (never edited by hand); a test checks that the committed files are current.
"""

from __future__ import annotations

import sys
from pathlib import Path

from orchestrator.matrix.helptext import parse_help

VERSIONS: tuple[str, ...] = ("0.5.9", "0.5.23")
REPO = Path(__file__).resolve().parents[2]
CAPTURES = REPO.parent / "shared" / "fixtures" / "sglang"
OUT_DIR = REPO / "orchestrator" / "sim" / "grammars"


def render(captures: Path = CAPTURES) -> dict[str, str]:
    """File name -> JSON text, for every pinned release."""
    return {
        f"{version}.json": parse_help((captures / version / "help.txt").read_text(), version).to_json()
        for version in VERSIONS
    }


def main(argv: list[str] | None = None) -> int:
    """Write the grammars (or, given `--check`, exit 1 if any committed file differs)."""
    check = "--check" in (argv if argv is not None else sys.argv[1:])
    stale = []
    for name, text in render().items():
        path = OUT_DIR / name
        if path.exists() and path.read_text() == text:
            continue
        stale.append(name)
        if not check:
            path.write_text(text)
            print(f"wrote {path.relative_to(REPO)}")
    if check and stale:
        print(f"stale: {', '.join(stale)} (run scripts/gen_grammars)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
