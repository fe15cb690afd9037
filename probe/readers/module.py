"""A live torch model as a checkpoint, for :class:`probe.Recorder`: its state dict read through the
same layouts that read a checkpoint file, and what a snapshot of it stores (names, shapes, dims).
Nothing is copied until a tensor is read; a read gives the values the model holds at that moment."""
from __future__ import annotations

import re

import numpy as np

from ..errors import ProbeError
from .checkpoints import StateDictSource
from .layouts import CanonicalReader, needs_heads


def hf_model(model):
    """``model`` if it is a Hugging Face model (it has a ``config``), else its first submodule that is one
    (a Lightning module wrapping it), else None."""
    for m in model.modules():
        if hasattr(getattr(m, "config", None), "to_dict"):
            return m
    return None


class ModuleSource(StateDictSource):
    """The tensors of ``model`` (its ``state_dict``; torch.compile's ``_orig_mod.`` prefix stripped), with
    its Hugging Face ``config`` when it has one, named ``label`` in messages. A raw tensor read once
    is kept until :meth:`forget`: a fused matrix (GPT-2's ``c_attn``) that three canonical tensors are
    cut from is converted once per snapshot."""

    kind = "module"

    def __init__(self, model, label: str):   # (no file to load: StateDictSource's own start is not used)
        config = getattr(hf_model(model), "config", None)
        self.path, self.step = label, None
        self.config = dict(config.to_dict()) if hasattr(config, "to_dict") else {}
        self._tensors = {k.removeprefix("_orig_mod."): v for k, v in model.state_dict().items()}
        self.kept: dict[str, np.ndarray] = {}

    def read(self, name: str) -> np.ndarray:
        if name not in self.kept:
            self.kept[name] = self.read_rows(name, 0, None)
        return self.kept[name]

    def forget(self) -> None:
        self.kept.clear()


class ModelTensors:
    """What a snapshot of ``model`` stores: ``shapes`` (stored name -> shape), ``roles`` (canonical name ->
    stored name: the ``weights/`` links), :meth:`read` (stored name -> float32 array, now), :meth:`dims`.

    The toolkit's own models (they name their canonical tensors: ``roles()``) store every parameter as
    the trainer does. Any other model stores each canonical tensor (``token_embedding``, ``layer0/W_Q``
    as (heads, d_model, d_head) ...) under its own name with the dots of a parameter name
    (``layer0.W_Q``), cut and transposed by the layout that reads its checkpoints, plus every parameter
    no canonical tensor is built from (biases, norm shifts), by its torch name in its torch layout.
    """

    def __init__(self, model, label: str, mapping: str | None = None):
        self.model_config: dict = {}
        if callable(getattr(model, "roles", None)) and hasattr(model, "cfg"):   # the toolkit's own
            params = dict(model.named_parameters())
            self.layout, self.roles = "gamma-probe", dict(model.roles())
            self.model_config = model.cfg.to_dict() if hasattr(model.cfg, "to_dict") else {}
            self._read = lambda: {n: p.detach().float().cpu().numpy() for n, p in params.items()}
            self.heads = getattr(model.cfg, "heads", 1)
        else:
            source = ModuleSource(model, label)
            if not source.config:   # a plain torch model: the head count of its nn.MultiheadAttention modules
                source.config = _attention_heads(model)
            reader = CanonicalReader(source, mapping)   # an unknown layout: one line listing its tensors
            self.layout, self.heads, self.model_config = reader.layout.name, reader.layout.heads, source.config
            if self.heads is None and reader.layout.layers:
                raise needs_heads(label, reader.layout.name, "recording per-head weights", "n_head")
            used = {r for raw, _ in reader.layout.rules.values() for r in raw}
            rest = [n for n, _ in model.named_parameters() if n.removeprefix("_orig_mod.") not in used]
            params = dict(model.named_parameters())
            if "token_embedding" not in reader.layout.rules:   # (PyTorch's encoder takes embedded inputs)
                own = ", ".join(n.removeprefix("_orig_mod.") for n in rest if params[n].ndim == 2)
                raise ProbeError(f"{label}: the {self.layout} layout names no token embedding: map token_embedding "
                                 "to the model's own in a mapping file ({\"token_embedding\": NAME}; the 2-D "
                                 f"weights no layout name reads: {own or 'none'})")
            self.roles = {c: c.replace("/", ".") for c in reader.names()}

            def read():
                source.forget()
                out = {self.roles[c]: reader.read(c) for c in reader.names()}
                out.update({n: params[n].detach().float().cpu().numpy() for n in rest})
                source.forget()
                return out

            self._read = read
        self.shapes = {n: tuple(a.shape) for n, a in self.read().items()}

    def read(self) -> dict[str, np.ndarray]:
        """Every stored tensor's values now, as float32 arrays."""
        return self._read()

    def canonical(self, name: str) -> tuple[int, ...] | None:
        """The shape of canonical tensor ``name`` (None when the model has none)."""
        stored = self.roles.get(name)
        return None if stored is None else self.shapes[stored]

    def dims(self, probe_shape: tuple[int, int]) -> dict[str, int]:
        """The file's ``dims``: the model's sizes, from its canonical tensors, and the probe batch's."""
        emb = self.canonical("token_embedding")
        if emb is None or len(emb) != 2:
            raise ProbeError("a model without a token embedding matrix cannot be recorded (no layout names one)")
        layers = len({m.group(1) for c in self.roles if (m := re.match(r"layer(\d+)/W_Q$", c))})
        q, k = self.canonical("layer0/W_Q"), self.canonical("layer0/W_K")
        mlp, head = self.canonical("layer0/W_in"), self.canonical("unembedding")
        pos = self.canonical("position_embedding")
        dims = {"vocab": emb[0], "d_model": emb[1], "probe": probe_shape[0], "seq": probe_shape[1],
                "layers": layers, "heads": int(self.heads or 1), "kv_heads": k[0] if k else int(self.heads or 1),
                "d_head": q[2] if q else 0, "d_hidden": head[0] if head else emb[1], "d_ff": mlp[1] if mlp else 0,
                "blocks": layers + 1 if layers else 0, "sites": 0, "token_probe": 0}
        if pos is not None:
            dims["positions"] = pos[0]
        return {k: int(v) for k, v in dims.items()}


def _attention_heads(model) -> dict:
    """``{"num_heads": H}`` when every ``nn.MultiheadAttention`` of ``model`` has ``H`` heads (what the torch
    layout splits their fused weights by), else ``{}``."""
    import torch

    counts = {m.num_heads for m in model.modules() if isinstance(m, torch.nn.MultiheadAttention)}
    return {"num_heads": counts.pop()} if len(counts) == 1 else {}
