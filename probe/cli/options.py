"""The probe commands' options, made from the parameters' declarations (:mod:`probe.params`), as plain
Click options.

An option is named like the API parameter it feeds (``--top-k`` -> ``top_k``). A probe command offers
each parameter of its API function as :data:`probe.params.PARAMS` declares it, with the function's own
default (so a flag has one default everywhere: the API's); its help is the declaration's, or the probe's own
text for it (:class:`probe.registry.Probe` ``options``). A range is shown in the help and checked by the
API (:func:`probe.params.check_number`), so a bad value reads the same from Python and here. The commands
written by hand (:mod:`probe.cli`) take the shared ones through the decorators at the end (:func:`fmt`, ...).
"""
from __future__ import annotations

import os
import re

import click

from ..params import PARAMS, Param

FORMATS = ("table", "json", "csv")
FORMAT_HELP = "table, json (strict: no NaN) or csv (tidy: step,metric,key,value); data on stdout, logs on stderr"
SOURCE = ("snapshot file, or a checkpoint: Hugging Face folder, .safetensors, .pt/.pth/.bin state dict, nanoGPT "
          "ckpt.pt, or a hub model hf:ORG/NAME[@REVISION]; or a folder of one training's checkpoints as a run "
          "(checkpoint-500/, ckpt_1000.pt, step-500.safetensors: the step in the name), or hub revisions named by "
          "step, hf:ORG/NAME@step1000,step2000")
SNAPSHOT_FILE = "snapshot file (.h5) written by probe-train"
#: offered last, in this order, by every probe command
LAST = ("step", "skip_damaged", "allow_nonfinite")


class ShownIntRange(click.IntRange):
    """An integer whose range ``--help`` shows; the API checks it (one wording from Python and the CLI)."""

    def convert(self, value, param, ctx):
        return click.INT.convert(value, param, ctx)


class ShownFloatRange(click.FloatRange):
    """A number whose range ``--help`` shows; the API checks it (one wording from Python and the CLI)."""

    def convert(self, value, param, ctx):
        return click.FLOAT.convert(value, param, ctx)


def help_of(name: str, probe=None) -> str:
    """The help of option ``name`` as probe ``probe`` (a :class:`probe.registry.Probe`; None: batch) shows
    it: the probe's own text for it, else the declaration's, else (a parameter only this probe has, such
    as another package's probe) its description in the function's numpydoc docstring."""
    own = probe.options.get(name) if probe is not None else None
    if own or name in PARAMS:
        text = PARAMS[name].help if name in PARAMS else ""
        return own or (text(probe) if callable(text) else text)
    doc = probe.function.__doc__ or ""
    found = re.search(rf"^\s*{name} :[^\n]*\n((?:\s{{5,}}\S[^\n]*\n?)+)", doc, re.M)
    return " ".join(found.group(1).split()) if found else ""


def _type(p: Param | None, default):
    """The Click type of a declared parameter (its kind; a range shown), else of its default."""
    if p is None:
        return type(default) if default is not None else str
    if p.kind in ("int", "float") and (p.lo is not None or p.hi is not None):
        return (ShownIntRange if p.kind == "int" else ShownFloatRange)(min=p.lo, max=p.hi)
    return {"int": int, "float": float, "bool": bool}.get(p.kind, str)


def click_option(name: str, default, help: str) -> click.Option:
    """The Click option of API parameter ``name`` with ``default`` and ``help`` (a parameter without a
    declaration: its type from its default)."""
    p = PARAMS.get(name)
    flag = "--" + name.replace("_", "-")
    kind = _type(p, default)
    if kind is bool:
        return click.Option([flag, name], is_flag=True, default=default, help=help)
    decls = [flag, *([p.short] if p and p.short else []), name]
    multiple = bool(p and p.multiple)
    return click.Option(decls, type=kind, default=default, multiple=multiple, metavar=p.metavar if p else None,
                        show_default=default is not None and not multiple, help=help)


def converted(options: dict, absolute: bool = False) -> dict:
    """Option values as the API takes them (with ``absolute``, file names made absolute)."""
    out = {}
    for n, v in options.items():
        p = PARAMS.get(n)
        v = p.convert(v) if p and p.convert else v
        out[n] = os.path.abspath(v) if (absolute and p and p.path and v) else v
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
