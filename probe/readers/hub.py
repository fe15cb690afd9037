"""Checkpoints on the Hugging Face hub: ``hf:ORG/NAME`` or ``hf:ORG/NAME@REVISION``.

A hub source becomes a local model folder through ``huggingface_hub``'s own cache, and
``HF_HUB_OFFLINE=1`` reads the cache only. Only what a probe can use is fetched: ``config.json``,
the tokenizer files, and the weights: safetensors weights that are not in the cache are read over
HTTP, header first and then only the byte ranges of the tensors a probe asks for (a hub that
ignores ranges gets the file downloaded into the cache instead); PyTorch ``.bin`` weights, which
cannot be read in parts, are downloaded whole.
Revisions are branch or tag names (Pythia's ``step1000``, OLMo's ``stage1-step1000-tokens4B``)
or commit hashes; :func:`revisions` lists a repository's refs (the cache's refs when offline).

Before the first request of a process the hub's endpoint is checked under a deadline
(:func:`_check_network`, ``PROBE_HUB_TIMEOUT`` seconds, 1.5 by default): without it, a machine with no
network waits out the hub library's retries (about 24 s) and hears of a refusal. Only public names of
``huggingface_hub`` are used, in forms that hold from 0.23 (``requests`` sessions) to 2.x (``httpx``).
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time

from .._files import open_regular
from .._text import terminal
from ..errors import ProbeError

PREFIX = "hf:"
_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_TOKENIZER = ["tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "vocab.txt",
              "special_tokens_map.json"]


def is_hub(path) -> bool:
    return isinstance(path, str) and path.startswith(PREFIX)


def parse(spec: str) -> tuple[str, str | None]:
    """``hf:ORG/NAME@REV`` -> ("ORG/NAME", "REV"); the revision is None when not given."""
    body = spec[len(PREFIX):]
    repo, _, rev = body.partition("@")
    if not _REPO.match(repo) or "--" in repo or ".." in repo:
        raise ProbeError(f"{spec}: not a hub repository name; use hf:ORG/NAME or hf:ORG/NAME@REVISION")
    if "@" in body and not rev.strip():
        raise ProbeError(f"{spec}: empty revision after '@'")
    return repo, (rev.strip() or None)


def with_revision(spec: str, rev: str) -> str:
    repo, _ = parse(spec)
    return f"{PREFIX}{repo}@{rev}"


def offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _hub():
    try:
        import huggingface_hub
    except ImportError:
        raise ProbeError("hf: sources need the huggingface_hub package (pip install huggingface_hub)") from None
    return huggingface_hub


def _cache_dir() -> str:
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def _endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT.rstrip("/")


def cli_command(*words: str, scripts: set[str] | None = None) -> str:
    """A command of the hub's own command line as the installed huggingface_hub names it: ``hf``
    (huggingface_hub >= 0.34; the only one from 1.0 on) or ``huggingface-cli`` (older ones), read from
    the installed distribution's console scripts (``scripts`` stands for them in tests).
    ``words``: "download", REPO, ... or "login"."""
    if scripts is None:
        from importlib import metadata

        try:
            scripts = {e.name for e in metadata.distribution("huggingface_hub").entry_points
                       if e.group == "console_scripts"}
        except metadata.PackageNotFoundError:
            scripts = set()
    if "hf" in scripts or "huggingface-cli" not in scripts:
        return " ".join(("hf", "auth", *words) if words[:1] == ("login",) else ("hf", *words))
    return " ".join(("huggingface-cli", *words))


def _store_command(repo: str, rev: str | None) -> str:
    return cli_command("download", repo, *(("--revision", rev) if rev else ()))


def _first_line(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _is_network_error(exc: BaseException) -> bool:
    """A failure to reach the hub at all (name lookup, refused or reset connection, timeout), as the
    socket, ``requests`` (huggingface_hub < 1.0: ``ConnectionError``, ``ConnectTimeout``,
    ``ReadTimeout``) or ``httpx``/``httpx2`` (>= 1.0: ``ConnectError``, ``...Timeout``) raise it;
    not an HTTP answer (whose ``requests`` classes are OSErrors too)."""
    import socket

    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, (ConnectionError, TimeoutError, socket.gaierror)):
            return True
        if any(word in type(exc).__name__ for word in ("Connect", "Timeout")):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _explain(spec: str, exc: Exception) -> ProbeError:
    """One line for what the hub library raised."""
    from huggingface_hub import utils as U   # the error classes live here in every version (0.23 ... 2.x)

    repo, rev = parse(spec)
    if isinstance(exc, U.RevisionNotFoundError):
        return ProbeError(f"{spec}: {repo} has no revision '{rev}' (list them with --revisions all)")
    if isinstance(exc, (U.RepositoryNotFoundError, U.GatedRepoError)):
        return ProbeError(f"{spec}: no such repository on the hub, or it needs a token "
                          f"(`{cli_command('login')}`)")
    if isinstance(exc, U.LocalEntryNotFoundError) or offline():
        where = f"revision {rev}" if rev else "its main revision"
        return ProbeError(f"{spec}: {where} is not in the hub cache ({_cache_dir()}) and the hub cannot be "
                          "reached (HF_HUB_OFFLINE=1 reads the cache only); weights read online over HTTP are not "
                          f"stored: `{_store_command(repo, rev)}` stores them")
    if _is_network_error(exc):
        return ProbeError(f"{spec}: lost the connection to {_endpoint()} ({_first_line(exc)}); to work offline, "
                          f"store the files with `{_store_command(repo, rev)}` and set HF_HUB_OFFLINE=1")
    return ProbeError(f"{spec}: the hub refused ({_first_line(exc)})")


DEADLINE = 1.5        # seconds the hub's endpoint has to answer the first request (PROBE_HUB_TIMEOUT)
_checked: dict[str, None] = {}   # endpoints that answered


def _deadline() -> float:
    text = os.environ.get("PROBE_HUB_TIMEOUT", "").strip()
    if not text:
        return DEADLINE
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ProbeError(f"PROBE_HUB_TIMEOUT={text!r}: give the seconds the hub has to answer (a number > 0)")
    return value


def _probe_endpoint(url: str, timeout: float) -> tuple[bool, str] | None:
    """Why ``url`` cannot be reached, as (no network at all?, reason), or None when it answers anything
    over HTTP. Other failures (a certificate the standard library does not trust, say) are left to the
    hub library, whose own settings may accept them. Proxies are the environment's, as for the hub."""
    import errno
    import socket
    import urllib.error
    import urllib.request

    try:
        urllib.request.urlopen(urllib.request.Request(url + "/", method="HEAD"), timeout=timeout).close()
    except urllib.error.HTTPError:
        return None                      # an answer, whatever its status: the network works
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, socket.gaierror):
            return True, "name lookup failed"
        if isinstance(reason, OSError) and reason.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN):
            return True, os.strerror(reason.errno).lower()
        if isinstance(reason, ConnectionRefusedError):
            return False, "connection refused"
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return False, f"no answer within {timeout:g} s"
        if isinstance(reason, ConnectionError):
            return False, os.strerror(reason.errno).lower() if reason.errno else type(reason).__name__
    except Exception:      # anything else is the hub library's to report
        return None
    return None


