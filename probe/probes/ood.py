"""The ``ood`` probe: accuracy per split and held-out combination."""
from __future__ import annotations

import math
import os

import numpy as np

from ..limits import MAX_MEMORY, budgeted, check_total
from ..analyses.stats import finite_rows, nonfinite
from ..analyses.ood import OODResult, loss_acc
from ..api.checks import with_warnings
from ..api.finite import Finite
from ..chart.panel import barh, Panel
from ..format import Run
from ..format.tensors import check_fits
from ..params import check_number
from ..registry import SNAPSHOT, Probe
from ..render import table
from ..readers.source import open_snapshot


@budgeted
def ood(path: str | os.PathLike, *, step: str | int = "latest", full: bool = False, threads: int = 0,
        progress=None, allow_nonfinite: bool = False,
        max_memory: int | str | None = MAX_MEMORY) -> list[OODResult]:
    """Evaluate the stored model on every split, and per anchor combination on the held-out data, per step.

    The model is rebuilt from the snapshot's weights (this needs ``torch``: ``probe_train`` evaluates it).
    By default each split is evaluated on the sequences the trainer used for its metrics, so the numbers
    equal the logged ones. For the composite task the result also holds the accuracy against the
    inferential and the symmetric target on the unseen anchor pair.

    Parameters
    ----------
    {path}
    {step}
    {full}
    threads : int, default 0
        With several steps, snapshots evaluated at once, one torch thread each (0: one per CPU core);
        the numbers do not depend on it.
    progress : callable, optional
        Called with a label (``"step 400 (3/9)"``) as each snapshot is evaluated.
    {allow_nonfinite}
    {max_memory}

    Returns
    -------
    Results[OODResult]
        One result per selected step: ``splits`` ({split: {"loss", "acc", "n"}}), ``combos`` (the
        held-out split per anchor combination) and ``targets`` (composite task).

    Raises
    ------
    ProbeError
        An unknown step; a weight holding NaN or inf, or non-finite logits (finite weights can overflow
        in the forward pass; the message names the split and how many sequences), without
        ``allow_nonfinite``.

    Examples
    --------
    >>> import probe
    >>> res = probe.ood("run.h5", step="all")
    >>> [(r.step, r.splits["rsn_test"]["acc"]) for r in res]
    >>> res[-1].combos                            # {"11,13": {"loss": ..., "acc": ..., "n": ...}, ...}
    """
    check_number("threads", threads)
    from probe_train import (
        evaluate as E,  # probe's one door into the trainer (torch is imported here)
    )

    with open_snapshot(path, "ood") as run:
        cfg = E.run_config(run)
        indices = run.step_indices(step)
        _model_fits(run, min(threads or os.cpu_count() or 1, len(indices)))
        task = E.load_task(run)
        steps = run.steps
        held_out = "rsn_test" if cfg.task == "anchor" else "ood_inferential"
        inputs = {split: E.split_inputs(task, split, full) for split in task.splits}
        check, nonfinite_at = Finite(run.path, allow_nonfinite), set()

        def check_weights(name, part, stack):   # as read, before a model is built from them
            for k, i in enumerate(part):
                if check(name, stack[k], int(steps[i]), "the model is evaluated with them") is not None:
                    nonfinite_at.add(int(i))

        done = []

        def evaluated(i):   # the progress label: the snapshot's step and how far along, not its index
            done.append(i)
            progress(f"step {int(steps[i])} ({len(done)}/{len(indices)})")

        out = E.map_models(run, indices, lambda i, model: _ood_one(E, model, task, cfg, held_out, inputs,
                                                                   int(steps[i]), check, i not in nonfinite_at),
                           threads=threads or os.cpu_count() or 1, progress=progress and evaluated,
                           check=check_weights)
    check.warn()
    return with_warnings(out)
