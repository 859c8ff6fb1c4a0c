"""Realistic PLACSP feed pages, built from the REAL entries bundled in include/placsp_samples.

Every `<entry>` written is a byte-for-byte copy of a real one; only its `<id>` and `<updated>`
change (and tombstones get a new `ref` and `when`). Pages look like the producer's:

- an Atom `<feed>` header (author, id, RFC 5005 `self`/`first`/`prev`/`next` links with relative
  hrefs, title, updated), then every `<at:deleted-entry>`, then the entries, all newest first;
- file names `<base>_YYYYMMDD_HHMMSS.atom` (Europe/Madrid time, `_n` suffix on a clash); with
  `head=True` the newest page is the head feed `<base>.atom`, as the live site serves it;
- `next` points to the older page, `prev` to the newer one, `first` to the head.

Entry pools (`entry_pool`):

| pool | source | entries | size |
|---|---|---|---|
| `"1044"` | the 5 real 500-item pages inside the two 1044 zips | 2,247 | 3.4-234 KB, mean 6.4 KB |
| `"643"` | version7.atom and version11.atom | 2 | 39 KB and 60 KB |
| `"mixed"` | both | 2,249 | |

The default pool is `"643"` for licitaciones and `"1044"` for every other dataset (menores and the
archive-only datasets get agregadas-shaped entries under their own id path: an approximation).

Page shapes (`SHAPES`, issue 36): `REAL_SHAPE` pages clone every bundled real entry ("mixed" pool,
500 items, 5% tombstones: 475 entries + 25 tombstones, ~3.2 MB, ~6.4 KB and ~3 document references an
entry, like the producer's 1044 pages); `HEAVY_SHAPE` pages clone the two 643 entries (~24 MB a page,
~50 KB and 27 document references an entry). `python -m benchmarks.pagegen` prints both beside the real pages
(`entry_shape`, `real_page_shape`).

Ids are `https://contrataciondelestado.es/sindicacion/<dataset entry_id_path>/<n>`, unique in the
corpus unless a `duplicate_id` corruption says otherwise. Ordinary tombstones point at ids outside
the corpus (entries published before it), so only the tombstones listed in the ground truth touch
a corpus entry. Output is a pure function of the arguments: same seed, same bytes.

Corruptions: `corruption_rate` is the share of entries (outside the `clean_tail` pages) that get
one, or `corruption_count` gives the number. Kinds are dealt round-robin over `mix`, so every kind
of the mix appears once the count reaches the number of kinds. A corruption whose constraint cannot
be met (a second `truncated_page` on a one-page corpus, a tombstone with no entry on the right side
of it) is skipped: the ground truth lists exactly what was written, never more.

| kind | what is written | page well-formed | expected_stage |
|---|---|---|---|
| `unclosed_tag` | `</cbc:ContractFolderID>` removed mid-entry | no | `bronze` |
| `truncated_page` | the page ends halfway through its last entry, no `</feed>` | no | `bronze` |
| `latin1_bytes` | the entry's `<summary>` text in Latin-1 inside the UTF-8 page | no | `bronze` |
| `unbound_prefix` | the entry's `cac-place-ext:` elements use prefix `ns3`, never declared | no | `bronze` |
| `na_amount` | an amount's text replaced by `N/A` | yes | `silver_dead_letter` |
| `decimal_comma` | an amount with a decimal comma (`261901,77`): VALID | yes | `silver_normalise` |
| `repeated_single` | 2nd copy of the entry's only `TenderResult` / `ValidNoticeInfo` | yes | `silver_parse` |
| `duplicate_id` | an older entry takes a newer one's id: newest must win | yes | `silver_merge` |
| `tombstone_after_update` | tombstone newer than the entry it names: entry goes | yes | `silver_merge` |
| `tombstone_before_update` | tombstone older than the entry it names: entry stays | yes | `silver_merge` |

`bronze`: extraction lands the page flagged `well_formed=False` with its items counted by byte
scan; nothing in it may be lost silently later. A Silver-level corruption that sits in (or, for the
two-item kinds, involves) a page broken by a page-level one has `masked_by` set to that kind.

Counting contract (what `placsp_provider.feed.page_scan.scan_page` reports): `PageFacts.entries`
and `.tombstones` are the start tags written, the cut entry of a truncated page included, so
they equal the scan's counts for well-formed pages and its byte-scan counts for broken ones.

Usage::

    corpus = generate_corpus(tmp, pages=20, items_per_page=500, corruption_rate=0.002, seed=1)
    corpus.files, corpus.total_entries, corpus.ground_truth       # pages on disk, truths
    chain = generate_corpus(tmp, pages=5, items_per_page=50, seed=1, head=True)
    site = LoopbackSite(chain_routes(chain))                       # the newest page is the head feed
"""

from __future__ import annotations

import functools
import random
import re
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from placsp_provider.datasets import DATASETS, Dataset
from placsp_provider.demo.loopback_site import Route
from placsp_provider.demo.samples import samples_dir

