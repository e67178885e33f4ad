"""Lumos: metadata automation as a Dagster code location."""
