"""The inspect API's TLS: a generated certificate serves, and a token is never sent in clear."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography import x509

from mirror.config import ConfigError, load_config
from mirror.inspect import tls as inspect_tls
from mirror.inspect.plugin import UsageError, direct_url_ssl


def test_self_signed_names_the_service_and_loopback() -> None:
    cert_pem, key_pem = inspect_tls.self_signed("svc", ["svc.ns.svc", "127.0.0.1"])
    cert = x509.load_pem_x509_certificate(cert_pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["svc.ns.svc"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert b"PRIVATE KEY" in key_pem


def test_generated_context_loads_and_mounted_files_are_used(tmp_path: Path) -> None:
    ctx = inspect_tls.server_context(service_hosts=inspect_tls.INSPECT_SERVICE_HOSTS)
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    cert_pem, key_pem = inspect_tls.self_signed("x", ["x"])
    (tmp_path / "c").write_bytes(cert_pem)
    (tmp_path / "k").write_bytes(key_pem)
    inspect_tls.server_context(tmp_path / "c", tmp_path / "k")
    with pytest.raises(ssl.SSLError):  # a key that does not match the certificate
        (tmp_path / "k2").write_bytes(inspect_tls.self_signed("y", ["y"])[1])
        inspect_tls.server_context(tmp_path / "c", tmp_path / "k2")


@pytest.mark.parametrize(("url", "ca", "verified"), [
    ("https://127.0.0.1:8081", None, False),
    ("https://localhost:8081", None, False),
    ("https://[::1]:8081", None, False),
    ("https://jobmirror.example:8081", "ca.pem", True),
])
def test_direct_url_ssl(url: str, ca: str | None, verified: bool, tmp_path: Path) -> None:
    ca_path = None
    if ca:
        ca_path = tmp_path / ca
        ca_path.write_bytes(inspect_tls.self_signed("ca", ["ca"])[0])
    got = direct_url_ssl(url, ca_path)
    assert isinstance(got, ssl.SSLContext) is verified


@pytest.mark.parametrize(("url", "needle"), [
    ("http://127.0.0.1:8081", "https only"),
    ("https://10.0.0.7:8081", "--inspect-ca"),
    ("https://jobmirror.example", "--inspect-ca"),
])
def test_direct_url_refuses_clear_or_unverified(url: str, needle: str) -> None:
    with pytest.raises(UsageError, match=needle.replace(".", r"\.")):
        direct_url_ssl(url, None)


def test_config_inspect_tls_needs_both_files(tmp_path: Path) -> None:
    """Through the CLI's own loader: the key as the docs and the sample spell it, ``inspectTLS``."""
    path = tmp_path / "config.yaml"
    base = "workers: [{name: w, kubeconfig: /kc}]\ninspectAddress: ':8081'\n"
    path.write_text(base + "inspectTLS: {certFile: /c, keyFile: /k}\n")
    cfg = load_config(path)
    assert cfg.inspect_tls is not None and cfg.inspect_tls.key_file == Path("/k")
    path.write_text(base + "inspectTLS: {certFile: /c}\n")
    with pytest.raises(ConfigError, match=r"inspectTLS\.keyFile: required but missing"):
        load_config(path)
