"""The bed's JobSet set-up, pure parts: its configuration and its webhooks served on 127.0.0.1."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from clusterbed.jobset import POD_LABEL, controller_config, webhook_registrations

SHIPPED = [
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
     "metadata": {"name": "mutating-webhook-configuration"},
     "webhooks": [
         {"name": "mjobset.kb.io", "clientConfig": {"service": {"name": "s", "namespace": "system", "path": "/m-js"}},
          "rules": [{"resources": ["jobsets"]}]},
         {"name": "mpod.kb.io", "clientConfig": {"service": {"name": "s", "namespace": "system", "path": "/m-pod"}},
          "rules": [{"resources": ["pods"]}]}]},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "webhook-service"}},
]


def test_the_controller_serves_its_webhooks_on_loopback_with_our_certificate() -> None:
    cfg = controller_config(webhook_port=9443, health_port=8081, cert_dir=Path("/c"))
    assert cfg["webhook"] == {"port": 9443, "host": "127.0.0.1", "certDir": "/c"}
    assert cfg["internalCertManagement"] == {"enable": False} and cfg["leaderElection"] == {"leaderElect": False}
    assert cfg["health"] == {"healthProbeBindAddress": "127.0.0.1:8081"}


@pytest.mark.parametrize(
    ("hook", "url", "selected"),
    [(0, "https://127.0.0.1:9443/m-js", False), (1, "https://127.0.0.1:9443/m-pod", True)],
    ids=["jobset", "pod"],
)
def test_webhooks_point_at_the_local_port(hook: int, url: str, selected: bool) -> None:
    regs = webhook_registrations(SHIPPED, port=9443, ca_pem=b"PEM")
    assert [r["metadata"]["name"] for r in regs] == ["jobset-bed-mutating-webhook-configuration"]
    got = regs[0]["webhooks"][hook]
    assert got["clientConfig"] == {"url": url, "caBundle": base64.b64encode(b"PEM").decode()}
    assert ("objectSelector" in got) is selected
    if selected:
        assert got["objectSelector"]["matchExpressions"][0]["key"] == POD_LABEL
    assert SHIPPED[0]["webhooks"][hook]["clientConfig"]["service"]  # the input is not changed
