"""`lumos serve`: the HTTP API over the snapshot store (docs/api.md)."""

from __future__ import annotations

import ipaddress
import sys

import click

from lumos_dagster.cli.common import config_option, load
from lumos_dagster.cli.output import echo, echo_json
from lumos_dagster.floor.extras import needs


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


@click.command()
@config_option
@click.option("--host", default=None, help="Address to bind (default: api.host, 127.0.0.1).")
@click.option("--port", type=click.IntRange(0, 65535), default=None, help="TCP port (default: api.port, 8765).")
@click.option("--hash-token", is_flag=True, help="Read a token on stdin, print its hash for api.tokens, and exit.")
@click.option("--new-token", is_flag=True, help="Make a random token, print it and its hash, and exit.")
@click.option("--openapi", is_flag=True, help="Print the OpenAPI document and exit.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info")
def serve(config_file, host, port, hash_token, new_token, openapi, log_level) -> None:
    """Serve the API: datasets, versions, compatibility checks, impact, cost, search, export.

    Every path but /health needs a bearer token listed (by its hash) under api.tokens in lumos.yaml;
    writes (accept a breaking change, record a release) need `api.writes: true`."""
    from lumos_dagster.api.auth import hash_token as hash_of
    from lumos_dagster.api.auth import new_token as make_token

    if hash_token:
        token = sys.stdin.readline().strip()
        if not token:
            raise click.ClickException("no token on stdin")
        echo(hash_of(token))
        return
    if new_token:
        token = make_token()
        echo(f"token: {token}")
        echo(f"hash:  {hash_of(token)}")
        echo("Give the token to its holder; put only the hash in lumos.yaml (api.tokens[].hash).", err=True)
        return
    if openapi:
        with needs("api", "lumos serve"):
            from lumos_dagster.api.app import openapi_document

        echo_json(openapi_document(), sort_keys=True)
        return

    with needs("api", "lumos serve"):
        import uvicorn
        from starlette.types import Receive, Scope, Send

        from lumos_dagster.api.app import build_app
    from lumos_dagster.api.service import Lumos
    from lumos_dagster.floor.errors import LumosError

    config = load(config_file)
    api = config.api
    host, port = host or api.host, api.port if port is None else port
    if not api.tokens:
        echo("warning: no api.tokens in lumos.yaml: every path but /health answers 401", err=True)
    if not _loopback(host):
        echo(f"warning: listening on {host}, beyond this machine: put TLS in front of it", err=True)
    try:
        lumos = Lumos(config, connections=api.workers, timeout=api.limits.request_timeout)
    except LumosError as exc:
        raise click.ClickException(str(exc)) from None

    async def _threads() -> None:  # requests served at once: the store connections there are
        import anyio.to_thread

        anyio.to_thread.current_default_thread_limiter().total_tokens = api.workers

    app = build_app(lumos, api)

    async def lifespan_app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            message = await receive()
            if message["type"] == "lifespan.startup":
                await _threads()
                await send({"type": "lifespan.startup.complete"})
                message = await receive()
            if message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
            return
        await app(scope, receive, send)

    echo(f"Lumos API on http://{host}:{port} (OpenAPI: /openapi.json, with a token)", err=True)
    # requests get the interpreter back sooner while a thread rebuilds a whole-estate cache (the
    # search index, the lineage graph): 5 ms turns put that rebuild into their tail latency
    sys.setswitchinterval(0.0005)
    try:
        uvicorn.run(lifespan_app, host=host, port=port, log_level=log_level, server_header=False,
                    date_header=False, timeout_keep_alive=5, access_log=log_level == "debug")  # fmt: skip
    finally:
        lumos.close()