def _check_network(spec: str) -> None:
    """Refuse at once, in one line, when the hub's endpoint cannot be reached: checked until it answers
    once in this process, within the deadline whatever the cause (a name lookup that hangs included: the
    check runs in a thread that is left behind if it does not finish)."""
    url = _endpoint()
    if url not in _checked:
        limit = _deadline()
        start = time.monotonic()
        box: list = []
        worker = threading.Thread(target=lambda: box.append(_probe_endpoint(url, limit)), daemon=True)
        worker.start()
        worker.join(limit + 0.1)
        found = box[0] if box else (False, f"no answer within {limit:g} s")
        if os.environ.get("PROBE_DEBUG"):
            print(terminal(f"debug: hub check of {url}: {found[1] if found else 'answered'} after "
                           f"{time.monotonic() - start:.3f} s"), file=sys.stderr)
        if found is not None:    # checked again next time: the network may be back by then
            no_network, why = found
            repo, rev = parse(spec)
            raise ProbeError(f"{spec}: {'no network: ' if no_network else ''}cannot reach {url} ({why}); to "
                             f"work offline, store the files with `{_store_command(repo, rev)}` and set "
                             "HF_HUB_OFFLINE=1")
        _checked[url] = None


def _weights(files: list[str]) -> tuple[list[str], bool]:
    """The weight files of a revision: its safetensors if it has any (True), else its .bin ones."""
    st = [f for f in files if f.endswith(".safetensors") or f == "model.safetensors.index.json"]
    if st:
        return st, True
    return [f for f in files if re.fullmatch(r"pytorch_model.*\.bin(\.index\.json)?", f)], False


