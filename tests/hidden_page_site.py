"""A loopback PLACSP site whose live chain skips one page that its January 2022 archive holds.

Chain (newest first): head (Jan 6-7) -> Jan 5 -> [Jan 4 is NOT linked] -> Jan 3 -> Jan 2 -> Jan 1
-> Dec 31 (older than any January window, so the walk ends without asking the archives).
The yearly 2022 archive holds every January page, the head as its stamped copy: 6 pages of 2
entries and 1 tombstone each, 18 records in January, 3 of them on the hidden page only.
"""

from __future__ import annotations

import io
import zipfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from lxml import etree

from placsp_provider.bronze.extract import ExtractRequest, extract_interval
from placsp_provider.datasets import DATASETS
from placsp_provider.demo.loopback_site import LoopbackSite, Reply
from placsp_provider.feed.client import ClientConfig, FeedClient
from tests.pages import page

AGR = DATASETS["agregadas"]
FOLDER = f"/sindicacion/{AGR.folder}/"
HIDDEN_DAY = 4
JANUARY_DAYS = (7, 5, 4, 3, 2, 1)  # one page each, the head first


def _stamp(d: int) -> str:
    return f"PlataformasAgregadasSinMenores_202201{d:02d}_030000.atom"


def _page_of(d: int, next_href: str | None) -> bytes:
    """Two entries and a tombstone; the head page's reach back to the day before (Jan 6)."""
    n = 100 * d
    hi = f"2022-01-{d:02d}T20:00:00.000+00:00"
    lo = f"2022-01-{d - 1 if d == 7 else d:02d}T01:00:00.000+00:00"
    return page([(n + 1, hi), (n + 2, lo)], tombstones=[(n + 3, lo)], next_href=next_href, self_href=_stamp(d))


DECEMBER = "PlataformasAgregadasSinMenores_20211231_030000.atom"


def serve_hidden_page_site(site: LoopbackSite) -> dict[str, bytes]:
    """Route the chain and the archive on `site`; return the archive's members (name -> bytes)."""
    names = {d: (AGR.head_file if d == 7 else _stamp(d)) for d in JANUARY_DAYS}
    members: dict[str, bytes] = {}
    for i, d in enumerate(JANUARY_DAYS):
        # As published, each page links to the next older one; the chain served skips the hidden page.
        published_next = names[JANUARY_DAYS[i + 1]] if i + 1 < len(JANUARY_DAYS) else DECEMBER
        members[_stamp(d)] = _page_of(d, published_next)
        if d == HIDDEN_DAY:
            continue
        served_next = names[3] if d == HIDDEN_DAY + 1 else published_next
        site.routes[FOLDER + names[d]] = (
            _page_of(d, served_next) if served_next != published_next else members[_stamp(d)]
        )
    site.routes[FOLDER + DECEMBER] = page([(1, "2021-12-31T10:00:00.000+00:00")], self_href=DECEMBER)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, body in members.items():
            archive.writestr(name, body)
    site.routes[FOLDER + "PlataformasAgregadasSinMenores_2022.zip"] = Reply(
        buf.getvalue(), content_type="application/zip"
    )
    return members


def empty_archives(site: LoopbackSite, year: int = 2022) -> None:
    """Empty yearly archives for the other live datasets (a DAG checks every one)."""
    buf = io.BytesIO()
    zipfile.ZipFile(buf, "w").close()
    for ds in DATASETS.values():
        if ds.key != AGR.key and ds.has_live_feed:
            site.routes[f"/sindicacion/{ds.folder}/{ds.archive_name(year)}"] = Reply(
                buf.getvalue(), content_type="application/zip"
            )


def daily_runs(site: LoopbackSite, lake: Path, today: date = date(2026, 11, 29)) -> None:
    """One extraction per January day 1..7, as the daily DAG would run them."""
    config = ClientConfig(base_url=site.base_url, backoff_base=0.0, max_retries=0)
    for d in range(1, 8):
        start = datetime(2022, 1, d, tzinfo=UTC)
        request = ExtractRequest(AGR, start, start + timedelta(days=1), lake, f"daily-{d}", today=today)
        with FeedClient(config, "agregadas") as client:
            extract_interval(client, request)


def archive_records(members: dict[str, bytes]) -> dict[str, set[tuple[str, str]]]:
    """{"entry": {(id, updated)}, "tombstone": {(ref, when)}} of January in the archive, by plain lxml
    (not the pipeline's parser)."""
    atom, tomb = "{http://www.w3.org/2005/Atom}", "{http://purl.org/atompub/tombstones/1.0}"
    out: dict[str, set[tuple[str, str]]] = {"entry": set(), "tombstone": set()}
    for body in members.values():
        root = etree.fromstring(body)
        for e in root.findall(f"{atom}entry"):
            out["entry"].add((e.findtext(f"{atom}id") or "", e.findtext(f"{atom}updated") or ""))
        for t in root.findall(f"{tomb}deleted-entry"):
            out["tombstone"].add((t.get("ref") or "", t.get("when") or ""))
    return {kind: {r for r in records if r[1].startswith("2022-01")} for kind, records in out.items()}
