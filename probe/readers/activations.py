"""Activations of an external checkpoint on a text file, for the probes that weights alone cannot
answer (norms, sinks, tokens): the checkpoint's own model runs through the ``transformers``
library on windows of the text, tokenized with the checkpoint's tokenizer files.

What comes back has the shapes this toolkit's snapshots store, so the same math reads both:
per-token loss and predictive entropy, per norm site the mean and median over tokens of what the
norm adds ε to (mean(x²) for an RMSNorm, var(x) for a LayerNorm) with its ε and the rms of its
gain, attention maps, and the residual-stream norm of every position entering each block and
leaving the last.
"""
from __future__ import annotations

import os
import re
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from ..files import regular_file
from ..limits import check, check_total
from ..errors import ProbeError, param, warn
from .hub import local
from .words import load_tokenizer, read_text

WINDOW = 128
MAX_TOKENS = 4096

# module name -> canonical norm site (this toolkit's names); others keep their own name
_SITES = [
    (re.compile(r"(?:^|\.)layers\.(\d+)\.input_layernorm$"), "layer{}/attn_norm"),
    (re.compile(r"(?:^|\.)layers\.(\d+)\.post_attention_layernorm$"), "layer{}/mlp_norm"),
    (re.compile(r"(?:^|\.)h\.(\d+)\.ln_1$"), "layer{}/attn_norm"),
    (re.compile(r"(?:^|\.)h\.(\d+)\.ln_2$"), "layer{}/mlp_norm"),
    (re.compile(r"(?:^|\.)(?:norm|ln_f|final_layer_norm|final_layernorm)$"), "final_norm"),
]


def site_name(module: str) -> str:
    for pat, name in _SITES:
        m = pat.search(module)
        if m:
            return name.format(*m.groups())
    return module


@dataclass
class Forward:
    """One pass of a checkpoint over text windows (B windows of T tokens)."""

    tokens: np.ndarray                       # (B, T) inputs
    targets: np.ndarray                      # (B, T) next tokens
    token_loss: np.ndarray                   # (B, T) nats
    token_entropy: np.ndarray                # (B, T) nats
    norm_sites: list[str] = field(default_factory=list)
    norm_eps: list[float] = field(default_factory=list)
    norm_ms: np.ndarray | None = None        # (sites,)
    norm_ms_median: np.ndarray | None = None
    norm_gain: np.ndarray | None = None      # (sites,) rms of each norm's weight (1 without one)
    attention: np.ndarray | None = None      # (layers, heads, B, T, T)
    hidden_norm: np.ndarray | None = None    # (layers + 1, B, T)
    vocab_size: int = 0


