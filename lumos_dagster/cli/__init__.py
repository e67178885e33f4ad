"""The `lumos` command line."""

from __future__ import annotations

import click

from lumos_dagster.cli import changes, cost, governance, portable, scan


@click.group()
def main() -> None:
    """Lumos keeps your catalog true: snapshots of your datasets' metadata, versioned."""


for command in (
    scan.schema,
    scan.discover,
    scan.demo_lake,
    scan.summary,
    scan.lite,
    changes.diff,
    changes.gate,
    changes.impact,
    changes.changed,
    changes.history,
    changes.evolution,
    changes.release,
    portable.sync,
    portable.export,
    portable.import_file,
    portable.validate_file,
    portable.compare,
    cost.cost,
    cost.savings,
    governance.report,
    governance.search,
):
    main.add_command(command)

if __name__ == "__main__":
    main()
