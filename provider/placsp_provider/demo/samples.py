"""The bundled real pages (include/placsp_samples) laid out as the PLACSP site would serve them.

The samples are real but few, so the demo site is small: a head feed per live dataset and the
archives that hold the rest. Pages are served byte for byte; where the site would serve an archive
we do not bundle, one is zipped at start-up from bundled real pages (the zip is a container, the
pages inside are untouched). See include/placsp_samples/SOURCES.md for where each page comes from.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from placsp_provider.datasets import DATASETS

# Logical date of the demo run: its data interval [2025-08-18, 2025-08-19) is the day the bundled
# 643 pages were published.
DEMO_DATE = "2025-08-19"


def samples_dir() -> Path:
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "include" / "placsp_samples"
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("include/placsp_samples not found next to the provider package")


def demo_routes(samples: Path | None = None) -> dict[str, bytes]:
    """URL path -> body for the demo site."""
    s = samples or samples_dir()
    lic, agr, men = DATASETS["licitaciones"], DATASETS["agregadas"], DATASETS["menores"]
    agr_zip_2022 = s / "1044_agregadas" / "PlataformasAgregadasSinMenores_202201_05-06.zip"
    with zipfile.ZipFile(agr_zip_2022) as z:
        newest_1044 = z.read("PlataformasAgregadasSinMenores_20220106_030013.atom")
    lic_dir = s / "643_licitaciones"
    routes: dict[str, bytes] = {
        # 643: the head holds one real entry (version 7 of a tender); the closed year's archive
        # holds another tender and the real not-well-formed fragment.
        _path(lic, lic.head_file): (lic_dir / "resolvedWithLotsAllAwarded" / "version7.atom").read_bytes(),
        _path(lic, lic.archive_name(2025)): _zip(
            {
                "version11.atom": (lic_dir / "resolvedWithNoLots" / "version11.atom").read_bytes(),
                "contrataciondelestadoes_sindicacion_licitacionesPerfilContratante_17540944.atom": (
                    lic_dir
                    / "fragment_not_wellformed"
                    / "contrataciondelestadoes_sindicacion_licitacionesPerfilContratante_17540944.atom"
                ).read_bytes(),
            }
        ),
        # 1044: the head is the newest real page we have; archives are the real (cut) ones.
        _path(agr, agr.head_file): newest_1044,
        _path(agr, agr.archive_name(2022)): agr_zip_2022.read_bytes(),
        _path(agr, agr.archive_name(2019)): (
            s / "1044_agregadas" / "PlataformasAgregadasSinMenores_2019.zip"
        ).read_bytes(),
        # 1143: a real head page.
        _path(men, men.head_file): (s / "1143_menores" / "contratosMenoresPerfilesContratantes.atom").read_bytes(),
    }
    return routes


def _path(ds: object, name: str) -> str:
    return f"/sindicacion/{ds.folder}/{name}"  # type: ignore[attr-defined]


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, body in members.items():
            z.writestr(name, body)
    return buf.getvalue()
