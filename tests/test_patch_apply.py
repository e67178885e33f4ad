"""DataHub's PATCH semantics as GMS applies them (lumos_dagster.catalog.patch_apply): patches built
by DataHub's own builders, applied to what another writer wrote first. Each case: the other
writer's aspect, what Lumos patches, what must be there after."""

import json

import pytest
from datahub.metadata.schema_classes import (
    AuditStampClass,
    DatasetPropertiesClass,
    DomainAssociationClass,
    DomainsClass,
    GlobalTagsClass,
    GlossaryTermAssociationClass,
    GlossaryTermsClass,
    MetadataAttributionClass,
    OperationClass,
    OwnerClass,
    OwnershipClass,
    TagAssociationClass,
    UpstreamClass,
    UpstreamLineageClass,
)
from datahub.specific.dataset import DatasetPatchBuilder

from lumos_dagster.catalog.patch_apply import PatchError, apply_patch, patched

DS = "urn:li:dataset:(urn:li:dataPlatform:file,tmp/lake/sales/orders,PROD)"
UP = "urn:li:dataset:(urn:li:dataPlatform:file,tmp/lake/raw/orders,PROD)"
THEIRS = "urn:li:dataset:(urn:li:dataPlatform:dbt,analytics.stg_orders,PROD)"
LUMOS = "urn:li:dataPlatform:lumos"
BY_LUMOS = MetadataAttributionClass(time=1, actor="urn:li:corpuser:lumos", source=LUMOS)


def _apply(current, build) -> dict:
    """Every aspect the builder patches, applied in order to `current` (aspect name → aspect)."""
    builder = DatasetPatchBuilder(DS)
    build(builder)
    state = dict(current)
    for mcp in builder.build():
        state[mcp.aspectName] = patched(mcp, state.get(mcp.aspectName))
    return state


def test_lineage_edges_are_added_and_removed_one_by_one():
    theirs = {"upstreamLineage": UpstreamLineageClass(upstreams=[UpstreamClass(THEIRS, "TRANSFORMED")])}
    added = _apply(theirs, lambda b: b.add_upstream_lineage(UpstreamClass(UP, "TRANSFORMED")))
    assert [u.dataset for u in added["upstreamLineage"].upstreams] == [THEIRS, UP]
    again = _apply(added, lambda b: b.add_upstream_lineage(UpstreamClass(UP, "COPY")))  # the same edge: replaced
    assert [(u.dataset, u.type) for u in again["upstreamLineage"].upstreams] == [(THEIRS, "TRANSFORMED"), (UP, "COPY")]
    removed = _apply(again, lambda b: b.remove_upstream_lineage(UP).remove_upstream_lineage(DS))  # DS: never there
    assert [u.dataset for u in removed["upstreamLineage"].upstreams] == [THEIRS]


def test_a_patch_on_an_absent_aspect_starts_from_the_templates_default():
    added = _apply({}, lambda b: b.add_upstream_lineage(UpstreamClass(UP, "TRANSFORMED")))
    assert [u.dataset for u in added["upstreamLineage"].upstreams] == [UP]
    props = _apply({}, lambda b: b.add_custom_property("lumos.version", "1.0.0"))["datasetProperties"]
    assert props.customProperties == {"lumos.version": "1.0.0"} and props.description is None


