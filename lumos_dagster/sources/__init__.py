"""Sources: where datasets live. Each is a config, a scanner and a report."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Union

from lumos_dagster.floor.limits import MAX_NAME
from lumos_dagster.floor.model import DatasetRecord
from lumos_dagster.floor.plugins import BuildContext
from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.floor.storable import unstorable
from lumos_dagster.sources.base import FileSource, Progress, TableDescription, TableSource
from lumos_dagster.sources.builtins import SOURCES
from lumos_dagster.sources.discovery import DiscoveredDataset
from lumos_dagster.sources.local import UNLISTED

if TYPE_CHECKING:  # lumos_dagster.floor.config imports this package's registry
    from lumos_dagster.floor.config import LumosConfig

Source = Union[FileSource, TableSource]

__all__ = [
    "Discovery",
    "FileSource",
    "Source",
    "TableDescription",
    "TableSource",
    "build_sources",
    "discover",
    "file_records",
]


def build_sources(config: LumosConfig) -> dict[str, Source]:
    """Each `sources` entry's source, built by its type's plug-in."""
    sources = {}
    for i, entry in enumerate(config.sources):
        context = BuildContext(f"{config.source_file}: sources[{i}]", config.base_dir)
        sources[entry.name] = SOURCES[entry.type].built(entry, context)
    return sources


@dataclass
class Discovery:
    records: list[DatasetRecord] = field(default_factory=list)
    scanned: list[str] = field(default_factory=list)  # sources that could be listed
    partial: list[str] = field(default_factory=list)  # sources listed but for folders that could not be


def file_records(source: FileSource, found: Mapping[str, DiscoveredDataset]) -> list[DatasetRecord]:
    return [
        DatasetRecord(
            name=ds.name,
            platform=ds.platform or source.platform,
            source=source.name,
            location=ds.location,
            format=ds.format,
            domain=ds.domain,
            partition_keys=ds.partition_keys,
            time_partition_key=ds.time_partition_key,
            time_format=ds.time_format,
            file_count=len(ds.files),
            total_bytes=sum(f.entry.size for f in ds.files),
            first_partition=min((d.isoformat() for f in ds.files if (d := ds.file_date(f))), default=None),
        )
        for ds in found.values()
    ]


def discover(
    sources: dict[str, Source], report: ScanReport, progress: Callable[[str], None] = lambda _: None
) -> Discovery:
    """Every dataset the sources hold, as registry records. A name found in two
    sources is a failure in the report, and neither is recorded."""
    out = Discovery()
    records = out.records
    for source in sources.values():
        progress(f"scanning {source.name} ({source.root})")
        unlisted = _unlisted(report)
        found = _records(source, report, progress=lambda n: progress(f"  listed {n} files"))
        if found is None:
            continue
        # listed whole, what is not there vanished; in part, it may be where the listing could not go
        (out.scanned if _unlisted(report) == unlisted else out.partial).append(source.name)
        records += [r for r in found if _storable(r, report)]
    names = [r.name for r in records]
    duplicated = {n for n in names if names.count(n) > 1}
    for name in sorted(duplicated):
        report.fail(name, "found in more than one source; give the sources distinct templates or roots")
    out.records = [r for r in records if r.name not in duplicated]
    return out


def _unlisted(report: ScanReport) -> int:
    return sum(n for reason, n in report.skipped.items() if reason.startswith(UNLISTED))


def _storable(record: DatasetRecord, report: ScanReport) -> bool:
    """Whether the store can keep the dataset's name; if not, a skip in the report (the name cut short)."""
    held = unstorable(record.name)
    if held is not None:
        why = f"a name holding {held}, which the store cannot keep"
    elif len(record.urn) > MAX_NAME:
        why = f"a name longer than the store keeps (its URN past {MAX_NAME:,} characters)"
    else:
        return True
    report.skip(record.name if len(record.name) <= 80 else f"{record.name[:40]}…{record.name[-20:]}", why)
    return False


def _records(source: Source, report: ScanReport, progress: Progress) -> list[DatasetRecord] | None:
    """The source's datasets as registry records; None when it cannot be reached."""
    if isinstance(source, FileSource):
        found = source.discover(report, progress=progress)
        return None if found is None else file_records(source, found)
    return source.discover(report, progress=progress)
