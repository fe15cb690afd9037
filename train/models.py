"""Emb-MLP, a GPT-style and a LLaMA-style decoder with gamma-initialization, in one file.

Weights use the ``x @ W`` layout (rows = inputs) with attention weights stored
per head, so a parameter *is* the tensor a probe asks for: ``W_E[token]`` is a
token's embedding, ``W_V[h]`` head h's value map (d_model x d_head).

gamma-initialization (papers 1, 2 and 4; the rule's one home is :mod:`probe_train.gamma`): every
weight matrix with fan-in d_in is drawn from N(0, (d_in^-gamma)^2); embedding tables use d_model as
d_in. Each module (embeddings, attention, MLP, output head) may take its own gamma (``gamma_embed``
...), and ``init_std`` replaces the rule by one fixed std (the usual LLM baseline, 0.02). Biases start
at 0 and norms at weight 1, bias 0; with ``head_bias`` the output head's bias has PyTorch's nn.Linear
default U(-1/sqrt(d), 1/sqrt(d)), as in paper 2's code (not gamma-scaled). Each model says which
parameter has which fan-in and gamma group (``fan_in()``): its weights are per head, 3-D, where no
shape rule could tell.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import RunConfig
from .gamma import GammaInit


def _act(name: str):
    return {"relu": F.relu, "gelu": F.gelu, "silu": F.silu}[name]


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight, computed in float32 whatever the input dtype."""

    def __init__(self, d: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)