def _patterns(files: list[str]) -> list[str]:
    """The files of a revision to download: config, tokenizer and weights (safetensors if any, else .bin)."""
    weights, _ = _weights(files)
    return ["config.json", *weights, *_TOKENIZER]


class RangeReader:
    """One safetensors file of a hub revision, read by byte ranges over HTTP (``read``); when the
    server answers a range request with the whole file, the file is downloaded into the cache once
    and read from there."""

    def __init__(self, repo: str, filename: str, commit: str):
        self.repo, self.filename, self.commit = repo, filename, commit
        self.label = f"hf:{repo}@{commit[:12]}/{filename}"
        self.local: str | None = None      # set once the whole file had to be downloaded
        self._size: int | None = None      # the file's length, from a range answer's Content-Range

    def download(self) -> str:
        """The whole file, into the cache; its local path."""
        try:
            self.local = _hub().hf_hub_download(self.repo, self.filename, revision=self.commit)
        except Exception as exc:
            raise _explain(f"hf:{self.repo}@{self.commit}", exc) from None
        return self.local

    def read(self, offset: int, size: int) -> bytes:
        """``size`` bytes from ``offset`` (fewer at the end of the file)."""
        if size <= 0:
            return b""
        if self.local is None:
            from huggingface_hub.utils import build_hf_headers, get_session

            headers = {**build_hf_headers(), "Range": f"bytes={offset}-{offset + size - 1}",
                       "Accept-Encoding": "identity"}
            try:
                url = _hub().hf_hub_url(self.repo, self.filename, revision=self.commit)
                status, body, total = _get_range(get_session(), url, headers)
            except ProbeError:
                raise
            except Exception as exc:   # network errors
                raise ProbeError(f"{self.label}: cannot read from the hub ({_first_line(exc)})") from None
            if status == 206:
                if total is not None:
                    self._size = total
                return body
            if status != 200:
                raise ProbeError(f"{self.label}: the hub answered {status} to a range request")
            self.download()            # 200: the server sends whole files only
        with open_regular(self.local, "rb", what="cached hub file") as fh:
            fh.seek(offset)
            return fh.read(size)

    def size(self) -> int:
        """The file's length in bytes (the header check needs it): from the Content-Range of a range
        answer, else from the hub's metadata of the file, else from the downloaded file."""
        if self.local is None and self._size is None:
            self.read(0, 1)
        if self.local is None and self._size is None:
            try:
                url = _hub().hf_hub_url(self.repo, self.filename, revision=self.commit)
                self._size = _hub().get_hf_file_metadata(url).size
            except Exception as exc:
                raise ProbeError(f"{self.label}: cannot read the file's size from the hub ({type(exc).__name__})") \
                    from None
        if self.local is not None:
            return os.path.getsize(self.local)
        if self._size is None:
            raise ProbeError(f"{self.label}: the hub gives no size for the file")
        return self._size


@contextlib.contextmanager
def _quiet():
    """huggingface_hub's progress bars off for a while (restored as they were)."""
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    was = are_progress_bars_disabled()
    disable_progress_bars()
    try:
        yield
    finally:
        if not was:
            enable_progress_bars()


def _get_range(session, url: str, headers: dict) -> tuple[int, bytes | None, int | None]:
    """(status, body when 206, the file's length from Content-Range) of a GET through the hub library's
    session, without reading a whole file a server sends instead of a range: an ``httpx`` client
    (huggingface_hub >= 1.0, ``stream`` is a method) or a ``requests`` session (older ones, where
    ``stream`` is a flag)."""
    def answer(status, headers, read):
        if status != 206:
            return status, None, None
        total = headers.get("Content-Range", "").rpartition("/")[2]
        return status, read(), (int(total) if total.isdigit() else None)

    if callable(getattr(session, "stream", None)):
        with session.stream("GET", url, headers=headers, follow_redirects=True) as r:
            return answer(r.status_code, r.headers, r.read)
    with session.get(url, headers=headers, stream=True, allow_redirects=True) as r:
        return answer(r.status_code, r.headers, lambda: r.content)


