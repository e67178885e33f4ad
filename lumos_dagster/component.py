"""The Lumos component: a lake's Lumos assets, sensors and schedules in a Dagster project of the user's own.

    # src/my_project/defs/lumos/defs.yaml, written by
    #   dg scaffold defs lumos_dagster.component.LumosComponent lumos
    type: lumos_dagster.component.LumosComponent
    attributes:
      config: "{{ context.project_root }}/lumos.yaml"

The definitions are the standalone code location's (lumos_dagster/definitions.py builds them for both),
and so is the state: the registry document, kept as Dagster defs state under the same key
(`lumos_dagster.assets.state`). One Lumos component per code location (its jobs, sensors and resources have fixed
names): one lumos.yaml names as many sources as the project has lakes.
"""

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import click
from dagster import Definitions, PreviewWarning
from dagster.components import (
    ComponentLoadContext,
    ResolutionContext,
    Resolvable,
    Resolver,
    Scaffolder,
    ScaffoldRequest,
    StateBackedComponent,
    scaffold_component,
    scaffold_with,
)

# the class Dagster 1.13 passes on as it is (component_tree.augment_component_tree_exception), where it
# wraps any other in a 160-line view of the component tree: not exported from dagster.components
from dagster.components.core.component_tree import ComponentTreeException
from dagster.components.utils.defs_state import DefsStateConfig
from pydantic import BaseModel, Field

from lumos_dagster.assets.state import state_config
from lumos_dagster.definitions import location_config, location_definitions
from lumos_dagster.floor.config import DEFAULT_CONFIG
from lumos_dagster.floor.errors import LumosError
from lumos_dagster.lineage.catalogue import RegistryState

#: how defs.yaml names the project's root (Dagster's template scope)
PROJECT_ROOT = "{{ context.project_root }}"

# dg imports every installed component library, then makes each one's scaffolder to list it (`dg
# scaffold defs`, `dg dev`'s check of defs.yaml): dagster-spark's, which Lumos brings through
# dagster-pyspark, says it is in preview each time, in the user's project whether it is used or not
warnings.filterwarnings(
    "ignore", message="Class `SparkDeclarativePipelineScaffolder` is currently in preview", category=PreviewWarning
)


class LumosComponentError(ComponentTreeException, click.ClickException):
    """What Lumos refuses (a lumos.yaml with a typo…), said in a user's project as `lumos` says it: Dagster
    passes a ComponentTreeException on unwrapped (the UI's code location error is this message), and
    `dg launch`, whose click prints a ClickException as one `Error: …` line, prints no traceback."""


@contextmanager
def said_as_lumos() -> Iterator[None]:
    try:
        yield
    except LumosError as exc:
        raise LumosComponentError(str(exc)) from None


class LumosScaffoldParams(BaseModel):
    config: str | None = Field(
        default=None, description=f"The lumos.yaml (`lumos init` writes one); default: the project's {DEFAULT_CONFIG}."
    )


class LumosScaffolder(Scaffolder[LumosScaffoldParams]):
    """defs.yaml naming the lumos.yaml by the project's root when it is inside (the defs folder may move)."""

    @classmethod
    def get_scaffold_params(cls) -> type[LumosScaffoldParams]:
        return LumosScaffoldParams

    def scaffold(self, request: ScaffoldRequest[LumosScaffoldParams]) -> None:
        root = (request.project_root or Path.cwd()).resolve()
        config = Path(request.params.config or root / DEFAULT_CONFIG).resolve()
        named = f"{PROJECT_ROOT}/{config.relative_to(root)}" if config.is_relative_to(root) else str(config)
        scaffold_component(request, {"config": named})


def _beside_defs_yaml(context: ResolutionContext, path: str) -> str:
    return str(context.resolve_source_relative_path(path))


@scaffold_with(LumosScaffolder)
@dataclass
class LumosComponent(StateBackedComponent, Resolvable):
    """Lumos on a lake: a time-partitioned asset per dataset (deps = lineage), each partition the dataset's
    snapshot, stored and written into the catalogs lumos.yaml names; the storage sensors, the schedules and
    Lumos' jobs. The datasets are those `lumos discover` recorded, kept as defs state."""

    config: Annotated[
        str,
        Resolver(
            _beside_defs_yaml,
            model_field_type=str,
            description="The lumos.yaml: absolute, or relative to this defs.yaml's folder.",
        ),
    ]

    @property
    def defs_state_config(self) -> DefsStateConfig:
        with said_as_lumos():
            return state_config(location_config(self.config))

    def write_state_to_path(self, state_path: Path) -> None:
        """The registry document now (`dg utils refresh-defs-state`, the UI's refresh)."""
        with said_as_lumos():
            state_path.write_text(RegistryState.of_location(location_config(self.config)).text)

    def build_defs(self, context: ComponentLoadContext) -> Definitions:
        """Not StateBackedComponent's, which builds a code server from the stored version and refreshes it only
        under `dg dev`: the registry changes while the deployment runs (sensors, `lumos discover`), so each load
        that initializes the code location publishes it, and a run worker builds from the version its run
        pinned (`lumos_dagster.assets.state.registry_state`)."""
        with said_as_lumos():
            return location_definitions(self.config)

    def build_defs_from_state(self, context: ComponentLoadContext, state_path: Path | None) -> Definitions:
        """The definitions of the registry document at `state_path` (none: the registry as this load sees it)."""
        state = RegistryState.loads(state_path.read_text()) if state_path is not None else None
        with said_as_lumos():
            return location_definitions(self.config, state)
