"""gamma-initialization, the one home of the rule: every weight matrix with fan-in d_in is drawn from
N(0, (d_in^-gamma)^2) (papers 1, 2 and 4), embedding tables with d_in = d_model, the output head in a
gamma group of its own; biases start at 0 and norms at weight 1, bias 0.

The toolkit's own models (:class:`GammaInit`, :mod:`probe_train.models`) and :func:`gamma_init_`, which
re-draws any torch model, make the same plan (:func:`plan`: what each parameter gets) and draw it the
same way (:func:`draw_`), so ``gamma_init_(model, cfg.gamma, seed=cfg.seed)`` on a toolkit model gives
the tensors ``probe-train`` starts from.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from fnmatch import fnmatchcase
from numbers import Integral, Real
from typing import Callable, Iterator, Mapping, Union

import torch
import torch.nn as nn

from probe.errors import ProbeError, param

#: the gamma groups, as the toolkit's ``gamma_embed`` ... ``gamma_head``; ``other``: a weight matrix no
#: rule names (a plain model's ``nn.Linear``), drawn with ``gamma['default']`` when gamma is per group
INIT_GROUPS = ("embed", "attn", "mlp", "head", "other")
ATTN_PARTS = ("qk", "vo")   # the toolkit's own models split attn into W_Q, W_K and W_V, W_O (gamma_qk, gamma_vo)

#: parameter-name patterns -> group, first match wins (after the user's ``rules``): Hugging Face GPT-2,
#: LLaMA, BERT and GPT-NeoX names and the toolkit's own. Heads come first: ``embed_out`` is NeoX's head.
DEFAULT_RULES: tuple[tuple[str, str], ...] = (
    ("*lm_head*", "head"), ("*embed_out*", "head"), ("cls.*", "head"), ("*.cls.*", "head"),
    ("*pooler*", "head"), ("*classifier*", "head"), ("score.*", "head"), ("*qa_outputs*", "head"),
    ("W_U", "head"),
    ("*wte*", "embed"), ("*wpe*", "embed"), ("*embed*", "embed"), ("W_E", "embed"), ("W_pos", "embed"),
    ("*attn*", "attn"), ("*attention*", "attn"), ("*.W_Q", "attn"), ("*.W_K", "attn"), ("*.W_V", "attn"),
    ("*.W_O", "attn"), ("*.W_G", "attn"),
    ("*mlp*", "mlp"), ("*intermediate*", "mlp"), ("*.output.dense.*", "mlp"), ("*ffn*", "mlp"),
    ("*feed_forward*", "mlp"), ("*fc1*", "mlp"), ("*fc2*", "mlp"), ("*linear1.*", "mlp"), ("*linear2.*", "mlp"),
)

Rules = Union[Mapping[str, str], Callable[[str], "str | None"], None]


def gamma_std(fan_in: int, gamma: float) -> float:
    """The papers' rule: the std of a weight matrix with ``fan_in`` inputs, fan_in^-gamma."""
    return fan_in ** (-gamma)


@dataclass(frozen=True)
class InitRow:
    """What one parameter got: ``init`` is ``normal`` (N(0, std^2)), ``uniform`` (U(-std, std): the
    toolkit's head bias with ``head_bias``), ``zeroed``, ``ones``, ``tied`` (the same tensor as
    ``tied_to``, drawn once there) or ``kept`` (a parameter no rule covers, left as it was)."""

    name: str
    module: str
    shape: tuple[int, ...]
    init: str
    group: str = ""
    fan_in: int | None = None
    std: float | None = None
    tied_to: str = ""
    zero_row: int | None = None   # an nn.Embedding's padding row, zeroed after the draw (as torch does)


