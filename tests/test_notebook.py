"""Probing from a notebook: ``dir(probe)`` lists the API (tab completion) while ``import probe`` stays
cheap, every probe's results become a DataFrame equal to its ``--format csv`` output, and
examples/tutorial.ipynb runs from top to bottom in a kernel of this interpreter."""
import io
import json
import os
import pickle
import subprocess
import sys
import warnings

import nbformat
import pandas as pd
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

import probe
from conftest import ROOT, run_cli
from probe import registry
from probe.api import probe_function
from probe.errors import ProbeWarning

TIDY = ["step", "metric", "key", "value"]
HEAVY = ("numpy", "h5py", "torch", "scipy", "pandas", "matplotlib")


def _python(code: str, *args, cwd) -> str:
    """``code`` run by this interpreter in a fresh process (outside the repository: the installed package)."""
    res = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout


# --- the package as a notebook sees it --------------------------------------------------------------

def test_import_probe_is_cheap_and_dir_lists_the_public_api(tmp_path):
    got = json.loads(_python("import json, sys, probe\n"
                             "print(json.dumps({'dir': dir(probe), 'modules': sorted(sys.modules)}))", cwd=tmp_path))
    assert [m for m in got["modules"] if m.split(".")[0] in HEAVY] == []
    assert got["dir"] == sorted(got["dir"])
    assert set(got["dir"]) == {*probe.__all__, "api", "batch", "callbacks", "chart", "errors", "figures", "registry",
                               "report"}
    assert set(registry.names()) <= set(got["dir"]) and {"Results", "ProbeError", "info", "Run"} <= set(got["dir"])
    assert not [n for n in got["dir"] if n.startswith("_")]


def test_every_name_dir_lists_resolves():
    import types

    for name in dir(probe):
        assert getattr(probe, name) is not None, name
    for name in probe.__all__:
        assert not isinstance(getattr(probe, name), types.ModuleType), name
    assert probe.chart.heatmap and probe.figures.SIZES and probe.report.MAX_STEPS
    assert probe.similarity is probe.api.similarity and probe.Results.__name__ == "Results"
    with pytest.raises(AttributeError, match="no attribute 'similarty'"):
        probe.similarty


def test_results_are_a_list_that_stays_one(tiny_run):
    res = probe.similarity(tiny_run, step="all")
    assert isinstance(res, list) and isinstance(res, probe.Results) and len(res) > 2
    assert res[0].step == 0 and res[-1] is res[len(res) - 1]
    assert isinstance(res[1:], probe.Results) and [r.step for r in res[1:]] == [r.step for r in res][1:]
    both = res[:1] + probe.bias(tiny_run)
    assert isinstance(both, probe.Results) and len(both) == 2
    assert isinstance([res[0]] + res[-1:], probe.Results)
    again = pickle.loads(pickle.dumps(res))
    assert isinstance(again, probe.Results) and [r.step for r in again] == [r.step for r in res]
    json.dumps([r.to_dict() for r in res])


def test_a_result_and_a_list_of_results_show_what_they_are_not_their_arrays(tiny_run):
    """A notebook cell that ends in ``probe.similarity(path, step="all")`` showed every array (46 KB)."""
    res = probe.similarity(tiny_run, step="all")
    steps = [r.step for r in res]
    text = repr(res)
    lines = text.splitlines()
    assert lines[0] == (f"Results: {len(res)} SimilarityResult, steps {', '.join(map(str, steps[:4]))}, ..., "
                        f"{steps[-2]}, {steps[-1]}")
    assert lines[1].split()[:4] == ["step", "mean_offdiag", "std_offdiag", "distance_corr"]
    assert [ln.split()[0] for ln in lines[2:]] == [str(s) for s in steps]   # a row per step, in order
    assert f"{res[-1].distance_corr:.4g}" == lines[-1].split()[3]
    assert len(text) < 2000 and max(map(len, lines)) <= 100 and "array(" not in text

    one = repr(res[-1])
    assert one.startswith(f"SimilarityResult(step={steps[-1]}, mean_offdiag={res[-1].mean_offdiag:.4g}, ")
    assert "matrix (10, 10)" in one and "ids (10,)" in one and "\n" not in one and len(one) < 400
    assert repr(probe.theory(tiny_run)[0]).startswith("TheoryResult(step=")
    assert repr(probe.Results()) == "Results: empty" and repr(res[-1:]).splitlines()[0].endswith(f"step {steps[-1]}")

    html = res._repr_html_()   # a table, a row per step, every step
    assert html.count("<tr>") == len(res) + 1 and "<th>distance_corr</th>" in html
    assert "<td>distance_corr</td>" in res[-1]._repr_html_()
    # attribute access as before
    assert res[-1].matrix.shape == (10, 10) and res[-1].summary()["distance_corr"] == res[-1].distance_corr


def test_version_is_the_installed_distributions_without_numpy(tmp_path):
    from importlib.metadata import version

    got = json.loads(_python("import json, sys, probe\n"
                             "print(json.dumps([probe.__version__, sorted(sys.modules)]))", cwd=tmp_path))
    assert got[0] == version("gamma-probe") == probe.__version__
    assert [m for m in got[1] if m.split(".")[0] in HEAVY] == []
    assert run_cli("probe", "--version").stdout.strip() == f"probe {probe.__version__}"


