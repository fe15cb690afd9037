"""Checkpoints on the Hugging Face hub: ``hf:ORG/NAME`` or ``hf:ORG/NAME@REVISION``.

A hub source becomes a local model folder through ``huggingface_hub``'s own cache, and
``HF_HUB_OFFLINE=1`` reads the cache only. Only what a probe can use is fetched: ``config.json``,
the tokenizer files, and the weights: safetensors weights that are not in the cache are read through
the hub library's file system (``HfFileSystem``), header first and then only the byte ranges of the
tensors a probe asks for (a hub that ignores ranges gets the file downloaded into the cache instead);
PyTorch ``.bin`` weights, which cannot be read in parts, are downloaded whole.
Revisions are branch or tag names (Pythia's ``step1000``, OLMo's ``stage1-step1000-tokens4B``)
or commit hashes; :func:`revisions` lists a repository's refs (the cache's refs when offline).

The first request to the hub is the revision's model info (:func:`_info`), asked once, without the
hub library's retries, under its timeout for metadata requests (``HF_HUB_ETAG_TIMEOUT`` seconds, 10 by
default): a machine with no network hears so in one line at once (a refused connection, a failed name
lookup) or within that timeout, not after the retries' 24 s. Only public names of ``huggingface_hub``
are used, in forms that hold from 0.23 (``requests``) to 2.x (``httpx``).
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import socket
from functools import cached_property

from ..files import open_regular
from ..errors import ProbeError
from .names import FOLDER_FILES, step_from_name

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


def _constants():
    """``huggingface_hub.constants``: the hub library's settings, read from the environment on import."""
    try:
        from huggingface_hub import constants
    except ImportError:
        raise ProbeError("hf: sources need the huggingface_hub package (pip install huggingface_hub)") from None
    except ValueError as exc:    # HF_HUB_ETAG_TIMEOUT=soon: the library cannot read its own settings
        raise ProbeError(f"huggingface_hub cannot read its settings ({exc}); HF_HUB_ETAG_TIMEOUT and "
                         "HF_HUB_DOWNLOAD_TIMEOUT are whole seconds") from None
    return constants


def offline() -> bool:
    return bool(_constants().HF_HUB_OFFLINE)


def _hub():
    _constants()
    import huggingface_hub

    return huggingface_hub


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


def _unreachable(exc: BaseException) -> tuple[bool, str] | None:
    """(no network at all?, why) when ``exc`` is a failure to reach the hub (a name lookup, a network
    that is down, a refused or reset connection, a timeout), as the socket, ``requests``
    (huggingface_hub < 1.0: ``ConnectionError``, ``ConnectTimeout``, ``ReadTimeout``) or ``httpx``/``httpx2``
    (>= 1.0: ``ConnectError``, ``...Timeout``) raise it, through its chain of causes; None for anything
    else: an HTTP answer (whose ``requests`` classes are OSErrors too)."""
    chain: list[BaseException] = []
    while exc is not None and len(chain) < 8:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    for e in chain:     # the socket's own error names the cause best
        if isinstance(e, socket.gaierror):
            return True, "name lookup failed"
        if isinstance(e, OSError) and e.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN):
            return True, os.strerror(e.errno).lower()
        if isinstance(e, ConnectionRefusedError):
            return False, "connection refused"
    for e in chain:
        if isinstance(e, TimeoutError) or "Timeout" in type(e).__name__:
            return False, f"no answer within {_constants().HF_HUB_ETAG_TIMEOUT:g} s"
        if isinstance(e, ConnectionError) or "Connect" in type(e).__name__:
            return False, _first_line(e)
    return None


def _explain(spec: str, exc: Exception, first: bool = False) -> ProbeError:
    """One line for what the hub library raised; ``first``: by the first request to the hub (:func:`_info`),
    whose network errors are said as the hub not being reached rather than a connection lost."""
    from huggingface_hub import utils as U   # the error classes live here in every version (0.23 ... 2.x)

    repo, rev = parse(spec)
    if isinstance(exc, U.RevisionNotFoundError):
        return ProbeError(f"{spec}: {repo} has no revision '{rev}' (list them with --revisions all)")
    if isinstance(exc, (U.RepositoryNotFoundError, U.GatedRepoError)):
        return ProbeError(f"{spec}: no such repository on the hub, or it needs a token "
                          f"(`{cli_command('login')}`)")
    if isinstance(exc, U.LocalEntryNotFoundError) or offline():
        where = f"revision {rev}" if rev else "its main revision"
        return ProbeError(f"{spec}: {where} is not in the hub cache ({_constants().HF_HUB_CACHE}) and the hub "
                          "cannot be reached (HF_HUB_OFFLINE=1 reads the cache only); weights read online over HTTP "
                          f"are not stored: `{_store_command(repo, rev)}` stores them")
    unreachable = _unreachable(exc)
    if not unreachable:
        return ProbeError(f"{spec}: the hub refused ({_first_line(exc)})")
    no_network, why = unreachable
    endpoint = _constants().ENDPOINT.rstrip("/")
    how = f"to work offline, store the files with `{_store_command(repo, rev)}` and set HF_HUB_OFFLINE=1"
    if first:
        return ProbeError(f"{spec}: {'no network: ' if no_network else ''}cannot reach {endpoint} ({why}); {how}")
    return ProbeError(f"{spec}: lost the connection to {endpoint} ({_first_line(exc)}); {how}")


def _info(spec: str):
    """The hub's model info of the source's revision (its commit ``sha`` and files ``siblings``): the
    first request to the hub, sent once, without the hub library's retries, under its timeout for
    metadata requests (``HF_HUB_ETAG_TIMEOUT``)."""
    repo, rev = parse(spec)
    return _call(spec, _hub().HfApi().model_info, repo, revision=rev, timeout=_constants().HF_HUB_ETAG_TIMEOUT,
                 first=True)