class GammaInitTable:
    """What :func:`gamma_init_` changed, one :class:`InitRow` per parameter in ``named_parameters``
    order (tied ones included); ``str()`` is an aligned table, ``to_dict()`` plain data.

    ``table[name]`` is a parameter's row, ``table[i]`` the i-th row, ``table[a:b]`` a table of those rows.
    """

    def __init__(self, rows: list[InitRow], gamma: dict[str, float], seed: int | None):
        self.rows = rows
        self.gamma = gamma
        self.seed = seed

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[InitRow]:
        return iter(self.rows)

    def __getitem__(self, key):
        if isinstance(key, str):
            for row in self.rows:
                if row.name == key:
                    return row
            raise KeyError(key)
        if isinstance(key, slice):
            return GammaInitTable(self.rows[key], self.gamma, self.seed)
        return self.rows[key]

    def table(self) -> str:
        """One line per parameter: name, module type, shape, group, fan-in, std and what it got."""
        head = ("parameter", "module", "shape", "group", "fan_in", "std", "init")
        cells = [head] + [(r.name, r.module, "x".join(map(str, r.shape)) or "scalar", r.group or "-",
                           "-" if r.fan_in is None else str(r.fan_in), "-" if r.std is None else f"{r.std:.4g}",
                           f"tied to {r.tied_to}" if r.init == "tied" else
                           r.init if r.zero_row is None else f"{r.init}, row {r.zero_row} zeroed")
                          for r in self.rows]
        widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
        right = {4, 5}   # numbers align right
        return "\n".join("  ".join(c.rjust(w) if i in right else c.ljust(w)
                                   for i, (c, w) in enumerate(zip(row, widths))).rstrip() for row in cells)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        drawn = sum(r.init == "normal" for r in self.rows)
        return f"<GammaInitTable: {drawn} matrices drawn, {len(self.rows)} parameters>"

    def to_dict(self) -> dict:
        """``{"gamma": {group: gamma}, "seed": int or None, "rows": [row as a dict, shape a list]}``."""
        return {"gamma": dict(self.gamma), "seed": self.seed,
                "rows": [{**asdict(r), "shape": list(r.shape)} for r in self.rows]}


class GammaInit:
    """Mixin of the toolkit's models: parameters listed in ``fan_in()`` (name -> (fan-in, group)) are
    drawn with std fan_in^-gamma(group), or ``init_std`` when it is set; the head bias named
    ``head_bias_name`` with ``head_bias`` has PyTorch's nn.Linear default U(+-1/sqrt(head_fan_in()))."""

    head_bias_name = ""   # the output head's bias parameter

    def fan_in(self) -> dict[str, tuple[int, str]]:
        raise NotImplementedError

    def head_fan_in(self) -> int:
        raise NotImplementedError

    def gamma_init_(self, generator: torch.Generator | None = None) -> None:
        c = self.cfg
        # the attention's W_Q, W_K and W_V, W_O are groups of their own here (gamma_qk, gamma_vo: attn's
        # gamma unless set), so the same rows as before are drawn when they are not
        gammas = {g: c.module_gamma(g) for g in (*INIT_GROUPS[:4], *ATTN_PARTS)}
        rows = plan(self, gammas, fixed_std=c.init_std)
        if c.depth_scale:   # GPT-2's rule: the residual stream's variance stays bounded over depth
            scaled, root = set(self.residual_outputs()), math.sqrt(2 * c.layers)
            rows = [replace(r, std=r.std / root) if r.name in scaled else r for r in rows]
        draw_(self, rows, generator)


def _group(name: str, rules: Rules, defaults: bool) -> str | None:
    if callable(rules):
        group = rules(name)
        if group is not None:
            if group not in INIT_GROUPS + ATTN_PARTS:
                raise ProbeError(f"{param('rules')}({name!r}) gave {group!r}: a group must be one of "
                                 f"{', '.join(INIT_GROUPS + ATTN_PARTS)} (or None)")
            return group
    elif rules:
        for pattern, group in rules.items():
            if fnmatchcase(name, pattern):
                return group
    for pattern, group in (DEFAULT_RULES if defaults else ()):
        if fnmatchcase(name, pattern):
            return group
    return None


def _matrix_fan_in(module: nn.Module, p: torch.Tensor) -> tuple[int, str | None]:
    """A weight matrix's fan-in and the group its module type implies (embeddings: d_model)."""
    if isinstance(module, nn.Embedding):
        return module.embedding_dim, "embed"
    if type(module).__name__ == "Conv1D":   # Hugging Face's GPT-2 layer: weight (in, out), x @ W
        return p.shape[0], None
    # nn.Linear (out, in), convolutions (out, in / groups, *kernel) and any other parameter: PyTorch's
    # convention (torch.nn.init's fan-in): the second dimension times the rest
    return math.prod(p.shape[1:]), None


