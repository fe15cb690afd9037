"""The ``cka`` probe: linear CKA between the token vectors of two runs, two steps of one run, or a run and a
checkpoint."""
from __future__ import annotations

import os

import numpy as np

from ..limits import MAX_MEMORY, budgeted
from ..analyses.cka import CKAResult, linear_cka
from ..api.checks import with_warnings
from ..api.selection import TokenRows
from ..params import STEP_GRAMMAR
from ..errors import ProbeError, param
from ..readers.source import open_source
from ..registry import WEIGHTS, Probe


@budgeted
def cka(path: str | os.PathLike, other: str | os.PathLike | None = None, tokens=None, *, words=None,
        words_file: str | None = None, tensor: str = "token_embedding", step: str | int = "latest",
        step_b: str | int | None = None, groups: str | None = None, mapping: str | None = None,
        skip_damaged: bool = False, allow_nonfinite: bool = False,
        max_memory: int | str | None = MAX_MEMORY) -> list[CKAResult]:
    """Linear CKA (Kornblith et al., ICML 2019) of the same tokens' vectors in run A and run B.

    The rows of ``tensor`` for the selected tokens are read in both (the same group names or ids, or the
    same words through each one's own vocabulary), centred, and compared with linear CKA: 1 when B's
    token geometry is A's up to a rotation and scale, near 0 when unrelated. Their lengths may differ.

    Parameters
    ----------
    path : str or os.PathLike
        Run A: a snapshot file written by ``probe-train``, a checkpoint file or folder, or ``hf:ORG/NAME@REV``.
    other : str or os.PathLike, optional
        Run B, any kind ``path`` can be; ``None``: ``path`` again, at ``step_b``.
    {tokens}
    {words} Each run looks them up in its own.
    {words_file}
    {tensor} The same in both runs.
    step : str or int, default "latest"
        A's snapshots (see [`similarity`][probe.probes.similarity.similarity]); several make a trajectory.
    step_b : str or int, optional
        B's step: one step for every step of A, or as many steps as A's, paired in order. ``None``: B's latest
        step, or with a second run and a ``step`` other than ``"latest"``, the same step numbers as A.
    {groups} Both runs get them.
    {mapping}
    {skip_damaged}
    {allow_nonfinite}
    {max_memory}

    Returns
    -------
    Results[CKAResult]
        One result per step of A: ``cka``, ``n``, ``dims``, ``step_b``.

    Raises
    ------
    ProbeError
        One model only (no ``other`` and no ``step_b``); a selection of different sizes in A and B; fewer
        than 2 tokens; B's steps that cannot be paired with A's; NaN or inf (without ``allow_nonfinite``).

    Examples
    --------
    >>> import probe
    >>> probe.cka("seed0.h5", "seed1.h5", tokens="reasoning")[0].cka
    >>> probe.cka("run.h5", step="all", step_b="latest").to_frame()     # how far each step is from the end
    """
    if other is None and step_b is None:
        raise ProbeError(f"cka compares two models: give a second run, or a second step of the same run with "
                         f"{param('step_b')}")
    with open_source(path, groups, mapping, skip_damaged=skip_damaged) as run:
        a = TokenRows(run, tokens, words, words_file, tensor, step, allow_nonfinite, "cka", 2, "linear CKA")
    if step_b is None:
        step_b = ",".join(map(str, a.steps)) if str(step) != "latest" else "latest"
    with open_source(other if other is not None else path, groups, mapping, skip_damaged=skip_damaged) as run:
        b = TokenRows(run, tokens, words, words_file, tensor, step_b, allow_nonfinite, "cka", 2, "linear CKA")
    if len(b.ids) != len(a.ids):
        raise ProbeError(f"the selection is {len(a.ids)} tokens in run A and {len(b.ids)} in run B; CKA compares "
                         "the same tokens")
    if len(b.steps) not in (1, len(a.steps)):
        raise ProbeError(f"{param('step_b')} selects {len(b.steps)} steps of run B for {len(a.steps)} of run A: give "
                         "one, or as many")
    out = []
    for k, s in enumerate(a.steps):
        kb = k if len(b.steps) > 1 else 0
        xa, sel_a, _ = a.finite(k, a.labels)
        xb, sel_b, _ = b.finite(kb, b.labels)
        in_a, in_b = np.isin(a.ids, sel_a), np.isin(b.ids, sel_b)   # a token counts where both rows are finite
        both = in_a & in_b
        if both.sum() < 2:
            raise ProbeError(f"fewer than 2 tokens have finite vectors in both runs at step {s}")
        out.append(linear_cka(xa[both[in_a]], xb[both[in_b]], step=s, step_b=b.steps[kb], ids=a.ids[both]))
    a.check.warn()
    b.check.warn()
    return with_warnings(out)


PROBE = Probe("cka", WEIGHTS, "Linear CKA of two runs' token vectors", function=cka, tokens="reasoning",
              batch=False, report=False, sweeps=False,
              options={"path": "run A: a snapshot file, or a checkpoint: Hugging Face folder, .safetensors, "
                       ".pt/.pth/.bin state dict, nanoGPT ckpt.pt, or a hub model hf:ORG/NAME[@REVISION]",
                       "other": "run B, any kind FILE can be (default: FILE again, at --step-b)",
                       "step": f"steps of run A: {STEP_GRAMMAR}",
                       "step_b": "steps of run B: one for every step of A, or as many, paired in order (default: "
                       "B's latest, or with --step other than latest the same step numbers as A)"},
              result="cka.CKAResult", metrics=("cka", "n"), example="probe cka a.h5 b.h5 --tokens reasoning",
              examples=("probe cka run.h5 --step all --step-b latest",
                        "probe cka seed0.h5 seed1.h5 --step all --plot cka.png"),
              nonfinite="a token whose row holds one in either run is left out",
              help="Linear CKA (Kornblith et al. 2019) between the vectors of the same tokens in two runs, two steps "
                   "of one run, or a run and a checkpoint (default tokens: reasoning): 1 when the token geometry "
                   "is the same up to rotation and scale.")
