"""Emb-MLP and a decoder-only transformer with gamma-initialization, in one file.

Weights use the ``x @ W`` layout (rows = inputs) with attention weights stored
per head, so a parameter *is* the tensor a probe asks for: ``W_E[token]`` is a
token's embedding, ``W_V[h]`` head h's value map (d_model x d_head).

gamma-initialization (papers 1 and 2): every weight matrix with fan-in d_in is
drawn from N(0, (d_in^-gamma)^2); embedding tables use d_model as d_in. Biases
start at 0 and LayerNorm keeps its default init (weight 1, bias 0); with ``head_bias``
the output head's bias has PyTorch's nn.Linear default U(-1/sqrt(d), 1/sqrt(d)), as in
paper 2's code (not gamma-scaled).
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import RunConfig


class GammaInit:
    """Mixin: parameters listed in ``fan_in()`` are drawn with std fan_in^-gamma."""

    head_bias_name = ""   # the output head's bias parameter

    def fan_in(self) -> dict[str, int]:
        raise NotImplementedError

    @torch.no_grad()
    def gamma_init_(self, gamma: float, generator: torch.Generator | None = None) -> None:
        fans = self.fan_in()
        for name, p in self.named_parameters():
            if name in fans:
                p.normal_(0.0, fans[name] ** (-gamma), generator=generator)
            elif name == self.head_bias_name and self.cfg.head_bias:
                bound = 1.0 / math.sqrt(self.head_fan_in())
                p.uniform_(-bound, bound, generator=generator)
            elif name.rsplit(".", 1)[-1].startswith("b_"):
                p.zero_()


def _act(name: str):
    return F.relu if name == "relu" else F.gelu


class Attention(nn.Module):
    def __init__(self, d_model: int, heads: int, d_head: int, bias: bool):
        super().__init__()
        self.heads, self.d_head = heads, d_head
        self.W_Q = nn.Parameter(torch.empty(heads, d_model, d_head))
        self.W_K = nn.Parameter(torch.empty(heads, d_model, d_head))
        self.W_V = nn.Parameter(torch.empty(heads, d_model, d_head))
        self.W_O = nn.Parameter(torch.empty(heads, d_head, d_model))
        if bias:
            self.b_Q = nn.Parameter(torch.zeros(heads, d_head))
            self.b_K = nn.Parameter(torch.zeros(heads, d_head))
            self.b_V = nn.Parameter(torch.zeros(heads, d_head))
            self.b_O = nn.Parameter(torch.zeros(d_model))
        else:
            self.b_Q = self.b_K = self.b_V = self.b_O = None

    def _proj(self, x: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        # (B, T, d) @ (d, H*e) in one matmul, then split heads -> (B, H, T, e)
        H, d, e = W.shape
        y = x @ W.permute(1, 0, 2).reshape(d, H * e)
        y = y.view(*x.shape[:-1], H, e).transpose(1, 2)
        return y if b is None else y + b[None, :, None, :]

    def forward(self, x: torch.Tensor, last_only: bool = False, return_attn: bool = False):
        """x (B, T, d) -> (B, T', d); T' = 1 with ``last_only`` (only the last query)."""
        B, T, _ = x.shape
        q = self._proj(x[:, -1:] if last_only else x, self.W_Q, self.b_Q)
        k = self._proj(x, self.W_K, self.b_K)
        v = self._proj(x, self.W_V, self.b_V)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.d_head)        # (B, H, T', T)
        if not last_only:
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        attn = scores.softmax(dim=-1)
        z = attn @ v                                                       # (B, H, T', e)
        H, e, d = self.W_O.shape
        out = z.transpose(1, 2).reshape(B, -1, H * e) @ self.W_O.reshape(H * e, d)
        if self.b_O is not None:
            out = out + self.b_O
        return (out, attn) if return_attn else (out, None)


class MLP(nn.Module):
    def __init__(self, d_model: int, d_ff: int, bias: bool, activation: str):
        super().__init__()
        self.W_in = nn.Parameter(torch.empty(d_model, d_ff))
        self.W_out = nn.Parameter(torch.empty(d_ff, d_model))
        self.b_in = nn.Parameter(torch.zeros(d_ff)) if bias else None
        self.b_out = nn.Parameter(torch.zeros(d_model)) if bias else None
        self.act = _act(activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x @ self.W_in
        if self.b_in is not None:
            h = h + self.b_in
        y = self.act(h) @ self.W_out
        return y if self.b_out is None else y + self.b_out


class Block(nn.Module):
    def __init__(self, cfg: RunConfig):
        super().__init__()
        self.pre = cfg.norm == "pre"
        self.ln1 = nn.LayerNorm(cfg.d_model, bias=cfg.bias or cfg.norm_bias)
        self.attn = Attention(cfg.d_model, cfg.heads, cfg.head_dim, cfg.bias)
        self.ln2 = nn.LayerNorm(cfg.d_model, bias=cfg.bias or cfg.norm_bias)
        self.mlp = MLP(cfg.d_model, cfg.d_ff, cfg.bias, cfg.activation)

    def forward(self, x: torch.Tensor, last_only: bool = False, return_attn: bool = False):
        if self.pre:
            a, attn = self.attn(self.ln1(x), last_only, return_attn)
            x = (x[:, -1:] if last_only else x) + a
            x = x + self.mlp(self.ln2(x))
        else:
            a, attn = self.attn(x, last_only, return_attn)
            x = self.ln1((x[:, -1:] if last_only else x) + a)
            x = self.ln2(x + self.mlp(x))
        return x, attn


class Transformer(GammaInit, nn.Module):
    """Decoder-only transformer predicting the label from the last position.

    forward(tokens (B, T)) -> logits (B, vocab). The last block computes its
    attention output and MLP for the last position only: that is all the loss needs.
    """

    kind = "transformer"
    head_bias_name = "b_U"

    def head_fan_in(self) -> int:
        return self.cfg.d_model

    def __init__(self, cfg: RunConfig):
        super().__init__()
        self.cfg = cfg
        self.W_E = nn.Parameter(torch.empty(cfg.vocab_size, cfg.d_model))
        self.W_pos = nn.Parameter(torch.empty(cfg.seq_len, cfg.d_model))
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.d_model, bias=cfg.bias or cfg.norm_bias) if cfg.norm == "pre" else None
        self.W_U = nn.Parameter(torch.empty(cfg.d_model, cfg.vocab_size))
        self.b_U = nn.Parameter(torch.zeros(cfg.vocab_size)) if cfg.bias or cfg.head_bias else None

    def fan_in(self) -> dict[str, int]:
        c = self.cfg
        fans = {"W_E": c.d_model, "W_pos": c.d_model, "W_U": c.d_model}
        for i in range(c.layers):
            p = f"blocks.{i}."
            fans.update({p + "attn.W_Q": c.d_model, p + "attn.W_K": c.d_model, p + "attn.W_V": c.d_model,
                         p + "attn.W_O": c.heads * c.head_dim, p + "mlp.W_in": c.d_model, p + "mlp.W_out": c.d_ff})
        return fans

    def roles(self) -> dict[str, str]:
        """Canonical weight names (``schemas/snapshot-v1.json``, the names every checkpoint reader
        serves) -> parameter names; the trainer stores them as links, so readers need no copy."""
        out = {"token_embedding": "W_E", "position_embedding": "W_pos", "unembedding": "W_U"}
        for i in range(self.cfg.layers):
            for w in ("W_Q", "W_K", "W_V", "W_O"):
                out[f"layer{i}/{w}"] = f"blocks.{i}.attn.{w}"
            for w in ("W_in", "W_out"):
                out[f"layer{i}/{w}"] = f"blocks.{i}.mlp.{w}"
        return out

    def attention_shape(self, n_probe: int) -> tuple[int, ...]:
        c = self.cfg
        return (c.layers, c.heads, n_probe, c.seq_len, c.seq_len)

    def forward(self, tokens: torch.Tensor, key_pos: torch.Tensor | None = None) -> torch.Tensor:
        x = self.W_E[tokens] + self.W_pos[: tokens.shape[1]]
        last = len(self.blocks) - 1
        for i, block in enumerate(self.blocks):
            x, _ = block(x, last_only=(i == last))
        return self._logits(x[:, -1])

    def lm_logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """Next-token logits at every position: tokens (B, T) -> (B, T, vocab)."""
        x = self.W_E[tokens] + self.W_pos[: tokens.shape[1]]
        for block in self.blocks:
            x, _ = block(x)
        return self._logits(x)

    def _logits(self, h: torch.Tensor) -> torch.Tensor:
        if self.ln_f is not None:
            h = self.ln_f(h)
        logits = h @ self.W_U
        return logits if self.b_U is None else logits + self.b_U

    @torch.no_grad()
    def attention_maps(self, tokens: torch.Tensor) -> torch.Tensor:
        """(layers, heads, B, T, T) attention probabilities over the full sequences."""
        x = self.W_E[tokens] + self.W_pos[: tokens.shape[1]]
        maps = []
        for block in self.blocks:
            x, attn = block(x, return_attn=True)
            maps.append(attn.transpose(0, 1))
        return torch.stack(maps)


class EmbMLP(GammaInit, nn.Module):
    """Paper 1 Definition 1: G(X) = act(sum_{s in X} w_emb(s) W1) W2 on X = [z, a1..aq].

    forward(tokens (B, L), key_pos (B,)) reads the key and the q anchors after it.
    """

    kind = "emb-mlp"
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

    def fan_in(self) -> dict[str, int]:
        return {"W_E": self.cfg.d_model, "W_1": self.cfg.d_model, "W_2": self.cfg.d_ff}

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


def build_model(cfg: RunConfig, generator: torch.Generator | None = None) -> nn.Module:
    model = Transformer(cfg) if cfg.model == "transformer" else EmbMLP(cfg)
    model.gamma_init_(cfg.gamma, generator)
    return model
