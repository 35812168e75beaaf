"""A launch re-attached by `--resume` gets its secrets as a new launch does: read by `launch_env`, handed to the
launcher, which takes the API key from the `--api-key` secret (`api_key_of`) and masks every secret's value."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config.load import load_hosts
from orchestrator.host.launcher import api_key_of
from orchestrator.host.session import HostSession
from orchestrator.secret import SecretRef
from orchestrator.sweep.cell_run import launch_env
from orchestrator.sweep.recover import api_key_words, recover_launch, recover_spec
from tests import simhost
from tests.store.test_records import make_cell, make_run

KEY, TOKEN = "sk-REATTACH-9fQ2", "hf_TOKEN-Zr81"


def test_a_reattached_launch_has_the_key_and_masks_the_secrets_a_new_launch_of_its_cell_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCH_TEST_API_KEY", KEY)
    monkeypatch.setenv("ORCH_TEST_HF_TOKEN", TOKEN)
    hosts = simhost.write_hosts(
        tmp_path / "hosts.yaml", tmp_path / "work", env={"HF_TOKEN": {"secret": "ORCH_TEST_HF_TOKEN"}}
    )
    session = HostSession.open(load_hosts(hosts)["simhost"])
    try:
        cell = make_cell(flags={"model-path": "/m", "api-key": SecretRef("ORCH_TEST_API_KEY"), "tp-size": 1})
        run_dir = tmp_path / "work" / "runs" / "r-reattach"
        run_dir.mkdir(parents=True)
        (run_dir / "pid").write_text("4242\n")
        run = make_run(cell, run_dir=str(run_dir), state="launched", pgid=4242, port=30000)
        launch = recover_launch(session, run, cell)
        assert launch is not None and launch.pgid == 4242
        # What a new launch of this cell is given (build_spec asks launch_env of its whole command line).
        secrets = launch_env(session.config, None, cell.install, ["--api-key", SecretRef("ORCH_TEST_API_KEY")])[1]
        assert launch.api_key == KEY == api_key_of(recover_spec(run, api_key_words(cell)), secrets)
        assert set(launch.secret_values) == {KEY, TOKEN} == set(secrets.values())
        # Without its cell (a stop after an interrupt), it is found, with no secret to use.
        bare = recover_launch(session, run)
        assert bare is not None and (bare.api_key, bare.secret_values) == (None, ())
    finally:
        session.close()
