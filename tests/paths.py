"""Where the tests find the repository and the shared real-world fixtures."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "tests" / "cases"
FIXTURES = REPO.parent / "shared" / "fixtures"
CRASH_LOGS = FIXTURES / "crash-logs"
SGLANG_CAPTURES = FIXTURES / "sglang"


def require_fixtures() -> None:
    """Skip the calling test module, saying why, when the shared real-world fixtures are not beside the checkout.

    Every test that reads ../shared/fixtures goes through the names above and calls this first, so a clone
    without the workspace's shared/ folder reports those tests skipped with the reason, never as errors.
    """
    if not FIXTURES.is_dir():
        import pytest

        pytest.skip(
            f"needs the shared real-world fixtures at {FIXTURES} (the workspace's shared/ folder beside this "
            "checkout), which is absent here",
            allow_module_level=True,
        )