def test_tags_terms_owners_and_domains_keyed_by_who_added_them():
    theirs = {
        "globalTags": GlobalTagsClass([TagAssociationClass("urn:li:tag:pii")]),
        "glossaryTerms": GlossaryTermsClass(
            [GlossaryTermAssociationClass("urn:li:glossaryTerm:Sales")], AuditStampClass(0, "urn:li:corpuser:them")
        ),  # fmt: skip
        "ownership": OwnershipClass([OwnerClass("urn:li:corpuser:alice", "DATAOWNER")]),
    }

    def add(b):
        b.add_tag(TagAssociationClass("urn:li:tag:pii", attribution=BY_LUMOS))  # the same tag, by Lumos too
        b.add_tag(TagAssociationClass("urn:li:tag:raw", attribution=BY_LUMOS))
        b.add_term(GlossaryTermAssociationClass("urn:li:glossaryTerm:Order", attribution=BY_LUMOS))
        b.add_owner(OwnerClass("urn:li:corpuser:alice", "DATAOWNER", attribution=BY_LUMOS))
        b.add_domain(DomainAssociationClass("urn:li:domain:sales", attribution=BY_LUMOS))

    added = _apply(theirs, add)
    assert [(t.tag, t.attribution and t.attribution.source) for t in added["globalTags"].tags] == [
        ("urn:li:tag:pii", None), ("urn:li:tag:pii", LUMOS), ("urn:li:tag:raw", LUMOS)]  # fmt: skip
    assert [t.urn for t in added["glossaryTerms"].terms] == ["urn:li:glossaryTerm:Sales", "urn:li:glossaryTerm:Order"]
    assert len(added["ownership"].owners) == 2
    assert added["domains"].domains == ["urn:li:domain:sales"]

    def remove(b):
        b.remove_tag("urn:li:tag:pii", attribution_source=LUMOS)
        b.remove_tag("urn:li:tag:raw", attribution_source=LUMOS)
        b.remove_term("urn:li:glossaryTerm:Order", attribution_source=LUMOS)
        b.remove_owner("urn:li:corpuser:alice", owner_type="DATAOWNER", attribution_source=LUMOS)
        b.remove_domain("urn:li:domain:sales", attribution_source=LUMOS)

    removed = _apply(added, remove)
    # exactly what the other writer had: its pii tag, its term, its owner
    assert [(t.tag, t.attribution) for t in removed["globalTags"].tags] == [("urn:li:tag:pii", None)]
    assert [t.urn for t in removed["glossaryTerms"].terms] == ["urn:li:glossaryTerm:Sales"]
    assert [(o.owner, o.attribution) for o in removed["ownership"].owners] == [("urn:li:corpuser:alice", None)]
    assert removed["domains"].domains == []


def test_properties_keep_what_others_wrote():
    theirs = {"datasetProperties": DatasetPropertiesClass(description="theirs", customProperties={"team": "x"})}
    added = _apply(theirs, lambda b: b.add_custom_property("lumos.version", "2.0.0").set_display_name("orders"))
    props = added["datasetProperties"]
    assert props.customProperties == {"team": "x", "lumos.version": "2.0.0"}
    assert (props.description, props.name) == ("theirs", "orders")
    removed = _apply(added, lambda b: b.remove_custom_property("lumos.version").remove_custom_property("lumos.gone"))
    assert removed["datasetProperties"].customProperties == {"team": "x"}


@pytest.mark.parametrize(
    "aspect, payload, error",
    [
        ("schemaMetadata", [{"op": "add", "path": "/fields", "value": []}], "no default and no current value"),
        ("globalTags", [{"op": "move", "path": "/tags"}], "Unsupported PATCH operation"),
        ("globalTags", [{"op": "add", "path": "tags", "value": 1}], "not a JSON pointer"),
    ],
)
def test_what_gms_refuses_is_refused(aspect, payload, error):
    with pytest.raises(PatchError, match=error):
        apply_patch(aspect, None, payload)


def test_a_timeseries_aspect_cannot_be_patched():
    from datahub.metadata.schema_classes import GenericAspectClass, MetadataChangeProposalClass

    mcp = MetadataChangeProposalClass(
        entityType="dataset", entityUrn=DS, changeType="PATCH", aspectName="operation",
        aspect=GenericAspectClass(value=json.dumps([]).encode(), contentType="application/json-patch+json"),
    )  # fmt: skip
    with pytest.raises(PatchError, match="timeseries"):
        patched(mcp, OperationClass(timestampMillis=0, operationType="UPDATE", lastUpdatedTimestamp=0))


def test_domains_given_whole_by_another_writer_survive_lumos_domain():
    theirs = {"domains": DomainsClass(domains=["urn:li:domain:finance"])}
    added = _apply(theirs, lambda b: b.add_domain(DomainAssociationClass("urn:li:domain:sales", attribution=BY_LUMOS)))
    # the generic patch keys `domainAssociations`; GMS' hook keeps `domains` in step with them
    assert added["domains"].domains == ["urn:li:domain:finance", "urn:li:domain:sales"]
    removed = _apply(added, lambda b: b.remove_domain("urn:li:domain:sales", attribution_source=LUMOS))
    assert removed["domains"].domains == ["urn:li:domain:finance"]
