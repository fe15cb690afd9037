"""Every option of the ``probe`` commands, declared once, as plain Click options.

An option is named like the API parameter it feeds (``--top-k`` -> ``top_k``). A probe command offers
each parameter of its API function as :data:`OPTIONS` declares it, with the function's own default
(so a flag has one default everywhere: the API's); its help is the declaration's, or the probe's own
text for it (:class:`probe.registry.Probe` ``options``). The commands written by hand (:mod:`probe.cli`)
take the shared ones through the decorators at the end (:func:`fmt`, :func:`step`, ...), with their own
help where it differs.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable

import click

from ..docstrings import STEP_GRAMMAR

FORMATS = ("table", "json", "csv")
FORMAT_HELP = "table, json (strict: no NaN) or csv (tidy: step,metric,key,value); data on stdout, logs on stderr"
TOKENS = "group names (reasoning, memory, keys), ids 3,5,7 or a half-open range 11:21"
SOURCE = ("snapshot file, or a checkpoint: Hugging Face folder, .safetensors, .pt/.pth/.bin state dict, nanoGPT "
          "ckpt.pt, or a hub model hf:ORG/NAME[@REVISION]")
SNAPSHOT_FILE = "snapshot file (.h5) written by probe-train"
MEMORY = ("memory budget of what the probe reads and computes (512MB, 8GiB or bytes): a tensor that needs more is "
          "refused before it is read [default: half of the memory this process can have: physical memory, or a "
          "lower cgroup or ulimit -v limit]")


@dataclass(frozen=True)
class Opt:
    """One option: its help (a text, or a function of the probe that shows it), its short flag, its
    Click type (None: from the default: a flag for a bool, else the default's type), whether it repeats,
    whether it names a file (``path``: batch hands its workers absolute names, since a Dask worker may
    run in another folder) and how its value becomes the API's (``convert``)."""

    help: str | Callable[[Any], str]
    short: str | None = None
    type: Any = None
    multiple: bool = False
    path: bool = False
    convert: Callable[[Any], Any] | None = None
    metavar: str | None = None


def _tokens(probe) -> str:
    return f"{TOKENS} [default: {probe.tokens}]" if probe is not None and probe.tokens else TOKENS


def _nonfinite(probe) -> str:
    if probe is not None and probe.nonfinite:
        return f"go on past NaN or inf instead of stopping with an error: {probe.nonfinite} (a warning says what)"
    return ("go on past NaN or inf instead of stopping with an error: each probe computes on the finite part "
            "(probe NAME --help says how) and a warning row says what")


#: every API parameter a probe command (and batch) offers, by name
OPTIONS: dict[str, Opt] = {
    "tokens": Opt(_tokens, "-t"),
    "words": Opt("comma-separated words instead of --tokens, looked up in a text run's vocabulary or the checkpoint's "
                 "tokenizer files (multi-token words are left out with a warning)"),
    "words_file": Opt("file of words instead of --tokens (one per line or comma-separated)", path=True),
    "tensor": Opt("tensor whose rows are the token vectors (see probe info)"),
    "groups": Opt("JSON/YAML file: group name -> token ids or words (adds --tokens names)", path=True),
    "mapping": Opt("JSON name-mapping file for an unknown checkpoint layout", path=True),
    "layer": Opt("attention layer, 0-based", "-l", type=int),
    "head": Opt("attention head of --layer, 0-based [default: 0]", type=int),
    "top_k": Opt("top singular vectors of W_V compared with the embeddings", type=click.IntRange(min=1)),
    "n_components": Opt("principal components to report", type=click.IntRange(min=1)),
    "neurons": Opt("weight whose neurons are grouped by cosine ('': none)", convert=lambda v: v or None),
    "threshold": Opt("cosine above which two neurons of --neurons are grouped"),
    "anchor": Opt("s0 of the cos(w(s0), w(s_j)) profile [default: the middle token]", type=int),
    "dim": Opt("length of the eq. 14 vectors [default: vocabulary size]", type=int),
    "seed": Opt("seed of the eq. 14 noise"),
    "full": Opt("every sequence of each split, not the subset the trainer logged its metrics on"),
    "splits": Opt("split A then split B (give twice) [default: the task's pair: anchor mem, rsn_train; lm story, "
                  "logic]", multiple=True, convert=lambda v: tuple(v) if v else None),
    "saturation": Opt("ε share s = ε / (m + ε) from which a norm site counts as saturated (0.1: its output rms is "
                      "<= 95 % of a clean norm's)"),
    "min_query": Opt("first query position counted (earlier queries see little besides position 0)",
                     type=click.IntRange(min=1)),
    "sink_threshold": Opt("mean attention on position 0 from which a head counts as a sink head"),
    "step_b": Opt("step of run B (default: its latest step, or with --step all / A:B / N the same steps as run A); "
                  "with one file, the second step to compare", type=str),
    "buckets": Opt("quantile buckets per token feature", type=click.IntRange(min=1)),
    "text": Opt("for a checkpoint: a text file to run the model on, with its tokenizer files (a snapshot file stores "
                "what it needs)", path=True, type=str),
    "window": Opt("with --text: tokens per window the model sees", type=click.IntRange(min=2)),
    "max_tokens": Opt("with --text: at most this many tokens of the text", type=click.IntRange(min=2)),
    "delta": Opt("the loss has escaped once it is below ln V minus this (nats)"),
    "smooth": Opt("steps averaged for the escape test", type=click.IntRange(min=1)),
    "spike_factor": Opt("a spike is a loss above this many times the running median"),
    "spike_window": Opt("steps in the running median", type=click.IntRange(min=1)),
    "precision": Opt("precision of the Gram matrix, float64 (WeightWatcher's values to machine precision) or "
                     "float32 (about twice as fast, ~1e-6 relative)"),
    "threads": Opt("work at once, one thread each (0: one per CPU core)", type=click.IntRange(min=0)),
    "max_memory": Opt(MEMORY, type=str, metavar="SIZE"),
    "step": Opt(STEP_GRAMMAR, "-s", type=str),
    "allow_nonfinite": Opt(_nonfinite),
}
#: offered last, in this order, by every probe command
LAST = ("step", "allow_nonfinite")


def help_of(name: str, probe=None) -> str:
    """The help of option ``name`` as probe ``probe`` (a :class:`probe.registry.Probe`; None: batch) shows
    it: the probe's own text for it, else the declaration's, else (a parameter only this probe has, such
    as another package's probe) its description in the function's numpydoc docstring."""
    own = probe.options.get(name) if probe is not None else None
    if own or name in OPTIONS:
        text = OPTIONS[name].help if name in OPTIONS else ""
        return own or (text(probe) if callable(text) else text)
    doc = probe.function.__doc__ or ""
    found = re.search(rf"^\s*{name} :[^\n]*\n((?:\s{{5,}}\S[^\n]*\n?)+)", doc, re.M)
    return " ".join(found.group(1).split()) if found else ""


def click_option(name: str, default, help: str) -> click.Option:
    """The Click option of API parameter ``name`` with ``default`` and ``help`` (a parameter without a
    declaration: its type from its default)."""
    opt = OPTIONS.get(name) or Opt(help)
    flag = "--" + name.replace("_", "-")
    kind = opt.type or (type(default) if default is not None else str)
    if kind is bool:
        return click.Option([flag, name], is_flag=True, default=default, help=help)
    decls = [flag, *([opt.short] if opt.short else []), name]
    return click.Option(decls, type=kind, default=default, multiple=opt.multiple, metavar=opt.metavar,
                        show_default=default is not None and not opt.multiple, help=help)


def converted(options: dict, absolute: bool = False) -> dict:
    """Option values as the API takes them (with ``absolute``, file names made absolute)."""
    out = {}
    for n, v in options.items():
        opt = OPTIONS.get(n) or Opt("")
        v = opt.convert(v) if opt.convert else v
        out[n] = os.path.abspath(v) if (absolute and opt.path and v) else v
    return out


# --- the options of the commands written by hand ------------------------------------------------

def fmt(help: str = FORMAT_HELP):
    return click.option("--format", "-f", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
                        help=help)


REVISIONS = ("hub sources (hf:ORG/NAME): a comma list of revisions (step1000,step2000) or all (every branch and tag, "
             "in step order); HF_HUB_OFFLINE=1 reads the local hub cache only")
PLOT = "write a figure to this .png/.pdf/.svg"
# 80: probe.render.WIDTH, spelled out here since importing render would load numpy for every --help
WIDE = ("table: print everything at full width (every column of a matrix, every key of a metric) instead of "
        "fitting 80 columns")
TENSORBOARD = (
    "also write the table's numbers as TensorBoard scalars, PROBE/METRIC[KEY] at each step, into a run per folder "
    "under DIR: a snapshot file is a run named by its stem, step-named checkpoints (model_500.pt, checkpoint-500/) "
    "the steps of a run named by their folder; the similarity matrix's cells are left out, and a run folder only "
    "grows (steps after those it holds). Needs pip install 'gamma-probe[tensorboard]'")
