"""Grouping listed files into datasets: pure rules, no I/O.

Without a template (auto-detection):
* a folder whose files share a format is one dataset, named by its path
  (`sales/orders`); its first segment is the domain when it has more than one;
* Hive-style `key=value` folders below it are partitions, not datasets; which of them drive
  time (`dt=`, `year=/month=/day=`, `hour=` …) is `scan/time_partitions`' rule;
* a folder holding several formats gives one dataset per format (`raw/mixed.csv`);
* a file directly under the root is a dataset of its own, named by its stem;
* names starting with `.` or `_` (`_SUCCESS`, `.crc`, `_temporary/`) are not data, nor are files under
  a writer's in-progress name (`x.parquet._COPYING_`, `part-0.inprogress.1f2e`, `x.csv.tmp`);
* a table folder (`_delta_log/` inside: `lumos_dagster.table_formats`) is one dataset named by its
  path, whatever it holds; its files are never grouped by the rules above.

With a template such as `{domain}/{dataset}/dt={date}/*`, whole-segment placeholders
name the dataset, `key={x}` segments are partitions, `{date}` is the time partition,
`*` matches within a segment and `**` any number of segments.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Callable

from lumos_dagster.floor.errors import ConfigError
from lumos_dagster.floor.time_partitions import DATE_FORMATS, mostly_times, partition_time
from lumos_dagster.floor.time_partitions import time_key as time_key_of
from lumos_dagster.formats import format_from, format_of, needs_head
from lumos_dagster.table_formats import claim

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class FileEntry:
    """A listed file: posix path relative to the source root, size in bytes, mtime (epoch s),
    and what changes whenever the content does (nanosecond mtime, or the object's ETag)."""

    path: str
    size: int
    mtime: float
    tag: str = ""

    @property
    def fingerprint(self) -> str:
        return f"{self.size}:{self.tag or self.mtime!r}"


@dataclass(frozen=True)
class DatasetFile:
    entry: FileEntry
    partition: tuple[tuple[str, str], ...] = ()


@dataclass
class DiscoveredDataset:
    name: str
    location: str  # relative to the source root: the dataset's folder, or its single file
    format: str
    domain: str | None = None
    files: list[DatasetFile] = field(default_factory=list)
    partition_keys: tuple[str, ...] = ()
    time_partition_key: str | None = None
    time_format: str | None = None
    platform: str | None = None  # a table format's catalog platform; None: the source's

    def file_time(self, f: DatasetFile) -> datetime | None:
        """The file's time-partition moment (midnight for a daily one), if the dataset has one."""
        if self.time_partition_key is None:
            return None
        return partition_time(self.time_partition_key, self.time_format, dict(f.partition))

    def file_date(self, f: DatasetFile) -> date | None:
        """The file's time-partition date, if the dataset is time-partitioned."""
        moment = self.file_time(f)
        return None if moment is None else moment.date()


@dataclass
class Grouping:
    datasets: dict[str, DiscoveredDataset] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    notes: list[tuple[str, str]] = field(default_factory=list)  # (path, what its content said)


#: a file's first `HEAD_BYTES` bytes by path, or None when the source does not look (or cannot)
Head = Callable[[str], "bytes | None"]


def _format(path: str, head: Head | None, result: Grouping) -> str | None:
    """The file's format as `lumos schema` sees it: by name, or by content where the name may mislead."""
    first = head(path) if head is not None and needs_head(path) else None
    if first is None:
        return format_of(path)
    fmt, note = format_from(path, first)
    if note:
        result.notes.append((path, note))
    return fmt


def is_hidden(path: str) -> bool:
    return any(seg[:1] in (".", "_") for seg in path.split("/"))


#: the names writers give a file until it is whole, and rename it from when it is (docs/sources.md,
#: "Files still being written"): Hadoop's `fs -put`/`-cp` (`x._COPYING_`), Flink's file sinks
#: (`part-0-1.inprogress.<uuid>`, `.in-progress`, `.pending`), gsutil (`.gstmp`), WinSCP (`.filepart`),
#: rclone and others (`.partial`, `.tmp`, `.temp`); Kafka Connect's HDFS sink writes under `+tmp/`.
#: Spark's and Hadoop's `_temporary/`, Spark's `.spark-staging-*` and rsync's `.name.XXXXXX` are hidden.
_IN_PROGRESS = re.compile(
    r"(\._COPYING_|\.(tmp|temp|partial|gstmp|filepart)|\.(inprogress|in-progress|pending)(\.[^/.]+)?)$|(^|/)\+tmp/",
    re.IGNORECASE,
)
IN_PROGRESS = "being written (a name its writer renames once the file is whole)"


def in_progress(path: str) -> bool:
    return _IN_PROGRESS.search(path) is not None


def _split_kv(segment: str) -> tuple[str, str] | None:
    key, sep, value = segment.partition("=")
    return (key, value) if sep and key else None


def _stem(filename: str) -> str:
    while True:
        stem, ext = os.path.splitext(filename)
        if not ext or not stem:
            return filename
        filename = stem


def _finish(ds: DiscoveredDataset, result: Grouping, time_key: str | None = None,
            time_format: str | None = None) -> DiscoveredDataset:  # fmt: skip
    keys: list[str] = []
    for f in ds.files:
        keys.extend(k for k, _ in f.partition if k not in keys)
    ds.partition_keys = tuple(keys)
    if time_key is None:
        time_key, time_format = time_key_of(ds.partition_keys, [dict(f.partition) for f in ds.files])
    ds.time_partition_key, ds.time_format = time_key, time_format
    if time_key is not None:
        # the odd folders a time key tolerates (time_partitions): their files belong to no window
        kept: list[DatasetFile] = []
        for f in ds.files:
            if partition_time(time_key, time_format, dict(f.partition)):
                kept.append(f)
            else:
                value = "/".join(dict(f.partition).get(k, "") for k in time_key.split("/"))
                result.skipped.append((f.entry.path, f"{time_key}={value!r} is not a time: left out of {ds.name}"))
        ds.files = kept
    ds.files.sort(key=lambda f: f.entry.path)
    return ds


class PathTemplate:
    """A compiled path template, e.g. `{domain}/{dataset}/dt={date}/*`."""

    def __init__(self, template: str):
        self.template = template.strip("/")
        self.name_parts: list[str] = []
        self.partition_keys: dict[str, str] = {}  # placeholder → partition key
        regex = []
        for segment in self.template.split("/"):
            regex.append(self._compile_segment(segment))
        if not self.name_parts:
            raise ConfigError(
                f"path template {template!r} names no dataset: give at least one whole-segment "
                "placeholder such as {dataset}"
            )
        self.regex = re.compile("/".join(regex) + r"\Z")

    def _compile_segment(self, segment: str) -> str:
        if segment == "**":
            return r".+?"
        kv = _split_kv(segment)
        whole = _PLACEHOLDER.fullmatch(segment)
        if whole and whole.group(1) != "date":
            self.name_parts.append(whole.group(1))
            return f"(?P<{whole.group(1)}>[^/]+)"
        if kv and (value := _PLACEHOLDER.fullmatch(kv[1])):
            self.partition_keys[value.group(1)] = kv[0]
        elif whole:  # a bare {date} folder
            self.partition_keys["date"] = "date"
        out, pos = [], 0
        for m in _PLACEHOLDER.finditer(segment):
            out.append(self._glob(segment[pos : m.start()]))
            out.append(f"(?P<{m.group(1)}>[^/]+)")
            pos = m.end()
        out.append(self._glob(segment[pos:]))
        return "".join(out)

    @staticmethod
    def _glob(text: str) -> str:
        return "".join("[^/]*" if c == "*" else ("[^/]" if c == "?" else re.escape(c)) for c in text)

    def match(self, path: str) -> tuple[str, str, dict[str, str], tuple[tuple[str, str], ...]] | None:
        """(name, location, placeholders, partition) for a matching path, else None."""
        m = self.regex.match(path)
        if not m:
            return None
        values = m.groupdict()
        name = "/".join(values[p] for p in self.name_parts)
        last = self.name_parts[-1]
        location = path[: m.end(last)]
        partition = tuple((key, values[ph]) for ph, key in self.partition_keys.items())
        return name, location, values, partition


def group_files(
    entries: list[FileEntry],
    template: str | None = None,
    formats: frozenset[str] | None = None,
    exclude: tuple[str, ...] = (),
    head: Head | None = None,
) -> Grouping:
    result = Grouping()
    tables, entries = claim([(e.path, e) for e in entries])
    _group_tables(tables, exclude, result)
    accepted: list[tuple[FileEntry, str]] = []
    for e in entries:
        if is_hidden(e.path):
            result.skipped.append((e.path, "hidden or marker file"))
        elif in_progress(e.path):
            result.skipped.append((e.path, IN_PROGRESS))
        elif any(fnmatch.fnmatch(e.path, pat) for pat in exclude):
            result.skipped.append((e.path, "excluded by pattern"))
        elif (fmt := _format(e.path, head, result)) is None:
            result.skipped.append((e.path, "unrecognised format"))
        elif formats is not None and fmt not in formats:
            result.skipped.append((e.path, f"format {fmt} not in the source's formats"))
        else:
            accepted.append((e, fmt))
    if template:
        _group_by_template(PathTemplate(template), accepted, result)
    else:
        _group_auto(accepted, result)
    return result


def _group_tables(tables: dict, exclude: tuple[str, ...], result: Grouping) -> None:
    """Each table folder is one dataset named by its path, template or not (its files follow the
    table's layout, not the source's); excluded only when every one of its files is."""
    for location, (fmt, files) in tables.items():
        if not location:
            reason = f"the source root is a {fmt.type} table: point the source at the folder holding it"
        elif exclude and all(any(fnmatch.fnmatch(e.path, pat) for pat in exclude) for e in files):
            reason = "excluded by pattern"
        else:
            parts = location.split("/")
            domain = parts[0] if len(parts) > 1 else None
            ds = DiscoveredDataset(location, location, fmt.type, domain, platform=fmt.platform)
            ds.files = sorted((DatasetFile(e) for e in files), key=lambda f: f.entry.path)
            result.datasets[location] = ds
            continue
        result.skipped += [(e.path, reason) for e in files]


def _group_by_template(tpl: PathTemplate, accepted: list[tuple[FileEntry, str]], result: Grouping) -> None:
    time_key = next((key for ph, key in tpl.partition_keys.items() if ph == "date"), None)
    for e, fmt in accepted:
        m = tpl.match(e.path)
        if m is None:
            result.skipped.append((e.path, f"does not match template {tpl.template}"))
            continue
        name, location, values, partition = m
        ds = result.datasets.get(name)
        if ds is None:
            ds = result.datasets[name] = DiscoveredDataset(name, location, fmt, values.get("domain"))
        elif ds.format != fmt:
            result.skipped.append((e.path, f"format {fmt} differs from dataset {name}'s {ds.format}"))
            continue
        ds.files.append(DatasetFile(e, partition))
    for ds in result.datasets.values():
        parts = [dict(f.partition) for f in ds.files]
        date_fmt = next((f for f in DATE_FORMATS if time_key and mostly_times(time_key, f, parts)), None)
        _finish(ds, result, time_key if date_fmt else None, date_fmt)


def _group_auto(accepted: list[tuple[FileEntry, str]], result: Grouping) -> None:
    by_dir: dict[str, dict[str, list[DatasetFile]]] = defaultdict(lambda: defaultdict(list))
    root_files: list[tuple[FileEntry, str]] = []
    for e, fmt in accepted:
        *dirs, _ = e.path.split("/")
        base: list[str] = []
        partition: list[tuple[str, str]] = []
        for seg in dirs:
            kv = _split_kv(seg)
            if kv is None and not partition:
                base.append(seg)
            elif kv is not None:
                partition.append(kv)
        if not base:
            if partition:
                result.skipped.append((e.path, "partition folder directly under the root: no dataset folder"))
            else:
                root_files.append((e, fmt))
            continue
        by_dir["/".join(base)][fmt].append(DatasetFile(e, tuple(partition)))

    for location, per_format in by_dir.items():
        parts = location.split("/")
        domain = parts[0] if len(parts) > 1 else None
        for fmt, files in per_format.items():
            name = location if len(per_format) == 1 else f"{location}.{fmt}"
            result.datasets[name] = _finish(DiscoveredDataset(name, location, fmt, domain, files), result)

    stems: dict[str, int] = defaultdict(int)
    for e, _ in root_files:
        stems[_stem(e.path)] += 1
    for e, fmt in root_files:
        stem = _stem(e.path)
        name = stem if stems[stem] == 1 and stem not in result.datasets else f"{stem}.{fmt}"
        result.datasets[name] = _finish(DiscoveredDataset(name, e.path, fmt, None, [DatasetFile(e)]), result)
