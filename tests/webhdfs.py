"""A WebHDFS stand-in: a NameNode and a DataNode on 127.0.0.1 that serve a local folder as HDFS' `/`
through the WebHDFS REST API as Hadoop's reference describes it (hadoop-hdfs/src/site/markdown/WebHDFS.md).

No Hadoop can run here: Debian ships none, its jars come from Maven Central (unreachable), and PyPI
has WebHDFS clients only (hdfs, pywebhdfs, webhdfspy…; hdfs-native speaks the RPC protocol and tests
against a MiniDFS cluster it builds with Maven). So this serves the read side of the API, which is all
Lumos uses, as the reference specifies it:

* the NameNode answers GETFILESTATUS, LISTSTATUS (of a folder, or of a file: the file itself with an
  empty `pathSuffix`), LISTSTATUS_BATCH (`startAfter`, `remainingEntries`, `ls_limit` entries a batch),
  GETCONTENTSUMMARY and GETHOMEDIRECTORY with the reference's JSON objects;
* OPEN is a `307 Temporary Redirect` to the DataNode (with `noredirect=true`, a 200 naming it), which
  serves `offset`/`length` as `application/octet-stream`;
* errors are `RemoteException` JSON under the reference's status codes: 404 FileNotFoundException,
  403 AccessControlException (a path given to `deny`, and what is under it), 400
  IllegalArgumentException (an unknown op, a bad parameter); writes are refused (405): the tests write
  the folder itself.

It runs in a process of its own: delta-rs holds the GIL through some blocking reads, which would
starve a server in the test's own process. Each request it answers is logged (node, op, path,
parameters, bytes sent), so tests see the user sent and what was read of each file.
"""

from __future__ import annotations

import json
import os
import posixpath
import stat
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlencode, urlparse

PREFIX = "/webhdfs/v1"
BLOCK_SIZE = 128 << 20  # dfs.blocksize's default
DEFAULT_USER = "dr.who"  # hadoop.http.staticuser.user: who a request without `user.name` is
_EXCEPTIONS = {
    400: ("IllegalArgumentException", "java.lang.IllegalArgumentException"),
    403: ("AccessControlException", "org.apache.hadoop.security.AccessControlException"),
    404: ("FileNotFoundException", "java.io.FileNotFoundException"),
    405: ("UnsupportedOperationException", "java.lang.UnsupportedOperationException"),
}
ROOT = Path(__file__).resolve().parent.parent


class WebHDFS:
    """The stand-in serving `root`; `host`/`port` are the NameNode's HTTP address (`webhdfs://host:port/…`)."""

    def __init__(self, root: Path, ls_limit: int = 1000):
        self.root = Path(root)
        self.state = Path(tempfile.mkdtemp(prefix="webhdfs-"))
        (self.state / "denied").write_text("")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.webhdfs", str(root), str(self.state), str(ls_limit)],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the WebHDFS stand-in did not start: {self.process.stderr.read()[-2000:]}")
        self.host, self.port = "127.0.0.1", int(line)
        self.url = f"http://{self.host}:{self.port}"

    def deny(self, path: str) -> None:
        """Refuse every operation on `path` and under it, as HDFS refuses a user its permissions exclude."""
        with open(self.state / "denied", "a") as fh:
            fh.write(posixpath.normpath(path) + "\n")

    def allow_all(self) -> None:
        (self.state / "denied").write_text("")

    @property
    def requests(self) -> list[dict]:
        """Every request answered so far: {node, op, path, params, status, sent}."""
        with open(self.state / "requests.jsonl") as fh:
            return [json.loads(line) for line in fh]

    def sent(self, path: str) -> int:
        """Bytes of `path` the DataNode has sent."""
        return sum(r["sent"] for r in self.requests if r["node"] == "datanode" and r["path"] == path)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


# ---------------------------------------------------------------------- the server (its own process)


