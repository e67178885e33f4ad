"""Local (or mounted) file systems."""

from __future__ import annotations

import os
from typing import Callable, Iterator

from lumos_dagster.config import LocalSourceConfig
from lumos_dagster.discovery import DiscoveredDataset, FileEntry, Grouping, group_files
from lumos_dagster.report import ScanReport

Progress = Callable[[int], None]


def list_files(root: str, subpath: str = "", report: ScanReport | None = None) -> Iterator[FileEntry]:
    """Every file under root/subpath, as paths relative to root.

    Folders named `.x` or `_x` (`_temporary`, `.git`) are not walked; symlinked
    folders are not followed (no loops). Unreadable folders go to the report.
    """
    start = os.path.join(root, subpath) if subpath else root
    if os.path.isfile(start):
        st = os.stat(start)
        yield FileEntry(subpath, st.st_size, st.st_mtime)
        return
    stack = [start]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            if report is not None:
                report.fail(folder, f"cannot list folder: {exc.strerror or exc}")
            continue
        for e in reversed(entries):
            if e.is_dir(follow_symlinks=False):
                if e.name[:1] not in (".", "_"):
                    stack.append(e.path)
            elif e.is_file():
                st = e.stat()
                yield FileEntry(os.path.relpath(e.path, root).replace(os.sep, "/"), st.st_size, st.st_mtime)


class LocalSource:
    def __init__(self, config: LocalSourceConfig, root: str):
        self.config = config
        self.root = root
        self.name = config.name
        self.platform = config.platform

    def uri(self, relpath: str) -> str:
        return os.path.join(self.root, relpath)

    def _group(self, entries: list[FileEntry]) -> Grouping:
        formats = frozenset(self.config.formats) if self.config.formats else None
        return group_files(entries, self.config.template, formats, tuple(self.config.exclude))

    def discover(self, report: ScanReport, progress: Progress | None = None) -> dict[str, DiscoveredDataset] | None:
        """The datasets under the root; None when the root cannot be scanned (not "no datasets")."""
        if not os.path.isdir(self.root):
            report.fail(f"source {self.name}", f"root folder {self.root} does not exist")
            return None
        entries = []
        for entry in list_files(self.root, report=report):
            entries.append(entry)
            if progress and len(entries) % 1000 == 0:
                progress(len(entries))
        report.files_listed += len(entries)
        grouping = self._group(entries)
        for path, reason in grouping.skipped:
            report.skip(path, reason)
        report.datasets_found += len(grouping.datasets)
        return grouping.datasets

    def dataset(self, location: str, fmt: str | None, report: ScanReport) -> DiscoveredDataset | None:
        """The dataset's current files: its location re-listed and re-grouped by the same rules.

        Found by location and format, not name: an auto-detected name can depend on
        sibling files (`raw/mixed.csv` exists because a JSON file sits next to it).
        """
        if not os.path.exists(self.uri(location)):
            return None
        entries = list(list_files(self.root, location, report))
        report.files_listed += len(entries)
        found = self._group(entries).datasets.values()
        return next((d for d in found if d.location == location and d.format == fmt), None)
