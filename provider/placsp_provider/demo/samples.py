"""The bundled real pages (include/placsp_samples) laid out as the PLACSP site would serve them.

The samples are real but few, so the demo site is small: a head feed per live dataset and the
archives that hold the rest. Pages are served byte for byte; where the site would serve an archive
we do not bundle, one is zipped at start-up from bundled real pages (the zip is a container, the
pages inside are untouched). See include/placsp_samples/SOURCES.md for where each page comes from.
`land_pages` lands pages in a lake the way extraction does, without a site.
"""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from collections.abc import Iterable
from pathlib import Path

from placsp_provider.datasets import DATASETS, Dataset

# Logical date of the demo run: its data interval [2025-08-18, 2025-08-19) is the day the bundled
# 643 pages were published.
DEMO_DATE = "2025-08-19"


def samples_dir() -> Path:
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "include" / "placsp_samples"
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("include/placsp_samples not found next to the provider package")


def demo_routes(samples: Path | None = None) -> dict[str, bytes]:
    """URL path -> body for the demo site."""
    s = samples or samples_dir()
    lic, agr, men = DATASETS["licitaciones"], DATASETS["agregadas"], DATASETS["menores"]
    agr_dir, lic_dir = s / "1044_agregadas", s / "643_licitaciones"
    agr_zip_2022 = agr_dir / "PlataformasAgregadasSinMenores_202201_05-06.zip"
    with zipfile.ZipFile(agr_zip_2022) as z:
        newest_1044 = z.read("PlataformasAgregadasSinMenores_20220106_030013.atom")
    fragment = "contrataciondelestadoes_sindicacion_licitacionesPerfilContratante_17540944.atom"
    return {
        # 643: the head holds one real entry (version 7 of a tender); the closed year's archive
        # holds another tender and the real not-well-formed fragment.
        _path(lic, lic.head_file): (lic_dir / "resolvedWithLotsAllAwarded" / "version7.atom").read_bytes(),
        _path(lic, lic.archive_name(2025)): _zip(
            {
                "version11.atom": (lic_dir / "resolvedWithNoLots" / "version11.atom").read_bytes(),
                fragment: (lic_dir / "fragment_not_wellformed" / fragment).read_bytes(),
            }
        ),
        # 1044: the head is the newest real page we have; archives are the real (cut) ones.
        _path(agr, agr.head_file): newest_1044,
        _path(agr, agr.archive_name(2022)): agr_zip_2022.read_bytes(),
        _path(agr, agr.archive_name(2019)): (agr_dir / "PlataformasAgregadasSinMenores_2019.zip").read_bytes(),
        # 1143: a real head page.
        _path(men, men.head_file): (s / "1143_menores" / "contratosMenoresPerfilesContratantes.atom").read_bytes(),
    }


def land_pages(lake: Path, dataset: str, pages: Iterable[Path], run_id: str, *, link: bool = False) -> Path:
    """Land `pages` in `lake` as extraction lands them (content-addressed files, one manifest
    `<run_id>.json` with the scan's counts), without a site: the class archive's training ingest and
    the benchmarks' lakes. `link` hard-links the files instead of copying them. Returns the manifest."""
    from placsp_provider.bronze.manifest import LandedPage, Manifest
    from placsp_provider.feed.page_scan import scan_page
    from placsp_provider.lake import manifests_dir, page_file
    from placsp_provider.lake_storage import local_lake

    ds = DATASETS[dataset]
    stamp = "2025-08-18T00:00:00Z"
    manifest = Manifest(ds.key, ds.syndication_id, run_id, stamp, stamp, stamp, f"{run_id}://")
    for page in pages:
        body = page.read_bytes()
        sha = hashlib.sha256(body).hexdigest()
        final = local_lake(page_file(lake, ds.key, page.name, sha), "landing sample pages")
        final.parent.mkdir(parents=True, exist_ok=True)
        if link:
            os.link(page, final)
        else:
            final.write_bytes(body)
        manifest.pages.append(
            LandedPage.from_scan(
                scan_page(final),
                url=f"{run_id}://{page.name}",
                file=str(final.relative_to(lake)),
                size=len(body),
                sha256=sha,
                source="feed",
                newly_landed=True,
            )
        )
    path = local_lake(manifests_dir(lake, ds.key) / f"{run_id}.json", "landing sample pages")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(manifest.to_json())
    return path


def _path(ds: Dataset, name: str) -> str:
    return f"/sindicacion/{ds.folder}/{name}"


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, body in members.items():
            z.writestr(name, body)
    return buf.getvalue()
