"""The ASGI layers around the application, outermost first: `Guard` (a request id, the body and URL
size limits, the deadline) and `Authenticate` (no valid token, no endpoint)."""

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lumos_dagster.api import audit, limits
from lumos_dagster.api.auth import Throttled, TokenVerifier
from lumos_dagster.api.errors import HttpProblem, reply

log = logging.getLogger("lumos.api")

#: paths answered without a token
OPEN = frozenset({"/health"})


class Guard:
    """The outermost layer: a request id, the body size limit and the time limit (`limits.deadline`)."""

    def __init__(self, app: ASGIApp, max_body: int, timeout: float):
        self.app, self.max_body, self.timeout = app, max_body, timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        rid = uuid.uuid4().hex
        scope["lumos.request_id"] = rid
        limits.deadline.set(time.monotonic() + self.timeout)
        started = False

        def refuse(status: int, message: str) -> Awaitable[None]:
            return reply(send, rid, status, message, {"x-request-id": rid, "connection": "close"})

        if len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"") > limits.MAX_URL_BYTES:
            return await refuse(414, f"the request's URL is longer than {limits.MAX_URL_BYTES} bytes")
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None:
            try:
                too_large = int(length) > self.max_body
            except ValueError:
                return await refuse(400, "malformed Content-Length")
            if too_large:
                return await refuse(413, f"request body larger than {self.max_body} bytes")
        seen = 0

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    raise HttpProblem(413, f"request body larger than {self.max_body} bytes")
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", rid.encode())]}
            await send(message)

        try:
            await asyncio.wait_for(self.app(scope, limited_receive, tracked_send), self.timeout)
        except TimeoutError:
            log.warning("request %s %s timed out after %.1f s [%s]", scope.get("method"), scope.get("path"),
                        self.timeout, rid)  # fmt: skip
            if not started:
                await refuse(504, f"the request took longer than {self.timeout:g} s")


class Authenticate:
    """Who calls, before anything else is done for the request: its body is not even read. A request
    without a valid token is answered 401 (429 when failed token checks are rationed) from here: it
    reaches no endpoint, takes no worker thread and writes nothing; refusals are logged, a line per
    10 s at most, so that a flood of them does not flood the log either."""

    def __init__(self, app: ASGIApp, verify: TokenVerifier):
        self.app, self.verify = app, verify
        self._refused, self._next_line = 0, 0.0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN:
            return await self.app(scope, receive, send)
        rid = scope.get("lumos.request_id") or "-"
        scheme, _, token = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1").partition(" ")
        try:
            who = await self.verify.authenticate(token.strip() if scheme.lower() == "bearer" else None)
        except Throttled:
            self._log(scope, 429, rid)
            return await reply(send, rid, 429, "too many failed token checks: retry in a second",
                                {"retry-after": "1"})  # fmt: skip
        if who is None:
            self._log(scope, 401, rid)
            return await reply(send, rid, 401, "a valid bearer token is needed", {"www-authenticate": "Bearer"})
        scope["lumos.principal"] = who
        await self.app(scope, receive, send)

    def _log(self, scope: Scope, status: int, rid: str) -> None:
        self._refused += 1
        now = time.monotonic()
        if now >= self._next_line:
            who = (scope.get("client") or ("-",))[0]
            audit.log.warning("refused %s %s from %s: %s, no valid token [%s] (%d since the last such line)",
                              scope.get("method"), scope.get("path"), who, status, rid, self._refused)  # fmt: skip
            self._refused, self._next_line = 0, now + 10
