"""A minimal reproduction for Dagster: the cost of each output of a multi_asset grows with the
number of its outputs, so one op of N assets costs O(N²) (found in dagster 1.13.27; unchanged in
1.13.29, the newest release on PyPI on 2026-11-26).

    python -m benchmarks.dagster_outputs [N …]

One subsettable multi_asset of N AssetSpecs with two AssetCheckSpecs each, yielding one
`MaterializeResult(check_results=[…])` per asset; ephemeral instance, console logger silenced.
Per yielded output, `_step_output_error_checked_user_event_sequence`
(dagster/_core/execution/plan/execute_step.py) calls `StepExecutionContext.get_output_asset_keys`,
which walks every output of the step and, for each, calls `AssetsDefinition.asset_and_check_keys`
(a property that builds a new set of all N·3 keys); `AssetCheckResult.to_asset_check_evaluation`
rebuilds a map of every check of the op and runs a database query, twice per embedded result.
Caching those three per step makes the cost per output flat. Lumos bounds its ops at 200 datasets
and yields events rather than outputs meanwhile (assets/datasets.py, docs/performance.md).
"""

# no `from __future__ import annotations`: Dagster reads the op's context annotation
import sys
import time

import dagster as dg

CHECKS = ("c0", "c1")


def _assets(n: int):
    partitions = dg.StaticPartitionsDefinition(["p"])
    specs = [dg.AssetSpec(f"a{i:05d}", partitions_def=partitions) for i in range(n)]
    checks = [dg.AssetCheckSpec(c, asset=s.key) for s in specs for c in CHECKS]

    @dg.multi_asset(specs=specs, check_specs=checks, can_subset=True, partitions_def=partitions, name="many")
    def many(context: dg.AssetExecutionContext):
        for key in sorted(context.selected_asset_keys):
            yield dg.MaterializeResult(
                asset_key=key,
                check_results=[dg.AssetCheckResult(asset_key=key, check_name=c, passed=True) for c in CHECKS],
            )

    return many


def ms_per_output(n: int) -> float:
    assets = _assets(n)
    start = time.perf_counter()
    result = dg.materialize(
        [assets],
        partition_key="p",
        instance=dg.DagsterInstance.ephemeral(),
        run_config={"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}},
    )
    assert result.success
    return (time.perf_counter() - start) / n * 1000


if __name__ == "__main__":
    print(f"dagster {dg.__version__}")
    print("| assets in the op | ms per asset |\n|---:|---:|")
    for size in [int(a) for a in sys.argv[1:]] or [125, 250, 500, 1000]:
        print(f"| {size:,} | {ms_per_output(size):.1f} |", flush=True)
