"""``probe-train coord-check``: the coordinate check (:mod:`probe_train.coord`) as a command: its table,
JSON, CSV and figure."""
from __future__ import annotations

import sys
from typing import Optional

import click

from probe.errors import fail, param, terminal

from .config import preset as make_preset
from .options import CONTEXT, PRESET_HELP, StderrBar, known_preset


def _int_list(_ctx, _param, value: str) -> list[int]:
    try:
        widths = [int(v) for v in value.split(",")]
    except ValueError:
        raise click.BadParameter(f"'{value}': use whole numbers with commas (32,64,128,256)") from None
    if any(w < 1 for w in widths):
        raise click.BadParameter(f"'{value}': widths are 1 or more")
    return widths


def _float_list(_ctx, _param, value: Optional[str]) -> Optional[list[float]]:
    if value is None:
        return None
    try:
        return [float(v) for v in value.split(",")]
    except ValueError:
        raise click.BadParameter(f"'{value}': use numbers with commas (0.5,0.8)") from None


# the fields coord-check sets itself: the width (--widths and what follows it), the seed (--seeds), gamma
_COORD_OWN = {"d_model": "--widths", "d_ff": "--widths (d_ff follows d_model)", "seed": "--seeds", "gamma": "--gamma"}


@click.command(context_settings=CONTEXT)
@click.option("--preset", default="quick", show_default=True, help=PRESET_HELP, callback=known_preset)
@click.option("--widths", "-w", required=True, callback=_int_list,
              help="the widths (d_model) to build the preset at, with commas: 32,64,128,256 (two or more)")
@click.option("--gamma", callback=_float_list, help="the gamma to check, or several with commas (one check each; "
              "default: the preset's)")
@click.option("--steps", type=click.IntRange(min=1), default=3, show_default=True,
              help="updates on the fixed batch; step 0 is the initial weights")
@click.option("--seeds", type=click.IntRange(min=1), default=3, show_default=True,
              help="seeds 0..N-1: one slope each, the interval over them")
@click.option("--set", "sets", multiple=True, metavar="FIELD=VALUE", help=(
    "any other config field (lr=4e-3, norm=pre, gamma_ref_width=64 for a fixed std); repeat for several"))
@click.option("--tolerance", type=click.FloatRange(min=0, min_open=True), default=0.1, show_default=True,
              help="|slope| within which (the whole 95 %% interval) a coordinate is flat")
@click.option("--format", "-f", "fmt", type=click.Choice(["table", "json", "csv"]), default="table",
              show_default=True, help="table, json or csv (every seed and width); data on stdout, notes on stderr")
@click.option("--plot", metavar="FILE", help="write mup's figure, a log-log panel per step, to this .png/.pdf/.svg")
def coord_check(preset: str, widths: list[int], gamma: Optional[list[float]], steps: int, seeds: int,
                sets: tuple[str, ...], tolerance: float, fmt: str, plot: Optional[str]) -> None:
    """microsoft/mup's coordinate check with gamma-init: build the preset at each width (d_ff, and a fixed
    d_head, scaled with d_model), train STEPS updates on one fixed batch at the peak learning rate (no
    warm-up), and measure each module's output as mup does, its mean |x|. Per module and step: the log-log
    slope against the width over seeds, with its 95 % interval: flat (a width-stable coordinate), grows,
    shrinks, or not shown. At step 0 a matrix of fan-in d drawn with std d^-gamma maps O(1) inputs to
    entries of size d^(1/2 - gamma).

    \b
    Examples:
      probe-train coord-check --preset composite-quick --widths 32,64,128,256 --gamma 0.5,0.8
      probe-train coord-check --preset tiny --widths 16,32,64 --set norm=pre --plot coord.png
      probe-train coord-check --preset quick --widths 32,64,128 --set gamma_ref_width=64 -f csv
    """
    from probe.chart.style import check_writable
    from .sweep import parse_grid

    if plot:
        check_writable(plot)
    overrides = parse_grid(list(sets), preset, option="set") if sets else {}
    for key, values in overrides.items():
        if key in _COORD_OWN:
            fail(f"{param('set', key)}: coord-check sets {key} itself ({_COORD_OWN[key]})")
        if len(values) > 1:
            fail(f"{param('set', key)}: one value (a check per gamma: --gamma)")
    base = make_preset(preset, **{k: v[0] for k, v in overrides.items()})
    gammas = gamma or [base.gamma]
    cfgs = [base.replace(gamma=g) for g in gammas]   # every gamma checked before one is trained
    from .coord import coord_check as check

    with StderrBar("coord-check") as bar:   # over the widths and seeds of every gamma
        checks = [check(c, widths, seeds=range(seeds), steps=steps, tolerance=tolerance,
                        progress=lambda done, total, i=i: bar.update(i * total + done, len(cfgs) * total))
                  for i, c in enumerate(cfgs)]
    if plot:
        _coord_plot(checks, plot, preset)
    from probe.render import table, write_csv, write_json

    if fmt == "json":
        write_json({"preset": preset, "set": {k: v[0] for k, v in overrides.items()}, "steps": steps,
                    "checks": [c.to_dict() for c in checks]})
        return
    if fmt == "csv":
        write_csv(["gamma", "module", "step", "seed", "width", "mean_abs"],
                  [r for c in checks for r in c.long_rows()])
        return
    for i, c in enumerate(checks):
        if i:
            print()
        lo, hi = c.widths[0], c.widths[-1]
        std = (f"init std {c.std[lo]:.3g} at every width" if c.std[lo] == c.std[hi] else
               f"init std {lo}^-{c.config.gamma:g} = {c.std[lo]:.3g} to {hi}^-{c.config.gamma:g} = {c.std[hi]:.3g}")
        print(terminal(f"gamma {c.config.gamma:g}: {std}"))
        print(terminal(f"{len(c.seeds)} seed{'s' * (len(c.seeds) > 1)}, {steps} update{'s' * (steps > 1)} on one "
                       f"batch at lr {c.config.lr:g} (no warm-up)"))
        table(["module", "step", f"|x| w{lo}", f"|x| w{hi}", "slope", "95% CI", "width"],
              [[m, t, a, b, s, _ci(l, h), v] for m, t, a, b, s, l, h, v in c.rows()], left=(0, 6))


def _ci(lo: float, hi: float) -> str:
    import math

    return f"[{lo:.2f}, {hi:.2f}]" if math.isfinite(lo) and math.isfinite(hi) else "-"


def _coord_plot(checks, path: str, preset: str) -> None:
    from probe.chart.mpl import figure
    from probe.chart.style import save

    panels = []
    for c in checks:
        for p in c.panels():
            if len(checks) > 1:
                p.title = f"gamma {c.config.gamma:g}, {p.title}"
            panels.append(p)
    per_step = len(panels) // (len(checks) * len(checks[0].steps))   # a row per step
    save(figure(panels, title=f"coordinate check: {preset}, widths {', '.join(map(str, checks[0].widths))}",
                cols=per_step if per_step > 1 else None), path)
    print(terminal(f"wrote {path}"), file=sys.stderr)
