"""A hostile or flaky site, over real HTTP on loopback: every attack is refused before any request
leaves for where it should not, with a message naming the dataset, the page and the link; every
flaky answer is retried or refused by name; nothing partial lands in Bronze.

A second loopback server on another port plays "elsewhere" (another service on the same host, a
metadata endpoint with credentials): it records every request it receives, and must receive none.
"""

from __future__ import annotations

import io
import logging
import zipfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from placsp_provider.bronze.extract import ExtractRequest, extract_interval
from placsp_provider.bronze.manifest import Manifest
from placsp_provider.datasets import DATASETS
from placsp_provider.demo.loopback_site import LoopbackSite, Reply
from placsp_provider.errors import ConfigError, FeedError, PageTooLargeError, UntrustedUrlError
from placsp_provider.feed.client import ClientConfig, FeedClient
from placsp_provider.feed.url_policy import UrlPolicy
from placsp_provider.lake import manifest_path
from tests.pages import day, page

pytestmark = pytest.mark.http

AGR = DATASETS["agregadas"]
FOLDER = f"/sindicacion/{AGR.folder}/"
HEAD = FOLDER + AGR.head_file
START = datetime(2022, 1, 5, tzinfo=UTC)


@pytest.fixture
def elsewhere():
    """Another server on 127.0.0.1 (another port): what a hostile link points to."""
    with LoopbackSite() as other:
        other.routes["/latest/meta-data/credentials"] = Reply(
            b'{"AccessKeyId": "AKIA-SECRET", "SecretAccessKey": "s3cr3t"}', content_type="application/json"
        )
        other.routes["/p2.atom"] = page([(9, day(5))])
        yield other


def _client(site: LoopbackSite, **overrides) -> FeedClient:
    config = {"base_url": site.base_url, "backoff_base": 0.0, "max_retries": 1, "read_timeout": 5.0}
    config.update(overrides)
    return FeedClient(ClientConfig(**config), "agregadas")


def _extract(site: LoopbackSite, lake: Path, *, client: FeedClient | None = None, **kw) -> Manifest:
    # Chains here end inside the window, so the extraction (rightly) asks the 2022 archive for the
    # rest: an empty one unless the test serves its own.
    site.routes.setdefault(FOLDER + "PlataformasAgregadasSinMenores_2022.zip", _archive({}))
    req = ExtractRequest(
        dataset=AGR,
        start=START,
        end=START + timedelta(days=1),
        lake=lake,
        run_id="test",
        overlap=timedelta(0),
        today=date(2026, 11, 29),
        **kw,
    )
    with client or _client(site) as c:
        return extract_interval(c, req)


def _pages(lake: Path) -> list[Path]:
    folder = lake / "bronze" / "agregadas" / "pages"
    return sorted(folder.iterdir()) if folder.exists() else []


def _head_linking_to(site: LoopbackSite, href: str) -> None:
    site.routes[HEAD] = page([(1, day(5, 20))], next_href=href)


def _no_leftovers(lake: Path) -> None:
    incoming = lake / "bronze" / "agregadas" / "_incoming"
    assert not incoming.exists() or not any(incoming.rglob("*")), "a temp file was left behind"


# -- one rule for every URL ---------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/p2.atom", "/latest/meta-data/credentials"])
def test_next_link_to_another_port_is_refused_and_never_fetched(lake, site, elsewhere, path) -> None:
    link = elsewhere.url(path)
    _head_linking_to(site, link)
    client = _client(site, auth=("placsp-user", "placsp-password"))
    with pytest.raises(UntrustedUrlError) as caught:
        _extract(site, lake, client=client)
    message = str(caught.value)
    assert message.startswith(f'dataset agregadas: {site.url(HEAD)}: its rel="next" link {link} is refused: ')
    assert f"port {link.split(':')[2].split('/')[0]} differs from the configured site's" in message
    assert elsewhere.requests == []  # not one request, so no credentials and nothing landed from it
    # The head page itself was within the rules: it was fetched with the credentials, and landed.
    assert site.requests[0][1]["Authorization"].startswith("Basic ")
    manifest = Manifest.load(manifest_path(lake, "agregadas", START, START + timedelta(days=1)))
    assert not manifest.complete and manifest.stop_reason.startswith("interrupted: dataset agregadas")
    assert [p.file for p in manifest.pages] == [str(f.relative_to(lake)) for f in _pages(lake)]
    assert all(b"s3cr3t" not in f.read_bytes() for f in _pages(lake))
    _no_leftovers(lake)


