"""Governance: quality evidence and score, required documentation, the govern step."""
