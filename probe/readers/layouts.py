"""Canonical tensor names over checkpoint layouts: one rule builder per model family.

Whatever the source, a probe asks for ``token_embedding`` (vocab x d), ``position_embedding``,
``unembedding`` (d x vocab), and per layer ``layer{i}/W_Q``, ``W_K``, ``W_V`` (heads x d x d_head),
``W_O`` (heads x d_head x d), ``W_in`` (d x d_ff), ``W_out`` (d_ff x d) and, for gated MLPs,
``W_gate`` (d x d_ff), and the norm gains ``layer{i}/attn_norm``, ``layer{i}/mlp_norm`` and
``final_norm`` (d,) where the family has them — all in the ``x @ W`` layout of this toolkit's own models (the names of
``schemas/snapshot-v1.json``). Covered: GPT-2 (Hugging Face Conv1D weights, the fused
``c_attn``), nanoGPT, GPT-NeoX / Pythia (per-head interleaved ``query_key_value``), LLaMA-style
(grouped K/V heads, gated MLP), BERT-style (MiniLM), Phi and Phi-3, PyTorch's own ``nn.MultiheadAttention``
(``nn.TransformerEncoder``: the fused ``in_proj_weight``), and this toolkit's snapshots, whose trainer
stores the canonical names itself. A name-mapping JSON file (canonical -> raw name, plus ``"heads"`` and
``"transpose"``) covers anything else, or names what a layout lacks (the embedding of an encoder):
:func:`_from_mapping`.

To add a family: write ``_family(source, shapes, cfg) -> Layout`` and list it in ``FAMILIES``
with the raw name that identifies it.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..files import open_regular
from ..limits import load_json
from ..errors import ProbeError, param
from .checkpoints import RawSource

Build = Callable[..., np.ndarray]
Rules = dict[str, tuple[tuple[str, ...], Build]]


@dataclass
class Layout:
    """Canonical name -> (raw names it is read from, how to build it)."""

    name: str
    heads: int | None        # None: no head count known (a lone weights file)
    layers: int
    rules: Rules


# --- shared pieces ---------------------------------------------------------------------------

def _same(w: np.ndarray) -> np.ndarray:
    return w


def _T(w: np.ndarray) -> np.ndarray:  # torch Linear stores out x in
    return w.T


def _heads_in(W: np.ndarray, H: int) -> np.ndarray:
    """(d, H*e) x@W projection -> (H, d, e)."""
    d, he = W.shape
    return W.reshape(d, H, he // H).transpose(1, 0, 2)


def _heads_out(W: np.ndarray, H: int) -> np.ndarray:
    """(H*e, d) x@W output projection -> (H, e, d)."""
    he, d = W.shape
    return W.reshape(H, he // H, d)


def _linear_attention(rules: Rules, i: int, pattern: str, parts: tuple[str, str, str, str], H: int | None,
                      KV: int | None) -> None:
    """Rules for layer ``i``'s separate q, k, v, o ``nn.Linear`` weights (stored out x in), named
    ``pattern.format(part)``; k and v have ``KV`` heads (grouped-query attention), q and o ``H`` (None, no
    count known: one head each)."""
    for nm, part, heads in zip(("W_Q", "W_K", "W_V"), parts, (H, KV, KV)):
        rules[f"layer{i}/{nm}"] = ((pattern.format(part),), lambda w, n=heads or 1: _heads_in(w.T, n))
    _output(rules, i, pattern.format(parts[3]), H)


def _output(rules: Rules, i: int, raw: str, H: int | None, fix: Build = _T) -> None:
    """Layer ``i``'s attention output projection ``raw`` (``fix`` makes it x @ W), split into ``H`` heads."""
    rules[f"layer{i}/W_O"] = ((raw,), lambda w: _heads_out(fix(w), H or 1))


def _each(rules: Rules, i: int, prefix: str, fix: Build = _T, **raw: str) -> None:
    """Layer ``i``'s canonical names -> their raw weights ``prefix + raw``, each made x @ W by ``fix``."""
    for nm, r in raw.items():
        rules[f"layer{i}/{nm}"] = ((prefix + r,), fix)


