"""Bad input: one ``Error:`` line on stderr, exit code 2, no traceback, nothing written or changed."""
import shutil

import pytest

from broken import assert_clean_error, broken_snapshots, digest
from conftest import run_cli


@pytest.fixture()
def work(tmp_path, tiny_run):
    good = tmp_path / "good.h5"
    shutil.copy(tiny_run, good)
    broken_snapshots(tmp_path, good)
    return tmp_path


def test_a_run_without_its_embedding(work):
    """(The other bad inputs: tests/test_bad_input.py.)"""
    before = digest(work)
    assert_clean_error(run_cli("probe", "similarity", work / "missing.h5"), "token_embedding")
    assert_clean_error(run_cli("probe", "similarity", work / "good.h5", "--tokens", "bogus", "--plot",
                                work / "fig.png"), "bogus")
    assert digest(work) == before  # nothing written, not even the figure


def test_good_calls_write_data_to_stdout(work):
    import json

    res = run_cli("probe", "similarity", work / "good.h5", "--tokens", "reasoning,3,5", "--format", "json",
                  "--plot", work / "fig.png")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["results"][0]["ids"] == list(range(11, 21)) + [3, 5]
    assert (work / "fig.png").stat().st_size > 1000
    res = run_cli("probe", "similarity", work / "good.h5", "--tokens", "11:14", "--step", "all", "--format", "csv")
    assert res.returncode == 0
    lines = res.stdout.strip().splitlines()
    assert lines[0] == "step,metric,key,value"
    assert any(",distance_corr," in x for x in lines)
    assert '0,cosine,"11,12",' in res.stdout          # matrix cells: key i,j (token ids)
    info = run_cli("probe", "info", work / "good.h5", "--format", "json")
    assert json.loads(info.stdout)["groups"]["reasoning"] == list(range(11, 21))


def test_a_closed_pipe_ends_quietly(tiny_run, tmp_path):
    """`probe ... | head -1`: the reader goes away mid-output; exit 0, nothing on stderr."""
    import subprocess

    from conftest import _script

    cmd = " ".join(_script("probe")) + f" similarity {tiny_run} --tokens 0:200 --step all --format csv"
    res = subprocess.run(["bash", "-c", f"{cmd} 2>err.txt | head -1; echo ${{PIPESTATUS[0]}}; cat err.txt"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    first, status, *err = res.stdout.splitlines()
    assert first == "step,metric,key,value" and status == "0" and err == []
