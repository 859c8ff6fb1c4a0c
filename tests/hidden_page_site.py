"""A loopback PLACSP site whose live chain skips one page that its January 2022 archive holds.

Chain (newest first): head (Jan 6-7) -> Jan 5 -> [Jan 4 is NOT linked] -> Jan 3 -> Jan 2 -> Jan 1
-> Dec 31 (older than any January window, so the walk ends without asking the archives).
The yearly 2022 archive holds every January page, the head as its stamped copy: 6 pages of 2
entries and 1 tombstone each, 18 records in January, 3 of them on the hidden page only.
"""

from __future__ import annotations

import io
import zipfile

from placsp_provider.datasets import DATASETS
from placsp_provider.demo.loopback_site import LoopbackSite, Reply
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
