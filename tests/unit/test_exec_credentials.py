import json

import pytest

from kruntime.exec_credentials import Credential, ExecCredentialError, needs_refresh, parse_exec_credential

V1 = "client.authentication.k8s.io/v1"


def out(status: dict[str, str], api_version: str = V1, kind: str = "ExecCredential") -> bytes:
    return json.dumps({"apiVersion": api_version, "kind": kind, "status": status}).encode()


def test_a_token_and_its_expiry() -> None:
    token, expires = parse_exec_credential(out({"token": "t", "expirationTimestamp": "2026-11-25T10:00:00Z"}),
                                           api_version=V1, command="aws")
    assert token == "t" and expires == 1795600800.0
    assert parse_exec_credential(out({"token": "t"}), api_version=V1, command="aws") == ("t", None)


@pytest.mark.parametrize(("stdout", "message"), [
    (b"not json", "not JSON"),
    (out({"token": "t"}, kind="Other"), "not an ExecCredential"),
    (out({"token": "t"}, api_version="client.authentication.k8s.io/v1beta1"), "v1beta1"),
    (out({}), "no status.token"),
    (out({"clientCertificateData": "x", "clientKeyData": "y"}), "client certificate"),
    (out({"token": "t", "expirationTimestamp": "soon"}), "RFC 3339"),
])
def test_bad_plugin_output_names_the_plugin_and_the_problem(stdout: bytes, message: str) -> None:
    with pytest.raises(ExecCredentialError, match=message) as exc:
        parse_exec_credential(stdout, api_version=V1, command="my-plugin")
    assert "my-plugin" in str(exc.value)


@pytest.mark.parametrize(("cred", "now", "refresh"), [
    (None, 0.0, True),
    (Credential("t", None, 0.0), 1e9, False),  # no expiry: until a 401
    (Credential("t", 900.0, 0.0), 700.0, False),  # 15-minute token, 200 s left
    (Credential("t", 900.0, 0.0), 720.0, True),  # the last fifth
    (Credential("t", 900.0, 0.0), 1000.0, True),  # expired
    (Credential("t", 2.0, 0.0), 0.5, False),  # short-lived: at least a second of margin
    (Credential("t", 2.0, 0.0), 1.0, True),
])
def test_tokens_are_renewed_in_the_last_fifth_of_their_life(cred: Credential | None, now: float,
                                                           refresh: bool) -> None:
    assert needs_refresh(cred, now) is refresh
