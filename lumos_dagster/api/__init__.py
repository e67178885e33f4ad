"""The entry layer's HTTP API (`lumos serve`) over the snapshot store.

`settings` (the `api:` section of lumos.yaml) and `auth` import nothing heavy; `app` builds the
FastAPI application, `service` is the in-process facade it answers from (notebooks use it too), and
`models` holds the typed results both of them and the SDK (`lumos_dagster.client`) share.
"""
