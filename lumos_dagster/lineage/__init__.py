"""Lineage rules: code tables resolved to datasets, the dataset list in lineage order, impact and
verdicts downstream of a change, and the datasets a change of code touches."""
