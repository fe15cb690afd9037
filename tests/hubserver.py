"""A model hub on 127.0.0.1 speaking the parts of the Hugging Face hub's HTTP API that
``huggingface_hub`` uses to list refs and files and to download (``/api/models/{repo}[/revision/{rev}]``,
``/tree``, ``POST /paths-info``, ``/refs``, ``HEAD``/``GET /{repo}/resolve/{rev}/{file}`` with byte ranges), serving folders
the test wrote. Point a process at it with ``HF_ENDPOINT``. Every request is logged, so a test can
check which bytes were read.

    with HubServer({"toy/tiny": {"main": folder_a, "step1000": folder_b}}) as hub:
        env = {"HF_ENDPOINT": hub.url, ...}
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse


class HubServer:
    def __init__(self, repos: dict[str, dict[str, str]], ranges: bool = True):
        """``repos``: repo id -> {revision name: folder}; ``ranges=False`` answers every GET whole (200)."""
        self.repos, self.ranges, self.log = repos, ranges, []
        self.commits = {repo: {rev: hashlib.sha1(f"{repo}@{rev}".encode()).hexdigest() for rev in revs}
                        for repo, revs in repos.items()}

    def __enter__(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                server._handle(self, head=True)

            def do_GET(self):
                server._handle(self, head=False)

            def do_POST(self):       # paths-info: the files named in the form, as the tree lists them
                server._handle(self, head=False)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._httpd.shutdown()
        self._httpd.server_close()

    # ----------------------------------------------------------------------------------------------
    def _folder(self, repo: str, rev: str) -> tuple[str, str] | None:
        revs = self.repos.get(repo, {})
        if rev in revs:
            return revs[rev], self.commits[repo][rev]
        for name, commit in self.commits.get(repo, {}).items():
            if commit == rev:
                return revs[name], commit
        return None

    @staticmethod
    def _files(folder: str) -> list[str]:
        return sorted(os.path.relpath(os.path.join(b, f), folder) for b, _, fs in os.walk(folder) for f in fs)

    def _json(self, h, data, status=200):
        body = json.dumps(data).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _missing(self, h, code: str):
        h.send_response(404)
        h.send_header("X-Error-Code", code)
        h.send_header("Content-Length", "0")
        h.end_headers()

    def _handle(self, h, head: bool):
        path = unquote(urlparse(h.path).path)
        self.log.append((h.command, path, h.headers.get("Range")))
        m = re.fullmatch(r"/api/models/([^/]+(?:/[^/]+)?)(?:/(revision|tree|paths-info)/([^/]+))?", path)
        if m:
            repo, what, rev = m.group(1), m.group(2) or "revision", m.group(3) or "main"
            if repo not in self.repos:
                return self._missing(h, "RepoNotFound")
            found = self._folder(repo, rev)
            if found is None:
                return self._missing(h, "RevisionNotFound")
            folder, commit = found
            files = self._files(folder)
            if what == "paths-info":
                form = parse_qs(h.rfile.read(int(h.headers.get("Content-Length", 0))).decode())
                files = [f for f in files if f in form.get("paths", [])]
            if what == "revision":
                # downloads, likes, tags: the hub always sends them, and huggingface_hub < 0.24 requires them
                return self._json(h, {"id": repo, "modelId": repo, "sha": commit, "private": False,
                                      "downloads": 0, "likes": 0, "tags": [],
                                      "siblings": [{"rfilename": f} for f in files]})
            return self._json(h, [{"type": "file", "path": f, "size": os.path.getsize(os.path.join(folder, f)),
                                   "oid": hashlib.sha1(open(os.path.join(folder, f), "rb").read()).hexdigest()}
                                  for f in files])
        m = re.fullmatch(r"/api/models/(.+?)/refs", path)
        if m:
            repo = m.group(1)
            if repo not in self.repos:
                return self._missing(h, "RepoNotFound")
            refs = [{"name": rev, "ref": f"refs/heads/{rev}", "targetCommit": self.commits[repo][rev]}
                    for rev in self.repos[repo]]
            return self._json(h, {"branches": refs, "tags": [], "converts": []})
        m = re.fullmatch(r"/(.+?)/resolve/([^/]+)/(.+)", path)
        if m:
            repo, rev, name = m.groups()
            found = self._folder(repo, rev) if repo in self.repos else None
            if found is None:
                return self._missing(h, "RepoNotFound" if repo not in self.repos else "RevisionNotFound")
            folder, commit = found
            full = os.path.join(folder, name)
            if not os.path.isfile(full):
                return self._missing(h, "EntryNotFound")
            data = open(full, "rb").read()
            etag = hashlib.sha1(data).hexdigest()
            rng = h.headers.get("Range")
            part = re.fullmatch(r"bytes=(\d+)-(\d*)", rng or "") if self.ranges and not head else None
            if part:
                lo = int(part.group(1))
                hi = min(int(part.group(2)) if part.group(2) else len(data) - 1, len(data) - 1)
                body = data[lo:hi + 1]
                h.send_response(206)
                h.send_header("Content-Range", f"bytes {lo}-{hi}/{len(data)}")
            else:
                body = data
                h.send_response(200)
            h.send_header("Accept-Ranges", "bytes" if self.ranges else "none")
            h.send_header("X-Repo-Commit", commit)
            h.send_header("ETag", f'"{etag}"')
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            if not head:
                h.wfile.write(body)
            return
        self._missing(h, "NotFound")

    def served(self, name: str) -> list[tuple[str, str | None]]:
        """(method, Range header) of every request for a file called ``name``."""
        return [(m, r) for m, p, r in self.log if "/resolve/" in p and p.endswith("/" + name)]