def _model_fits(run: Run, workers: int) -> None:
    """The memory budget's check of the models ood rebuilds from the parameters, ``workers`` at once (each
    read as float32, then the model's own copy): its largest parameter by name, then all of them."""
    weights = run.weights()
    params = {n: shape for n, shape in run.tensors().items() if n not in weights}   # the links left out
    if not params:
        return
    largest = max(params, key=lambda n: math.prod(params[n]))
    check_fits(run.tensor(largest), 1)
    check_total(run.path, f"the model rebuilt from its {len(params)} parameters ({workers} at once)",
                4 * 2 * workers * sum(math.prod(shape) for shape in params.values()))
def _ood_one(E, model, task, cfg, held_out: str, inputs: dict, step: int, check: Finite,
             finite_weights: bool) -> OODResult:
    res = OODResult(step=step)
    logits_of = {}
    for split in task.splits:
        idx, loss, acc, logits = E.evaluate_split(model, task, inputs[split])
        ok, nan, inf = nonfinite(logits)
        if ok is not None:
            rows = finite_rows(ok)
            why = " (from finite weights: the forward pass overflows)" if finite_weights else ""
            check.report(f"the output (logits) of split {split}", step, nan, inf,
                         "those sequences left out of its loss and accuracy",
                         f" in {int((~rows).sum())} of {len(rows)} sequences{why}")
            idx, logits = idx[rows], logits[rows]
            loss, acc = loss_acc(logits, task.labels[idx])
        logits_of[split] = (idx, logits)
        res.splits[split] = {"loss": loss, "acc": acc, "n": int(len(idx))}
    if held_out in logits_of:   # a text run's splits (story, logic) hold no anchor combinations
        idx, logits = logits_of[held_out]
        for c in np.unique(task.combo[idx]):
            sel = task.combo[idx] == c
            loss, acc = loss_acc(logits[sel], task.labels[idx][sel])
            res.combos[",".join(map(str, task.combos[c]))] = {"loss": loss, "acc": acc, "n": int(sel.sum())}
    if cfg.task == "composite":
        for name in ("ood_inferential", "ood_symmetric"):
            idx, logits = logits_of[name]
            res.targets[name.removeprefix("ood_")] = {
                "acc": float((logits.argmax(-1) == task.labels[idx]).mean()), "n": int(len(idx))}
    return res


def detail(r, width) -> None:
    table(["split / combination", "n", "loss", "acc"],
          [[s, m["n"], m["loss"], m["acc"]] for s, m in r.splits.items()]
          + [[f"  held-out {c}", m["n"], m["loss"], m["acc"]] for c, m in r.combos.items()]
          + [[f"  target {t}", m["n"], None, m["acc"]] for t, m in r.targets.items()], width=width)
    print()


def chart(r) -> list[Panel]:
    names = list(r.splits) + [f"held-out {c}" for c in r.combos] + [f"target {t}" for t in r.targets]
    vals = [m["acc"] for m in r.splits.values()] + [m["acc"] for m in r.combos.values()] \
        + [m["acc"] for m in r.targets.values()]
    return [barh(f"step {r.step}", "accuracy", "split", names, {"accuracy": vals}, xscale="unit")]


PROBE = Probe("ood", SNAPSHOT, "Accuracy per split and held-out combination", function=ood,
              options={"threads": "snapshots evaluated at once, one torch thread each (0: one per CPU core); the "
                                  "numbers do not depend on it"},
              report_options=(("threads", 1),), result="ood.OODResult", metrics=("acc", "loss"),
              example="probe ood run.h5 --step all", examples=("probe ood run.h5 --full --format json",),
              nonfinite="the model runs with the weights as stored, and the sequences whose logits are not finite are "
                        "left out of each split's loss and accuracy",
              help="Rebuild the model from the stored weights; accuracy and loss per split and per held-out anchor "
                   "combination (composite task: inferential vs symmetric accuracy on the unseen pair).",
              detail=detail, chart=chart)
