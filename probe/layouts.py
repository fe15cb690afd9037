"""Canonical tensor names over checkpoint layouts.

Whatever the source, a probe asks for ``token_embedding`` (vocab x d), ``position_embedding``,
``unembedding`` (d x vocab), and per layer ``layer{i}/W_Q``, ``W_K``, ``W_V`` (heads x d x d_head),
``W_O`` (heads x d_head x d), ``W_in`` (d x d_ff) and ``W_out`` (d_ff x d) — all in the
``x @ W`` layout of this toolkit's own models. Covered: GPT-2 (Hugging Face, Conv1D
weights and the fused ``c_attn``), nanoGPT, GPT-NeoX / Pythia (per-head interleaved
``query_key_value``), LLaMA-style (grouped K/V heads, gated MLP: ``W_gate`` too), BERT-style
(MiniLM) and this toolkit's models. A name-mapping JSON file (canonical -> raw name, plus
``"heads"``) covers anything else.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .checkpoints import Source
from .errors import ProbeError

Reader = Callable[[str], np.ndarray]


def _heads_in(W: np.ndarray, H: int) -> np.ndarray:
    """(d, H*e) x@W projection -> (H, d, e)."""
    d, he = W.shape
    return W.reshape(d, H, he // H).transpose(1, 0, 2)


def _heads_out(W: np.ndarray, H: int) -> np.ndarray:
    """(H*e, d) x@W output projection -> (H, e, d)."""
    he, d = W.shape
    return W.reshape(H, he // H, d)


def _linear_attention(rules: dict, i: int, pattern: str, parts: tuple[str, str, str, str], H: int, KV: int) -> None:
    """Rules for layer ``i``'s separate q, k, v, o ``nn.Linear`` weights (stored out x in), named
    ``pattern.format(part)``; k and v have ``KV`` heads (grouped-query attention), q and o ``H``."""
    for nm, part, heads in zip(("W_Q", "W_K", "W_V"), parts, (H, KV, KV)):
        rules[f"layer{i}/{nm}"] = ((pattern.format(part),), lambda w, n=heads: _heads_in(w.T, n))
    rules[f"layer{i}/W_O"] = ((pattern.format(parts[3]),), lambda w, n=H: _heads_out(w.T, n))


@dataclass
class Layout:
    """Canonical name -> (raw names it is read from, how to build it)."""

    name: str
    heads: int
    layers: int
    rules: dict[str, tuple[tuple[str, ...], Callable[..., np.ndarray]]]

    def names(self) -> list[str]:
        return list(self.rules)


def _layer_count(names, pattern: str) -> int:
    found = {int(m.group(1)) for n in names if (m := re.search(pattern, n))}
    return max(found) + 1 if found else 0


def _prefix(names, anchor: str) -> str:
    """The prefix before ``anchor`` in the raw names ('' or e.g. 'transformer.' / 'bert.')."""
    for n in names:
        i = n.find(anchor)
        if i >= 0:
            return n[:i]
    return ""


def _cfg_int(cfg: dict, *keys: str) -> int | None:
    for k in keys:
        for c in (cfg, cfg.get("nanogpt", {})):
            if isinstance(c.get(k), int):
                return c[k]
    return None


def _heads(cfg: dict, source: Source, family: str, *keys: str) -> int:
    """The head count from config.json; a layout cannot be split into heads without it."""
    keys = keys or ("num_attention_heads",)
    H = _cfg_int(cfg, *keys)
    if H is None:
        raise ProbeError(f"{source.path}: {family} weights but no head count (config.json {keys[0]})")
    return H


def detect(source: Source, mapping_file: str | None = None) -> Layout:
    shapes = source.shapes()
    names = list(shapes)
    cfg = source.config
    if mapping_file:
        return _from_mapping(mapping_file, shapes)
    T = lambda W: W.T  # noqa: E731  (torch Linear stores out x in)

    if "W_E" in shapes and any(n.startswith("blocks.") or n == "W_1" for n in names):
        H = int(cfg.get("heads", 1))
        L = _layer_count(names, r"^blocks\.(\d+)\.")
        rules = {"token_embedding": (("W_E",), lambda w: w)}
        if "W_pos" in shapes:
            rules["position_embedding"] = (("W_pos",), lambda w: w)
        rules["unembedding"] = ((("W_U",) if "W_U" in shapes else ("W_2",)), lambda w: w)
        for i in range(L):
            p = f"blocks.{i}."
            for w in ("W_Q", "W_K", "W_V", "W_O"):
                rules[f"layer{i}/{w}"] = ((p + "attn." + w,), lambda x: x)
            rules[f"layer{i}/W_in"] = ((p + "mlp.W_in",), lambda x: x)
            rules[f"layer{i}/W_out"] = ((p + "mlp.W_out",), lambda x: x)
        return Layout("gamma-probe", H, L, rules)

    if any(".attn.c_attn.weight" in n for n in names):  # GPT-2 family
        pre = _prefix(names, "wte.weight")
        L = _layer_count(names, r"h\.(\d+)\.attn\.c_attn")
        c_attn = shapes[f"{pre}h.0.attn.c_attn.weight"]
        conv1d = c_attn[1] == 3 * c_attn[0]          # HF Conv1D stores in x out
        H = _heads(cfg, source, "GPT-2-style", "n_head", "num_attention_heads")
        fix = (lambda w: w) if conv1d else T
        rules = {"token_embedding": ((f"{pre}wte.weight",), lambda w: w)}
        if f"{pre}wpe.weight" in shapes:
            rules["position_embedding"] = ((f"{pre}wpe.weight",), lambda w: w)
        lm = [n for n in names if n.endswith("lm_head.weight")]
        rules["unembedding"] = (((lm[0],) if lm else (f"{pre}wte.weight",)), T)  # tied when absent
        for i in range(L):
            p = f"{pre}h.{i}."

            def qkv(w, j, H=H, fix=fix):
                W = fix(w)
                d = W.shape[0]
                return _heads_in(W[:, j * d:(j + 1) * d], H)

            for j, nm in enumerate(("W_Q", "W_K", "W_V")):
                rules[f"layer{i}/{nm}"] = ((p + "attn.c_attn.weight",), lambda w, j=j, qkv=qkv: qkv(w, j))
            rules[f"layer{i}/W_O"] = ((p + "attn.c_proj.weight",), lambda w, H=H, fix=fix: _heads_out(fix(w), H))
            rules[f"layer{i}/W_in"] = ((p + "mlp.c_fc.weight",), fix)
            rules[f"layer{i}/W_out"] = ((p + "mlp.c_proj.weight",), fix)
        return Layout("gpt2" if conv1d else "nanogpt", H, L, rules)

    if any(".attention.query_key_value.weight" in n for n in names):  # GPT-NeoX / Pythia
        pre = _prefix(names, "layers.0.attention")
        L = _layer_count(names, r"layers\.(\d+)\.attention\.query_key_value")
        H = _heads(cfg, source, "GPT-NeoX")
        rules = {"token_embedding": ((f"{pre}embed_in.weight",), lambda w: w)}
        out = [n for n in names if n.endswith("embed_out.weight")]
        if out:
            rules["unembedding"] = ((out[0],), T)
        for i in range(L):
            p = f"{pre}layers.{i}."

            def qkv(w, j, H=H):
                # rows are grouped per head as (H, 3, e): [q_h, k_h, v_h] for each head
                three_he, d = w.shape
                e = three_he // (3 * H)
                return w.reshape(H, 3, e, d)[:, j].transpose(0, 2, 1)

            for j, nm in enumerate(("W_Q", "W_K", "W_V")):
                rules[f"layer{i}/{nm}"] = ((p + "attention.query_key_value.weight",),
                                           lambda w, j=j, qkv=qkv: qkv(w, j))
            rules[f"layer{i}/W_O"] = ((p + "attention.dense.weight",), lambda w, H=H: _heads_out(w.T, H))
            rules[f"layer{i}/W_in"] = ((p + "mlp.dense_h_to_4h.weight",), T)
            rules[f"layer{i}/W_out"] = ((p + "mlp.dense_4h_to_h.weight",), T)
        return Layout("gpt-neox", H, L, rules)

    if any(".self_attn.q_proj.weight" in n for n in names):  # LLaMA-style
        pre = _prefix(names, "layers.0.self_attn")
        L = _layer_count(names, r"layers\.(\d+)\.self_attn\.q_proj")
        H = _heads(cfg, source, "LLaMA-style")
        KV = _cfg_int(cfg, "num_key_value_heads") or H
        emb = [n for n in names if n.endswith("embed_tokens.weight")]
        rules = {"token_embedding": ((emb[0],), lambda w: w)}
        lm = [n for n in names if n.endswith("lm_head.weight")]
        rules["unembedding"] = (((lm[0],) if lm else (emb[0],)), T)
        for i in range(L):
            p = f"{pre}layers.{i}."
            _linear_attention(rules, i, p + "self_attn.{}_proj.weight", ("q", "k", "v", "o"), H, KV)
            rules[f"layer{i}/W_in"] = ((p + "mlp.up_proj.weight",), T)
            rules[f"layer{i}/W_gate"] = ((p + "mlp.gate_proj.weight",), T)
            rules[f"layer{i}/W_out"] = ((p + "mlp.down_proj.weight",), T)
        return Layout("llama", H, L, rules)

    if any(".attention.self.query.weight" in n for n in names):  # BERT-style
        pre = _prefix(names, "embeddings.word_embeddings.weight")
        L = _layer_count(names, r"encoder\.layer\.(\d+)\.attention")
        H = _heads(cfg, source, "BERT-style")
        rules = {"token_embedding": ((f"{pre}embeddings.word_embeddings.weight",), lambda w: w)}
        if f"{pre}embeddings.position_embeddings.weight" in shapes:
            rules["position_embedding"] = ((f"{pre}embeddings.position_embeddings.weight",), lambda w: w)
        for i in range(L):
            p = f"{pre}encoder.layer.{i}."
            _linear_attention(rules, i, p + "attention.{}.weight",
                              ("self.query", "self.key", "self.value", "output.dense"), H, H)
            rules[f"layer{i}/W_in"] = ((p + "intermediate.dense.weight",), T)
            rules[f"layer{i}/W_out"] = ((p + "output.dense.weight",), T)
        return Layout("bert", H, L, rules)

    shown = ", ".join(names[:12]) + (f", ... ({len(names)} in all)" if len(names) > 12 else "")
    raise ProbeError(f"{source.path}: unknown checkpoint layout; tensors found: {shown}. Pass a name-mapping "
                     "JSON file ({\"heads\": H, \"token_embedding\": \"raw.name\", \"layer0/W_V\": ...}, "
                     "raw tensors in x @ W layout or with \"transpose\": [names]) with --mapping")


def _from_mapping(path: str, shapes: dict) -> Layout:
    try:
        with open(path) as fh:
            m = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ProbeError(f"{path}: unreadable name-mapping file ({exc})") from None
    H = int(m.pop("heads", 1))
    transpose = set(m.pop("transpose", []))
    rules = {}
    for canon, raw in m.items():
        if raw not in shapes:
            raise ProbeError(f"{path}: maps {canon} to '{raw}', which the checkpoint does not hold")
        fix = (lambda w: w.T) if canon in transpose else (lambda w: w)
        if re.fullmatch(r"layer\d+/W_[QKV]", canon):
            rules[canon] = ((raw,), lambda w, fix=fix: _heads_in(fix(w), H))
        elif re.fullmatch(r"layer\d+/W_O", canon):
            rules[canon] = ((raw,), lambda w, fix=fix: _heads_out(fix(w), H))
        else:
            rules[canon] = ((raw,), fix)
    L = _layer_count(rules, r"^layer(\d+)/")
    return Layout("mapping", H, L, rules)


class CanonicalReader:
    """Read canonical tensors from any source: ``CanonicalReader(open_checkpoint(p)).read("layer0/W_V")``."""

    def __init__(self, source: Source, mapping_file: str | None = None):
        self.source = source
        self.layout = detect(source, mapping_file)

    def names(self) -> list[str]:
        return self.layout.names()

    def read(self, name: str) -> np.ndarray:
        if name not in self.layout.rules:
            raise ProbeError(f"{self.source.path}: no canonical tensor '{name}' in this {self.layout.name} "
                             f"checkpoint; it has {', '.join(self.layout.names()[:8])}, ...")
        raw, build = self.layout.rules[name]
        return np.asarray(build(*(self.source.read(r) for r in raw)), dtype=np.float32)
