"""TLS for the inspect API: users' bearer tokens must not cross the cluster network in clear.

The manager API server's service proxy reaches the controller Pod over the Pod network and,
for an ``https:`` service name, speaks TLS to it without checking the serving certificate
(it authenticated the user; the Pod is selected by the Service). So what matters here is
that the hop is encrypted, and a certificate generated at start is enough. An operator who
wants a verifiable certificate (e.g. for ``--inspect-url`` without a port-forward) mounts one
and names it in ``inspectTLS``.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import tempfile
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

SELF_SIGNED_DAYS = 365
#: Names of the shipped Service (deploy/manager/service.yaml) for a generated certificate.
INSPECT_SERVICE_HOSTS = ("jobmirror-inspect.jobmirror-system.svc", "jobmirror-inspect.jobmirror-system")


def self_signed(common_name: str, hosts: Sequence[str], *,
                now: datetime.datetime | None = None) -> tuple[bytes, bytes]:
    """A P-256 key and a self-signed serving certificate for ``hosts`` (DNS names or IPs), PEM."""
    now = now or datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    cert = (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=SELF_SIGNED_DAYS))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def server_context(cert_file: Path | None = None, key_file: Path | None = None, *,
                   service_hosts: Sequence[str] = ()) -> ssl.SSLContext:
    """A TLS 1.2+ server context from the given files, or from a certificate made now.

    A generated key lives only in a 0700 temporary directory for the instant ``ssl`` needs a
    path to load it (the controller's root filesystem is read-only; /tmp is an emptyDir).
    """
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_file is not None and key_file is not None:
        ctx.load_cert_chain(cert_file, key_file)
        return ctx
    hosts = [*service_hosts, "localhost", "127.0.0.1"]
    cert_pem, key_pem = self_signed(service_hosts[0] if service_hosts else "jobmirror-inspect", hosts)
    with tempfile.TemporaryDirectory(prefix="jobmirror-tls-") as d:
        cert_path, key_path = Path(d) / "tls.crt", Path(d) / "tls.key"
        cert_path.write_bytes(cert_pem)
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key_pem)
        ctx.load_cert_chain(cert_path, key_path)
    return ctx