def _norms(rules: Rules, shapes: dict, sites: dict[str, str]) -> None:
    """Norm gains, or a position embedding (canonical site -> raw weight name, read as it is), for the
    sites the checkpoint holds."""
    for site, raw in sites.items():
        if raw in shapes:
            rules[site] = ((raw,), _same)


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


def _ending(names, suffix: str) -> str | None:
    return next((n for n in names if n.endswith(suffix)), None)


def _cfg_int(cfg: dict, *keys: str) -> int | None:
    """The first of ``keys`` config.json (or a nanoGPT checkpoint's ``model_args``) holds as an int; None
    without one. A head count that is None (a lone weights file) makes the attention weights one head each,
    the layer's whole map: what the probes of whole matrices read (rank, spectrum) is the same, and a probe
    of one head says that it needs the count (:func:`needs_heads`)."""
    for k in keys:
        for c in (cfg, cfg.get("nanogpt", {})):
            if isinstance(c.get(k), int):
                return c[k]
    return None


def needs_heads(path: str, family: str, what: str, key: str = "num_attention_heads") -> ProbeError:
    """The error of a probe or a layout that cannot go on without the head count."""
    if family in ("torch", "mapping"):   # (no config.json to give it: PyTorch's modules or a model of one's own)
        return ProbeError(f"{path}: {family} weights without a head count: {what} needs it; give \"heads\" in the "
                          f"name-mapping file ({param('mapping')})")
    return ProbeError(f"{path}: {family} weights without a head count (config.json {key}): {what} needs it; put "
                      "the model's config.json beside the weights file")


def _unsplittable(path: str, family: str, raw: str) -> Build:
    def build(w):
        raise needs_heads(path, family, f"splitting {raw} into queries, keys and values")
    return build


# --- one rule builder per family -------------------------------------------------------------

def _own(source: RawSource, shapes: dict, cfg: dict) -> Layout:
    """This toolkit's snapshots: the trainer stored every canonical name (``weights/``)."""
    dims = cfg.get("dims", {})
    return Layout("gamma-probe", int(dims.get("heads", 1)), int(dims.get("layers", 0)),
                  {n: ((n,), _same) for n in shapes})


def _gpt2(source: RawSource, shapes: dict, cfg: dict) -> Layout:
    """GPT-2 (Hugging Face Conv1D, in x out) and nanoGPT (nn.Linear, out x in): fused c_attn."""
    pre = _prefix(shapes, "wte.weight")
    L = _layer_count(shapes, r"h\.(\d+)\.attn\.c_attn")
    c_attn = shapes[f"{pre}h.0.attn.c_attn.weight"]
    conv1d = c_attn[1] == 3 * c_attn[0]
    H = _cfg_int(cfg, "n_head", "num_attention_heads")
    fix = _same if conv1d else _T
    rules: Rules = {"token_embedding": ((f"{pre}wte.weight",), _same)}
    _norms(rules, shapes, {"position_embedding": f"{pre}wpe.weight"})
    rules["unembedding"] = ((_ending(shapes, "lm_head.weight") or f"{pre}wte.weight",), _T)  # tied when absent

    def qkv(w, j):
        W = fix(w)
        d = W.shape[0]
        return _heads_in(W[:, j * d:(j + 1) * d], H or 1)

    for i in range(L):
        p = f"{pre}h.{i}."
        for j, nm in enumerate(("W_Q", "W_K", "W_V")):
            rules[f"layer{i}/{nm}"] = ((p + "attn.c_attn.weight",), lambda w, j=j: qkv(w, j))
        _output(rules, i, p + "attn.c_proj.weight", H, fix)
        _each(rules, i, p, fix, W_in="mlp.c_fc.weight", W_out="mlp.c_proj.weight")
        _norms(rules, shapes, {f"layer{i}/attn_norm": p + "ln_1.weight", f"layer{i}/mlp_norm": p + "ln_2.weight"})
    _norms(rules, shapes, {"final_norm": f"{pre}ln_f.weight"})
    return Layout("gpt2" if conv1d else "nanogpt", H, L, rules)


