"""Show, or with --regen write, the expected files of the cases kept as data (tests/cases/matrix, launch).

The tests only compare; this writes what today's code produces, so that a person reads the diff
before committing it: an expected file is a claim about what is right, not a record of what is.

  scripts/regen_cases            # print the difference from the committed files; exit 1 if any
  scripts/regen_cases --regen    # write them
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.case_files import (
    LAUNCH_CASES,
    MATRIX_CASES,
    case_environ,
    diff,
    launch_case,
    matrix_expansion,
    render,
)


def wanted() -> dict[Path, str]:
    """Every expected file, as today's code writes it."""
    files = {path.with_suffix(".json"): render(matrix_expansion(path)) for path in sorted(MATRIX_CASES.glob("*.yaml"))}
    for case in sorted(p for p in LAUNCH_CASES.iterdir() if p.is_dir()):
        saved = dict(os.environ)
        os.environ.update(case_environ(case))
        try:
            with tempfile.TemporaryDirectory(prefix="launch-case-") as workdir:
                rendering = launch_case(case, Path(workdir))
        finally:
            os.environ.clear()
            os.environ.update(saved)
        if rendering.leaks:
            raise SystemExit(f"{case.name}: a secret leaked: {'; '.join(rendering.leaks)}")
        files |= {case / name: text for name, text in rendering.files.items()}
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regen", action="store_true", help="write the expected files (read the diff first)")
    args = parser.parse_args()
    changed = 0
    for path, text in wanted().items():
        old = path.read_text() if path.exists() else ""
        if old == text:
            continue
        changed += 1
        print(diff(old, text, str(path.relative_to(MATRIX_CASES.parents[1]))), end="")
        if args.regen:
            path.write_text(text)
    print(f"{changed} expected file(s) {'written' if args.regen else 'differ'}", file=sys.stderr)
    return 0 if args.regen or not changed else 1


if __name__ == "__main__":
    sys.exit(main())