def _call(spec: str, request, *args, first: bool = False, **kw):
    """``request(*args, **kw)``, a request of the hub library for the source ``spec``; whatever it
    raises becomes one line (:func:`_explain`)."""
    try:
        return request(*args, **kw)
    except Exception as exc:  # the hub library's errors, network errors
        raise _explain(spec, exc, first) from None


def _weights(files: list[str]) -> tuple[list[str], bool]:
    """The weight files of a revision: its safetensors if it has any (True), else its .bin ones."""
    st = [f for f in files if f.endswith(".safetensors") or f == "model.safetensors.index.json"]
    if st:
        return st, True
    return [f for f in files if re.fullmatch(r"pytorch_model.*\.bin(\.index\.json)?", f)], False


class RangeReader:
    """One safetensors file of a hub revision, read by byte ranges (``read``) through the hub library's
    file system, ``HfFileSystem``, whose files seek and read as one HTTP range request each (no cache
    of blocks: exactly the bytes asked for); when the hub answers a range request with the whole file,
    the file is downloaded into the cache once and read from there."""

    def __init__(self, repo: str, filename: str, commit: str):
        self.repo, self.filename, self.commit = repo, filename, commit
        self.label = f"hf:{repo}@{commit[:12]}/{filename}"
        self.local: str | None = None      # set once the whole file had to be downloaded

    @cached_property
    def _remote(self):
        """The file opened on HfFileSystem, once read."""
        return _hub().HfFileSystem().open(f"{self.repo}/{self.filename}", "rb", revision=self.commit,
                                          cache_type="none")

    def download(self) -> str:
        """The whole file, into the cache; its local path."""
        self.local = _call(f"hf:{self.repo}@{self.commit}", _hub().hf_hub_download, self.repo, self.filename,
                           revision=self.commit)
        return self.local

    def read(self, offset: int, size: int) -> bytes:
        """``size`` bytes from ``offset`` (fewer at the end of the file)."""
        if size <= 0:
            return b""
        if self.local is None:
            try:
                self._remote.seek(offset)
                data = self._remote.read(size)
            except Exception as exc:   # network errors, the hub's refusals
                raise ProbeError(f"{self.label}: cannot read from the hub ({_first_line(exc)})") from None
            if len(data) <= size:
                return data
            self.download()            # more than asked for: the hub sends whole files only
        with open_regular(self.local, "rb", what="cached hub file") as fh:
            fh.seek(offset)
            return fh.read(size)

    def size(self) -> int:
        """The file's length in bytes (the header check needs it): from the hub's listing of the
        revision's files, or from the downloaded file."""
        if self.local is not None:
            return os.path.getsize(self.local)
        try:
            return self._remote.size
        except Exception as exc:
            raise ProbeError(f"{self.label}: cannot read the file's size from the hub ({type(exc).__name__})") \
                from None


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


def fetch(path) -> tuple[str, dict[str, RangeReader]]:
    """(the local folder of a hub source, {weight file: RangeReader} for the safetensors weights that
    are read over HTTP instead of from that folder). Offline, or for .bin weights, every file is
    local; any other path is returned as it is."""
    if not is_hub(path):
        return path, {}
    if offline():
        return local(path), {}
    repo, rev = parse(path)
    files = [f.rfilename for f in _info(path).siblings]
    weights, safetensors = _weights(files)
    if not safetensors:
        return local(path, files), {}
    small = ["config.json", *_TOKENIZER, *[f for f in weights if f.endswith(".json")]]
    with _quiet():      # a few small files: no progress bars before the command's own output
        folder = _call(path, _hub().snapshot_download, repo, revision=rev, allow_patterns=small)
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
    if offline():
        folder = _call(path, hub.snapshot_download, repo, revision=rev, local_files_only=True)
    else:
        files = [f.rfilename for f in _info(path).siblings] if files is None else files
        # config, tokenizer and weights (safetensors if any, else .bin)
        folder = _call(path, hub.snapshot_download, repo, revision=rev,
                       allow_patterns=["config.json", *_weights(files)[0], *_TOKENIZER])
    if not any(os.path.exists(os.path.join(folder, f)) for f in FOLDER_FILES):
        # (huggingface_hub < 1.0 hands out a cached revision that holds only the config and tokenizer
        # files a range read left there)
        raise ProbeError(f"{path}: the cached revision holds no model weights ({folder}); weights read online "
                         f"over HTTP are not stored: `{_store_command(repo, rev)}` stores them")
    return folder


def revisions(spec: str) -> list[str]:
    """Every branch and tag of the repository (the cache's refs when offline), in training order:
    names that state a step (step1000, ...-step1000-...) by step, then the others by name."""
    repo, _ = parse(spec)
    if offline():
        cache = _constants().HF_HUB_CACHE
        root = os.path.join(cache, "models--" + repo.replace("/", "--"))
        if not os.path.isdir(root):
            raise ProbeError(f"hf:{repo}: not in the hub cache ({cache}) and the hub cannot be reached "
                             "(HF_HUB_OFFLINE=1 reads the cache only)")
        refs = os.path.join(root, "refs")
        names = [os.path.relpath(os.path.join(base, f), refs).replace(os.sep, "/")
                 for base, _, files in os.walk(refs) for f in files]
    else:
        _info(f"{PREFIX}{repo}")     # first: listing refs has no timeout of its own
        refs = _call(spec, _hub().HfApi().list_repo_refs, repo)
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
