"""One decision of what is secret (orchestrator/secret.py), used by config, transport, harvest and the store."""

from __future__ import annotations

import json

import pytest

from orchestrator.config import model as config_model
from orchestrator.harvest.evidence import EvidenceBuilder
from orchestrator.secret import MASK, Masker, SecretRef, is_secret_name, parse_ref, scrub, scrub_text
from orchestrator.store import secrets as store_secrets
from orchestrator.transport import shell


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True), ("SSH_KEY", True), ("api-key", True), ("admin_api_key", True), ("MY_APIKEY", True),
        ("AWS_SECRET_ACCESS_KEY", True), ("SECRET_KEY_BASE", True), ("DB_PASSWD", True), ("PASSWORD", True),
        ("GOOGLE_APPLICATION_CREDENTIALS", True),
        ("MAX_TOKENS", False), ("max_new_tokens", False), ("TOKENIZERS_PARALLELISM", False),
        ("skip-tokenizer-init", False), ("KEYBOARD", False), ("MONKEY", False), ("PATH", False),
        # a count of tokens or a tokenizer's entry is text, not a credential; a token that opens something is
        ("new-token", False), ("#cached-token", False), ("pending_token", False), ("eos_token", False),
        ("access_token", True), ("refresh-token", True), ("auth_token", True), ("SECRET_NEW_TOKEN", True),
    ],
)  # fmt: skip
def test_one_rule_for_names_everywhere(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret
    # The other layers ask the same function instead of keeping rules of their own.
    assert config_model.looks_secret(name) is secret
    assert shell.looks_secret(name) is secret
    assert store_secrets.is_secret_name(name) is secret


def test_one_mask() -> None:
    assert shell.MASK is store_secrets.MASK is MASK


def test_a_reference_is_its_text_and_reads_back() -> None:
    ref = SecretRef("ORCH_API_KEY", "sk-held")
    assert str(ref) == "{secret: ORCH_API_KEY}" and "sk-held" not in repr(ref)
    assert json.dumps({"api-key": ref}) == '{"api-key": "{secret: ORCH_API_KEY}"}'
    assert parse_ref(json.loads(json.dumps(ref))) == ref and parse_ref({"secret": "X"}) == SecretRef("X")
    assert parse_ref("{secret:X}") == SecretRef("X") and parse_ref({"secret": "not a name"}) is None
    assert ref.resolve({"ORCH_API_KEY": "env"}) == "sk-held" and SecretRef("A").resolve({"A": "env"}) == "env"
    # The store keeps a reference as it is (it names a variable) and masks a value under the same name.
    assert scrub({"api-key": ref, "hf_token": "x"}) == {"api-key": "{secret: ORCH_API_KEY}", "hf_token": MASK}
    assert scrub_text("api-key: {secret: ORCH_API_KEY}") == "api-key: {secret: ORCH_API_KEY}"


def test_the_masker_hides_known_values_anywhere_and_secret_assignments() -> None:
    masker = Masker(["sk-live-123456", "ab"])
    assert masker.text("echo sk-live-123456 and ab") == "echo *** and ab"  # too short to search for: kept
    assert (
        masker.text("ServerArgs(api_key='zzz', admin_api_key=None)") == "ServerArgs(api_key='***', admin_api_key=None)"
    )
    assert masker.line(b"x SSH_KEY=abc sk-live-123456") == b"x SSH_KEY=*** ***"


def test_serving_counters_stay_verbatim_and_credentials_beside_them_do_not() -> None:
    line = (
        "[2026-05-28 03:00:06 TP0] Prefill batch, #new-seq: 1, #new-token: 896, #cached-token: 0, "
        "#pending-token: 55747, token usage: 0.01, #running-req: 47"
    )
    assert scrub_text(line) == line
    assert Masker().line(line.encode()) == line.encode() and Masker().text(line) == line
    assert scrub_text("eos_token: </s> access_token: abc123 HF_TOKEN=hf_x") == (
        "eos_token: </s> access_token: *** HF_TOKEN=***"
    )


def test_harvest_masks_server_args_before_anything_is_kept() -> None:
    builder = EvidenceBuilder(Masker(["sk-live-123456"]))
    builder.feed(
        b"[2026-01-01 00:00:00] server_args=ServerArgs(model_path='/m', api_key='sk-live-123456', tp_size=1)\n"
    )
    builder.feed(b"[2026-01-01 00:00:01] ERROR: request with sk-live-123456 failed\n")
    evidence = json.dumps(builder.finish().to_dict())
    assert "sk-live-123456" not in evidence and "api_key" in evidence