def norm_denominator(norm: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Per token, what the norm adds eps to: mean(x^2) for RMSNorm, var(x) for LayerNorm. (..., d) -> (...)."""
    xf = x.float()
    if isinstance(norm, RMSNorm):
        return xf.pow(2).mean(-1)
    return xf.var(-1, unbiased=False)


def rope_tables(T: int, e: int, theta: float, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin (T, e) of the rotary embedding, frequencies theta^(-2i/e) repeated for both halves."""
    inv = theta ** (-torch.arange(0, e, 2, device=device, dtype=torch.float32) / e)
    ang = torch.arange(T, device=device, dtype=torch.float32)[:, None] * inv[None]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos(), ang.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate (B, H, T, e) by position: the halves (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)."""
    h = x.shape[-1] // 2
    rot = torch.cat([-x[..., h:], x[..., :h]], dim=-1)
    return (x * cos + rot * sin).to(x.dtype)


class Attention(nn.Module):
    """Multi-head causal self-attention with per-head weights; optional grouped K/V heads, rotary
    positions and a head-wise sigmoid output gate (the LLaMA-style options)."""

    def __init__(self, d_model: int, heads: int, d_head: int, bias: bool, kv_heads: int = 0, gate: bool = False):
        super().__init__()
        kv = kv_heads or heads
        self.heads, self.kv_heads, self.d_head = heads, kv, d_head
        self.W_Q = nn.Parameter(torch.empty(heads, d_model, d_head))
        self.W_K = nn.Parameter(torch.empty(kv, d_model, d_head))
        self.W_V = nn.Parameter(torch.empty(kv, d_model, d_head))
        self.W_O = nn.Parameter(torch.empty(heads, d_head, d_model))
        # the gate of head h is sigmoid(x @ W_G[:, h]), x the block's normed input
        self.W_G = nn.Parameter(torch.empty(d_model, heads)) if gate else None
        self.b_Q = nn.Parameter(torch.zeros(heads, d_head)) if bias else None
        self.b_K = nn.Parameter(torch.zeros(kv, d_head)) if bias else None
        self.b_V = nn.Parameter(torch.zeros(kv, d_head)) if bias else None
        self.b_O = nn.Parameter(torch.zeros(d_model)) if bias else None

    def _proj(self, x: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        # (B, T, d) @ (d, H*e) in one matmul, then split heads -> (B, H, T, e)
        H, d, e = W.shape
        y = x @ W.permute(1, 0, 2).reshape(d, H * e)
        y = y.view(*x.shape[:-1], H, e).transpose(1, 2)
        return y if b is None else y + b[None, :, None, :]

    def forward(self, x: torch.Tensor, last_only: bool = False, return_attn: bool = False, rope=None):
        """x (B, T, d) -> (B, T', d); T' = 1 with ``last_only`` (only the last query)."""
        B, T, _ = x.shape
        xq = x[:, -1:] if last_only else x
        q = self._proj(xq, self.W_Q, self.b_Q)
        k = self._proj(x, self.W_K, self.b_K)
        v = self._proj(x, self.W_V, self.b_V)
        if rope is not None:
            cos, sin = rope
            q = apply_rope(q, cos[T - q.shape[2]:T], sin[T - q.shape[2]:T])
            k = apply_rope(k, cos[:T], sin[:T])
        if self.kv_heads != self.heads:   # query head h reads K/V head h // (heads / kv_heads)
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        attn = None
        if rope is not None and not return_attn:   # the LLaMA path: fused attention
            z = F.scaled_dot_product_attention(q, k, v, is_causal=not last_only)
        else:
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.d_head)        # (B, H, T', T)
            if not last_only:
                mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
                scores = scores.masked_fill(mask, float("-inf"))
            attn = scores.float().softmax(dim=-1).to(v.dtype) if rope is not None else scores.softmax(dim=-1)
            z = attn @ v                                                       # (B, H, T', e)
        if self.W_G is not None:
            z = z * torch.sigmoid(xq @ self.W_G).transpose(1, 2)[..., None]
        H, e, d = self.W_O.shape
        out = z.transpose(1, 2).reshape(B, -1, H * e) @ self.W_O.reshape(H * e, d)
        if self.b_O is not None:
            out = out + self.b_O
        return out, attn


class MLP(nn.Module):
    """act(x @ W_in) @ W_out, or with ``gated`` SwiGLU: (silu(x @ W_gate) * (x @ W_in)) @ W_out."""

    def __init__(self, d_model: int, d_ff: int, bias: bool, activation: str, gated: bool = False):
        super().__init__()
        self.W_gate = nn.Parameter(torch.empty(d_model, d_ff)) if gated else None
        self.W_in = nn.Parameter(torch.empty(d_model, d_ff))
        self.W_out = nn.Parameter(torch.empty(d_ff, d_model))
        self.b_in = nn.Parameter(torch.zeros(d_ff)) if bias else None
        self.b_out = nn.Parameter(torch.zeros(d_model)) if bias else None
        self.act = _act(activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x @ self.W_in
        if self.b_in is not None:
            h = h + self.b_in
        h = F.silu(x @ self.W_gate) * h if self.W_gate is not None else self.act(h)
        y = h @ self.W_out
        return y if self.b_out is None else y + self.b_out


def _norm(cfg: RunConfig) -> nn.Module:
    """A block's or the final norm: RMSNorm (llama), else LayerNorm (biases with --bias or --norm-bias)."""
    if cfg.model == "llama":
        return RMSNorm(cfg.d_model, cfg.norm_eps)
    return nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps, bias=cfg.bias or cfg.norm_bias)


class Block(nn.Module):
    """GPT-style block: LayerNorm before (pre) or after (post) each residual sublayer. LLaMA-style
    block: pre-RMSNorm, rotary attention (grouped K/V, optional output gate), SwiGLU, no biases."""

    def __init__(self, cfg: RunConfig):
        super().__init__()
        llama = cfg.model == "llama"
        self.pre = llama or cfg.norm == "pre"
        bias = cfg.bias and not llama
        self.ln1 = _norm(cfg)
        self.attn = Attention(cfg.d_model, cfg.heads, cfg.head_dim, bias, cfg.n_kv_heads, cfg.gated_attention)
        self.ln2 = _norm(cfg)
        self.mlp = MLP(cfg.d_model, cfg.d_ff, bias, "silu" if llama else cfg.activation, gated=llama)

    def forward(self, x: torch.Tensor, last_only: bool = False, return_attn: bool = False, rope=None):
        if self.pre:
            a, attn = self.attn(self.ln1(x), last_only, return_attn, rope)
            x = (x[:, -1:] if last_only else x) + a
            return x + self.mlp(self.ln2(x)), attn
        a, attn = self.attn(x, last_only, return_attn, rope)
        x = self.ln1((x[:, -1:] if last_only else x) + a)
        return self.ln2(x + self.mlp(x)), attn


class Decoder(GammaInit, nn.Module):
    """The decoders: GPT-style (``transformer``: learned positions, LayerNorm pre or post, a plain MLP)
    or LLaMA-style (``llama``: no position table, rotary positions in attention, pre-RMSNorm blocks
    with SwiGLU MLPs, a final RMSNorm, no biases; optionally tied embeddings, grouped K/V heads and
    gated attention). Forward for the last position (the synthetic tasks), next-token logits at every
    position (text), attention maps and the norm statistics a snapshot stores."""

    head_bias_name = "b_U"

    def __init__(self, cfg: RunConfig):
        super().__init__()
        self.cfg = cfg
        self.rope = cfg.model == "llama"
        self.W_E = nn.Parameter(torch.empty(cfg.vocab_size, cfg.d_model))
        self.W_pos = None if self.rope else nn.Parameter(torch.empty(cfg.seq_len, cfg.d_model))
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln_f = _norm(cfg) if self.rope or cfg.norm == "pre" else None
        self.W_U = None if cfg.tie_embeddings else nn.Parameter(torch.empty(cfg.d_model, cfg.vocab_size))
        head_bias = cfg.head_bias or (cfg.bias and not self.rope)
        self.b_U = nn.Parameter(torch.zeros(cfg.vocab_size)) if head_bias else None

    def head_fan_in(self) -> int:
        return self.cfg.d_model

    def _rope(self, T: int, device):
        if not self.rope:
            return None
        if getattr(self, "_rope_cache", (None,))[0] != (T, device):
            self._rope_cache = ((T, device), rope_tables(T, self.cfg.head_dim, self.cfg.rope_theta, device))
        return self._rope_cache[1]

    def _run(self, tokens: torch.Tensor, last_only: bool = False, return_attn: bool = False):
        x = self.W_E[tokens]
        if self.W_pos is not None:
            x = x + self.W_pos[: tokens.shape[1]]
        rope = self._rope(tokens.shape[1], tokens.device)
        last = len(self.blocks) - 1
        maps = []
        for i, block in enumerate(self.blocks):
            x, attn = block(x, last_only and i == last, return_attn, rope)
            maps.append(attn)
        return x, maps

    def forward(self, tokens: torch.Tensor, key_pos: torch.Tensor | None = None) -> torch.Tensor:
        """tokens (B, T) -> logits of the last position (B, vocab). The last block computes its
        attention output and MLP for the last position only: that is all the loss needs."""
        return self._logits(self._run(tokens, last_only=True)[0][:, -1])

    def lm_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """Next-token logits at every position: tokens (B, T) -> (B, T, vocab)."""
        return self._logits(self._run(tokens)[0])

    def _logits(self, h: torch.Tensor) -> torch.Tensor:
        if self.ln_f is not None:
            h = self.ln_f(h)
        logits = h @ (self.W_E.T if self.W_U is None else self.W_U)
        return logits if self.b_U is None else logits + self.b_U

    @torch.no_grad()
    def attention_maps(self, tokens: torch.Tensor) -> torch.Tensor:
        """(layers, heads, B, T, T) attention probabilities over the full sequences."""
        return torch.stack([a.float().transpose(0, 1) for a in self._run(tokens, return_attn=True)[1]])

    def norms(self) -> dict[str, nn.Module]:
        """Norm site -> module, in the order a snapshot stores them: per layer the norm of the attention
        sublayer and of the MLP sublayer (before them in pre-norm blocks, after in post-norm ones), then
        the final norm."""
        out = {}
        for i, b in enumerate(self.blocks):
            out[f"layer{i}/attn_norm"] = b.ln1
            out[f"layer{i}/mlp_norm"] = b.ln2
        if self.ln_f is not None:
            out["final_norm"] = self.ln_f
        return out

    @torch.no_grad()
    def inspect(self, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        """One pass over full sequences: ``attention`` (layers, heads, B, T, T); ``norm_ms`` and
        ``norm_ms_median`` (sites,): the mean and the median over tokens of what each norm adds eps
        to; ``hidden_norm`` (layers + 1, B, T): the L2 norm of the residual stream entering each block
        and leaving the last one."""
        per_site: dict[str, torch.Tensor] = {}
        hooks = [m.register_forward_pre_hook(lambda mod, args, s=site: per_site.__setitem__(
                     s, norm_denominator(mod, args[0]).flatten()))
                 for site, m in self.norms().items()]
        hidden = []
        hooks += [b.register_forward_pre_hook(lambda mod, args: hidden.append(args[0].float().norm(dim=-1)))
                  for b in self.blocks]
        try:
            x, maps = self._run(tokens, return_attn=True)
            if self.ln_f is not None:
                self.ln_f(x)   # for its hook
        finally:
            for h in hooks:
                h.remove()
        hidden.append(x.float().norm(dim=-1))
        ms = torch.stack([per_site[s] for s in self.norms()])
        return {"attention": torch.stack([a.float().transpose(0, 1) for a in maps]),
                "norm_ms": ms.mean(dim=1), "norm_ms_median": ms.median(dim=1).values,
                "hidden_norm": torch.stack(hidden)}

    def attention_shape(self, n_probe: int) -> tuple[int, ...]:
        c = self.cfg
        return (c.layers, c.heads, n_probe, c.seq_len, c.seq_len)

    def _layer_roles(self, i: int) -> dict[str, str]:
        p = f"blocks.{i}."
        out = {f"layer{i}/{w}": p + f"attn.{w}" for w in ("W_Q", "W_K", "W_V", "W_O")}
        if self.blocks[i].attn.W_G is not None:
            out[f"layer{i}/W_attn_gate"] = p + "attn.W_G"
        out.update({f"layer{i}/{w}": p + f"mlp.{w}" for w in ("W_gate", "W_in", "W_out")
                    if getattr(self.blocks[i].mlp, w) is not None})
        out[f"layer{i}/attn_norm"] = p + "ln1.weight"
        out[f"layer{i}/mlp_norm"] = p + "ln2.weight"
        return out

    def roles(self) -> dict[str, str]:
        """Canonical weight names (``schemas/snapshot-v1.json``, the names every checkpoint reader
        serves) -> parameter names; the trainer stores them as links, so readers need no copy."""
        names = dict(self.named_parameters())
        out = {"token_embedding": "W_E", "position_embedding": "W_pos", "unembedding": "W_U"}
        out = {k: v for k, v in out.items() if v in names}
        for i in range(self.cfg.layers):
            out.update(self._layer_roles(i))
        if self.ln_f is not None:
            out["final_norm"] = "ln_f.weight"
        return out

    def fan_in(self) -> dict[str, tuple[int, str]]:
        c = self.cfg
        fans = {e: (c.d_model, "embed") for e in ("W_E", "W_pos") if getattr(self, e) is not None}
        if self.W_U is not None:
            fans["W_U"] = (c.d_model, "head")
        for i, b in enumerate(self.blocks):
            p = f"blocks.{i}."
            fans.update({p + "attn.W_Q": (c.d_model, "qk"), p + "attn.W_K": (c.d_model, "qk"),
                         p + "attn.W_V": (c.d_model, "vo"), p + "attn.W_O": (c.heads * c.head_dim, "vo"),
                         p + "mlp.W_in": (c.d_model, "mlp"), p + "mlp.W_out": (c.d_ff, "mlp")})
            if b.attn.W_G is not None:
                fans[p + "attn.W_G"] = (c.d_model, "attn")
            if b.mlp.W_gate is not None:
                fans[p + "mlp.W_gate"] = (c.d_model, "mlp")
        return fans

    def residual_outputs(self) -> list[str]:
        """The matrices that write into the residual stream (``depth_scale`` draws them at std / sqrt(2L))."""
        return [f"blocks.{i}.{n}" for i in range(len(self.blocks)) for n in ("attn.W_O", "mlp.W_out")]


class EmbMLP(GammaInit, nn.Module):
    """Paper 1 Definition 1: G(X) = act(sum_{s in X} w_emb(s) W1) W2 on X = [z, a1..aq].

    forward(tokens (B, L), key_pos (B,)) reads the key and the q anchors after it.
    """

    head_bias_name = "b_2"

    def head_fan_in(self) -> int:
        return self.cfg.d_ff

    def __init__(self, cfg: RunConfig):
        super().__init__()
        self.cfg = cfg
        self.W_E = nn.Parameter(torch.empty(cfg.vocab_size, cfg.d_model))
        self.W_1 = nn.Parameter(torch.empty(cfg.d_model, cfg.d_ff))
        self.W_2 = nn.Parameter(torch.empty(cfg.d_ff, cfg.vocab_size))
        self.b_1 = nn.Parameter(torch.zeros(cfg.d_ff)) if cfg.bias else None
        self.b_2 = nn.Parameter(torch.zeros(cfg.vocab_size)) if cfg.bias or cfg.head_bias else None
        self.act = _act(cfg.activation)

    def fan_in(self) -> dict[str, tuple[int, str]]:
        c = self.cfg
        return {"W_E": (c.d_model, "embed"), "W_1": (c.d_model, "mlp"), "W_2": (c.d_ff, "head")}

    def roles(self) -> dict[str, str]:
        """Canonical names -> parameters; W_1 (embedding sum -> hidden) has no canonical analogue."""
        return {"token_embedding": "W_E", "unembedding": "W_2"}

    def attention_shape(self, n_probe: int) -> None:
        return None

    def forward(self, tokens: torch.Tensor, key_pos: torch.Tensor) -> torch.Tensor:
        offs = torch.arange(self.cfg.n_anchors + 1, device=tokens.device)
        short = tokens.gather(1, key_pos[:, None] + offs)                  # (B, q+1)
        h = self.W_E[short].sum(dim=1) @ self.W_1
        if self.b_1 is not None:
            h = h + self.b_1
        out = self.act(h) @ self.W_2
        return out if self.b_2 is None else out + self.b_2

    def attention_maps(self, tokens: torch.Tensor) -> None:
        return None


MODELS = {"transformer": Decoder, "llama": Decoder, "emb-mlp": EmbMLP}


def build_model(cfg: RunConfig, generator: torch.Generator | None = None) -> nn.Module:
    model = MODELS[cfg.model](cfg)
    model.gamma_init_(generator)
    return model