# -- corruption kinds -----------------------------------------------------------------------------
UNCLOSED_TAG = "unclosed_tag"
TRUNCATED_PAGE = "truncated_page"
LATIN1_BYTES = "latin1_bytes"
UNBOUND_PREFIX = "unbound_prefix"
NA_AMOUNT = "na_amount"
DECIMAL_COMMA = "decimal_comma"
REPEATED_SINGLE = "repeated_single"
DUPLICATE_ID = "duplicate_id"
TOMBSTONE_AFTER_UPDATE = "tombstone_after_update"
TOMBSTONE_BEFORE_UPDATE = "tombstone_before_update"

# Kind -> the stage that must catch it, in the round-robin order of a corruption mix.
EXPECTED_STAGE: dict[str, str] = {
    UNCLOSED_TAG: "bronze",
    NA_AMOUNT: "silver_dead_letter",
    DECIMAL_COMMA: "silver_normalise",
    REPEATED_SINGLE: "silver_parse",
    TRUNCATED_PAGE: "bronze",
    LATIN1_BYTES: "bronze",
    UNBOUND_PREFIX: "bronze",
    DUPLICATE_ID: "silver_merge",
    TOMBSTONE_BEFORE_UPDATE: "silver_merge",
    TOMBSTONE_AFTER_UPDATE: "silver_merge",
}
CORRUPTION_KINDS: tuple[str, ...] = tuple(EXPECTED_STAGE)
# Kinds that make the whole page not well-formed.
PAGE_LEVEL_KINDS = frozenset(kind for kind, stage in EXPECTED_STAGE.items() if stage == "bronze")

ENTRY_POOLS = ("1044", "643", "mixed")
TOMBSTONE_STYLES = ("root", "inline")
DEFAULT_NEWEST = datetime(2025, 11, 28, 23, 0, tzinfo=UTC)
UNBOUND_PREFIX_NAME = "ns3"

_ATOM_NS = "http://www.w3.org/2005/Atom"
_TOMBSTONE_NS = "http://purl.org/atompub/tombstones/1.0"
_ID_HOST = "https://contrataciondelestado.es/sindicacion"
# Namespace declarations of real pages, in the producer's order (1044 pages: ns1; 643 pages: ns7).
_NS_DECLS = (
    ("cbc-place-ext", "urn:dgpe:names:draft:codice-place-ext:schema:xsd:CommonBasicComponents-2"),
    ("cac-place-ext", "urn:dgpe:names:draft:codice-place-ext:schema:xsd:CommonAggregateComponents-2"),
    ("cbc", "urn:dgpe:names:draft:codice:schema:xsd:CommonBasicComponents-2"),
    ("cac", "urn:dgpe:names:draft:codice:schema:xsd:CommonAggregateComponents-2"),
)
_UBL_EXT = "urn:oasis:names:specification:ubl:schema:xsd:CommonExtensionComponents-2"
_REAL_TITLES = {
    "licitaciones": "licitacionesPerfilesContratanteCompleto v3",
    "agregadas": "Plataformas Agregadas Sin Menores",
}

_ENTRY_RE = re.compile(rb"<entry>.*?</entry>", re.S)
_AMOUNT_RE = re.compile(
    rb"<cbc:(TotalAmount|TaxExclusiveAmount|EstimatedOverallContractAmount|PayableAmount)\b[^>]*>"
    rb"([0-9]+(?:\.[0-9]+)?)</cbc:\1>"
)
_REFERENCE_RE = re.compile(rb"<[\w-]+:\w*DocumentReference[\s>]")
_SUMMARY_RE = re.compile(rb"(<summary\b[^>]*>)([^<]*)(</summary>)")
_REPEATABLES = (b"cac:TenderResult", b"cac-place-ext:ValidNoticeInfo")


# -- public types ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Corruption:
    """One injected corruption and what the pipeline must do with it.

    `page_file` is the page's file name (the last segment of its URL; Bronze lands it as
    `<stem>.<sha16>.atom`). `entry_id` is the Atom id of the entry concerned (for tombstone kinds,
    the id the tombstone names). `facts` holds the specifics (element, old and new text, the other
    page and timestamps) as strings.
    """

    page_file: str
    entry_id: str
    kind: str
    expected_stage: str
    detail: str
    facts: Mapping[str, str] = field(default_factory=dict)
    masked_by: str | None = None  # a page-level kind that breaks this item's page (or its partner's)


@dataclass(frozen=True)
class PageFacts:
    """What one generated page holds (counts as `scan_page` reports them; see the module doc)."""

    index: int  # 0 = newest
    file: str
    entries: int
    tombstones: int
    bytes: int
    well_formed: bool
    newest: datetime  # newest `updated`/`when` of its items (UTC)
    oldest: datetime
    published: datetime  # the header's `<updated>` and the stamp in the file name (UTC)

    @property
    def items(self) -> int:
        return self.entries + self.tombstones


