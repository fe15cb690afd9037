"""Checkpoints on the Hugging Face hub: ``hf:ORG/NAME`` or ``hf:ORG/NAME@REVISION``.

A hub source becomes a local model folder through ``huggingface_hub``'s own cache, and
``HF_HUB_OFFLINE=1`` reads the cache only. Only what a probe can use is fetched: ``config.json``,
the tokenizer files, and the weights: safetensors weights that are not in the cache are read over
HTTP, header first and then only the byte ranges of the tensors a probe asks for (a hub that
ignores ranges gets the file downloaded into the cache instead); PyTorch ``.bin`` weights, which
cannot be read in parts, are downloaded whole.
Revisions are branch or tag names (Pythia's ``step1000``, OLMo's ``stage1-step1000-tokens4B``)
or commit hashes; :func:`revisions` lists a repository's refs (the cache's refs when offline).
"""
from __future__ import annotations

import contextlib
import os
import re

from .._files import open_regular
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


def _explain(spec: str, exc: Exception) -> ProbeError:
    """One line for what the hub library raised."""
    from huggingface_hub import errors as E

    repo, rev = parse(spec)
    if isinstance(exc, E.RevisionNotFoundError):
        return ProbeError(f"{spec}: {repo} has no revision '{rev}' (list them with --revisions all)")
    if isinstance(exc, (E.RepositoryNotFoundError, E.GatedRepoError)):
        return ProbeError(f"{spec}: no such repository on the hub, or it needs a token (huggingface-cli login)")
    if isinstance(exc, E.LocalEntryNotFoundError) or offline():
        where = f"revision {rev}" if rev else "its main revision"
        return ProbeError(f"{spec}: {where} is not in the hub cache ({_cache_dir()}) and the hub cannot be "
                          "reached (HF_HUB_OFFLINE=1 reads the cache only); weights read online over HTTP are not "
                          f"stored: huggingface-cli download {repo}{f' --revision {rev}' if rev else ''} stores them")
    return ProbeError(f"{spec}: the hub refused ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")


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
                with get_session().stream("GET", url, headers=headers, follow_redirects=True) as r:
                    if r.status_code == 206:
                        total = r.headers.get("Content-Range", "").rpartition("/")[2]
                        if total.isdigit():
                            self._size = int(total)
                        return r.read()
                    if r.status_code != 200:
                        raise ProbeError(f"{self.label}: the hub answered {r.status_code} to a range request")
            except ProbeError:
                raise
            except Exception as exc:   # network errors
                raise ProbeError(f"{self.label}: cannot read from the hub ({type(exc).__name__}: "
                                 f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
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
            files = hub.HfApi().list_repo_files(repo, revision=rev) if files is None else files
            folder = hub.snapshot_download(repo, revision=rev, allow_patterns=_patterns(files))
    except ProbeError:
        raise
    except Exception as exc:  # the hub library's errors, network errors
        raise _explain(path, exc) from None
    if not any(os.path.exists(os.path.join(folder, f)) for f in ("model.safetensors", "model.safetensors.index.json",
                                                                   "pytorch_model.bin", "pytorch_model.bin.index.json")):
        raise ProbeError(f"{path}: the cached revision holds no model weights ({folder})")
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
    from .checkpoints import step_from_name

    repo, _ = parse(spec)
    hub = _hub()
    if offline():
        names = _cached_refs(repo)
    else:
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
