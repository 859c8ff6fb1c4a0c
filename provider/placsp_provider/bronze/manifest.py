"""The extraction manifest: what was landed for one dataset and interval, counted without Spark.

Later stages reconcile against `entries` and `tombstones` here: for every page, the rows in Silver
plus the dead letters must add up to these numbers.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from placsp_provider.lake_storage import LakePath

if TYPE_CHECKING:
    from placsp_provider.feed.page_scan import PageScan

MANIFEST_VERSION = 1


@dataclass
class LandedPage:
    url: str  # page URL, or `<archive URL>#<member>` for archive members
    file: str  # path relative to the lake root
    bytes: int
    sha256: str
    entries: int
    tombstones: int
    min_updated: str | None
    max_updated: str | None
    min_deleted: str | None
    max_deleted: str | None
    well_formed: bool
    error: str | None  # parser message (line, column) for pages that are not well-formed
    source: str  # "feed" or "archive"
    newly_landed: bool  # False when the same bytes were already in Bronze

    @classmethod
    def from_scan(
        cls, scan: PageScan, *, url: str, file: str, size: int, sha256: str, source: str, newly_landed: bool
    ) -> LandedPage:
        """The manifest line of a landed page: its counts are the scan's, never Spark's."""
        stamps = {key: value for key, value in scan.to_json().items() if key.startswith(("min_", "max_"))}
        return cls(
            url=url,
            file=file,
            bytes=size,
            sha256=sha256,
            entries=scan.entries,
            tombstones=scan.tombstones,
            **stamps,
            well_formed=scan.well_formed,
            error=scan.error,
            source=source,
            newly_landed=newly_landed,
        )


@dataclass
class Manifest:
    dataset: str
    syndication_id: int
    run_id: str
    interval_start: str
    interval_end: str
    window_start: str  # interval_start minus the overlap
    base_url: str
    pages: list[LandedPage] = field(default_factory=list)
    archives: list[str] = field(default_factory=list)
    pages_visited: int = 0
    stop_reason: str = ""  # why the walk ended, or `interrupted: <error>` for a run that failed
    complete: bool = True  # False: the run failed; the pages listed were landed, others may be missing
    extracted_at: str = ""
    version: int = MANIFEST_VERSION

    @property
    def entries(self) -> int:
        return sum(p.entries for p in self.pages)

    @property
    def tombstones(self) -> int:
        return sum(p.tombstones for p in self.pages)

    def summary(self) -> dict[str, Any]:
        """The compact figure that goes to XCom and the CLI's --json."""
        bad = [p for p in self.pages if not p.well_formed]
        return {
            "dataset": self.dataset,
            "interval": [self.interval_start, self.interval_end],
            "pages": len(self.pages),
            "new_pages": sum(p.newly_landed for p in self.pages),
            "entries": self.entries,
            "tombstones": self.tombstones,
            "bytes": sum(p.bytes for p in self.pages),
            "not_well_formed": len(bad),
            "not_well_formed_files": [p.file for p in bad][:10],
            "archives": len(self.archives),
            "pages_visited": self.pages_visited,
            "stop_reason": self.stop_reason,
            "complete": self.complete,
        }

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, ensure_ascii=False, sort_keys=True)

    @classmethod
    def load(cls, path: LakePath) -> Manifest:
        raw = json.loads(path.read_text(encoding="utf-8"))
        pages = [LandedPage(**p) for p in raw.pop("pages", [])]
        return cls(pages=pages, **raw)
