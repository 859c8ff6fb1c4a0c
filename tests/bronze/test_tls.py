"""TLS verification is on by default, and a CA bundle makes a private chain work (as the FNMT
chain of the PLACSP site needs). Real HTTPS on loopback with a certificate made by openssl."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from placsp_provider.demo.loopback_site import LoopbackSite
from placsp_provider.errors import FeedError
from placsp_provider.feed.client import ClientConfig, FeedClient

pytestmark = [pytest.mark.http, pytest.mark.skipif(not shutil.which("openssl"), reason="needs the openssl CLI")]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_unknown_ca_fails_with_a_hint_about_the_bundle(certificate, tmp_path: Path) -> None:
    expected = r"dataset agregadas: https://127.0.0.1:\d+/x.atom: TLS verification failed .*FNMT.*ca_bundle"
    with (
        LoopbackSite({"/x.atom": b"<feed/>"}, tls=certificate) as site,
        FeedClient(ClientConfig(base_url=site.base_url, max_retries=0), "agregadas") as client,
        pytest.raises(FeedError, match=expected),
    ):
        client.download(site.url("/x.atom"), tmp_path / "x.atom")


def test_ca_bundle_makes_the_chain_verify(certificate, tmp_path: Path) -> None:
    body = b'<feed xmlns="http://www.w3.org/2005/Atom"/>'
    with LoopbackSite({"/x.atom": body}, tls=certificate) as site:
        config = ClientConfig(base_url=site.base_url, verify=str(certificate[0]))
        with FeedClient(config, "agregadas") as client:
            got = client.download(site.url("/x.atom"), tmp_path / "x.atom")
    assert got.path.read_bytes() == body


def test_a_missing_bundle_is_refused_before_any_network_work() -> None:
    from placsp_provider.errors import ConfigError

    with pytest.raises(ConfigError, match=r"CA bundle ./nope\.pem. does not exist"):
        ClientConfig(verify="/nope.pem")


# -- the connection's Test button ----------------------------------------------------------------
@pytest.mark.http
def test_the_hook_test_button_reaches_the_site_with_the_connection_settings(site, monkeypatch) -> None:
    import json

    from placsp_provider.datasets import live_datasets
    from placsp_provider.hooks.placsp import PlacspHook

    head = live_datasets()[0]
    site.routes[f"/sindicacion/{head.folder}/{head.head_file}"] = b"<feed/>"
    conn = {"conn_type": "placsp", "host": site.base_url, "login": "u", "password": "p", "extra": {"max_retries": 0}}
    monkeypatch.setenv("AIRFLOW_CONN_PLACSP_DEFAULT", json.dumps(conn))
    ok, message = PlacspHook().test_connection()
    assert ok and message.endswith(f"{head.head_file}: HTTP 200 OK"), message
    assert site.requests[0][1]["Authorization"].startswith("Basic ")
    del site.routes[f"/sindicacion/{head.folder}/{head.head_file}"]
    ok, message = PlacspHook().test_connection()
    assert not ok and "answered HTTP 404 Not Found" in message and "p@" not in message
