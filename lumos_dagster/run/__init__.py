"""The snapshot run: list, read, assemble, price, govern, store (versions decided once), judge, deliver,
alert and release, one batch of datasets at a time; the Dagster op and `lumos snapshot` drive it."""