@dataclass(frozen=True)
class CorpusSpec:
    """Everything that decides the bytes of a corpus. Validated on construction.

    `target_page_bytes` (when set) overrides `items_per_page`: items per page are chosen from the
    pool's mean entry size so pages weigh about that much. `clean_tail` keeps the oldest N pages
    free of corruptions (e.g. the page an extraction stops at must stay readable).
    """

    pages: int = 10
    items_per_page: int = 500
    corruption_rate: float = 0.0
    seed: int = 0
    dataset_key: str = "agregadas"
    target_page_bytes: int | None = None
    tombstone_share: float = 0.05
    mix: Mapping[str, int] | None = None  # kind -> integer weight; default: every kind, weight 1
    entry_pool: str | None = None  # "1044", "643", "mixed"; default by dataset
    tombstone_style: str | None = None  # "root" (2025 pages) / "inline" (2022 pages); default by pool
    newest: datetime = DEFAULT_NEWEST
    item_spacing: timedelta = timedelta(seconds=40)
    head: bool = False
    clean_tail: int = 0
    corruption_count: int | None = None  # exact number of corruptions; overrides corruption_rate

    def __post_init__(self) -> None:
        if self.dataset_key not in DATASETS:
            raise ValueError(f"unknown dataset_key {self.dataset_key!r}; known: {', '.join(DATASETS)}")
        if self.pages < 1:
            raise ValueError(f"pages must be at least 1, got {self.pages}")
        if self.target_page_bytes is None and self.items_per_page < 1:
            raise ValueError(f"items_per_page must be at least 1, got {self.items_per_page}")
        if self.target_page_bytes is not None and self.target_page_bytes < 4096:
            raise ValueError(f"target_page_bytes must be at least 4096, got {self.target_page_bytes}")
        if not 0.0 <= self.corruption_rate <= 1.0:
            raise ValueError(f"corruption_rate must be in [0, 1], got {self.corruption_rate}")
        if not 0.0 <= self.tombstone_share < 1.0:
            raise ValueError(f"tombstone_share must be in [0, 1), got {self.tombstone_share}")
        if self.entry_pool is not None and self.entry_pool not in ENTRY_POOLS:
            raise ValueError(f"entry_pool must be one of {ENTRY_POOLS}, got {self.entry_pool!r}")
        if self.tombstone_style is not None and self.tombstone_style not in TOMBSTONE_STYLES:
            raise ValueError(f"tombstone_style must be one of {TOMBSTONE_STYLES}, got {self.tombstone_style!r}")
        if self.newest.tzinfo is None:
            raise ValueError("newest must be timezone-aware")
        if self.item_spacing < timedelta(seconds=1):
            raise ValueError(f"item_spacing must be at least 1 s, got {self.item_spacing}")
        if self.corruption_count is not None and self.corruption_count < 0:
            raise ValueError(f"corruption_count must be >= 0, got {self.corruption_count}")
        if not 0 <= self.clean_tail <= self.pages:
            raise ValueError(f"clean_tail must be in [0, pages], got {self.clean_tail}")
        for kind, weight in (self.mix or {}).items():
            if kind not in EXPECTED_STAGE:
                raise ValueError(f"unknown corruption kind {kind!r}; known: {', '.join(CORRUPTION_KINDS)}")
            if not isinstance(weight, int) or weight < 0:
                raise ValueError(f"mix weight of {kind} must be a non-negative int, got {weight!r}")
        tomb_kinds = {TOMBSTONE_AFTER_UPDATE, TOMBSTONE_BEFORE_UPDATE}
        wants = self.corruption_count if self.corruption_count is not None else self.corruption_rate
        if wants and self.tombstone_share == 0 and any(self._weights().get(k) for k in tomb_kinds):
            raise ValueError("tombstone corruptions need tombstones: set tombstone_share > 0 or drop them from mix")

    @property
    def dataset(self) -> Dataset:
        return DATASETS[self.dataset_key]

    @property
    def pool(self) -> str:
        return self.entry_pool or ("643" if self.dataset_key == "licitaciones" else "1044")

    @property
    def style(self) -> str:
        return self.tombstone_style or ("root" if self.pool == "643" else "inline")

    def _weights(self) -> dict[str, int]:
        return dict(self.mix) if self.mix is not None else dict.fromkeys(CORRUPTION_KINDS, 1)


@dataclass
class Corpus:
    """A generated corpus on disk. `files` and `pages` are newest first."""

    spec: CorpusSpec
    files: list[Path]
    pages: list[PageFacts]
    ground_truth: list[Corruption]
    total_entries: int
    total_tombstones: int
    bytes: int


# -- page shapes ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class PageShape:
    """What a corpus's pages are made of: the real entries they clone (`entry_pool`) and the items of a
    page. `options()` are `generate_corpus` keyword arguments."""

    name: str
    entry_pool: str
    items_per_page: int
    tombstone_share: float
    what: str

    def options(self) -> dict[str, Any]:
        shape = {"entry_pool": self.entry_pool, "items_per_page": self.items_per_page}
        return shape | {"tombstone_share": self.tombstone_share}


