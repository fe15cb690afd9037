"""Headless Chromium driven through the DevTools protocol over a pipe (``--remote-debugging-pipe``:
JSON messages ended by NUL on file descriptors 3 and 4), so a test can open a page, read console
errors and exceptions, evaluate JavaScript and take a screenshot with no driver package."""
from __future__ import annotations

import base64
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

# where the browser tests keep their screenshots for a person to look at (git-ignored; CI may collect it)
ARTIFACTS = Path(os.environ.get("PROBE_TEST_ARTIFACTS", Path(__file__).resolve().parent.parent / "test-artifacts"))

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-pipe", "--window-size=1400,1000", "--allow-file-access-from-files"]


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    def __init__(self, exe: str):
        self._profile = tempfile.mkdtemp(prefix="cdp-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def fds():   # the protocol's fixed descriptors: 3 = commands in, 4 = replies out
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
                                     preexec_fn=fds, pass_fds=(3, 4),   # kept: set by fds() first
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._id = 0
        self._replies: dict[int, dict] = {}
        self.events: "queue.Queue[dict]" = queue.Queue()
        self.log: list[dict] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=True)

    def _read(self) -> None:
        buf = b""
        while True:
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                with self._cond:
                    if "id" in msg:
                        self._replies[msg["id"]] = msg
                    else:
                        self.log.append(msg)
                    self._cond.notify_all()

    def send(self, method: str, session: bool = False, timeout: float = 60, **params) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        end = time.monotonic() + timeout
        with self._cond:
            while self._id not in self._replies:
                if not self._cond.wait(timeout=max(0.0, end - time.monotonic())):
                    raise TimeoutError(method)
            reply = self._replies.pop(self._id)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def open(self, url: str, timeout: float = 60) -> None:
        n = len(self.log)
        self.send("Page.navigate", session=True, url=url)
        self.wait_event("Page.loadEventFired", after=n, timeout=timeout)

    def wait_event(self, method: str, after: int = 0, timeout: float = 60) -> dict:
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                for m in self.log[after:]:
                    if m.get("method") == method:
                        return m
                if not self._cond.wait(timeout=max(0.0, end - time.monotonic())):
                    raise TimeoutError(method)

    def eval(self, js: str):
        res = self.send("Runtime.evaluate", session=True, expression=js, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(res["exceptionDetails"])
        return res["result"].get("value")

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads the page produced so far."""
        out = []
        for m in self.log:
            meth, p = m.get("method"), m.get("params", {})
            if meth == "Runtime.exceptionThrown":
                out.append(json.dumps(p.get("exceptionDetails", {}))[:300])
            elif meth == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif meth == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(p["entry"].get("text", ""))
        return out

    def screenshot(self, path: str, full: bool = True) -> None:
        """The whole page (``full``) or what the window shows (the first screen, at the top)."""
        data = self.send("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=full)["data"]
        with open(path, "wb") as fh:
            fh.write(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self._to_chrome)
        shutil.rmtree(self._profile, ignore_errors=True)