def test_to_frame_without_pandas_names_the_extra(tiny_run, tmp_path):
    # sys.modules[name] = None is how Python spells "not installed": importing it raises ImportError
    out = _python("import sys\nsys.modules['pandas'] = None\nimport probe\n"
                  "res = probe.bias(sys.argv[1])\n"
                  "for call in (res.to_frame, res[0].to_frame):\n"
                  "    try:\n        call()\n    except probe.ProbeError as e:\n        print(e)\n", tiny_run,
                  cwd=tmp_path)
    assert out == "to_frame() needs pandas: pip install 'gamma-probe[notebook]'\n" * 2


# --- every probe: to_frame() is its CSV ------------------------------------------------------------

@pytest.fixture(scope="module")
def text_run(tmp_path_factory):
    """A tiny language run: it stores the per-token losses that `tokens` compares."""
    path = tmp_path_factory.mktemp("text") / "llm.h5"
    res = run_cli("probe-train", "--preset", "llm-tiny", "--out", path, "--quiet", "--threads", "1")
    assert res.returncode == 0, res.stderr
    return path


def _csv_frame(text: str) -> pd.DataFrame:
    """The CLI's tidy CSV read as a user would, undefined cells (empty) as missing."""
    return pd.read_csv(io.StringIO(text), keep_default_na=False, na_values={"step": [""], "value": [""]},
                       dtype={"step": "Int64", "metric": str, "key": str, "value": float})


@pytest.mark.parametrize("name", registry.names())
def test_to_frame_is_the_csv_of_the_command(name, tiny_run, request):
    spec = registry.get(name)
    assert spec.command is not None, f"{name} has no command to compare with"
    options = {"step": "all"}
    path = tiny_run
    if name == "tokens":   # the stored per-token losses of a language run: its step 0 against its last
        path, options = request.getfixturevalue("text_run"), {"step": "0", "step_b": "latest"}
    if name == "regime_widths":   # runs of several widths
        path = request.getfixturevalue("width_sweep")
    if name == "cka":      # two models: each step of the run against its last
        options = {"step": "all", "step_b": "latest"}
    flags = [x for k, v in options.items() for x in ("--" + k.replace("_", "-"), v)]
    res = run_cli("probe", *(spec.command or name).split(), path, *flags, "--format", "csv")
    assert res.returncode == 0, res.stderr
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProbeWarning)
        results = probe_function(name)(path, **options)
    assert isinstance(results, probe.Results)
    frame = results.to_frame()
    assert list(frame.columns) == TIDY and len(frame) > 0
    pd.testing.assert_frame_equal(frame, _csv_frame(res.stdout), check_exact=True)
    # the list's frame is its results' frames, one after the other
    pd.testing.assert_frame_equal(frame, pd.concat([r.to_frame() for r in results], ignore_index=True),
                                  check_exact=True)


def test_undefined_values_are_missing_in_the_frame_and_empty_in_the_csv(tiny_run):
    frame = probe.rank_trajectory(tiny_run).to_frame()          # one result for the whole run: no step
    assert frame.step.isna().all()
    frame = probe.dynamics(tiny_run).to_frame()                  # 40 steps never escape the plateau
    escape = frame[frame.metric == "escape_step"]
    assert len(escape) == 1 and escape.value.isna().all()
    res = run_cli("probe", "dynamics", tiny_run, "--format", "csv")
    assert res.stdout.splitlines()[1].endswith(",escape_step,,")


# --- the tutorial --------------------------------------------------------------------------------

def _kernel(tmp_path) -> KernelManager:
    """A kernel of this interpreter, from a kernel spec of our own: no user-level Jupyter state is read."""
    spec = tmp_path / "kernels" / "probe-tutorial"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "probe tutorial", "language": "python"}))
    specs = KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")], ensure_native_kernel=False)
    return KernelManager(kernel_name="probe-tutorial", kernel_spec_manager=specs,
                         connection_file=str(tmp_path / "connection.json"))


def test_tutorial_notebook_runs_and_shows_frames_and_figures(tmp_path):
    nb = nbformat.read(ROOT / "examples" / "tutorial.ipynb", as_version=4)
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells if c.cell_type == "code"), \
        "commit the notebook with its outputs cleared"
    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    env.update(PROBE_TUTORIAL_SIZE="tiny", IPYTHONDIR=str(home / "ipython"), JUPYTER_CONFIG_DIR=str(home / "config"),
               JUPYTER_DATA_DIR=str(home / "data"), MPLCONFIGDIR=str(home / "mpl"), PYTHONUNBUFFERED="1")
    client = NotebookClient(nb, km=_kernel(tmp_path), timeout=240, resources={"metadata": {"path": str(work)}})
    client.execute(env=env)        # raises CellExecutionError, with the cell and its traceback, on any error

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    frames = [o.data["text/html"] for o in outputs if "dataframe" in o.get("data", {}).get("text/html", "")]
    assert len(images) >= 4 and len(frames) >= 4
    last = frames[-1]                          # the closing table: one column per γ
    assert "0.3" in last and "0.8" in last and "distance_corr" in last and "rsn_test" in last
    assert sorted(p.name.split("-")[1] for p in (work / "tutorial-runs").glob("*.h5")) == ["g0.3", "g0.8"]
