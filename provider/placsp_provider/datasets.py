"""The five PLACSP syndication datasets, in one typed place.

Facts come from the official syndication spec (v1.10) and were checked against real pages; see
docs/architecture.md. Nothing here does I/O, so both Airflow and the Spark job can import it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from functools import cached_property

from placsp_provider.errors import ConfigError

LIVE_BASE_URL = "https://contrataciondelsectorpublico.gob.es/sindicacion"
# The producer moved hosts; entry ids and hrefs still name the old one, and redirects may cross.
PLACSP_HOSTS = ("contrataciondelsectorpublico.gob.es", "contrataciondelestado.es")


@dataclass(frozen=True)
class Dataset:
    """One syndication feed of the platform."""

    key: str  # short name used in paths, table partitions and DAG ids
    syndication_id: int
    title: str
    file_base: str  # page and archive names start with this
    entry_id_path: str  # path segment of entry ids: .../sindicacion/<entry_id_path>/<n>
    first_year: int
    has_live_feed: bool

    @property
    def folder(self) -> str:
        return f"sindicacion_{self.syndication_id}"

    @property
    def head_file(self) -> str:
        return f"{self.file_base}.atom"

    @cached_property  # read for every entry of a page: compiled once (a frozen dataclass allows it)
    def entry_id_pattern(self) -> re.Pattern[str]:
        # Both hosts appear in ids; the numeric tail is the stable folder key.
        return re.compile(r"^https?://(?:[\w.-]+)/sindicacion/" + re.escape(self.entry_id_path) + r"/(\d+)$")

    def head_url(self, base_url: str) -> str:
        return f"{base_url.rstrip('/')}/{self.folder}/{self.head_file}"

    def archive_name(self, year: int, month: int | None = None) -> str:
        """`<base>_YYYY.zip` for a closed year, `<base>_YYYYMM.zip` for a month of the current one."""
        return f"{self.file_base}_{year:04d}{'' if month is None else f'{month:02d}'}.zip"

    def archive_url(self, base_url: str, year: int, month: int | None = None) -> str:
        return f"{base_url.rstrip('/')}/{self.folder}/{self.archive_name(year, month)}"

    def archive_for(self, year: int, month: int, today: date) -> tuple[int, int | None]:
        """Which archive holds a month: the yearly one once the year is closed, else the monthly one.

        Archive-only datasets (EMP, CPM) publish annual archives only, the current year included.
        """
        return (year, None) if year < today.year or not self.has_live_feed else (year, month)


DATASETS: dict[str, Dataset] = {
    d.key: d
    for d in (
        Dataset(
            key="licitaciones",
            syndication_id=643,
            title="Licitaciones (perfiles del contratante, sin menores)",
            file_base="licitacionesPerfilesContratanteCompleto3",
            entry_id_path="licitacionesPerfilContratante",
            first_year=2012,
            has_live_feed=True,
        ),
        Dataset(
            key="agregadas",
            syndication_id=1044,
            title="Plataformas autonómicas agregadas (sin menores)",
            file_base="PlataformasAgregadasSinMenores",
            entry_id_path="PlataformasAgregadasSinMenores",
            first_year=2016,
            has_live_feed=True,
        ),
        Dataset(
            key="menores",
            syndication_id=1143,
            title="Contratos menores",
            file_base="contratosMenoresPerfilesContratantes",
            entry_id_path="datosAbiertosMenores",
            first_year=2018,
            has_live_feed=True,
        ),
        Dataset(
            key="encargos",
            syndication_id=1383,
            title="Encargos a medios propios (EMP)",
            file_base="EMP_SectorPublico",
            entry_id_path="EMP_SectorPublico",
            first_year=2022,
            has_live_feed=False,
        ),
        Dataset(
            key="consultas",
            syndication_id=1403,
            title="Consultas preliminares de mercado (CPM)",
            file_base="CPM_SectorPublico",
            entry_id_path="CPM_SectorPublico",
            first_year=2022,
            has_live_feed=False,
        ),
    )
}


def get_dataset(name: str | int) -> Dataset:
    """Look a dataset up by key (`licitaciones`) or syndication id (`643`)."""
    text = str(name).strip()
    found = DATASETS.get(text) or next((d for d in DATASETS.values() if text == str(d.syndication_id)), None)
    if found is not None:
        return found
    known = ", ".join(f"{d.key} ({d.syndication_id})" for d in DATASETS.values())
    raise ConfigError(f"unknown PLACSP dataset {name!r}; known datasets: {known}")


def live_datasets() -> list[Dataset]:
    return [d for d in DATASETS.values() if d.has_live_feed]
