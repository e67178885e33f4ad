"""One small exception hierarchy. Messages name the file, dataset or key, and the fix."""

from __future__ import annotations

import difflib
from typing import Iterable, Sequence


class LumosError(Exception):
    """Base of every error Lumos raises on purpose."""


class ConfigError(LumosError):
    """lumos.yaml is missing, malformed or invalid."""


class SchemaReadError(LumosError):
    """A file's schema could not be read; the message says which file and why."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class StoreError(LumosError):
    """The snapshot store cannot be opened or written."""


class CatalogError(LumosError):
    """The catalog refused or could not receive metadata."""


class SparkUnavailable(LumosError):
    """The Spark master or Spark Connect server lumos.yaml names cannot be reached, or Spark cannot start:
    the run fails once, naming the key (`spark.master` / `spark.remote`) and the address, rather than each
    dataset that needed Spark failing on its own."""


class NotProfiled(LumosError):
    """Why a dataset cannot be profiled (said in the run's warnings; its snapshot is unaffected)."""


class UnknownDataset(LumosError):
    """Dataset names Lumos does not know: one message wherever a name is asked for (`lumos history`,
    `impact`, `diff`, `gate`, `release`, `savings`), with the names closest to each."""

    def __init__(self, names: Sequence[str], known: Iterable[str]):
        known = sorted(set(known))
        said = []
        for name in names:
            close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
            said.append(f"{name} (did you mean {' or '.join(close)}?)" if close else name)
        super().__init__(
            f"unknown dataset{'s' if len(names) > 1 else ''} {', '.join(said)}: `lumos discover` records what "
            "the sources hold, lumos.yaml's `datasets:` declares others"
        )
        self.names = tuple(names)