def _is_bias(name: str) -> bool:
    # "bias", nn.MultiheadAttention's in_proj_bias and bias_k / bias_v, the toolkit's b_U, b_in ...
    leaf = name.rpartition(".")[2]
    return leaf == "bias" or leaf.endswith("_bias") or leaf.startswith(("bias_", "b_"))


def _is_norm(module: nn.Module, name: str) -> bool:
    # by class (LayerNorm, LlamaRMSNorm, BatchNorm1d) or by the module's own name (norm1, final_norm)
    owner = name.rpartition(".")[0]
    return "norm" in type(module).__name__.lower() or "norm" in owner.rpartition(".")[2].lower()


def plan(model: nn.Module, gammas: Mapping[str, float], rules: Rules = None,
         fixed_std: float = 0.0) -> list[InitRow]:
    """What each parameter of ``model`` gets, in ``named_parameters`` order (tied ones included, once
    each name). A toolkit model's weights take their fan-in and group from its ``fan_in()``; any other
    model's from the module type and the rules. ``gammas``: group -> gamma (``default``: a group not
    named); ``fixed_std`` > 0 replaces the rule (the toolkit's ``init_std``)."""
    own = model.fan_in() if isinstance(model, GammaInit) else None
    modules = dict(model.named_modules(remove_duplicate=False))
    seen: dict[int, str] = {}
    rows = []
    for name, p in model.named_parameters(remove_duplicate=False):
        module = modules[name.rpartition(".")[0]]
        kind, shape = type(module).__name__, tuple(p.shape)
        if id(p) in seen:
            rows.append(InitRow(name, kind, shape, "tied", tied_to=seen[id(p)]))
            continue
        seen[id(p)] = name
        if own is not None and name in own:
            fan, group = own[name]
            group = _group(name, rules, defaults=False) or group
        elif own is None and p.ndim >= 2 and not _is_norm(module, name) and not _is_bias(name):
            fan, by_type = _matrix_fan_in(module, p)
            group = _group(name, rules, defaults=True) or by_type or "other"
        else:
            rows.append(_small_init(model, module, name, kind, shape, p))
            continue
        std = fixed_std if fixed_std > 0 else gamma_std(fan, _gamma_of(gammas, group, name))
        pad = getattr(module, "padding_idx", None) if isinstance(module, nn.Embedding) else None
        rows.append(InitRow(name, kind, shape, "normal", group, int(fan), std,
                            zero_row=None if pad is None else int(pad) % shape[0]))
    return rows


def _small_init(model, module: nn.Module, name: str, kind: str, shape: tuple[int, ...], p) -> InitRow:
    """A parameter that is no weight matrix: the toolkit's head bias, a bias, a norm weight, or kept."""
    if isinstance(model, GammaInit) and name == model.head_bias_name and model.cfg.head_bias:
        fan = model.head_fan_in()   # PyTorch's nn.Linear default, as paper 2's code (not gamma-scaled)
        return InitRow(name, kind, shape, "uniform", "head", fan, 1.0 / math.sqrt(fan))
    if _is_bias(name):
        return InitRow(name, kind, shape, "zeroed")
    if p.ndim == 1 and _is_norm(module, name):
        return InitRow(name, kind, shape, "zeroed" if _scales_by_one_plus_weight(module) else "ones")
    return InitRow(name, kind, shape, "kept")


