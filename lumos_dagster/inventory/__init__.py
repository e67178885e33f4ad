"""Keeping the registry in step with storage: discovery's refresh, and what changed since the last look."""
