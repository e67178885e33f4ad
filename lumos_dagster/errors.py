"""One small exception hierarchy. Messages name the file, dataset or key, and the fix."""


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


class NotProfiled(LumosError):
    """Why a dataset cannot be profiled (said in the run's warnings; its snapshot is unaffected)."""