# Issue 36: the ingest's cost follows entries, not bytes, so a benchmark's pages must hold as many
# entries a MB as the producer's. The real 1044 pages hold 6.4 KB an entry (3.2 `*DocumentReference`
# elements, 1.1 `documents` rows); the two real 643 entries 39 and 60 KB (27 references, 16.5 rows):
# pages of only those carry ~7x fewer entries a MB. Both shapes clone real entries byte for byte
# (only ids and timestamps change).
REAL_SHAPE = PageShape(
    "real", "mixed", 500, 0.05, "clones of every bundled real entry (2,247 of 1044, 2 of 643), 475 + 25 tombstones"
)
HEAVY_SHAPE = PageShape("heavy", "643", 500, 0.05, "clones of the two real 643 entries, 475 + 25 tombstones")
SHAPES: dict[str, PageShape] = {s.name: s for s in (REAL_SHAPE, HEAVY_SHAPE)}


@dataclass(frozen=True)
class EntryShape:
    """What the entries of some pages look like: counts from the provider's own `parse_page` (documents:
    the rows Silver's `documents` table gets), sizes and `*DocumentReference` elements (publication
    records among them, which Silver keeps in `notices`) from the `<entry>` elements' bytes."""

    pages: int
    page_bytes: int
    entries: int
    tombstones: int
    entry_bytes: int
    document_references: int
    documents: int

    @property
    def kb_per_entry(self) -> float:
        return self.entry_bytes / max(self.entries, 1) / 1000

    @property
    def references_per_entry(self) -> float:
        return self.document_references / max(self.entries, 1)

    @property
    def documents_per_entry(self) -> float:
        return self.documents / max(self.entries, 1)

    @property
    def entries_per_mb(self) -> float:
        return self.entries / max(self.page_bytes, 1) * 1e6

    def line(self) -> str:
        return (
            f"{self.pages} pages, {self.page_bytes / self.pages / 1e6:.2f} MB a page, "
            f"{self.entries / self.pages:.0f} entries + {self.tombstones / self.pages:.0f} tombstones a page, "
            f"{self.kb_per_entry:.1f} KB an entry, {self.references_per_entry:.1f} document references an entry "
            f"({self.documents_per_entry:.1f} `documents` rows), "
            f"{self.entries_per_mb:.0f} entries a MB"
        )


def entry_shape(pages: Iterable[bytes], dataset_key: str = "agregadas") -> EntryShape:
    """`EntryShape` of `pages` (each a whole feed page), parsed by the provider's `parse_page`."""
    from placsp_provider.parser.page_parser import parse_page

    dataset = DATASETS[dataset_key]
    totals = Counter[str]()
    for n, data in enumerate(pages):
        result = parse_page(data, dataset=dataset, source_file=f"page-{n}.atom")
        totals["pages"] += 1
        totals["page_bytes"] += len(data)
        totals["entries"] += len(result.entries)
        totals["tombstones"] += len(result.tombstones)
        for match in _ENTRY_RE.finditer(data):
            totals["entry_bytes"] += len(match.group(0))
            totals["document_references"] += len(_REFERENCE_RE.findall(match.group(0)))
        totals["documents"] += len(result.documents)
    return EntryShape(**{f.name: totals[f.name] for f in fields(EntryShape)})


def real_page_shape() -> EntryShape:
    """`EntryShape` of the real 500-item 1044 pages bundled (the producer's pages, what `REAL_SHAPE` copies)."""
    return entry_shape(_pool_pages("1044"), "agregadas")


# -- public functions -----------------------------------------------------------------------------
def generate_corpus(
    out_dir: Path,
    pages: int = 10,
    items_per_page: int = 500,
    corruption_rate: float = 0.0,
    seed: int = 0,
    dataset_key: str = "agregadas",
    **options: Any,
) -> Corpus:
    """Write `pages` pages into `out_dir` (created if needed), one at a time; return their facts.
    `options` are the other `CorpusSpec` fields."""
    spec = CorpusSpec(pages, items_per_page, corruption_rate, seed, dataset_key, **options)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plan = _plan(spec)
    facts: list[PageFacts] = []
    for page_facts, body in _render(spec, plan):
        (out_dir / page_facts.file).write_bytes(body)
        facts.append(page_facts)
    totals = (sum(p.entries for p in facts), sum(p.tombstones for p in facts), sum(p.bytes for p in facts))
    return Corpus(spec, [out_dir / p.file for p in facts], facts, plan.ground_truth, *totals)


def chain_routes(corpus: Corpus) -> dict[str, Route]:
    """URL path -> page file for a corpus generated with `head=True` (LoopbackSite reads files lazily)."""
    ds = corpus.spec.dataset
    if not ds.has_live_feed:
        raise ValueError(f"dataset {ds.key} publishes annual archives only: it has no live chain to serve")
    if not corpus.spec.head:
        raise ValueError("chain_routes needs a corpus generated with head=True (its newest page is the head feed)")
    return {f"/sindicacion/{ds.folder}/{path.name}": path for path in corpus.files}