@pytest.mark.parametrize(
    ("href", "why"),
    [
        ("file:///etc/passwd", "scheme 'file' is never fetched (only http)"),
        ("ftp://127.0.0.1/feed.atom", "scheme 'ftp' is never fetched (only http)"),
        ("https://127.0.0.1/feed.atom", "its scheme https differs from the configured site's (http)"),
        ("http://evil.example/feed.atom", "host evil.example:80 is neither the configured site"),
        ("http://:80/x", "it is not an absolute URL with a host and a valid port"),
    ],
)
def test_other_schemes_and_hosts_are_refused_by_name(lake, site, href, why) -> None:
    _head_linking_to(site, href)
    with pytest.raises(UntrustedUrlError, match="refused: " + why.replace("(", r"\(").replace(")", r"\)")):
        _extract(site, lake)
    assert list(site.hits) == [HEAD]


def test_an_https_site_never_follows_a_link_to_plain_http() -> None:
    policy = UrlPolicy.for_base("https://contrataciondelsectorpublico.gob.es/sindicacion")
    assert policy.refusal("https://contrataciondelestado.es/sindicacion/x.atom") is None  # the old host
    assert policy.refusal("http://contrataciondelsectorpublico.gob.es/sindicacion/x.atom") == (
        "its scheme http differs from the configured site's (https)"
    )
    assert "port 8443 differs" in (policy.refusal("https://contrataciondelsectorpublico.gob.es:8443/x") or "")
    assert policy.may_send_credentials("https://contrataciondelsectorpublico.gob.es/sindicacion/p.atom")
    assert not policy.may_send_credentials("https://contrataciondelestado.es/sindicacion/p.atom")


def test_redirect_to_another_port_of_the_same_host_is_refused(lake, site, elsewhere) -> None:
    site.routes[HEAD] = Reply(b"", status=302, headers={"Location": elsewhere.url("/p2.atom")})
    with pytest.raises(UntrustedUrlError, match=r"redirected \(302\) to http://127\.0\.0\.1:\d+/p2\.atom, refused"):
        _extract(site, lake)
    assert elsewhere.requests == []


def test_an_allowed_host_is_fetched_without_the_credentials(lake, site, elsewhere) -> None:
    host_port = elsewhere.url("").split("://")[1]
    _head_linking_to(site, elsewhere.url("/p2.atom"))
    elsewhere.routes["/p2.atom"] = page([(9, day(5))])
    client = _client(site, auth=("user", "password"), allowed_hosts=(host_port,))
    manifest = _extract(site, lake, client=client)
    assert manifest.entries == 2
    assert "Authorization" in site.requests[0][1]
    assert [path for path, _ in elsewhere.requests] == ["/p2.atom"]
    assert "Authorization" not in elsewhere.requests[0][1]


def test_base_url_secrets_never_reach_the_manifest(lake, site) -> None:
    site.routes[HEAD] = page([(1, day(5))])  # the chain ends inside the window: the rest from the archive
    base = site.base_url.replace("http://", "http://user:hunter2@")
    config = ClientConfig(base_url=base, backoff_base=0.0, max_retries=0)
    manifest = _extract(site, lake, client=FeedClient(config, "agregadas"))
    text = manifest_path(lake, "agregadas", START, START + timedelta(days=1)).read_text()
    assert manifest.archives and "hunter2" not in text and "user" not in text
    assert site.requests[0][1]["Authorization"].startswith("Basic ")  # the site itself did get them


def test_a_base_url_with_a_query_string_is_refused_without_echoing_it() -> None:
    with pytest.raises(ConfigError) as caught:
        ClientConfig(base_url="https://u:pw@contrataciondelsectorpublico.gob.es/sindicacion?token=s3cr3t")
    assert "must not carry a query string" in str(caught.value)
    assert "s3cr3t" not in str(caught.value) and "pw" not in str(caught.value)