@torch.no_grad()
def _scales_by_one_plus_weight(module: nn.Module) -> bool:
    """Whether a norm multiplies by 1 + weight (Gemma's and Qwen3.5's RMSNorm: its identity is weight 0)
    rather than by its weight (LayerNorm, LLaMA's RMSNorm). Told by what it does, not by its class name,
    which no list keeps up with: with every parameter of its own at 0, a norm that scales by its weight
    outputs 0 on any input, one that scales by 1 + weight does not. The module is left as it was (its
    parameters and train/eval mode restored); one that cannot run on a (3, dim) tensor counts as not."""
    own = list(module.parameters(recurse=False))
    dim = next((int(p.shape[0]) for p in own if p.ndim == 1), 0)
    if not own or not dim:
        return False
    saved, was_training = [p.detach().clone() for p in own], module.training
    try:
        for p in own:
            p.zero_()
        module.train(False)   # (a batch norm must not update its running statistics)
        x = torch.randn(3, dim, generator=torch.Generator().manual_seed(0)).to(own[0].device, own[0].dtype)
        out = module(x)
        out = out[0] if isinstance(out, (tuple, list)) else out
        return bool(torch.is_tensor(out) and out.shape == x.shape and torch.count_nonzero(out) > 0)
    except Exception:   # (any error of a module's forward: it is not a norm this test can tell)
        return False
    finally:
        for p, v in zip(own, saved):
            p.copy_(v)
        module.train(was_training)


def _gamma_of(gammas: Mapping[str, float], group: str, name: str) -> float:
    if gammas.get(group):   # (a group's 0 is "not set", as probe-train's --gamma-embed 0 is --gamma)
        return gammas[group]
    if group in ATTN_PARTS and gammas.get("attn"):   # W_Q, W_K / W_V, W_O of the toolkit's models: attn's
        return gammas["attn"]
    if "default" in gammas:
        return gammas["default"]
    raise ProbeError(f"{param('gamma')} has no value for group '{group}' ({name}): add '{group}' or 'default'")


@torch.no_grad()
def draw_(model: nn.Module, rows: list[InitRow], generator: torch.Generator | None) -> None:
    """Apply ``rows`` to ``model`` in order. Each draw is made in float32 on the CPU and copied in, so a
    seed gives the same weights whatever the parameter's device and dtype."""
    params = dict(model.named_parameters(remove_duplicate=False))
    for r in rows:
        p = params[r.name]
        if r.init == "normal":
            p.copy_(torch.empty(p.shape, dtype=torch.float32).normal_(0.0, r.std, generator=generator))
            if r.zero_row is not None:   # the padding token's vector stays 0, as nn.Embedding and HF init it
                p[r.zero_row] = 0
        elif r.init == "uniform":
            p.copy_(torch.empty(p.shape, dtype=torch.float32).uniform_(-r.std, r.std, generator=generator))
        elif r.init == "zeroed":
            p.zero_()
        elif r.init == "ones":
            p.fill_(1.0)


def _check_gamma(gamma) -> dict[str, float]:
    given = gamma if isinstance(gamma, Mapping) else {"default": gamma}
    for key, value in given.items():
        if key not in INIT_GROUPS and key not in ATTN_PARTS and key != "default":
            raise ProbeError(f"unknown {param('gamma')} group '{key}' (known: {', '.join(INIT_GROUPS + ATTN_PARTS)}, default)")
        # RunConfig's range and wording: a finite number, positive; a group's 0 means "the default's",
        # as RunConfig's gamma_embed ... gamma_head do (probe-train --gamma-embed 0: --gamma)
        name = param("gamma") if given is not gamma else f"{param('gamma')}[{key!r}]"
        if not isinstance(value, Real) or isinstance(value, bool) or not math.isfinite(value):
            raise ProbeError(f"{name}={value!r}: need a finite number")
        if value < 0 or (value == 0 and key == "default"):
            raise ProbeError(f"{name} must be positive" + ("" if key == "default" else " (or 0: the default's)"))
    return {k: float(v) for k, v in given.items()}


def _check_rules(rules: Rules) -> Rules:
    if rules is None or callable(rules):
        return rules
    if not isinstance(rules, Mapping):
        raise ProbeError(f"{param('rules')} must be a dict of name patterns -> group or a function of a name")
    bad = {k: v for k, v in rules.items() if not isinstance(k, str) or v not in INIT_GROUPS + ATTN_PARTS}
    if bad:
        k, v = next(iter(bad.items()))
        raise ProbeError(f"{param('rules')}: {k!r} -> {v!r}: a group must be one of "
                         f"{', '.join(INIT_GROUPS + ATTN_PARTS)}")
    return rules


