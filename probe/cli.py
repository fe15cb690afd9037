"""``probe``: analyse snapshot files. A thin layer over :mod:`probe.api`.

Data goes to stdout (``--format table|json|csv``), logs and errors to stderr.
Heavy modules (h5py, numpy, matplotlib) are imported inside the commands so
``probe --help`` starts instantly.
"""
from __future__ import annotations

import sys
from enum import Enum
from typing import Optional

import typer

from .cli_util import run_cli

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Probe training snapshots for reasoning vs memorizing structure.")


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


FILE = typer.Argument(..., help="snapshot file (.h5) written by probe-train")
FORMAT = typer.Option(Format.table, "--format", "-f", help="output format")
STEP = typer.Option("latest", "--step", "-s", help="latest, all, a step number, or A:B (half-open step range)")


@app.command()
def info(file: str = FILE, fmt: Format = FORMAT) -> None:
    """Configuration, snapshot steps, token groups, tensors and shapes of a run."""
    from . import api, output

    d = api.info(file)
    if fmt is Format.json:
        output.write_json(d)
        return
    if fmt is Format.csv:
        output.write_csv(["section", "name", "value"],
                         [("config", k, v) for k, v in d["config"].items()]
                         + [("step", i, s) for i, s in enumerate(d["steps"])]
                         + [("group", k, " ".join(map(str, v))) for k, v in d["groups"].items()]
                         + [("tensor", k, "x".join(map(str, v))) for k, v in d["tensors"].items()])
        return
    c = d["config"]
    steps = d["steps"]
    shown = ", ".join(map(str, steps if len(steps) <= 16 else steps[:8] + ["..."] + steps[-4:]))
    print(f"file       {d['file']}  (schema {d['schema_version']}, written by {d['package_version']})")
    print(f"task       {d['task'].get('kind')}: splits {', '.join(d['task'].get('splits', []))}")
    print(f"model      {c.get('model')}  gamma={c.get('gamma')}  d_model={c.get('d_model')}  layers={c.get('layers')}"
          f"  heads={c.get('heads')}  d_ff={c.get('d_ff')}  norm={c.get('norm')}")
    print(f"training   {c.get('steps')} steps, batch {c.get('batch_size')}, lr {c.get('lr')}, "
          f"weight decay {c.get('weight_decay')}, seed {c.get('seed')}")
    print(f"snapshots  {d['snapshots']}: steps {shown}")
    for split, m in d["metrics"].items():
        if m:
            print(f"  {split:<10} loss {m.get('loss', float('nan')):.4f}  acc {m.get('acc', float('nan')):.4f}")
    print("groups")
    for k, v in d["groups"].items():
        print(f"  {k:<10} {len(v):>4} tokens  {_ids(v)}")
    print("tensors (per snapshot)")
    for k, v in d["tensors"].items():
        print(f"  {k:<28} {' x '.join(map(str, v))}")


def _ids(v) -> str:
    if len(v) > 1 and list(v) == list(range(v[0], v[-1] + 1)):
        return f"{v[0]}:{v[-1] + 1}"
    return ",".join(map(str, v[:12])) + (",..." if len(v) > 12 else "")


@app.command()
def validate(file: str = FILE, fmt: Format = FORMAT) -> None:
    """Check FILE against the snapshot schema: exit 0 if it matches, else list findings and exit 1."""
    from . import api, output

    findings = api.validate(file)
    if fmt is Format.json:
        output.write_json({"file": file, "valid": not findings, "findings": findings})
    elif fmt is Format.csv:
        output.write_csv(["file", "finding"], [(file, x) for x in findings])
    else:
        if findings:
            for x in findings:
                print(f"{file}: {x}")
        else:
            print(f"{file}: valid")
    if findings:
        raise typer.Exit(1)


@app.command()
def similarity(
    file: str = FILE,
    tokens: str = typer.Option("reasoning", "--tokens", "-t",
                               help="group name(s) (reasoning, memory, keys), ids 3,5,7 or a half-open range 11:21"),
    tensor: str = typer.Option("token_embedding", help="tensor whose rows are compared (see probe info)"),
    step: str = STEP,
    fmt: Format = FORMAT,
    plot: Optional[str] = typer.Option(None, help="write heat map(s) to this .png/.pdf/.svg"),
) -> None:
    """Cosine-similarity matrix of token vectors, with its mean and its fall-off with |i - j|."""
    from . import api, output

    if plot:
        from .plotting import check_writable

        check_writable(plot)
    results = api.similarity(file, tokens, tensor=tensor, step=step)
    if fmt is Format.json:
        output.write_json({"file": file, "tensor": tensor, "tokens": tokens,
                           "results": [r.to_dict() for r in results]})
    elif fmt is Format.csv:
        rows = []
        for r in results:
            k = len(r.ids)
            for i in range(k):
                for j in range(k):
                    rows.append((r.step, "cosine", r.ids[i], r.ids[j], abs(int(r.ids[i]) - int(r.ids[j])),
                                 float(r.matrix[i, j])))
            for d, v in r.by_distance.items():
                rows.append((r.step, "mean_by_distance", None, None, d, v))
            for name in ("mean_offdiag", "std_offdiag", "distance_corr"):
                rows.append((r.step, name, None, None, None, getattr(r, name)))
        output.write_csv(["step", "metric", "token_i", "token_j", "distance", "value"], rows)
    else:
        _similarity_table(results, tokens, tensor)
    if plot:
        from .plotting import similarity_heatmaps

        similarity_heatmaps(results, plot, f"{file}: {tensor}, tokens {tokens}")
        print(f"wrote {plot}", file=sys.stderr)


def _similarity_table(results, tokens: str, tensor: str) -> None:
    from . import output

    max_d = 10
    if len(results) == 1:
        r = results[0]
        print(f"cosine similarity of {tensor} rows, tokens {tokens}, step {r.step}")
        output.table(["token"] + [str(i) for i in r.ids],
                     [[int(i)] + [f"{v:.2f}" for v in row] for i, row in zip(r.ids, r.matrix)])
        print()
    dists = sorted({d for r in results for d in r.by_distance})[:max_d]
    output.table(["step", "mean_offdiag", "std_offdiag", "distance_corr"] + [f"d={d}" for d in dists],
                 [[r.step, r.mean_offdiag, r.std_offdiag, r.distance_corr]
                  + [r.by_distance.get(d, float("nan")) for d in dists] for r in results])


def main() -> None:
    run_cli(app)


if __name__ == "__main__":
    main()
