"""Local (or mounted) file systems."""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from typing import Iterator

from lumos_dagster.floor.scan_report import ScanReport
from lumos_dagster.formats import HEAD_BYTES
from lumos_dagster.sources.base import FileSource
from lumos_dagster.sources.discovery import FileEntry
from lumos_dagster.table_formats import hidden_folders


def list_files(root: str, subpath: str = "", report: ScanReport | None = None) -> Iterator[FileEntry]:
    """Every file under root/subpath, as paths relative to root.

    Folders named `.x` or `_x` (`_temporary`, `.git`) are not walked, but for a table's own
    (`_delta_log`: `lumos_dagster.table_formats.hidden_folders`); symlinked folders are not followed (no
    loops), symlinked files only to a file under the root (a link to /etc/passwd would otherwise
    publish its first line as column names). What cannot be walked is one skip in the report, with
    its reason, and the walk goes on: a link in a loop or to nothing, a folder that cannot be listed
    (`UNLISTED`: its source then removes nothing), a file gone since it was listed.
    """
    start = os.path.join(root, subpath) if subpath else root
    if os.path.isfile(start):
        if os.path.islink(start) and _outside(start, root):
            if report is not None:
                report.skip(subpath, OUTSIDE)
            return
        st = os.stat(start)
        yield FileEntry(subpath, st.st_size, st.st_mtime_ns / 1e9, str(st.st_mtime_ns))
        return
    if not os.path.isdir(start):
        return
    # (folder, its path relative to root with a trailing "/"): relative paths are joined, not
    # computed by os.path.relpath (a third of the listing's time)
    relative = posixpath.normpath(subpath or ".").strip("/")
    stack = [(start, "" if relative == "." else f"{relative}/")]
    walked = hidden_folders()
    while stack:
        folder, prefix = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            if report is not None:
                report.skip(prefix or ".", f"{UNLISTED} ({exc.strerror or type(exc).__name__})")
            continue
        for e in reversed(entries):
            try:
                if e.is_dir(follow_symlinks=False):
                    if e.name[:1] not in (".", "_") or e.name in walked:
                        stack.append((e.path, f"{prefix}{e.name}/"))
                    continue
                # a link is followed here: in a loop, to itself or to nothing, it raises
                st = os.stat(e.path) if e.is_symlink() else e.stat()
            except OSError as exc:
                if report is not None:
                    report.skip(prefix + e.name, _unwalkable(exc))
                continue
            if not stat.S_ISREG(st.st_mode):
                continue  # a link to a folder (not followed), a socket
            if e.is_symlink() and _outside(e.path, root):
                if report is not None:
                    report.skip(prefix + e.name, OUTSIDE)
                continue
            yield FileEntry(prefix + e.name, st.st_size, st.st_mtime_ns / 1e9, str(st.st_mtime_ns))


OUTSIDE = "symlink to a file outside the source's root"
#: why a folder was not walked; what was found under it before is kept
UNLISTED = "folder that cannot be listed: its datasets are kept, and its source removes none this time"
_UNWALKABLE = {
    errno.ELOOP: "symlink in a loop (to itself, or back to itself through others)",
    errno.ENOENT: "dangling symlink, or a file gone since it was listed",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
}


def _unwalkable(exc: OSError) -> str:
    return _UNWALKABLE.get(exc.errno or 0) or f"cannot be read ({exc.strerror or type(exc).__name__})"


def _outside(link: str, root: str) -> bool:
    top = os.path.realpath(root)
    return os.path.commonpath([os.path.realpath(link), top]) != top


class LocalSource(FileSource):
    def __init__(self, config, root: str):
        super().__init__(config)
        self.root = root

    def reachable(self, report: ScanReport) -> bool:
        if os.path.isdir(self.root):
            return True
        problem = "is a file, not a folder" if os.path.exists(self.root) else "does not exist"
        report.fail(f"source {self.name}", f"root folder {self.root} {problem}")
        return False

    def list(self, subpath: str, report: ScanReport) -> Iterator[FileEntry]:
        return list_files(self.root, subpath, report)

    def uri(self, relpath: str) -> str:
        return os.path.join(self.root, relpath)

    def head(self, relpath: str) -> bytes | None:
        # a local read costs microseconds: every file whose name could mislead is looked at
        try:
            with open(self.uri(relpath), "rb") as fh:
                return fh.read(HEAD_BYTES)
        except OSError:  # gone or unreadable since listed: the reader reports it
            return None
