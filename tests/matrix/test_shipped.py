"""The grammars that ship with the tool: every pinned release, newest first by release order (not text order)."""

from __future__ import annotations

from orchestrator.matrix.gen_grammars import VERSIONS
from orchestrator.matrix.shipped import shipped_grammar, shipped_versions, version_key


def test_releases_sort_as_they_came_out() -> None:
    assert sorted(["0.5.9", "0.5.23", "0.4.10", "0.5.10"], key=version_key) == ["0.4.10", "0.5.9", "0.5.10", "0.5.23"]


def test_every_pinned_release_ships_and_the_newest_comes_first() -> None:
    versions = shipped_versions()
    assert sorted(versions) == sorted(VERSIONS)
    assert versions[0] == max(VERSIONS, key=version_key)
    for version in versions:
        grammar = shipped_grammar(version)
        assert grammar.version == version and grammar.lookup("--tp-size") is not None
