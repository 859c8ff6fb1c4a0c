"""Small feed pages for tests, built from a REAL 1044 entry (only id and updated change)."""

from __future__ import annotations

import re
from datetime import datetime
from functools import cache

from tests.conftest import SAMPLES

ATOM_ROOT = (
    b'<feed xmlns="http://www.w3.org/2005/Atom" '
    b'xmlns:at="http://purl.org/atompub/tombstones/1.0" '
    b'xmlns:cbc-place-ext="urn:dgpe:names:draft:codice-place-ext:schema:xsd:CommonBasicComponents-2" '
    b'xmlns:cac-place-ext="urn:dgpe:names:draft:codice-place-ext:schema:xsd:CommonAggregateComponents-2" '
    b'xmlns:cbc="urn:dgpe:names:draft:codice:schema:xsd:CommonBasicComponents-2" '
    b'xmlns:cac="urn:dgpe:names:draft:codice:schema:xsd:CommonAggregateComponents-2">'
)
ID_PREFIX = "https://contrataciondelestado.es/sindicacion/PlataformasAgregadasSinMenores/"


@cache
def real_entry() -> bytes:
    """The first <entry> of the real 1044 page, byte for byte."""
    data = (SAMPLES / "1044_agregadas" / "PlataformasAgregadasSinMenores_20220104_030016_1.atom").read_bytes()
    start = data.index(b"<entry>")
    return data[start : data.index(b"</entry>", start) + len(b"</entry>")]


def entry(number: int, updated: str) -> bytes:
    body = real_entry()
    body = re.sub(rb"<id>[^<]*</id>", f"<id>{ID_PREFIX}{number}</id>".encode(), body, count=1)
    return re.sub(rb"<updated>[^<]*</updated>", f"<updated>{updated}</updated>".encode(), body, count=1)


def tombstone(number: int, when: str) -> bytes:
    comment = '<at:comment type="ANULADA"/>'
    return f'<at:deleted-entry ref="{ID_PREFIX}{number}" when="{when}">{comment}</at:deleted-entry>'.encode()


def page(
    entries: list[tuple[int, str]],
    *,
    tombstones: list[tuple[int, str]] = (),  # type: ignore[assignment]
    next_href: str | None = None,
    self_href: str = "PlataformasAgregadasSinMenores.atom",
) -> bytes:
    links = f'<link href="{self_href}" rel="self"/>'
    if next_href:
        links += f'<link href="{next_href}" rel="next"/>'
    parts = [b'<?xml version="1.0" encoding="UTF-8"?>\n', ATOM_ROOT, b"<id>test</id>", links.encode()]
    parts += [b"<title>t</title><updated>2022-01-06T03:00:00+01:00</updated>"]
    parts += [tombstone(n, w) for n, w in tombstones]
    parts += [entry(n, u) for n, u in entries]
    parts.append(b"</feed>")
    return b"".join(parts)


def day(d: int, hour: int = 12) -> str:
    return datetime(2022, 1, d, hour).strftime("%Y-%m-%dT%H:%M:%S.000+00:00")


_LICITACIONES_SAMPLES = {  # the names tests land them under -> where they are in the real 643 samples
    "version7.atom": "resolvedWithLotsAllAwarded/version7.atom",  # one entry, lots all awarded
    "version11.atom": "resolvedWithNoLots/version11.atom",  # one entry, no lots
    "fragment.atom": (
        "fragment_not_wellformed/contrataciondelestadoes_sindicacion_licitacionesPerfilContratante_17540944.atom"
    ),
}


def licitaciones_samples(*names: str) -> dict[str, bytes]:
    """The real 643 (licitaciones) sample pages, `name -> bytes` as `tests.spark.bronze.land` takes them:
    `names` of version7.atom, version11.atom, fragment.atom (not well-formed: 3 dead letters); all by
    default."""
    folder = SAMPLES / "643_licitaciones"
    return {name: (folder / _LICITACIONES_SAMPLES[name]).read_bytes() for name in names or _LICITACIONES_SAMPLES}