def fetch(path) -> tuple[str, dict[str, RangeReader]]:
    """(the local folder of a hub source, {weight file: RangeReader} for the safetensors weights that
    are read over HTTP instead of from that folder). Offline, or for .bin weights, every file is
    local; any other path is returned as it is."""
    if not is_hub(path):
        return path, {}
    if offline():
        return local(path), {}
    repo, rev = parse(path)
    hub = _hub()
    _check_network(path)
    try:
        files = hub.HfApi().list_repo_files(repo, revision=rev)
    except Exception as exc:
        raise _explain(path, exc) from None
    weights, safetensors = _weights(files)
    if not safetensors:
        return local(path, files), {}
    small = ["config.json", *_TOKENIZER, *[f for f in weights if f.endswith(".json")]]
    try:
        with _quiet():      # a few small files: no progress bars before the command's own output
            folder = hub.snapshot_download(repo, revision=rev, allow_patterns=small)
    except Exception as exc:
        raise _explain(path, exc) from None
    commit = os.path.basename(os.path.normpath(folder))
    remote = {f: RangeReader(repo, f, commit) for f in weights
              if f.endswith(".safetensors") and not os.path.exists(os.path.join(folder, f))}
    return folder, remote


def local(path, files: list[str] | None = None):
    """The local folder of a hub source (downloaded into the cache if needed); any other path as it is.
    ``files``: the revision's file list, when the caller has already asked the hub for it."""
    if not is_hub(path):
        return path
    repo, rev = parse(path)
    hub = _hub()
    try:
        if offline():
            folder = hub.snapshot_download(repo, revision=rev, local_files_only=True)
        else:
            _check_network(path)
            files = hub.HfApi().list_repo_files(repo, revision=rev) if files is None else files
            folder = hub.snapshot_download(repo, revision=rev, allow_patterns=_patterns(files))
    except ProbeError:
        raise
    except Exception as exc:  # the hub library's errors, network errors
        raise _explain(path, exc) from None
    if not any(os.path.exists(os.path.join(folder, f)) for f in ("model.safetensors", "model.safetensors.index.json",
                                                                   "pytorch_model.bin", "pytorch_model.bin.index.json")):
        # (huggingface_hub < 1.0 hands out a cached revision that holds only the config and tokenizer
        # files a range read left there)
        raise ProbeError(f"{path}: the cached revision holds no model weights ({folder}); weights read online "
                         f"over HTTP are not stored: `{_store_command(repo, rev)}` stores them")
    return folder


def _cached_refs(repo: str) -> list[str]:
    root = os.path.join(_cache_dir(), "models--" + repo.replace("/", "--"))
    refs = os.path.join(root, "refs")
    if not os.path.isdir(root):
        raise ProbeError(f"hf:{repo}: not in the hub cache ({_cache_dir()}) and the hub cannot be reached "
                         "(HF_HUB_OFFLINE=1 reads the cache only)")
    out = []
    for base, _, files in os.walk(refs):
        for f in files:
            out.append(os.path.relpath(os.path.join(base, f), refs).replace(os.sep, "/"))
    return out


def revisions(spec: str) -> list[str]:
    """Every branch and tag of the repository (the cache's refs when offline), in training order:
    names that state a step (step1000, ...-step1000-...) by step, then the others by name."""
    from .names import step_from_name

    repo, _ = parse(spec)
    hub = _hub()
    if offline():
        names = _cached_refs(repo)
    else:
        _check_network(spec)
        try:
            refs = hub.HfApi().list_repo_refs(repo)
        except Exception as exc:
            raise _explain(spec, exc) from None
        names = [r.name for r in (*refs.branches, *refs.tags)]
    if not names:
        raise ProbeError(f"{spec}: no revisions found")

    def key(name):
        step = step_from_name(name)
        return (step is None, step or 0, name)

    return sorted(dict.fromkeys(names), key=key)


def expand(spec: str, revs: str | None) -> list[str]:
    """``hf:ORG/NAME`` with ``--revisions a,b`` or ``all`` -> one ``hf:ORG/NAME@REV`` per revision."""
    if not revs:
        return [spec]
    repo, rev = parse(spec)
    if rev:
        raise ProbeError(f"{spec}: give the revision either after '@' or with --revisions, not both")
    names = revisions(spec) if revs.strip() == "all" else [r.strip() for r in revs.split(",") if r.strip()]
    if not names:
        raise ProbeError(f"bad --revisions '{revs}': use all or a comma list (step1000,step2000)")
    return [f"{PREFIX}{repo}@{r}" for r in names]
