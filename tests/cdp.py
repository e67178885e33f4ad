"""Headless Chromium driven over the Chrome DevTools Protocol: enough to load a single-page app,
wait for text, press a key and take a screenshot (playwright's browsers cannot be downloaded here;
Debian's chromium and the `websockets` package Dagster's webserver brings are)."""

from __future__ import annotations

import base64
import itertools
import json
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

from websockets.sync.client import connect

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--hide-scrollbars", "--remote-debugging-port=0"]  # fmt: skip


class Browser:
    def __init__(self, profile: Path, width: int = 1600, height: int = 1000):
        binary = shutil.which("chromium")
        if binary is None:
            raise RuntimeError("chromium is missing: install Debian's package with `apt-get install -y chromium`")
        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        port = self._port()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            page = next(t for t in json.load(r) if t["type"] == "page")
        # held open across calls and closed by `close`: websockets 17 asks for `legacy=True` to connect so
        self.ws = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=10, legacy=True)
        self.ids = itertools.count(1)
        self.call("Page.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def _port(self) -> int:
        for line in self.proc.stderr:  # "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/…"
            m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if m:
                return int(m.group(1))
        raise RuntimeError(f"chromium exited ({self.proc.wait()}) without a DevTools port")

    def call(self, method: str, **params):
        n = next(self.ids)
        self.ws.send(json.dumps({"id": n, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=60))
            if message.get("id") == n:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def go(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def js(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def text(self) -> str:
        return self.js("document.body ? document.body.innerText : ''") or ""

    def wait_for(self, *needles: str, timeout: float = 30) -> str:
        """The page's text once it holds every needle; fails naming the missing ones."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.text()
            missing = [n for n in needles if n not in text]
            if not missing:
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"the page never showed {missing}; it shows:\n{text[:3000]}")
            time.sleep(0.25)

    def key(self, key: str, code: str, modifiers: int = 0) -> None:
        """Press a key on the page (modifiers: 1 Alt, 2 Ctrl, 4 Meta, 8 Shift)."""
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key=key, code=code, modifiers=modifiers)

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            self.proc.wait(timeout=10)
