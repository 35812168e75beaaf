"""What changed in a host's installs since a sweep recorded them (for a resume, which must not mix two SGLang
builds under one label): versions, builds and commits per install, and packages installed or removed."""

from __future__ import annotations

from orchestrator.planning.installs import InstallChange, install_changes

RECORDED = {
    "sglang": "0.5.9",
    "sglang-build": "aaaa0000aaaa0000",
    "sglang-commit": "29b7f22d8",
    "torch": "2.9.1",
    "sglang[after]": "0.5.23",
    "sglang-build[after]": "cccc0000cccc0000",
}


def test_the_same_installs_have_no_change() -> None:
    assert install_changes(RECORDED, dict(RECORDED)) == []


def test_a_nightly_of_the_same_version_string_is_a_change() -> None:
    now = {**RECORDED, "sglang-build": "bbbb1111bbbb1111", "sglang-commit": "0a1b2c3d4"}
    changes = install_changes(RECORDED, now)
    assert changes == [
        InstallChange("sglang-build", "aaaa0000aaaa0000", "bbbb1111bbbb1111"),
        InstallChange("sglang-commit", "29b7f22d8", "0a1b2c3d4"),
    ]
    assert str(changes[0]) == "sglang-build aaaa0000aaaa0000 -> bbbb1111bbbb1111"


def test_each_install_and_package_counts() -> None:
    now = {k: v for k, v in RECORDED.items() if k != "torch"} | {
        "sglang[after]": "0.5.24",
        "flashinfer-python": "0.5.3",
    }
    assert install_changes(RECORDED, now) == [
        InstallChange("flashinfer-python", None, "0.5.3"),
        InstallChange("sglang[after]", "0.5.23", "0.5.24"),
        InstallChange("torch", "2.9.1", None),
    ]


def test_a_sweep_recorded_before_builds_were_is_compared_by_versions() -> None:
    old = {"sglang": "0.5.9", "torch": "2.9.1"}
    assert install_changes(old, {**old, "sglang-build": "aaaa", "sglang-commit": "29b7f22d8"}) == []
    assert install_changes(old, {"sglang": "0.5.10", "torch": "2.9.1", "sglang-build": "aaaa"}) == [
        InstallChange("sglang", "0.5.9", "0.5.10")
    ]
    # A build recorded but not said now is unknown now: never taken for the same.
    assert install_changes(RECORDED, {k: v for k, v in RECORDED.items() if k != "sglang-build"}) == [
        InstallChange("sglang-build", "aaaa0000aaaa0000", None)
    ]
    assert str(install_changes({"sglang": None}, {"sglang": "0.5.9"})[0]) == "sglang unknown -> 0.5.9"
