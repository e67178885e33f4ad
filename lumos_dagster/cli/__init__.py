"""The `lumos` command line. Each command's module loads when the command runs: `lumos discover`
does not pay for importing DataHub's file sink or the report renderers."""

from __future__ import annotations

import importlib

import click

#: command → module of lumos_dagster.cli and function
COMMANDS = {
    "schema": "scan:schema",
    "discover": "scan:discover",
    "demo-lake": "scan:demo_lake",
    "snapshot": "snapshot:snapshot",
    "summary": "scan:summary",
    "lite": "scan:lite",
    "diff": "changes:diff",
    "gate": "changes:gate",
    "impact": "changes:impact",
    "changed": "changes:changed",
    "history": "changes:history",
    "evolution": "changes:evolution",
    "release": "changes:release",
    "sync": "portable:sync",
    "export": "portable:export",
    "import": "portable:import_file",
    "validate": "portable:validate_file",
    "compare": "portable:compare",
    "migrate": "migrate:migrate",
    "cost": "cost:cost",
    "savings": "cost:savings",
    "report": "governance:report",
    "search": "governance:search",
    "serve": "serve:serve",
    "deploy": "deploy:deploy",
    "init": "init:init",
    "docs": "docs:docs",
}


class _Commands(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attribute = COMMANDS[name].split(":")
        return getattr(importlib.import_module(f"lumos_dagster.cli.{module}"), attribute)


@click.group(cls=_Commands)
@click.version_option(package_name="lumos", prog_name="lumos")
def main() -> None:
    """Lumos keeps your catalog true: snapshots of your datasets' metadata, versioned."""
    from lumos_dagster.collector import skip_final_collection

    skip_final_collection()


if __name__ == "__main__":
    main()