def test_tls_verification_off_warns_once(caplog, site) -> None:
    with caplog.at_level(logging.WARNING):
        FeedClient(ClientConfig(base_url=site.base_url, verify=False), "agregadas").close()
    warnings = [r.getMessage() for r in caplog.records if "TLS certificate verification is OFF" in r.getMessage()]
    assert len(warnings) == 1 and "dataset agregadas" in warnings[0]


# -- compressed and odd responses ---------------------------------------------------------------
@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
@pytest.mark.parametrize("send_length", [True, False])
def test_compressed_responses_land_the_page_bytes(tmp_path, site, encoding, send_length) -> None:
    body = page([(1, day(5)), (2, day(5))])
    site.routes["/p.atom"] = Reply(body, encoding=encoding, send_length=send_length)
    with _client(site, max_retries=0) as client:
        got = client.download(site.url("/p.atom"), tmp_path / "p.atom")
    assert got.path.read_bytes() == body and got.bytes == len(body)
    assert "gzip" in site.requests[0][1]["Accept-Encoding"]


def test_a_compressed_page_is_capped_at_its_decompressed_size(tmp_path, site) -> None:
    body = page([(1, day(5))]) + b"<!--" + b" " * 3_000_000 + b"-->"
    site.routes["/bomb.atom"] = Reply(body, encoding="gzip")
    with _client(site, max_retries=0, max_page_bytes=1_000_000) as client, pytest.raises(PageTooLargeError) as caught:
        client.download(site.url("/bomb.atom"), tmp_path / "p.atom")
    assert "exceeded the limit of 1,000,000 bytes once decompressed while streaming; not landed" in str(caught.value)
    assert not (tmp_path / "p.atom").exists()


@pytest.mark.parametrize("header", ["Retry-After", "Content-Length"])
def test_unicode_digits_in_headers_are_not_numbers(tmp_path, site, header) -> None:
    body = page([(1, day(5))])
    calls = []

    def flaky(_handler) -> Reply:
        calls.append(1)
        if header == "Retry-After" and len(calls) == 1:
            return Reply(b"busy", status=503, headers={"Retry-After": "²"})
        return Reply(body, headers={"Content-Length": "²"} if header == "Content-Length" else None)

    site.routes["/p.atom"] = flaky
    with _client(site) as client:
        got = client.download(site.url("/p.atom"), tmp_path / "p.atom")
    assert got.path.read_bytes() == body


def test_a_trickling_server_hits_the_download_deadline(tmp_path, site) -> None:
    site.routes["/slow.atom"] = Reply(page([(1, day(5))]), trickle=0.02)  # ~5,000 bytes: 100 s
    with _client(site, max_retries=0, page_deadline=1.0) as client, pytest.raises(FeedError) as caught:
        client.download(site.url("/slow.atom"), tmp_path / "p.atom")
    assert "download exceeded its deadline of 1 s (gave up after 1 attempts)" in str(caught.value)
    assert not (tmp_path / "p.atom").exists()


@pytest.mark.parametrize(
    "prefix", [b"\xef\xbb\xbf", b"\n\n  ", b"<!-- maintenance -->\n", b'<?xml version="1.0"?>\n<!-- x -->']
)
def test_html_after_a_bom_comment_or_whitespace_is_refused_not_landed(lake, site, prefix) -> None:
    html = prefix + b"<!DOCTYPE html><html><head><title>Mantenimiento</title></head><body/></html>"
    site.routes[HEAD] = Reply(html, content_type="application/atom+xml")  # a lying Content-Type
    with pytest.raises(FeedError, match=r"served an HTML page instead of an Atom feed \(title: 'Mantenimiento'"):
        _extract(site, lake)
    assert site.hits[HEAD] == 2  # retried once (max_retries=1), then refused
    assert _pages(lake) == []