def gamma_init_(model: nn.Module, gamma: float | Mapping[str, float], *, rules: Rules = None,
                seed: int | torch.Generator = 0) -> GammaInitTable:
    """Re-draw every weight matrix of ``model`` in place with std fan_in^-gamma (gamma-initialization).

    A weight matrix is any parameter of two or more dimensions outside a norm: ``nn.Linear`` (weight
    (out, in): fan-in ``in``), Hugging Face's ``Conv1D`` (GPT-2's, weight (in, out): fan-in ``shape[0]``),
    ``nn.Embedding`` (fan-in ``embedding_dim``, d_model, as the papers and the toolkit's models draw
    W_E), convolutions and other parameters by PyTorch's fan-in convention (``shape[1] * prod(shape[2:])``).
    A parameter tied to one already drawn (GPT-2's ``lm_head`` is ``wte``) is drawn once and reported as
    tied. An ``nn.Embedding``'s padding row (``padding_idx``) is zeroed after the draw, as PyTorch and
    Hugging Face initialise it. Biases are zeroed, norm weights (a module whose class or name says
    ``norm``) set to their identity: 1, or 0 for a norm that scales by 1 + weight (Gemma's RMSNorm;
    told by running it once), what no rule covers (a 1-D scale of a custom module) kept. On the
    toolkit's own models the draws are ``probe-train``'s for the same seed and gammas.

    Parameters
    ----------
    model : torch.nn.Module
        Any torch model; changed in place, under ``torch.no_grad``.
    gamma : float or dict of str to float
        One gamma for every weight, or one per group (``embed``, ``attn``, ``mlp``, ``head``, ``other``,
        as ``probe-train --gamma-embed ...``; ``default`` for the groups not named). Finite, > 0. On the
        toolkit's own models ``qk`` (W_Q, W_K) and ``vo`` (W_V, W_O) split ``attn`` (``--gamma-qk``,
        ``--gamma-vo``); a rule may name them on any model.
    rules : dict of str to str, or callable, optional
        Parameter-name patterns (``fnmatch``: ``"*.q_proj.*"``) -> group, or a function of a parameter
        name returning its group (or None: the default rules decide). Tried before :data:`DEFAULT_RULES`,
        which know GPT-2, LLaMA, BERT, GPT-NeoX and the toolkit's names; an embedding no rule names is
        ``embed``, any other matrix ``other``.
    seed : int or torch.Generator, default 0
        The draws' seed (a CPU generator seeded with it, as ``probe-train`` does), or a CPU generator.
        The draws follow ``named_parameters`` order, in float32 on the CPU, whatever the model's device.

    Returns
    -------
    GammaInitTable
        One row per parameter: name, module type, shape, group, fan-in, std, and what it got
        (``normal``, ``zeroed``, ``ones``, ``tied``, ``uniform``, ``kept``).

    Raises
    ------
    ProbeError
        ``gamma`` not a finite number > 0, an unknown group, a bad seed, or a model without any weight
        matrix.

    Examples
    --------
    >>> import torch.nn as nn
    >>> from probe_train import gamma_init_
    >>> table = gamma_init_(nn.Sequential(nn.Embedding(100, 64), nn.Linear(64, 10)), gamma=0.5, seed=0)
    >>> table["1.weight"].std
    0.125
    """
    if not isinstance(model, nn.Module):
        raise ProbeError(f"{param('model')} must be a torch nn.Module, not {type(model).__name__}")
    gammas = _check_gamma(gamma)
    rules = _check_rules(rules)
    if isinstance(seed, torch.Generator):
        if seed.device.type != "cpu":
            raise ProbeError(f"{param('seed')}: the draws are made on the CPU; give a CPU generator or an int")
        generator, shown = seed, None
    elif isinstance(seed, Integral) and not isinstance(seed, bool) and seed >= 0:
        generator, shown = torch.Generator().manual_seed(int(seed)), int(seed)
    else:
        raise ProbeError(f"{param('seed', seed)}: need an integer 0 or more, or a torch.Generator")
    rows = plan(model, gammas, rules)
    if not any(r.init == "normal" for r in rows):
        raise ProbeError(f"{type(model).__name__} has no weight matrix to gamma-initialise "
                         f"(no parameter of 2 or more dimensions outside a norm)")
    draw_(model, rows, generator)
    return GammaInitTable(rows, gammas, shown)