# -- real entries ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Template:
    head: bytes  # `<entry>` ... `<id>`
    between: bytes  # `</id>` ... `<updated>`
    tail: bytes  # `</updated>` ... `</entry>`
    size: int
    has_amount: bool
    has_single_repeatable: bool
    has_latin1_summary: bool

    def render(self, ident: str, updated: str) -> bytes:
        return b"".join((self.head, ident.encode(), self.between, updated.encode(), self.tail))

    def supports(self, kind: str) -> bool:
        if kind in (NA_AMOUNT, DECIMAL_COMMA):
            return self.has_amount
        return {REPEATED_SINGLE: self.has_single_repeatable, LATIN1_BYTES: self.has_latin1_summary}.get(kind, True)


def _pool_pages(pool: str) -> list[bytes]:
    s = samples_dir()
    out: list[bytes] = []
    if pool in ("1044", "mixed"):
        for zip_path in sorted((s / "1044_agregadas").glob("*.zip")):
            with zipfile.ZipFile(zip_path) as archive:
                out += [archive.read(name) for name in sorted(archive.namelist()) if name.endswith(".atom")]
    if pool in ("643", "mixed"):
        for rel in ("resolvedWithLotsAllAwarded/version7.atom", "resolvedWithNoLots/version11.atom"):
            out.append((s / "643_licitaciones" / rel).read_bytes())
    return out


@functools.lru_cache(maxsize=4)
def _templates(pool: str) -> tuple[_Template, ...]:
    templates: list[_Template] = []
    for data in _pool_pages(pool):
        for match in _ENTRY_RE.finditer(data):
            entry = match.group(0)
            i0, i1 = entry.index(b"<id>") + 4, entry.index(b"</id>")
            u0, u1 = entry.index(b"<updated>") + 9, entry.index(b"</updated>")
            summary = _SUMMARY_RE.search(entry)
            text = summary.group(2).decode("utf-8") if summary else ""
            templates.append(
                _Template(
                    head=entry[:i0],
                    between=entry[i1:u0],
                    tail=entry[u1:],
                    size=len(entry),
                    has_amount=_AMOUNT_RE.search(entry) is not None,
                    has_single_repeatable=any(entry.count(b"<" + t + b">") == 1 for t in _REPEATABLES),
                    has_latin1_summary=any(127 < ord(ch) < 256 for ch in text),
                )
            )
    if not templates:
        raise FileNotFoundError(f"no real entries found for pool {pool!r} under {samples_dir()}")
    return tuple(templates)


# -- planning -------------------------------------------------------------------------------------
@dataclass
class _Item:
    is_entry: bool
    ident: str  # entry id, or the tombstone's ref
    when: datetime  # UTC
    template: int = -1
    corruption: str | None = None
    facts: dict[str, str] = field(default_factory=dict)


@dataclass
class _Page:
    index: int
    file: str
    published: datetime
    items: list[_Item]  # tombstones then entries, each newest first

    @property
    def entries(self) -> list[_Item]:
        return [i for i in self.items if i.is_entry]


@dataclass
class _Plan:
    pages: list[_Page]
    ground_truth: list[Corruption]


try:
    _TZ: tzinfo = ZoneInfo("Europe/Madrid")
except ZoneInfoNotFoundError:  # no tz database: CET all year round
    _TZ = timezone(timedelta(hours=1))


def _stamp(value: datetime) -> str:
    """RFC 3339 in the producer's style: `2025-08-18T09:00:00.000+02:00`."""
    return value.astimezone(_TZ).isoformat(timespec="milliseconds")


def _items_per_page(spec: CorpusSpec) -> int:
    if spec.target_page_bytes is None:
        return spec.items_per_page
    templates = _templates(spec.pool)
    mean_entry = sum(t.size for t in templates) / len(templates)
    tombstone = 260.0 if spec.style == "inline" else 230.0
    mean_item = (1 - spec.tombstone_share) * mean_entry + spec.tombstone_share * tombstone + 5
    return max(1, round((spec.target_page_bytes - 2000) / mean_item))


def _plan(spec: CorpusSpec) -> _Plan:
    rng = random.Random(spec.seed)
    templates = _templates(spec.pool)
    ds = spec.dataset
    per_page = _items_per_page(spec)
    tomb_per_page = round(per_page * spec.tombstone_share)
    # Entry ids and (disjoint) ids of older, deleted entries; both look like the producer's.
    entry_numbers = iter(rng.sample(range(1_000_000, 9_000_000), (per_page - tomb_per_page) * spec.pages))
    tomb_numbers = iter(rng.sample(range(9_000_000, 9_999_999), tomb_per_page * spec.pages))
    id_prefix = f"{_ID_HOST}/{ds.entry_id_path}/"

    span = spec.item_spacing * per_page
    span_ms = max(per_page, int(span.total_seconds() * 1000))
    newest = spec.newest.astimezone(UTC)
    pages: list[_Page] = []
    used_names: set[str] = set()
    for p in range(spec.pages):
        top = newest - span * p
        offsets = (
            sorted(rng.sample(range(1, span_ms), per_page)) if span_ms > per_page else list(range(1, per_page + 1))
        )
        times = [top - timedelta(milliseconds=o) for o in offsets]  # newest first
        tomb_slots = set(rng.sample(range(per_page), tomb_per_page))
        tombs: list[_Item] = []
        entries: list[_Item] = []
        for k, when in enumerate(times):
            if k in tomb_slots:
                tombs.append(_Item(False, f"{id_prefix}{next(tomb_numbers)}", when))
            else:
                entries.append(_Item(True, f"{id_prefix}{next(entry_numbers)}", when, rng.randrange(len(templates))))
        published = top + timedelta(seconds=1)
        if spec.head and p == 0:
            name = ds.head_file
        else:
            name = f"{ds.file_base}_{published.astimezone(_TZ):%Y%m%d_%H%M%S}"
            n, candidate = 0, f"{name}.atom"
            while candidate in used_names:
                n += 1
                candidate = f"{name}_{n}.atom"
            name = candidate
        used_names.add(name)
        pages.append(_Page(p, name, published, tombs + entries))

    plan = _Plan(pages, [])
    _inject(spec, plan, rng, templates)
    return plan


