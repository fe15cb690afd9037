"""Checkpoint readers: one interface over every source a probe can read.

A :class:`Source` lists its raw tensors (name -> shape) without reading them and
reads one tensor on demand, so a probe touches only the bytes it asks for:

* a Hugging Face model folder (``config.json`` with ``model.safetensors``, sharded
  ``model.safetensors.index.json``, or ``pytorch_model.bin``);
* a ``.safetensors`` file (lazy: header first, one tensor at a time);
* a PyTorch state dict (``.pt``, ``.pth``, ``.bin``) loaded with ``weights_only=True``;
  a file that needs arbitrary code to unpickle is refused, never executed;
* a nanoGPT ``ckpt.pt`` (``model`` + ``model_args``; torch.compile's ``_orig_mod.``
  prefix stripped);
* this toolkit's own snapshot files (a chosen step).

:mod:`.layouts` maps the raw names to canonical ones (``layer3/W_V``...).
"""
from __future__ import annotations

import json
import os
import re
from typing import Protocol

import numpy as np

from ..errors import ProbeError

_STEP_PATTERNS = (r"step[_-]?(\d+)", r"checkpoint[_-](\d+)", r"iter[_-]?(\d+)", r"epoch[_-]?(\d+)",
                  r"model[_-](\d+)", r"ckpt[_-](\d+)", r"[_-](\d+)$")


def step_from_name(path: str) -> int | None:
    """The training step encoded in a checkpoint's file or folder name (step1000, model_20.pt, checkpoint-500)."""
    stem = os.path.basename(os.path.normpath(path))
    stem = re.sub(r"\.(safetensors|pt|pth|bin|h5|hdf5|ckpt)$", "", stem)
    for pat in _STEP_PATTERNS:
        m = re.search(pat, stem, flags=re.IGNORECASE)
        if m:
            return int(m.group(1))
    return None


class Source(Protocol):
    path: str
    config: dict
    step: int | None

    def shapes(self) -> dict[str, tuple[int, ...]]: ...

    def read(self, name: str) -> np.ndarray: ...


def _to_numpy(t) -> np.ndarray:
    import torch

    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.float()
    return t.detach().cpu().numpy()


class SafetensorsSource:
    """One .safetensors file: names and shapes from the JSON header; tensors read one at a time."""

    def __init__(self, path: str, config: dict | None = None, step: int | None = None):
        self.path, self.config, self.step = path, config or {}, step
        try:
            with open(path, "rb") as fh:
                n = int.from_bytes(fh.read(8), "little")
                if not 0 < n < 100 * 2**20:
                    raise ValueError
                header = json.loads(fh.read(n))
        except (OSError, ValueError):
            raise ProbeError(f"{path}: not a safetensors file (unreadable header)") from None
        header.pop("__metadata__", None)
        self._shapes = {k: tuple(v["shape"]) for k, v in header.items()}

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return dict(self._shapes)

    def read(self, name: str) -> np.ndarray:
        from safetensors import safe_open

        if name not in self._shapes:
            raise ProbeError(f"{self.path}: no tensor '{name}'")
        with safe_open(self.path, framework="pt") as f:
            return _to_numpy(f.get_tensor(name))


class ShardedSafetensorsSource:
    """A model split over several .safetensors files by ``model.safetensors.index.json``."""

    def __init__(self, index_path: str, config: dict | None = None, step: int | None = None):
        self.path, self.config, self.step = index_path, config or {}, step
        try:
            with open(index_path) as fh:
                weight_map = json.load(fh)["weight_map"]
        except (OSError, ValueError, KeyError):
            raise ProbeError(f"{index_path}: not a safetensors index (no weight_map)") from None
        folder = os.path.dirname(index_path)
        self._shards: dict[str, SafetensorsSource] = {}
        self._where: dict[str, SafetensorsSource] = {}
        for name, shard in weight_map.items():
            if shard not in self._shards:
                self._shards[shard] = SafetensorsSource(os.path.join(folder, shard))
            self._where[name] = self._shards[shard]

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {n: src.shapes()[n] for n, src in self._where.items()}

    def read(self, name: str) -> np.ndarray:
        if name not in self._where:
            raise ProbeError(f"{self.path}: no tensor '{name}'")
        return self._where[name].read(name)


