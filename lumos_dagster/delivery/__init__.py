"""Delivery: the outbox the store keeps, sent to each catalog (`outbox`), and the worker process that
delivers a run's snapshots while the run goes on (`worker`)."""
