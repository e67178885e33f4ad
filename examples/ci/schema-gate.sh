#!/usr/bin/env bash
# The schema gate CI runs: the GitHub Actions workflow and the Jenkinsfile next to this
# file both call it, and tests/test_ci_examples.py runs it too.
#
# It snapshots the datasets a change touches, then fails when a breaking schema change
# under the datasets' policies has not been accepted in lumos.yaml. Environment:
#   LUMOS_CONFIG        lumos.yaml (its store should be the shared one, e.g. PostgreSQL,
#                       so the gate compares with what main last recorded)
#   LUMOS_SELECT        Dagster asset selection to materialize (unset: every dataset; set but
#                       empty: none, the change touches no dataset). `lumos changed` gives it
#                       from the changed files: the datasets they build and their consumers
#   LUMOS_PARTITION     partition to snapshot (default: today, UTC)
#   LUMOS_DIFF_PAIRS    optional "old.avsc:new.avsc …" schema files to compare as well
#   LUMOS_REPORT        where the markdown report goes (default: lumos-schema-report.md)
set -uo pipefail

report="${LUMOS_REPORT:-lumos-schema-report.md}"
since="$(date -u +%Y-%m-%dT%H:%M:%S+00:00)"

lumos discover || exit $?
select="${LUMOS_SELECT-*}"
materialize=0
if [ -n "$select" ]; then
    dagster asset materialize -m lumos_dagster.definitions --select "$select" \
        --partition "${LUMOS_PARTITION:-$(date -u +%F)}"
    materialize=$?  # fails for errors only: a breaking change fails its check, and the gate below
else
    echo "the change touches no dataset: nothing to snapshot"
fi

lumos gate --since "$since" --format markdown --output "$report" > /dev/null
gate=$?
for pair in ${LUMOS_DIFF_PAIRS:-}; do
    lumos diff "${pair%%:*}" "${pair#*:}" --format markdown >> "$report"
    status=$?
    [ "$status" -gt "$gate" ] && gate=$status
done

cat "$report"
# 1: a breaking change, 2: bad input; otherwise whatever the materialization said
[ "$gate" -ne 0 ] && exit "$gate"
exit "$materialize"