def test_a_page_cut_without_content_length_is_downloaded_again(lake, site) -> None:
    body = page([(1, day(5, 20)), (2, day(5, 10))])
    calls = []

    def cut_once(_handler) -> Reply:
        calls.append(1)
        return Reply(body, send_length=False, cut_at=len(body) // 2 if len(calls) == 1 else None)

    site.routes[HEAD] = cut_once
    manifest = _extract(site, lake)
    assert len(calls) == 2
    assert [(p.well_formed, p.entries) for p in manifest.pages] == [(True, 2)]
    assert [f.read_bytes() for f in _pages(lake)] == [body]


def test_a_page_that_always_ends_early_is_landed_for_quarantine_after_the_retries(lake, site) -> None:
    body = page([(1, day(5, 20)), (2, day(5, 10))])
    site.routes[HEAD] = Reply(body, send_length=False, cut_at=len(body) - 200)
    manifest = _extract(site, lake)
    assert site.hits[HEAD] == 3  # 1 + max_truncated_retries (2)
    assert [p.well_formed for p in manifest.pages] == [False]


def test_an_over_long_url_segment_lands_under_a_short_safe_name(lake, site) -> None:
    name = "PlataformasAgregadasSinMenores_" + "x" * 300 + ".atom"
    site.routes[HEAD] = page([(1, day(5, 20))], next_href=name)
    site.routes[FOLDER + name] = page([(2, day(5, 10))])
    manifest = _extract(site, lake)
    assert manifest.entries == 2
    assert all(len(f.name) < 160 for f in _pages(lake))
    assert any(p.url.endswith(name) for p in manifest.pages)  # the manifest keeps the real URL


# -- a walk that does not trust order ------------------------------------------------------------
def test_a_backdated_page_at_the_head_does_not_hide_the_next_page(lake, site) -> None:
    second = "PlataformasAgregadasSinMenores_20220105_230000.atom"
    site.routes[HEAD] = page([(1, "2021-06-01T10:00:00.000+00:00")], next_href=second)  # backdated
    site.routes[FOLDER + second] = page([(2, day(5, 20)), (3, day(5, 8))], next_href="p3.atom")
    site.routes[FOLDER + "p3.atom"] = page([(4, day(3))], next_href="p4.atom")
    site.routes[FOLDER + "p4.atom"] = page([(5, day(2))], next_href="p5.atom")
    manifest = _extract(site, lake)
    # The backdated page is landed too: newer pages follow it, so it was out of order, and new.
    assert sorted(p.url.rsplit("/", 1)[-1] for p in manifest.pages) == sorted([AGR.head_file, second])
    assert manifest.entries == 3
    assert FOLDER + "p5.atom" not in site.hits
    assert manifest.stop_reason.startswith("2 consecutive pages entirely older than the window start")


# -- archives -------------------------------------------------------------------------------------
def _archive(members: dict[str, bytes], *, encrypt: set[str] = frozenset()) -> bytes:  # type: ignore[assignment]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    raw = bytearray(buf.getvalue())
    # zipfile cannot write encrypted members: set the "encrypted" flag bit on the member's local and
    # central headers, which is what a reader sees first of an encrypted member.
    for name in encrypt:
        encoded = name.encode()
        for signature, flag_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
            at = raw.find(signature)
            while at >= 0:
                name_at = at + (30 if signature == b"PK\x03\x04" else 46)
                if raw[name_at : name_at + len(encoded)] == encoded:
                    raw[at + flag_at] |= 0x1
                at = raw.find(signature, at + 4)
    return bytes(raw)


def _backfill(site: LoopbackSite, lake: Path, members: dict[str, bytes], **kw) -> Manifest:
    site.routes[FOLDER + "PlataformasAgregadasSinMenores_2022.zip"] = Reply(
        _archive(members, **kw), content_type="application/zip"
    )
    return _extract(site, lake, source="archives")


def test_a_zip_bomb_member_is_refused_by_its_ratio(lake, site) -> None:
    bomb = page([(1, day(5))]) + b"<!--" + b" " * 20_000_000 + b"-->"  # ~20 MB that deflates ~1000:1
    with pytest.raises(PageTooLargeError) as caught:
        _backfill(site, lake, {"PlataformasAgregadasSinMenores_20220105_120000.atom": bomb})
    assert "archive member inflates more than 200:1" in str(caught.value)
    assert str(caught.value).startswith("dataset agregadas: http://127.0.0.1:")
    assert _pages(lake) == []
    _no_leftovers(lake)


def test_an_archive_is_capped_on_its_total_inflated_size(lake, site) -> None:
    members = {f"PlataformasAgregadasSinMenores_20220105_0{h}0000.atom": page([(h, day(5, h))]) for h in range(1, 5)}
    one = len(next(iter(members.values())))
    site.routes[FOLDER + "PlataformasAgregadasSinMenores_2022.zip"] = _archive(members)
    client = _client(site, max_archive_inflated_bytes=int(one * 2.5))
    with pytest.raises(PageTooLargeError, match="the archive inflates past max_archive_inflated_bytes"):
        _extract(site, lake, client=client, source="archives")
    assert len(_pages(lake)) == 2  # the first two members, listed in the manifest of the failed run
    manifest = Manifest.load(manifest_path(lake, "agregadas", START, START + timedelta(days=1)))
    assert len(manifest.pages) == 2 and not manifest.complete
    _no_leftovers(lake)


def test_an_encrypted_member_is_a_named_error(lake, site) -> None:
    name = "PlataformasAgregadasSinMenores_20220105_120000.atom"
    with pytest.raises(FeedError, match=f"#{name}: archive member is encrypted; it cannot be read, not landed"):
        _backfill(site, lake, {name: page([(1, day(5))])}, encrypt={name})
    assert _pages(lake) == []


def test_a_member_with_an_impossible_date_is_decided_on_its_content(lake, site) -> None:
    manifest = _backfill(site, lake, {"PlataformasAgregadasSinMenores_20221345_990000.atom": page([(1, day(5))])})
    assert manifest.entries == 1


def test_the_cli_prints_one_line_for_a_refused_link(tmp_path, site) -> None:
    import subprocess
    import sys

    _head_linking_to(site, "ftp://127.0.0.1/next.atom")
    done = subprocess.run(
        [
            *(sys.executable, "-m", "placsp_provider.cli", "extract", "--dataset", "agregadas"),
            *("--since", "2022-01-05", "--until", "2022-01-06", "--lake", str(tmp_path / "lake")),
            *("--base-url", site.base_url, "--overlap-hours", "0", "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("placsp extract: error: dataset agregadas: ")
    assert "ftp://127.0.0.1/next.atom is refused: scheme 'ftp' is never fetched" in last
    assert "Traceback" not in done.stderr


def test_a_gone_page_after_an_older_one_ends_the_walk_and_says_so(lake, site) -> None:
    site.routes[HEAD] = page([(1, day(5, 20))], next_href="older.atom")
    site.routes[FOLDER + "older.atom"] = page([(2, day(3))], next_href="rotated-away.atom")  # not served: 404
    manifest = _extract(site, lake)
    assert [p.entries for p in manifest.pages] == [1]
    assert manifest.complete and manifest.stop_reason.startswith(
        "a page entirely older than the window, then the next page is gone (dataset agregadas: "
    )
    assert "rotated-away.atom: answered HTTP 404 Not Found" in manifest.stop_reason


def test_a_gone_page_inside_the_window_still_fails(lake, site) -> None:
    site.routes[HEAD] = page([(1, day(5, 20))], next_href="rotated-away.atom")
    with pytest.raises(FeedError, match=r"rotated-away\.atom: answered HTTP 404 Not Found"):
        _extract(site, lake)


def test_a_failed_rerun_keeps_what_the_earlier_run_listed(lake, site, elsewhere) -> None:
    site.routes[HEAD] = page([(1, day(5, 20))])
    first = _extract(site, lake)
    assert first.complete and len(first.pages) == 1
    site.routes[HEAD] = page([(1, day(5, 21))], next_href=elsewhere.url("/p2.atom"))  # a new head, then an attack
    with pytest.raises(UntrustedUrlError):
        _extract(site, lake)
    again = Manifest.load(manifest_path(lake, "agregadas", START, START + timedelta(days=1)))
    assert not again.complete and {p.file for p in first.pages} < {p.file for p in again.pages}
    assert len(again.pages) == 2
