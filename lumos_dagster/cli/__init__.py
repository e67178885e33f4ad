"""The `lumos` command line. Each command's module loads when the command runs: `lumos discover`
does not pay for importing DataHub's file sink or the report renderers."""

from __future__ import annotations

import importlib

import click

from lumos_dagster.floor.wording import visible

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

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:  # click prints it: its names made visible, as `output.echo` does
            # `message` is typed Final, but click reads it only when it prints the error
            setattr(exc, "message", "\n".join(map(visible, exc.message.split("\n"))))  # noqa: B010
            raise
        except Exception as exc:  # a store fault mid-command is one line, not the SQL and its parameters
            from lumos_dagster.floor.errors import LumosError
            from lumos_dagster.store.faults import fault_message

            fault = str(exc) if isinstance(exc, LumosError) else fault_message(exc)
            if fault is None:
                raise
            raise click.ClickException(visible(fault)) from None  # a LumosError's own lines: one line

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attribute = COMMANDS[name].split(":")
        return getattr(importlib.import_module(f"lumos_dagster.cli.{module}"), attribute)


@click.group(cls=_Commands)
@click.version_option(package_name="lumos", prog_name="lumos")
def main() -> None:
    """Lumos keeps your catalog true: snapshots of your datasets' metadata, versioned."""
    from lumos_dagster.floor.collector import skip_final_collection

    skip_final_collection()


if __name__ == "__main__":
    main()
