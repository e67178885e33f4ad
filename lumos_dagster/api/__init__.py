"""The entry layer's HTTP API (`lumos serve`) over the snapshot store.

`auth` imports nothing heavy; `app` builds the FastAPI application from a router per area
(`routes/`: health, datasets, changes, reports), the ASGI layers around it (`middleware`: limits,
authentication), the error bodies every failure becomes (`errors`) and what the endpoints depend on
(`access`: the service, scopes, the audit of writes); `service` is the in-process facade it answers
from (notebooks use it too), and `models` holds the typed results both of them and the SDK
(`lumos_dagster.client`) share.
"""
