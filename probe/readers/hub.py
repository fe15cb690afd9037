"""Checkpoints on the Hugging Face hub: ``hf:ORG/NAME`` or ``hf:ORG/NAME@REVISION``.

A hub source becomes a local model folder through ``huggingface_hub``'s own cache, so a
revision downloaded once is read from disk afterwards, and ``HF_HUB_OFFLINE=1`` reads the
cache only. Only what a probe can use is fetched: ``config.json``, the weights (safetensors
when the revision has them, else the PyTorch ``.bin`` files) and the tokenizer files.
Revisions are branch or tag names (Pythia's ``step1000``, OLMo's ``stage1-step1000-tokens4B``)
or commit hashes; :func:`revisions` lists a repository's refs (the cache's refs when offline).
"""
from __future__ import annotations

import os
import re

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
                          "reached (HF_HUB_OFFLINE=1 reads the cache only)")
    return ProbeError(f"{spec}: the hub refused ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")


def _patterns(repo: str, rev: str | None) -> list[str]:
    """The files to fetch: safetensors weights if the revision has any, else the .bin ones."""
    files = _hub().HfApi().list_repo_files(repo, revision=rev)
    weights = [f for f in files if f.endswith(".safetensors") or f == "model.safetensors.index.json"]
    if not weights:
        weights = [f for f in files if re.fullmatch(r"pytorch_model.*\.bin(\.index\.json)?", f)]
    return ["config.json", *weights, *_TOKENIZER]


def local(path):
    """The local folder of a hub source (downloaded into the cache if needed); any other path as it is."""
    if not is_hub(path):
        return path
    repo, rev = parse(path)
    hub = _hub()
    try:
        if offline():
            folder = hub.snapshot_download(repo, revision=rev, local_files_only=True)
        else:
            folder = hub.snapshot_download(repo, revision=rev, allow_patterns=_patterns(repo, rev))
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