class _Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class _Cluster:
    """The NameNode and DataNode of one folder."""

    def __init__(self, root: Path, state: Path, ls_limit: int):
        self.root, self.state, self.ls_limit = root, state, ls_limit
        self.log = open(state / "requests.jsonl", "a")
        self.lock = threading.Lock()
        self.datanode = self.serve(self.datanode_op, "datanode")
        self.namenode = self.serve(self.namenode_op, "namenode")

    def namenode_op(self, op: str, path: str, params: dict[str, str]) -> tuple[int, dict, bytes | dict]:
        if op == "OPEN":  # the data comes from a DataNode: the NameNode says which
            if not self.local(path).is_file():
                raise _Refused(404, f"Path is not a file: {path}")
            forwarded = urlencode({**params, "namenoderpcaddress": "127.0.0.1:8020"})
            location = f"http://127.0.0.1:{self.datanode.server_address[1]}{PREFIX}{path}?{forwarded}"
            if params.get("noredirect") == "true":
                return 200, {}, {"Location": location}
            return 307, {"Location": location}, b""
        if op == "GETFILESTATUS":
            return 200, {}, {"FileStatus": self.status(path, "")}
        if op == "LISTSTATUS":
            return 200, {}, {"FileStatuses": {"FileStatus": self.listing(path)}}
        if op == "LISTSTATUS_BATCH":
            entries = self.listing(path)
            if params.get("startAfter"):
                entries = [e for e in entries if e["pathSuffix"] > params["startAfter"]]
            batch, rest = entries[: self.ls_limit], len(entries) - self.ls_limit
            listing = {"partialListing": {"FileStatuses": {"FileStatus": batch}}, "remainingEntries": max(rest, 0)}
            return 200, {}, {"DirectoryListing": listing}
        if op == "GETCONTENTSUMMARY":
            return 200, {}, {"ContentSummary": self.summary(path)}
        if op == "GETHOMEDIRECTORY":
            return 200, {}, {"Path": f"/user/{params.get('user.name', DEFAULT_USER)}"}
        raise _Refused(400, f'Invalid value for webhdfs parameter "op": No enum constant {op}')

    def datanode_op(self, op: str, path: str, params: dict[str, str]) -> tuple[int, dict, bytes | dict]:
        if op != "OPEN":
            raise _Refused(400, f'Invalid value for webhdfs parameter "op": {op} is not a DataNode operation')
        local = self.local(path)
        if not local.is_file():
            raise _Refused(404, f"File does not exist: {path}")
        size = local.stat().st_size
        offset, length = _number(params, "offset", 0), _number(params, "length", None)
        if offset > size:
            raise _Refused(403, f"Offset={offset} out of the range [0, {size}); OPEN, path={path}")
        with open(local, "rb") as fh:
            fh.seek(offset)
            data = fh.read(size - offset if length is None else length)
        return 200, {"Content-Type": "application/octet-stream"}, data

    def local(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def check(self, path: str, user: str) -> None:
        denied = (self.state / "denied").read_text().split()
        for folder in denied:
            if path == folder or path.startswith(folder.rstrip("/") + "/"):
                inode = f'"{folder}":hdfs:supergroup:drwx------'
                raise _Refused(403, f"Permission denied: user={user}, access=READ_EXECUTE, inode={inode}")
        if not self.local(path).exists():
            raise _Refused(404, f"File does not exist: {path}")

    def status(self, path: str, suffix: str) -> dict:
        """The reference's FileStatus properties of `path`."""
        found = self.local(path).stat()
        folder = stat.S_ISDIR(found.st_mode)
        return {
            "accessTime": 0 if folder else found.st_atime_ns // 1_000_000,
            "blockSize": 0 if folder else BLOCK_SIZE,
            "childrenNum": len(os.listdir(self.local(path))) if folder else 0,
            "fileId": found.st_ino,  # the inode id: a file written anew gets a new one
            "group": "supergroup",
            "length": 0 if folder else found.st_size,
            "modificationTime": found.st_mtime_ns // 1_000_000,
            "owner": "hdfs",
            "pathSuffix": suffix,
            "permission": format(found.st_mode & 0o777, "o"),
            "replication": 0 if folder else 1,
            "storagePolicy": 0,
            "type": "DIRECTORY" if folder else "FILE",
        }

    def listing(self, path: str) -> list[dict]:
        local = self.local(path)
        if local.is_file():  # "List a File": the file itself, its pathSuffix empty
            return [self.status(path, "")]
        return [self.status(posixpath.join(path, name), name) for name in sorted(os.listdir(local))]

    def summary(self, path: str) -> dict:
        local = self.local(path)
        inside = [local] if local.is_file() else list(local.rglob("*"))
        files = [p for p in inside if p.is_file()]
        length = sum(p.stat().st_size for p in files)
        folders = sum(1 for p in inside if p.is_dir()) + (0 if local.is_file() else 1)
        return {"directoryCount": folders, "fileCount": len(files), "length": length, "quota": -1,
                "spaceConsumed": length, "spaceQuota": -1, "typeQuota": {}}  # fmt: skip

    def record(self, node: str, op: str, path: str, params: dict, status: int, sent: int) -> None:
        entry = {"node": node, "op": op, "path": path, "params": params, "status": status, "sent": sent}
        with self.lock:
            self.log.write(json.dumps(entry) + "\n")
            self.log.flush()

    def serve(self, answer, node: str) -> ThreadingHTTPServer:
        cluster = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as clients expect

            def do_GET(self) -> None:
                url = urlparse(self.path)
                params = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
                op = params.get("op", "").upper()
                path = posixpath.normpath(unquote(url.path.removeprefix(PREFIX)) or "/")
                try:
                    if not url.path.startswith(PREFIX):
                        raise _Refused(404, f"not a WebHDFS path: {url.path}")
                    cluster.check(path, params.get("user.name", DEFAULT_USER))
                    status, headers, body = answer(op, path, params)
                except _Refused as refused:
                    status, headers, body = refused.status, {}, _remote_exception(refused.status, str(refused))
                sent = self._reply(status, headers, body)
                cluster.record(node, op, path, params, status, sent)

            def _refuse(self) -> None:
                message = f"{self.command} is not served: this stand-in is read-only"
                self._reply(405, {}, _remote_exception(405, message))

            do_PUT = do_POST = do_DELETE = _refuse

            def _reply(self, status: int, headers: dict, body: bytes | dict) -> int:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                if not isinstance(body, bytes):
                    self.send_header("Content-Type", "application/json")
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # a reader that stopped early
                    self.close_connection = True
                return len(data)

            def log_message(self, *args) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server


def _remote_exception(status: int, message: str) -> dict:
    exception, java_class = _EXCEPTIONS[status]
    return {"RemoteException": {"exception": exception, "javaClassName": java_class, "message": message}}


def _number(params: dict[str, str], key: str, default):
    value = params.get(key)
    if value is None or value == "":
        return default
    if not value.isdigit():
        raise _Refused(400, f'Invalid value for webhdfs parameter "{key}": {value}')
    return int(value)


if __name__ == "__main__":
    root, state, ls_limit = sys.argv[1:]
    cluster = _Cluster(Path(root), Path(state), int(ls_limit))
    print(cluster.namenode.server_address[1], flush=True)
    sys.stdin.read()  # until the test process closes its end, or ends
