"""No code runs from the user's folder: in a folder holding a ``train.py`` and a ``schemas.py`` that
raise on import (every ML repository has a train.py), the toolkit's commands
that start children (figures, sweeps, the live report) and its Python API still run the toolkit's
own code. The installed import names are ``probe``, ``probe_train`` and ``probe_schemas``."""
import subprocess
import sys

import pytest

from conftest import run_cli

TRAP = "raise RuntimeError('the user\\'s {name} was imported')\n"


@pytest.fixture()
def user_folder(tmp_path):
    for name in ("train", "schemas"):
        (tmp_path / f"{name}.py").write_text(TRAP.format(name=f"{name}.py"))
    return tmp_path


def _clean(res):
    assert res.returncode == 0, res.stderr
    assert "was imported" not in res.stdout + res.stderr


def test_figures_in_a_folder_with_a_train_py(user_folder):
    # and modules named like the toolkit's: multiprocessing starts the trainers' fork server with
    # `python -c`, which (Python 3.11) put this folder first on its path until it ran with PYTHONSAFEPATH
    (user_folder / "probe_train.py").write_text(TRAP.format(name="probe_train.py"))
    (user_folder / "probe.py").write_text(TRAP.format(name="probe.py"))
    _clean(run_cli("probe", "figures", "p1-label-dist", "--tiny", "-o", "figs", cwd=user_folder, real=True,
                   timeout=600))
    assert (user_folder / "figs" / "p1-label-dist.png").is_file()


@pytest.mark.slow   # 29 s (CI time): the figures test below starts the same console scripts from such a folder
def test_sweep_and_live_report_in_a_folder_with_a_train_py(user_folder):
    _clean(run_cli("probe-train", "sweep", "--preset", "tiny", "--grid", "steps=4", "--grid", "seed=0:2",
                   "--grid", "snapshot_every=2", "--out", "s", "--jobs", "2", cwd=user_folder, real=True))
    assert len(list((user_folder / "s").glob("*.h5"))) == 2
    _clean(run_cli("probe-train", "--preset", "tiny", "--steps", "20", "--snapshot-every", "10", "--out", "r.h5",
                   "--report", "r.html", "--quiet", cwd=user_folder, real=True))
    assert (user_folder / "r.html").read_text().rstrip().endswith("</html>")


def test_python_api_in_a_folder_with_a_train_py(user_folder, tiny_run):
    code = ("import probe, probe_train, probe_schemas; "
            f"r = probe.similarity({str(tiny_run)!r}, tokens='reasoning')[0]; "
            "print(round(float(r.distance_corr), 3)); print(probe_schemas.snapshot_schema()['version'])")
    res = subprocess.run([sys.executable, "-c", code], cwd=user_folder, capture_output=True, text=True,
                         timeout=300)
    _clean(res)
    assert len(res.stdout.split()) == 2


def test_every_package_folder_is_installed():
    """pyproject lists the packages by hand (the mapped folders need it): a new subpackage must be listed."""
    tomllib = pytest.importorskip("tomllib")   # Python 3.11+

    from conftest import ROOT
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {name: folder for name, folder in cfg["package-dir"].items()}
    listed = set(cfg["packages"])
    found = set()
    for top in ("probe", "probe_train", "probe_schemas"):
        base = ROOT / folders.get(top, top)
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base).parts
            found.add(".".join((top, *rel)))
    assert found == listed
