"""A live torch model as a checkpoint, for :class:`probe.Recorder`: its state dict read through the
same layouts that read a checkpoint file, and what a snapshot of it stores (names, shapes, dims).
Nothing is copied until a tensor is read; a read gives the values the model holds at that moment."""
from __future__ import annotations

import fnmatch
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
    cut from is converted once per snapshot. :meth:`forget` also takes the state dict anew: whatever
    gave the parameters new storage since (``model.to("cuda")``, ``.to(torch.bfloat16)``,
    ``resize_token_embeddings``) is what the next snapshot reads, never the tensors of an earlier one."""

    kind = "module"

    def __init__(self, model, label: str):   # (no file to load: StateDictSource's own start is not used)
        config = getattr(hf_model(model), "config", None)
        self.path, self.step, self.model = label, None, model
        self.config = dict(config.to_dict()) if hasattr(config, "to_dict") else {}
        self.kept: dict[str, np.ndarray] = {}
        self.forget()

    def read(self, name: str) -> np.ndarray:
        if name not in self.kept:
            self.kept[name] = self.read_rows(name, 0, None)
        return self.kept[name]

    def forget(self) -> None:
        self.kept.clear()
        self._tensors = live_state(self.model)


def live_state(model) -> dict:
    """``model``'s state dict as it is now (torch.compile's ``_orig_mod.`` prefix stripped): the tensors
    its parameters and buffers hold at this moment, not those of an earlier call."""
    return {k.removeprefix("_orig_mod."): v for k, v in model.state_dict().items()}


class ModelTensors:
    """What a snapshot of ``model`` stores: ``shapes`` (stored name -> shape), ``roles`` (canonical name ->
    stored name: the ``weights/`` links), :meth:`read` (stored name -> float32 array, now), :meth:`dims`,
    ``tied`` (canonical name -> the canonical tensor it shares its memory with, stored once),
    ``left_out`` (the canonical tensors ``keep`` did not select) and ``full`` (every canonical tensor's
    shape, stored or not: the model's sizes).

    The toolkit's own models (they name their canonical tensors: ``roles()``) store every parameter as
    the trainer does. Any other model stores each canonical tensor (``token_embedding``, ``layer0/W_Q``
    as (heads, d_model, d_head) ...) under its own name with the dots of a parameter name
    (``layer0.W_Q``), cut and transposed by the layout that reads its checkpoints, plus every parameter
    no canonical tensor is built from (biases, norm shifts), by its torch name in its torch layout.
    A tensor tied to one already stored (GPT-2's ``lm_head`` is its ``wte``) is not stored again.
    ``keep``: shell patterns (``layer*/W_V``, ``*.bias``) over canonical and stored names; only the
    tensors they match are stored (the token embedding always: every probe of tokens reads it).
    """

    def __init__(self, model, label: str, mapping: str | None = None, keep=None):
        self.model_config: dict = {}
        self.label, self.tied = label, {}
        if callable(getattr(model, "roles", None)) and hasattr(model, "cfg"):   # the toolkit's own
            self.layout, roles = "gamma-probe", dict(model.roles())
            self.model_config = model.cfg.to_dict() if hasattr(model.cfg, "to_dict") else {}
            names = [n for n, _ in model.named_parameters()]   # (tied parameters are named once)
            self.heads = getattr(model.cfg, "heads", 1)
            shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
            self.full = {c: shapes[n] for c, n in roles.items()}
        else:
            source = ModuleSource(model, label)
            if not source.config:   # a plain torch model: the head count of its nn.MultiheadAttention modules
                source.config = _attention_heads(model)
            reader = CanonicalReader(source, mapping)   # an unknown layout: one line listing its tensors
            self.layout, self.heads, self.model_config = reader.layout.name, reader.layout.heads, source.config
            if self.heads is None and reader.layout.layers:
                raise needs_heads(label, reader.layout.name, "recording per-head weights", "n_head")
            rules = reader.layout.rules
            alias = source.aliases()
            first: dict[str, str] = {}   # a canonical tensor that is one raw tensor's memory as another's, or
            for c, (raw, _) in rules.items():   # its transpose (GPT-2's lm_head, nanoGPT's): tied, stored once
                if len(raw) != 1:
                    continue
                prev = first.setdefault(alias.get(raw[0], raw[0]), c)
                if prev != c and _same_values(reader.read(c), reader.read(prev)):
                    self.tied[c] = prev
            used = {alias.get(r, r) for raw, _ in rules.values() for r in raw}
            names = [n for n, _ in model.named_parameters() if n.removeprefix("_orig_mod.") not in used]
            if "token_embedding" not in rules:   # (PyTorch's encoder takes embedded inputs)
                params = dict(model.named_parameters())
                own = ", ".join(n.removeprefix("_orig_mod.") for n in names if params[n].ndim == 2)
                raise ProbeError(f"{label}: the {self.layout} layout names no token embedding: map token_embedding "
                                 "to the model's own in a mapping file ({\"token_embedding\": NAME}; the 2-D "
                                 f"weights no layout name reads: {own or 'none'})")
            roles = {c: c.replace("/", ".") for c in rules if c not in self.tied}
            self.full = {c: tuple(reader.shape(c)) for c in roles}
        for pattern in keep or ():   # a pattern that selects nothing is a typo, not a wish to store nothing
            if not any(fnmatch.fnmatchcase(n, pattern) for n in [*roles, *roles.values(), *names]):
                raise ProbeError(f"keep: '{pattern}' matches no tensor of this model (its canonical names: "
                                 f"{', '.join(list(roles)[:6])}, ...)")
        self.left_out = [c for c in roles if not _kept(keep, c, roles[c]) and c != "token_embedding"]
        self.roles = {c: n for c, n in roles.items() if c not in self.left_out}
        stored = set(self.roles.values())
        names = [n for n in names if n in stored or _kept(keep, n)]
        if self.layout == "gamma-probe":
            def read():   # the parameters asked for anew at each read (a model moved or cast since holds new ones)
                params = dict(model.named_parameters())
                return {n: params[n].detach().float().cpu().numpy() for n in names}
        else:
            canon = list(self.roles)

            def read():
                source.forget()   # (the model's tensors now)
                params = dict(model.named_parameters())
                out = {self.roles[c]: reader.read(c) for c in canon}
                out.update({n: params[n].detach().float().cpu().numpy() for n in names})
                source.kept.clear()
                return out

        self._read = read
        self.shapes: dict[str, tuple[int, ...]] = {}   # (empty: the first read sets them)
        self.shapes = {n: tuple(a.shape) for n, a in self.read().items()}

    def read(self) -> dict[str, np.ndarray]:
        """Every stored tensor's values now, as float32 arrays. A tensor whose shape changed since the
        first read (``resize_token_embeddings``) is refused: the file's datasets have the first shapes."""
        out = self._read()
        for n, a in out.items():
            if self.shapes and tuple(a.shape) != self.shapes.get(n):
                raise ProbeError(f"{self.label}: '{n}' is now {tuple(a.shape)}, {self.shapes.get(n)} when recording "
                                 "began (the model was resized); record the resized model into a new file")
        return out

    def canonical(self, name: str) -> tuple[int, ...] | None:
        """The shape of canonical tensor ``name``, stored or left out (None when the model has none)."""
        return self.full.get(name)

    def dims(self, probe_shape: tuple[int, int]) -> dict[str, int]:
        """The file's ``dims``: the model's sizes, from its canonical tensors, and the probe batch's."""
        emb = self.canonical("token_embedding")
        if emb is None or len(emb) != 2:
            raise ProbeError("a model without a token embedding matrix cannot be recorded (no layout names one)")
        layers = len({m.group(1) for c in self.full if (m := re.match(r"layer(\d+)/W_Q$", c))})
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


def _kept(keep, *names: str) -> bool:
    """Whether ``keep`` (shell patterns; None: everything) selects a tensor known by any of ``names``."""
    return keep is None or any(fnmatch.fnmatchcase(n, p) for n in names for p in keep)


def _same_values(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` is ``b`` or its transpose (two canonical views of one tied matrix)."""
    return (a.shape == b.shape and np.array_equal(a, b)) or (a.shape == b.shape[::-1] and np.array_equal(a, b.T))


def _attention_heads(model) -> dict:
    """``{"num_heads": H}`` when every ``nn.MultiheadAttention`` of ``model`` has ``H`` heads (what the torch
    layout splits their fused weights by), else ``{}``."""
    import torch

    counts = {m.num_heads for m in model.modules() if isinstance(m, torch.nn.MultiheadAttention)}
    return {"num_heads": counts.pop()} if len(counts) == 1 else {}