def _neox(source: RawSource, shapes: dict, cfg: dict) -> Layout:
    """GPT-NeoX / Pythia: query_key_value rows grouped per head as (H, 3, e)."""
    pre = _prefix(shapes, "layers.0.attention")
    L = _layer_count(shapes, r"layers\.(\d+)\.attention\.query_key_value")
    H = _cfg_int(cfg, "num_attention_heads")
    rules: Rules = {"token_embedding": ((f"{pre}embed_in.weight",), _same)}
    out = _ending(shapes, "embed_out.weight")
    if out:
        rules["unembedding"] = ((out,), _T)

    def qkv(w, j, H=H):
        three_he, d = w.shape
        e = three_he // (3 * H)
        return w.reshape(H, 3, e, d)[:, j].transpose(0, 2, 1)

    for i in range(L):
        p = f"{pre}layers.{i}."
        for j, nm in enumerate(("W_Q", "W_K", "W_V")):   # interleaved per head: no split without the count
            rules[f"layer{i}/{nm}"] = ((p + "attention.query_key_value.weight",), (lambda w, j=j: qkv(w, j)) if H
                                       else _unsplittable(source.path, "GPT-NeoX", "query_key_value"))
        _output(rules, i, p + "attention.dense.weight", H)
        _each(rules, i, p, W_in="mlp.dense_h_to_4h.weight", W_out="mlp.dense_4h_to_h.weight")
        _norms(rules, shapes, {f"layer{i}/attn_norm": p + "input_layernorm.weight",
                               f"layer{i}/mlp_norm": p + "post_attention_layernorm.weight"})
    _norms(rules, shapes, {"final_norm": f"{pre}final_layer_norm.weight"})
    return Layout("gpt-neox", H, L, rules)


def _decoder(shapes: dict, cfg: dict, layer_part: str):
    """What the Hugging Face decoders with ``model.layers.{i}.self_attn`` share: (prefix, layers,
    heads, K/V heads, rules holding the embedding and the unembedding, tied when lm_head is absent)."""
    pre = _prefix(shapes, "layers.0.self_attn")
    L = _layer_count(shapes, rf"layers\.(\d+)\.self_attn\.{layer_part}")
    H = _cfg_int(cfg, "num_attention_heads")
    KV = _cfg_int(cfg, "num_key_value_heads") or H
    emb = _ending(shapes, "embed_tokens.weight")
    rules: Rules = {"token_embedding": ((emb,), _same),
                    "unembedding": ((_ending(shapes, "lm_head.weight") or emb,), _T)}
    for i in range(L):   # LLaMA, Mistral, Qwen2, Gemma, Phi-3 (Phi has one input_layernorm per layer)
        _norms(rules, shapes, {f"layer{i}/attn_norm": f"{pre}layers.{i}.input_layernorm.weight",
                               f"layer{i}/mlp_norm": f"{pre}layers.{i}.post_attention_layernorm.weight"})
    _norms(rules, shapes, {"final_norm": f"{pre}norm.weight"})
    _norms(rules, shapes, {"final_norm": f"{pre}final_layernorm.weight"})
    return pre, L, H, KV, rules


def _llama(source: RawSource, shapes: dict, cfg: dict) -> Layout:
    """LLaMA-style: separate q/k/v/o projections, grouped K/V heads, gated MLP, RMSNorm gains."""
    pre, L, H, KV, rules = _decoder(shapes, cfg, "q_proj")
    for i in range(L):
        p = f"{pre}layers.{i}."
        _linear_attention(rules, i, p + "self_attn.{}_proj.weight", ("q", "k", "v", "o"), H, KV)
        _each(rules, i, p, W_in="mlp.up_proj.weight", W_gate="mlp.gate_proj.weight", W_out="mlp.down_proj.weight")
    return Layout("llama", H, L, rules)


def _phi(source: RawSource, shapes: dict, cfg: dict) -> Layout:
    """Phi-1/1.5/2: separate q/k/v projections, output ``dense``, MLP ``fc1``/``fc2``; partial rotary
    embedding changes no weight."""
    pre, L, H, KV, rules = _decoder(shapes, cfg, "dense")
    for i in range(L):
        p = f"{pre}layers.{i}."
        _linear_attention(rules, i, p + "self_attn.{}.weight", ("q_proj", "k_proj", "v_proj", "dense"), H, KV)
        _each(rules, i, p, W_in="mlp.fc1.weight", W_out="mlp.fc2.weight")
    return Layout("phi", H, L, rules)