def _inject(spec: CorpusSpec, plan: _Plan, rng: random.Random, templates: tuple[_Template, ...]) -> None:
    corruptible = plan.pages[: spec.pages - spec.clean_tail]
    where: dict[int, _Page] = {}  # id(item) -> its page
    free_entries: list[_Item] = []
    free_tombs: list[_Item] = []
    for page in corruptible:
        for member in page.items:
            where[id(member)] = page
            (free_entries if member.is_entry else free_tombs).append(member)
    last_entries = {id(p.entries[-1]) for p in corruptible if p.entries}
    count = (
        spec.corruption_count if spec.corruption_count is not None else round(spec.corruption_rate * len(free_entries))
    )
    weights = spec._weights()
    cycle = [k for k in CORRUPTION_KINDS for _ in range(weights.get(k, 0))]
    if not count or not cycle:
        return
    for kind in set(cycle) - {TRUNCATED_PAGE, DUPLICATE_ID, TOMBSTONE_AFTER_UPDATE, TOMBSTONE_BEFORE_UPDATE}:
        if not any(t.supports(kind) for t in templates):
            raise ValueError(f"no real entry in pool {spec.pool!r} supports corruption {kind!r}")
    rng.shuffle(free_entries)
    rng.shuffle(free_tombs)
    truncated: set[int] = set()
    records: list[tuple[str, _Item, list[_Page]]] = []  # kind, item, pages involved (its own first)
    for n in range(count):
        kind = cycle[n % len(cycle)]
        partner: _Item | None = None  # the other item of a two-item kind
        if kind == TRUNCATED_PAGE:
            item = _take(free_entries, lambda e: id(e) in last_entries and where[id(e)].index not in truncated)
            if item is None:
                continue
            truncated.add(where[id(item)].index)
            entry = templates[item.template].render(item.ident, _stamp(item.when))
            item.facts = {"kept_bytes": str(len(entry) // 2), "entry_bytes": str(len(entry))}
        elif kind == DUPLICATE_ID:
            if len(free_entries) < 2:
                continue
            a, b = _take(free_entries), _take(free_entries)
            assert a is not None and b is not None
            item, partner = (a, b) if a.when > b.when else (b, a)  # the newer and the older version
            partner.ident = item.ident
            item.facts = {
                "newest_updated": _stamp(item.when),
                "older_updated": _stamp(partner.when),
                "older_page_file": where[id(partner)].file,
            }
        elif kind in (TOMBSTONE_AFTER_UPDATE, TOMBSTONE_BEFORE_UPDATE):
            after = kind == TOMBSTONE_AFTER_UPDATE
            pair = _take_pair(free_tombs, free_entries, after)
            if pair is None:
                continue
            item, partner = pair  # the tombstone and the entry it names
            item.ident = partner.ident
            item.facts = {
                "entry_updated": _stamp(partner.when),
                "entry_page_file": where[id(partner)].file,
                "tombstone_when": _stamp(item.when),
                "entry_survives": "false" if after else "true",
            }
        else:
            item = _take(free_entries)
            if item is None:
                continue
            item.template = rng.choice([i for i, t in enumerate(templates) if t.supports(kind)])
            _, item.facts = _corrupt(kind, templates[item.template].render(item.ident, _stamp(item.when)))
        item.corruption = kind
        records.append((kind, item, [where[id(i)] for i in (item, partner) if i is not None]))

    # The first page-level kind of each page (records are in injection order).
    breakers = {pages[0].index: kind for kind, _, pages in reversed(records) if kind in PAGE_LEVEL_KINDS}
    for kind, item, involved in records:
        masked = None
        if kind not in PAGE_LEVEL_KINDS:
            masked = next((breakers[p.index] for p in involved if p.index in breakers), None)
        facts = dict(item.facts)
        truth = Corruption(
            involved[0].file, item.ident, kind, EXPECTED_STAGE[kind], _detail(kind, facts), facts, masked
        )
        plan.ground_truth.append(truth)
    order = {p.file: p.index for p in plan.pages}
    plan.ground_truth.sort(key=lambda c: (order[c.page_file], c.kind, c.entry_id))


def _take(pool: list[_Item], accept: Callable[[_Item], bool] | None = None) -> _Item | None:
    """Remove and return the last item of a shuffled pool that `accept`s (swap-remove: O(1))."""
    for i in range(len(pool) - 1, -1, -1):
        if accept is None or accept(pool[i]):
            pool[i], pool[-1] = pool[-1], pool[i]
            return pool.pop()
    return None


def _take_pair(tombs: list[_Item], entries: list[_Item], after: bool) -> tuple[_Item, _Item] | None:
    """A free tombstone and a free entry older (`after`) or newer than it; both leave their pools."""
    for i in range(len(tombs) - 1, -1, -1):
        entry = _take(entries, functools.partial(_on_side, tombs[i].when, after))
        if entry is not None:
            tombs[i], tombs[-1] = tombs[-1], tombs[i]
            return tombs.pop(), entry
    return None


def _on_side(when: datetime, older: bool, entry: _Item) -> bool:
    return entry.when < when if older else entry.when > when


def _detail(kind: str, facts: Mapping[str, str]) -> str:
    if kind in (NA_AMOUNT, DECIMAL_COMMA):
        text = f"{facts['element']} {facts['original']!r} written as {facts['written']!r}"
        return text + (f", must read {facts['expected_value']}" if kind == DECIMAL_COMMA else ", must dead-letter")
    if kind == REPEATED_SINGLE:
        return f"{facts['element']} appears twice; both must be kept"
    if kind == UNCLOSED_TAG:
        return f"<{facts['element']}> left unclosed; page not well-formed"
    if kind == LATIN1_BYTES:
        return "<summary> text encoded as Latin-1 in a UTF-8 page; page not well-formed"
    if kind == UNBOUND_PREFIX:
        return f"{facts['elements']} elements use undeclared prefix {UNBOUND_PREFIX_NAME}; page not well-formed"
    if kind == TRUNCATED_PAGE:
        return f"page cut after {facts['kept_bytes']} of {facts['entry_bytes']} bytes of its last entry"
    if kind == DUPLICATE_ID:
        return (
            f"two versions: {facts['newest_updated']} here, {facts['older_updated']} in "
            f"{facts['older_page_file']}; the newest must win"
        )
    survives = facts["entry_survives"] == "true"
    return (
        f"tombstone when={facts['tombstone_when']} names an entry updated {facts['entry_updated']} "
        f"({facts['entry_page_file']}): entry must {'stay' if survives else 'be deleted'}"
    )


def _corrupt(kind: str, entry: bytes) -> tuple[bytes, dict[str, str]]:
    """Apply an entry-level corruption to one rendered entry; return the bytes and their facts."""
    if kind in (NA_AMOUNT, DECIMAL_COMMA):
        matches = list(_AMOUNT_RE.finditer(entry))
        # A decimal comma is only a trap where the amount has decimals to begin with.
        dotted = [m for m in matches if b"." in m.group(2)] if kind == DECIMAL_COMMA else []
        match = (dotted or matches)[0]
        original = match.group(2).decode()
        if kind == NA_AMOUNT:
            written, expected = "N/A", ""
        elif "." in original:
            written, expected = original.replace(".", ","), original
        else:
            written, expected = original + ",00", original + ".00"
        start, end = match.span(2)
        facts = {"element": f"cbc:{match.group(1).decode()}", "original": original, "written": written}
        if expected:
            facts["expected_value"] = expected
        return entry[:start] + written.encode() + entry[end:], facts
    if kind == REPEATED_SINGLE:
        for tag in _REPEATABLES:
            if entry.count(b"<" + tag + b">") == 1:
                start = entry.index(b"<" + tag + b">")
                close = b"</" + tag + b">"
                end = entry.index(close, start) + len(close)
                indent = entry[entry.rfind(b"\n", 0, start) : start]
                return entry[:end] + indent + entry[start:end] + entry[end:], {"element": tag.decode()}
        raise ValueError("entry has no single TenderResult or ValidNoticeInfo")
    if kind == UNCLOSED_TAG:
        close = b"</cbc:ContractFolderID>"
        if close not in entry:
            pos = entry.index(b"</cbc:")
            close = entry[pos : entry.index(b">", pos) + 1]
        return entry.replace(close, b"", 1), {"element": close[2:-1].decode()}
    if kind == LATIN1_BYTES:
        summary = _SUMMARY_RE.search(entry)
        assert summary is not None
        text = summary.group(2).decode("utf-8").encode("latin-1", errors="replace")
        return entry[: summary.start(2)] + text + entry[summary.end(2) :], {"element": "summary"}
    if kind == UNBOUND_PREFIX:
        count = entry.count(b"<cac-place-ext:")
        new = entry.replace(b"<cac-place-ext:", b"<" + UNBOUND_PREFIX_NAME.encode() + b":")
        new = new.replace(b"</cac-place-ext:", b"</" + UNBOUND_PREFIX_NAME.encode() + b":")
        return new, {"elements": str(count), "prefix": UNBOUND_PREFIX_NAME}
    raise ValueError(f"{kind} is not an entry-level corruption")


# -- rendering ------------------------------------------------------------------------------------
def _render(spec: CorpusSpec, plan: _Plan) -> Iterator[tuple[PageFacts, bytes]]:
    templates = _templates(spec.pool)
    for p in plan.pages:
        body, well_formed = _render_page(spec, plan, p, templates)
        when, entries = [i.when for i in p.items], sum(i.is_entry for i in p.items)
        counts = (entries, len(when) - entries, len(body), well_formed)  # entries, tombstones, bytes
        yield PageFacts(p.index, p.file, *counts, max(when), min(when), p.published), body


def _render_page(spec: CorpusSpec, plan: _Plan, page: _Page, templates: tuple[_Template, ...]) -> tuple[bytes, bool]:
    parts: list[bytes] = [_header(spec, plan, page)]
    well_formed = True
    inline = spec.style == "inline"
    for item in page.items:
        if not item.is_entry:
            parts.append(_tombstone(item, inline))
            continue
        entry = templates[item.template].render(item.ident, _stamp(item.when))
        kind = item.corruption
        if kind in (UNCLOSED_TAG, LATIN1_BYTES, UNBOUND_PREFIX, NA_AMOUNT, DECIMAL_COMMA, REPEATED_SINGLE):
            entry, _ = _corrupt(kind, entry)
            well_formed = well_formed and kind not in PAGE_LEVEL_KINDS
        if kind == TRUNCATED_PAGE:
            parts.append(b"    " + entry[: len(entry) // 2])  # the same cut `_inject` described
            return b"".join(parts), False
        parts.append(b"    " + entry + b"\n")
    parts.append(b"</feed>\n")
    return b"".join(parts), well_formed


def _header(spec: CorpusSpec, plan: _Plan, page: _Page) -> bytes:
    ds = spec.dataset
    ubl_prefix = "ns7" if spec.pool == "643" else "ns1"
    decls = [f'xmlns="{_ATOM_NS}"', *(f'xmlns:{p}="{uri}"' for p, uri in _NS_DECLS)]
    if spec.style == "root":
        decls.append(f'xmlns:at="{_TOMBSTONE_NS}"')
    decls.append(f'xmlns:{ubl_prefix}="{_UBL_EXT}"')
    links = [("self", page.file), ("first", ds.head_file)]
    if page.index > 0:
        links.append(("prev", plan.pages[page.index - 1].file))
    elif not spec.head:
        links.append(("prev", ds.head_file))
    if page.index + 1 < len(plan.pages):
        links.append(("next", plan.pages[page.index + 1].file))
    title = _REAL_TITLES.get(ds.key, ds.title)
    lines = [
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>',
        f"<feed {' '.join(decls)}>",
        "    <author>",
        "        <name>Plataforma de Contratación del Sector Público</name>",
        "        <uri>https://contrataciondelestado.es</uri>",
        "        <email>contrataciondelestado@hacienda.gob.es</email>",
        "    </author>",
        f"    <id>{_ID_HOST}/{ds.folder}/{ds.head_file}</id>",
        *(f'    <link href="{href}" rel="{rel}"/>' for rel, href in links),
        f"    <title>Licitaciones publicadas en la Plataforma de Contratación del Sector Público: {title}</title>",
        f"    <updated>{_stamp(page.published)}</updated>",
        "",
    ]
    return "\n".join(lines).encode("utf-8")


def _tombstone(item: _Item, inline: bool) -> bytes:
    if inline:  # 2022 pages: namespace declared on every tombstone, no comment
        return (
            f'    <at:deleted-entry ref="{item.ident}" when="{_stamp(item.when)}" xmlns:at="{_TOMBSTONE_NS}"/>\n'
        ).encode()
    comment = "ANULADA" if (item.when.microsecond // 1000) % 2 else "CERRADA"  # deterministic, both occur
    return (
        f'    <at:deleted-entry ref="{item.ident}" when="{_stamp(item.when)}">'
        f'<at:comment type="{comment}"/></at:deleted-entry>\n'
    ).encode()


def main(argv: list[str] | None = None) -> int:
    """`python -m benchmarks.pagegen`: the entries of each shape's generated pages beside the real pages'."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description="Compare generated pages' entries with the real pages'.")
    parser.add_argument("--pages", type=int, default=4, help="pages generated per shape (default 4)")
    parser.add_argument("--dataset", default="licitaciones", choices=sorted(DATASETS))
    args = parser.parse_args(argv)
    print(f"real 1044 pages bundled: {real_page_shape().line()}")
    with tempfile.TemporaryDirectory(prefix="placsp-pagegen-") as tmp:
        for shape in SHAPES.values():
            corpus = generate_corpus(Path(tmp) / shape.name, args.pages, dataset_key=args.dataset, **shape.options())
            facts = entry_shape((f.read_bytes() for f in corpus.files), args.dataset)
            print(f"shape {shape.name!r} ({shape.what}): {facts.line()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
