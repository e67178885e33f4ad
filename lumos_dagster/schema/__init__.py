"""Schemas over time: diffs, compatibility rules, versions, the gate, history and releases."""