def text_windows(path: str, text_file: str, window: int = WINDOW, max_tokens: int = MAX_TOKENS
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets), each (B, window): the text file tokenized with the checkpoint's tokenizer
    and cut into non-overlapping windows, at most ``max_tokens`` tokens in all."""
    if window < 2:
        raise ProbeError(f"{param('window', window)}: need at least 2 tokens")
    text = read_text(text_file, "the text file", encoding="utf-8")
    tok, _ = load_tokenizer(path, purpose="text")
    ids = np.asarray(tok.encode(text, add_special_tokens=False).ids, dtype=np.int64)[: max_tokens + 1]
    n = (len(ids) - 1) // window
    if n < 1:
        raise ProbeError(f"{text_file}: {len(ids)} tokens, fewer than one window of {window} "
                         f"({param('window')}) plus one")
    idx = np.arange(n)[:, None] * window + np.arange(window + 1)[None, :]
    w = ids[idx]
    return w[:, :-1], w[:, 1:]


def _load_model(path: str, batch: int, window: int, attention: bool):
    try:
        import torch
        from transformers import AutoModelForCausalLM
    except ImportError:
        raise ProbeError("running a checkpoint on text needs the transformers package: pip install transformers") \
            from None
    path = local(path)
    if not os.path.isdir(path) or not os.path.exists(os.path.join(path, "config.json")):
        raise ProbeError(f"{path}: running a checkpoint on text needs a Hugging Face model folder (config.json "
                         "and weights)")
    for name in sorted(os.listdir(path)):       # transformers opens what it likes in the folder
        if os.path.exists(os.path.join(path, name)) and not os.path.isdir(os.path.join(path, name)):
            regular_file(os.path.join(path, name), "model file")
    _fits(path, batch, window, attention)
    try:
        model, loading = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager",
                                                              torch_dtype=torch.float32, output_loading_info=True)
    except Exception as exc:   # transformers raises many types for a folder it cannot build
        raise ProbeError(f"{path}: transformers cannot build a causal language model from it "
                         f"({str(exc).splitlines()[0][:200]})") from None
    return model.eval(), list(loading.get("missing_keys") or [])


def _fits(path: str, batch: int, window: int, attention: bool) -> None:
    """The memory budget's check of the model transformers would build from ``path``'s config.json (built
    here on torch's meta device: shapes, no memory) and of a batch's activations, before either exists:
    its largest parameter by name, then the whole in float32 with the logits of ``batch`` windows (and
    their log-softmax and its exp) and, with ``attention``, every layer's maps."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        config = AutoConfig.from_pretrained(path)
        with torch.device("meta"):
            meta = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    except Exception as exc:   # as from_pretrained's own failures below
        raise ProbeError(f"{path}: transformers cannot build a causal language model from it "
                         f"({str(exc).splitlines()[0][:200]})") from None
    params = dict(meta.named_parameters())
    if not params:
        return
    name = max(params, key=lambda n: params[n].numel())
    check(path, name, params[name].shape, "float32", 4)
    vocab = meta.get_input_embeddings().weight.shape[0]
    cfg = config.get_text_config() if hasattr(config, "get_text_config") else config
    layers, heads = (getattr(cfg, k, 0) or 0 for k in ("num_hidden_layers", "num_attention_heads"))
    total = 4 * (sum(p.numel() for p in params.values()) + 3 * batch * window * vocab
                 + (layers * heads * batch * window * window if attention else 0))
    check_total(path, f"the model built from its config.json ({len(params)} parameters) with a batch of "
                      f"{batch} windows of {window} tokens", total)


@contextmanager
def _quiet():
    """transformers' own output kept off stderr while a model is built and run, as it was before after: its
    logged notices (a deprecated argument, weights it initialised: :func:`_load_model` says that one), its
    "Loading weights" progress bar and the Python warnings of transformers and torch. The command's stderr
    holds its own lines only."""
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def run_text(path: str | os.PathLike, text_file: str, *, window: int = WINDOW, max_tokens: int = MAX_TOKENS,
             attention: bool = False, batch: int = 8) -> Forward:
    """Run the checkpoint at ``path`` over the windows of ``text_file``."""
    path = os.fspath(path)
    inputs, targets = text_windows(path, text_file, window, max_tokens)
    with _quiet():
        model, missing = _load_model(path, min(batch, len(inputs)), inputs.shape[1], attention)
        out = _run(model, path, inputs, targets, attention, batch)
    if missing:   # transformers' own notice of it is silenced (_quiet): the one that matters, in our words
        shown = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
        warn(f"{path}: the weights hold no values for {len(missing)} of the model's parameters ({shown}); "
             "transformers gave them its initial values (random weights, unit norm gains), and the probes see those")
    return out


def _run(model, path: str, inputs: np.ndarray, targets: np.ndarray, attention: bool, batch: int) -> Forward:
    import torch

    vocab = int(model.get_input_embeddings().weight.shape[0])
    if inputs.max() >= vocab:
        raise ProbeError(f"{path}: the tokenizer gives ids up to {int(inputs.max())}, the model has {vocab} embeddings")
    norms, seen = [], set()
    for n, m in model.named_modules():
        if "norm" in type(m).__name__.lower() and hasattr(m, "weight"):
            site = site_name(n)
            norms.append((n if site in seen else site, m))   # a second match keeps its module name
            seen.add(site)
    per_site: dict[str, list] = {s: [] for s, _ in norms}
    blocks = [m for n, m in model.named_modules() if re.search(r"(?:^|\.)(?:layers|h)\.\d+$", n)]
    block_in: list[list] = [[] for _ in blocks]

    def norm_hook(site, rms):
        def hook(mod, args):
            x = args[0].float()
            per_site[site].append((x.pow(2).mean(-1) if rms else x.var(-1, unbiased=False)).flatten())
        return hook

    hooks = [m.register_forward_pre_hook(norm_hook(s, "rms" in type(m).__name__.lower())) for s, m in norms]
    hooks += [b.register_forward_pre_hook(lambda mod, args, i=i: block_in[i].append(args[0].float().norm(dim=-1)))
              for i, b in enumerate(blocks)]
    # leaving the last block: the final norm's input where there is one (hidden_states[-1] is normed then)
    final_in: list = []
    hooks += [m.register_forward_pre_hook(lambda mod, args: final_in.append(args[0].float().norm(dim=-1)))
              for s, m in norms if s == "final_norm"][:1]
    losses, ents, maps, outs = [], [], [], []
    try:
        with torch.no_grad():
            for start in range(0, len(inputs), batch):
                x = torch.as_tensor(inputs[start:start + batch])
                y = torch.as_tensor(targets[start:start + batch])
                out = model(input_ids=x, output_attentions=attention, output_hidden_states=True)
                logp = out.logits.float().log_softmax(-1)
                losses.append(-logp.gather(-1, y[..., None])[..., 0])
                ents.append(-(logp.exp() * logp).sum(-1))
                if attention:
                    maps.append(torch.stack([a.float() for a in out.attentions]))   # (L, b, H, T, T)
                outs.append(out.hidden_states[-1].float().norm(dim=-1))
    finally:
        for h in hooks:
            h.remove()
    sites = [s for s, _ in norms]
    ms = [torch.cat(per_site[s]) for s in sites]
    hidden = None
    if blocks and all(block_in):
        rows = [torch.cat(b) for b in block_in] + [torch.cat(final_in if final_in else outs)]
        hidden = torch.stack(rows).numpy()
    return Forward(
        tokens=inputs, targets=targets, token_loss=torch.cat(losses).numpy(), token_entropy=torch.cat(ents).numpy(),
        norm_sites=sites, norm_eps=[float(getattr(m, "variance_epsilon", getattr(m, "eps", float("nan"))))
                                    for _, m in norms],
        norm_ms=np.array([float(v.mean()) for v in ms]) if ms else None,
        norm_ms_median=np.array([float(v.median()) for v in ms]) if ms else None,
        norm_gain=np.array([float(m.weight.detach().float().pow(2).mean().sqrt()) if m.weight is not None else 1.0
                            for _, m in norms]) if norms else None,
        attention=torch.cat(maps, dim=1).transpose(1, 2).numpy() if maps else None,
        hidden_norm=hidden, vocab_size=vocab)
