"""Where the tests find the repository and the shared real-world fixtures."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "tests" / "cases"
FIXTURES = REPO.parent / "shared" / "fixtures"
CRASH_LOGS = FIXTURES / "crash-logs"
SGLANG_CAPTURES = FIXTURES / "sglang"