class StateDictSource:
    """A PyTorch state dict, or a nanoGPT checkpoint (``model`` + ``model_args``)."""

    def __init__(self, path: str, config: dict | None = None, step: int | None = None):
        import pickle

        import torch

        self.path, self.config, self.step = path, dict(config or {}), step
        try:
            try:
                obj = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError:  # old (non-zip) checkpoints cannot be memory-mapped
                obj = torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as exc:
            # torch names the callable a pickle asks for ("unsupported GLOBAL posix.system"); any
            # other failure of the weights-only unpickler means the bytes are not a checkpoint
            why = [ln.strip() for ln in str(exc).splitlines() if "GLOBAL" in ln]
            if not why:
                raise ProbeError(f"{path}: not a PyTorch checkpoint (unreadable pickle)") from None
            raise ProbeError(f"{path}: refused: unpickling it would run code or build objects other than "
                             f"tensors ({why[0][:120]}); only plain state dicts are read") from None
        except Exception as exc:
            raise ProbeError(f"{path}: not a PyTorch checkpoint ({type(exc).__name__}: {str(exc)[:100]})") from None
        if isinstance(obj, dict) and "model" in obj and "model_args" in obj:  # nanoGPT
            self.config.setdefault("nanogpt", dict(obj["model_args"]))
            if self.step is None and isinstance(obj.get("iter_num"), int):
                self.step = obj["iter_num"]
            obj = obj["model"]
        if not isinstance(obj, dict) or not all(hasattr(v, "shape") for v in obj.values()):
            raise ProbeError(f"{path}: holds no state dict of tensors")
        self._tensors = {k.removeprefix("_orig_mod."): v for k, v in obj.items()}

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {k: tuple(v.shape) for k, v in self._tensors.items()}

    def read(self, name: str) -> np.ndarray:
        if name not in self._tensors:
            raise ProbeError(f"{self.path}: no tensor '{name}'")
        return _to_numpy(self._tensors[name])


class SnapshotSource:
    """This toolkit's snapshot file at one step, by the canonical names its trainer stored
    (the ``weights/`` links): the file itself says which parameter is which."""

    def __init__(self, path: str, step: str | int = "latest"):
        from ..format import Run

        self.path = path
        self._run = Run(path)
        self._index = self._run.step_indices(step)[0]
        self.step = int(self._run.steps[self._index])
        self.config = dict(self._run.config, layout="gamma-probe", dims=self._run.dims)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        return self._run.weights()

    def read(self, name: str) -> np.ndarray:
        return self._run.read(name, self._index)


def open_checkpoint(path: str | os.PathLike, step: str | int = "latest") -> Source:
    """The right reader for ``path``: a folder, .safetensors, .pt/.pth/.bin/ckpt or .h5 snapshot."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ProbeError(f"{path}: no such file or folder")
    name_step = step_from_name(path)
    if os.path.isdir(path):
        cfg_path = os.path.join(path, "config.json")
        config = {}
        if os.path.exists(cfg_path):
            try:
                with open(cfg_path) as fh:
                    config = json.load(fh)
            except ValueError:
                raise ProbeError(f"{cfg_path}: not valid JSON") from None
        for fname, cls in (("model.safetensors", SafetensorsSource),
                           ("model.safetensors.index.json", ShardedSafetensorsSource),
                           ("pytorch_model.bin", StateDictSource)):
            full = os.path.join(path, fname)
            if os.path.exists(full):
                return cls(full, config, name_step)
        raise ProbeError(f"{path}: a folder without model.safetensors, model.safetensors.index.json "
                         "or pytorch_model.bin")
    from ..format import is_snapshot_file

    if is_snapshot_file(path):
        return SnapshotSource(path, step)
    if path.endswith(".safetensors"):
        return SafetensorsSource(path, _sibling_config(path), name_step)
    if path.endswith(".json") and "index" in os.path.basename(path):
        return ShardedSafetensorsSource(path, _sibling_config(path), name_step)
    return StateDictSource(path, _sibling_config(path), name_step)


def _sibling_config(path: str) -> dict:
    cfg = os.path.join(os.path.dirname(os.path.abspath(path)), "config.json")
    if os.path.exists(cfg):
        try:
            with open(cfg) as fh:
                return json.load(fh)
        except ValueError:
            return {}
    return {}