def _phi3(source: RawSource, shapes: dict, cfg: dict) -> Layout:
    """Phi-3: fused ``qkv_proj`` (rows: H query heads, then KV key heads, then KV value heads) and
    fused ``gate_up_proj`` (rows: gate, then up)."""
    pre, L, H, KV, rules = _decoder(shapes, cfg, "qkv_proj")
    e = shapes[f"{pre}layers.0.self_attn.qkv_proj.weight"][0] // (H + 2 * KV) if H else 0
    spans = {"W_Q": (0, H * e, H), "W_K": (H * e, (H + KV) * e, KV), "W_V": ((H + KV) * e, (H + 2 * KV) * e, KV)} \
        if H else {}
    for i in range(L):
        p = f"{pre}layers.{i}."
        for nm in ("W_Q", "W_K", "W_V"):    # the rows of each part depend on the head counts
            a, b, n = spans.get(nm, (0, 0, 0))
            rules[f"layer{i}/{nm}"] = ((p + "self_attn.qkv_proj.weight",),
                                       (lambda w, a=a, b=b, n=n: _heads_in(w[a:b].T, n)) if H
                                       else _unsplittable(source.path, "Phi-3", "qkv_proj"))
        _output(rules, i, p + "self_attn.o_proj.weight", H)
        rules[f"layer{i}/W_gate"] = ((p + "mlp.gate_up_proj.weight",), lambda w: w[: w.shape[0] // 2].T)
        rules[f"layer{i}/W_in"] = ((p + "mlp.gate_up_proj.weight",), lambda w: w[w.shape[0] // 2:].T)
        _each(rules, i, p, W_out="mlp.down_proj.weight")
    return Layout("phi3", H, L, rules)


def _bert(source: RawSource, shapes: dict, cfg: dict) -> Layout:
    """BERT-style encoders (MiniLM): separate query/key/value, output.dense."""
    pre = _prefix(shapes, "embeddings.word_embeddings.weight")
    L = _layer_count(shapes, r"encoder\.layer\.(\d+)\.attention")
    H = _cfg_int(cfg, "num_attention_heads")
    rules: Rules = {"token_embedding": ((f"{pre}embeddings.word_embeddings.weight",), _same)}
    _norms(rules, shapes, {"position_embedding": f"{pre}embeddings.position_embeddings.weight"})
    for i in range(L):
        p = f"{pre}encoder.layer.{i}."
        _linear_attention(rules, i, p + "attention.{}.weight",
                          ("self.query", "self.key", "self.value", "output.dense"), H, H)
        _each(rules, i, p, W_in="intermediate.dense.weight", W_out="output.dense.weight")
    return Layout("bert", H, L, rules)


def _torch(source: RawSource, shapes: dict, cfg: dict) -> Layout:
    """PyTorch's ``nn.MultiheadAttention``, one layer each in name order (``nn.TransformerEncoder``'s
    ``layers.{i}.self_attn``): the fused ``in_proj_weight`` (rows: q, then k, then v; out x in) and
    ``out_proj``; an ``nn.TransformerEncoderLayer``'s ``linear1``/``linear2`` are its MLP, ``norm1``/``norm2``
    its norms, and the encoder's ``norm`` the final one. PyTorch's modules hold no embedding: a mapping
    file names it. The head count is the module's ``num_heads`` (a live model: :class:`ModelTensors`) or
    the mapping's ``"heads"``."""
    H = _cfg_int(cfg, "num_heads", "nhead", "num_attention_heads")
    attn = sorted((n.removesuffix("in_proj_weight") for n in shapes if n.endswith("in_proj_weight")), key=_natural)
    rules: Rules = {}
    for i, p in enumerate(attn):
        for j, nm in enumerate(("W_Q", "W_K", "W_V")):
            rules[f"layer{i}/{nm}"] = ((p + "in_proj_weight",),
                                       lambda w, j=j: _heads_in(w[j * w.shape[1]:(j + 1) * w.shape[1]].T, H or 1))
        _output(rules, i, p + "out_proj.weight", H)
        block = p.removesuffix("self_attn.") if p.endswith("self_attn.") else None   # an encoder layer's
        if block is not None and {block + "linear1.weight", block + "linear2.weight"} <= set(shapes):
            _each(rules, i, block, W_in="linear1.weight", W_out="linear2.weight")
        if block is not None:
            _norms(rules, shapes, {f"layer{i}/attn_norm": block + "norm1.weight", f"layer{i}/mlp_norm": block + "norm2.weight"})
        encoder = re.match(r"(.*)layers\.\d+\.$", block or "")
        if encoder:
            _norms(rules, shapes, {"final_norm": encoder.group(1) + "norm.weight"})
    return Layout("torch", H, len(attn), rules)


def _natural(name: str) -> list:
    """Sort key: layer 2 before layer 10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


# (how a family is recognised: a raw-name fragment, its builder), tried in order
FAMILIES: list[tuple[str, Callable[[RawSource, dict, dict], Layout]]] = [
    (".attn.c_attn.weight", _gpt2),
    (".attention.query_key_value.weight", _neox),
    (".self_attn.dense.weight", _phi),             # before LLaMA: Phi also has q_proj
    (".self_attn.qkv_proj.weight", _phi3),
    (".self_attn.q_proj.weight", _llama),          # LLaMA, Mistral, Qwen2, Gemma
    (".attention.self.query.weight", _bert),
    ("in_proj_weight", _torch),                    # PyTorch's nn.MultiheadAttention
]


def _family(source: RawSource, shapes: dict, cfg: dict) -> Layout | None:
    """Our own snapshot's layout, or a known family's; None for a layout not known."""
    if cfg.get("layout") == "gamma-probe":
        return _own(source, shapes, cfg)
    for fragment, build in FAMILIES:
        if any(fragment in n for n in shapes):
            return build(source, shapes, cfg)
    return None


def detect(source: RawSource, mapping_file: str | None = None) -> Layout:
    """The layout of ``source``: our own snapshot, or a known family, with what a name-mapping file adds."""
    shapes = source.shapes()
    if mapping_file:
        return _from_mapping(mapping_file, source, shapes)
    layout = _family(source, shapes, source.config)
    if layout is not None:
        return layout
    names = list(shapes)
    shown = ", ".join(names[:12]) + (f", ... ({len(names)} in all)" if len(names) > 12 else "")
    raise ProbeError(f"{source.path}: unknown checkpoint layout; tensors found: {shown}. Pass a name-mapping "
                     "JSON file ({\"heads\": H, \"token_embedding\": \"raw.name\", \"layer0/W_V\": ...}, "
                     f"raw tensors in x @ W layout or with \"transpose\": [names]) as {param('mapping')}")


# What a mapping file may name: the canonical tensors (per layer: layer{i}/NAME, or layer{i}/NAME for
# every i a raw name with {i} matches), and for each, the axis that is d_model in x @ W layout. W_QKV is a
# fused projection, x @ W = [q | k | v] (d_model x 3 * heads * d_head), read as W_Q, W_K and W_V.
_TOP = {"token_embedding": 1, "position_embedding": 1, "unembedding": 0, "final_norm": 0}
_PER_LAYER = {"W_Q": 0, "W_K": 0, "W_V": 0, "W_QKV": 0, "W_O": 1, "W_in": 0, "W_gate": 0, "W_out": 1,
              "attn_norm": 0, "mlp_norm": 0}


def _from_mapping(path: str, source: RawSource, shapes: dict) -> Layout:
    """A name-mapping file (canonical name -> raw name; ``"heads"``; ``"transpose"``: the canonical names,
    or the model's own, of tensors stored out x in, as ``nn.Linear``'s), over the known family's layout
    where there is one (a mapping names what it lacks, or overrides it). Every name is checked here, and
    every shape against d_model and the head count: a mapping that matches nothing or does not fit is one
    line, before anything is read or recorded."""
    try:
        with open_regular(path, what="name-mapping file") as fh:
            m = load_json(fh, path, "name-mapping file")
    except (OSError, ValueError) as exc:
        raise ProbeError(f"{path}: unreadable name-mapping file ({exc})") from None
    if not isinstance(m, dict):
        raise ProbeError(f"{path}: a name-mapping file is a JSON object (canonical name -> raw name)")
    heads, transpose = m.pop("heads", None), m.pop("transpose", [])
    if heads is not None and (not isinstance(heads, int) or isinstance(heads, bool) or heads < 1):
        raise ProbeError(f"{path}: \"heads\" is {heads!r}; need an integer at least 1")
    if not isinstance(transpose, list) or not all(isinstance(t, str) for t in transpose):
        raise ProbeError(f"{path}: \"transpose\" is a list of names (canonical ones, or the model's own)")
    cfg = dict(source.config)
    if heads is not None:   # (a count the checkpoint's own config gives differently is refused below)
        cfg.setdefault("num_attention_heads", heads)
    base = _family(source, shapes, cfg)
    H = heads or (base.heads if base else 1)   # (a mapping alone: one head, unless it says)
    if base is not None and heads is not None and base.heads not in (None, heads):
        raise ProbeError(f"{path}: \"heads\" is {heads}, but the checkpoint's config says {base.heads}")
    pairs = _expanded(path, m, shapes)
    known = set(m) | set(m.values()) | {n for p in pairs for n in p[:2]}
    unknown = [t for t in transpose if t not in known]
    if unknown:
        shown = sorted(n for n in known if "{i}" not in n)
        raise ProbeError(f"{path}: transpose lists '{unknown[0]}', which the mapping does not name; it takes the "
                         f"canonical names it maps or the model's own: {', '.join(shown[:16])}"
                         + (f", ... ({len(shown)} in all)" if len(shown) > 16 else ""))
    rules: Rules = dict(base.rules) if base else {}
    flips = [any(x in transpose for x in p) for p in pairs]   # by its canonical name or its own, or their {i} form
    d = next((_fixed(shapes[p[1]], f)[1] for p, f in zip(pairs, flips) if p[0] == "token_embedding"), None)
    for (canon, raw, *_), flip in zip(pairs, flips):
        _fits(path, canon, raw, shapes[raw], flip, d, H)
        fix = _T if flip else _same
        kind = canon.rsplit("/", 1)[-1]
        if kind == "W_QKV":
            i = canon.split("/")[0]
            for j, nm in enumerate(("W_Q", "W_K", "W_V")):
                rules[f"{i}/{nm}"] = ((raw,), lambda w, j=j, fix=fix: _heads_in(np.split(fix(w), 3, axis=1)[j], H or 1))
        elif kind in ("W_Q", "W_K", "W_V"):
            rules[canon] = ((raw,), lambda w, fix=fix: _heads_in(fix(w), H or 1))
        elif kind == "W_O":
            rules[canon] = ((raw,), lambda w, fix=fix: _heads_out(fix(w), H or 1))
        else:
            rules[canon] = ((raw,), fix)
    L = _layer_count(rules, r"^layer(\d+)/")
    return Layout(base.name if base else "mapping", H, L, rules)


def _expanded(path: str, m: dict, shapes: dict) -> list[tuple[str, str, str, str]]:
    """(canonical name, raw name, the mapping's key, its value) of every entry, a ``{i}`` entry once for
    each layer a raw name matches; a name the mapping cannot mean is refused in one line."""
    out = []
    for canon, raw in m.items():
        kind = re.sub(r"^layer(\d+|\{i\})/", "", canon)
        if (kind not in _PER_LAYER if kind != canon else kind not in _TOP):
            raise ProbeError(f"{path}: '{canon}' is no canonical name ({', '.join(_TOP)}, or layer{{i}}/ with "
                             f"{', '.join(_PER_LAYER)})")
        if not isinstance(raw, str):
            raise ProbeError(f"{path}: maps {canon} to {raw!r}; a raw tensor name is a string")
        if "{i}" in canon:
            found = [(canon.replace("{i}", str(i)), raw.replace("{i}", str(i)), canon, raw)
                     for i in range(len(shapes)) if "{i}" in raw and raw.replace("{i}", str(i)) in shapes]
            if not found:
                raise ProbeError(f"{path}: maps {canon} to '{raw}', which matches no tensor of the checkpoint"
                                 + ("" if "{i}" in raw else " (a raw name with {i} in it names each layer's)"))
            out += found
        elif raw not in shapes:
            near = difflib.get_close_matches(raw, list(shapes), 1)
            raise ProbeError(f"{path}: maps {canon} to '{raw}', which the checkpoint does not hold"
                             + (f"; did you mean '{near[0]}'?" if near else ""))
        else:
            out.append((canon, raw, canon, raw))
    return out


def _fixed(shape, flip: bool) -> tuple:
    return tuple(shape)[::-1] if flip else tuple(shape)


def _fits(path: str, canon: str, raw: str, stored: tuple, flip: bool, d: int | None, H: int | None) -> None:
    """Refuse mapped tensor ``raw`` (of shape ``stored``; ``flip``: transposed) unless it fits ``canon``: a
    matrix (a vector for a norm) whose d_model axis in x @ W layout is ``d`` (the token embedding's width,
    where mapped), its heads' axis divided by ``H``."""
    kind = canon.rsplit("/", 1)[-1]
    axis, shape = {**_TOP, **_PER_LAYER}[kind], _fixed(stored, flip)
    what = f"{path}: {canon} is '{raw}' of shape {tuple(stored)}{', transposed' if flip else ''}"
    if len(shape) != (1 if kind.endswith("norm") else 2):
        raise ProbeError(f"{what}; a mapping reads {'a vector' if kind.endswith('norm') else 'a matrix'} there")
    if d is not None and shape[axis] != d:
        turn = len(shape) == 2 and shape[1 - axis] == d
        where = ("rows" if axis == 0 else "columns") if len(shape) == 2 else "entries"
        raise ProbeError(f"{what}: in x @ W layout it has d_model={d} {where}"
                         + (f"; {'leave it out of' if flip else 'list it in'} \"transpose\"" if turn else ""))
    split = {"W_Q": 1, "W_K": 1, "W_V": 1, "W_QKV": 1, "W_O": 0}.get(kind)
    n = (H or 1) * (3 if kind == "W_QKV" else 1)
    if split is not None and shape[split] % n:
        if kind == "W_QKV":
            raise ProbeError(f"{what}: its {shape[1]} columns in x @ W layout do not split into q, k and v of "
                             f"{H or 1} heads each")
        raise ProbeError(f"{what}: {H} heads do not divide its {shape[split]} {'columns' if split else 'rows'} "
                         "in x @ W layout")


class CanonicalReader:
    """Read canonical tensors from any source: ``CanonicalReader(open_checkpoint(p)).read("layer0/W_V")``."""

    def __init__(self, source: RawSource, mapping_file: str | None = None):
        self.source = source
        self.layout = detect(source, mapping_file)

    def names(self) -> list[str]:
        return list(self.layout.rules)

    def _rule(self, name: str):
        if name not in self.layout.rules:
            raise ProbeError(f"{self.source.path}: no canonical tensor '{name}' in this {self.layout.name} "
                             f"checkpoint; it has {', '.join(self.names()[:8])}, ...")
        return self.layout.rules[name]

    def read(self, name: str) -> np.ndarray:
        raw, build = self._rule(name)
        return np.asarray(build(*(self.source.read(r) for r in raw)), dtype=np.float32)

    def shape(self, name: str) -> tuple[int, ...]:
        """The canonical tensor's shape, from the checkpoint's header when the rule keeps or
        transposes one raw tensor (no data read), else by building it."""
        raw, build = self._rule(name)
        if len(raw) == 1 and build in (_same, _T):
            shape = tuple(self.source.shapes()[raw[0]])
            return shape if build is _same else shape[::-1]
        return tuple(self.read(name).shape)

    def read_rows(self, name: str, lo: int, hi: int) -> np.ndarray:
        """Rows lo:hi of a canonical tensor; only those rows are read when it is one raw tensor as
        stored (an embedding), whatever its dtype."""
        raw, build = self._rule(name)
        if len(raw) == 1 and build is _same:
            return np.asarray(self.source.read_rows(raw[0], lo, hi), dtype=np.float32)
        return self.read(name)[lo:hi]
