"""OpenLineage: one DatasetEvent per snapshot (schema, version, ownership, storage,
datasource, documentation, tags and column-lineage facets; a DROP lifecycle facet for a
removed dataset),
through openlineage-python's own HTTP or file transport (Marquez and friends)."""

from __future__ import annotations

from typing import Sequence

from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import DatasetEvent, StaticDataset
from openlineage.client.generated import (
    column_lineage_dataset,
    dataset_version_dataset,
    datasource_dataset,
    documentation_dataset,
    lifecycle_state_change_dataset,
    ownership_dataset,
    schema_dataset,
    storage_dataset,
    symlinks_dataset,
    tags_dataset,
)
from openlineage.client.serde import Serde
from openlineage.client.transport import Transport
from openlineage.client.transport.file import FileConfig, FileTransport
from openlineage.client.transport.http import ApiKeyTokenProvider, HttpConfig, HttpTransport, TokenProvider

from lumos_dagster.catalog.base import content_hash, send_each
from lumos_dagster.floor.datatypes import Array, Field, Map, Struct, type_str
from lumos_dagster.floor.masking import shown_url
from lumos_dagster.floor.model import Snapshot

PRODUCER = "https://github.com/lumos/lumos"


def _field(f: Field) -> schema_dataset.SchemaDatasetFacetFields:
    inner = f.type
    while isinstance(inner, (Array, Map)):
        inner = inner.element if isinstance(inner, Array) else inner.value
    children = [_field(c) for c in inner.fields] if isinstance(inner, Struct) else []
    return schema_dataset.SchemaDatasetFacetFields(
        name=f.name, type=type_str(f.type), description=f.description, fields=children
    )


class OpenLineageCatalog:
    def __init__(
        self,
        namespace: str,
        url: str | None = None,
        path: str | None = None,
        api_key: str | None = None,
        timeout_sec: float = 30,
    ):
        self.namespace = namespace
        self.name = f"openlineage:{shown_url(url) if url else path}"  # the outbox keys on it: no credentials
        transport: Transport
        if url:
            auth = ApiKeyTokenProvider({"apiKey": api_key}) if api_key else TokenProvider({})
            transport = HttpTransport(HttpConfig(url=url, timeout=timeout_sec, auth=auth))
        elif path:
            transport = FileTransport(FileConfig(log_file_path=path, append=True))
        else:
            raise ValueError("OpenLineage needs a url (HTTP transport) or a path (file transport)")
        self.client = OpenLineageClient(transport=transport)

    def event(self, s: Snapshot) -> DatasetEvent:
        facets: dict = {}
        if s.removed:
            facets["lifecycleStateChange"] = lifecycle_state_change_dataset.LifecycleStateChangeDatasetFacet(
                lifecycleStateChange=lifecycle_state_change_dataset.LifecycleStateChange.DROP
            )
        else:
            facets["datasource"] = datasource_dataset.DatasourceDatasetFacet(
                name=s.dataset.platform, uri=s.dataset.location
            )
            facets["storage"] = storage_dataset.StorageDatasetFacet(
                storageLayer=s.dataset.platform, fileFormat=s.dataset.format
            )
            facets["symlinks"] = symlinks_dataset.SymlinksDatasetFacet(
                identifiers=[
                    symlinks_dataset.Identifier(namespace=s.dataset.platform, name=s.dataset.location, type="FILE")
                ]
            )
            if s.schema.fields:
                facets["schema"] = schema_dataset.SchemaDatasetFacet(fields=[_field(f) for f in s.schema.fields])
            if s.version:
                facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=s.version)
            if s.description:
                facets["documentation"] = documentation_dataset.DocumentationDatasetFacet(description=s.description)
            if s.owners:
                facets["ownership"] = ownership_dataset.OwnershipDatasetFacet(
                    owners=[ownership_dataset.Owner(name=f"{o.kind}:{o.id}", type=o.type) for o in s.owners]
                )
            if s.tags:
                facets["tags"] = tags_dataset.TagsDatasetFacet(
                    tags=[tags_dataset.TagsDatasetFacetFields(key=t, value="true", source="LUMOS") for t in s.tags]
                )
            if lineage := self._column_lineage(s):
                facets["columnLineage"] = lineage
        return DatasetEvent(
            eventTime=s.captured_at.isoformat(),
            producer=PRODUCER,
            dataset=StaticDataset(namespace=self.namespace, name=s.dataset.name, facets=facets),
        )

    def _column_lineage(self, s: Snapshot) -> column_lineage_dataset.ColumnLineageDatasetFacet | None:
        """Which upstream columns each column comes from (the edges SQL and dbt lineage derived)."""
        inputs: dict[str, list] = {}
        for e in s.upstream:
            for c in e.columns:
                inputs.setdefault(c.downstream, []).append(
                    column_lineage_dataset.InputField(namespace=self.namespace, name=e.upstream.name, field=c.upstream)
                )
        if not inputs:
            return None
        return column_lineage_dataset.ColumnLineageDatasetFacet(
            fields={name: column_lineage_dataset.Fields(inputFields=found) for name, found in sorted(inputs.items())}
        )

    def fingerprint(self, snapshot: Snapshot) -> str:
        doc = Serde.to_dict(self.event(snapshot))
        doc.pop("eventTime")  # when Lumos looked is not a change of the dataset
        return content_hash(doc)

    def emit(self, snapshots: Sequence[Snapshot]) -> int:
        return send_each(snapshots, self.event, self._send, "OpenLineage")

    def _send(self, event: DatasetEvent) -> int:
        self.client.emit(event)
        return 1

    def close(self) -> None:
        self.client.close(timeout=5)
