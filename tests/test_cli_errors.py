"""Bad input: one ``Error:`` line on stderr, exit code 2, no traceback, nothing written or changed."""
import hashlib
import shutil

import h5py
import pytest

from conftest import run_cli


def _digest(directory):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


def _assert_clean_error(res, *fragments):
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.stderr
    assert "Traceback" not in res.stderr
    for frag in fragments:
        assert frag in lines[0], lines[0]


@pytest.fixture()
def work(tmp_path, tiny_run):
    good = tmp_path / "good.h5"
    shutil.copy(tiny_run, good)
    (tmp_path / "notes.txt").write_text("not hdf5\n")
    data = good.read_bytes()
    (tmp_path / "truncated.h5").write_bytes(data[: len(data) // 3])
    corrupt = bytearray(data)
    corrupt[48:4096] = b"\xff" * (4096 - 48)  # wreck the root group's metadata after the superblock
    (tmp_path / "corrupt.h5").write_bytes(bytes(corrupt))
    newer = tmp_path / "newer.h5"
    shutil.copy(good, newer)
    with h5py.File(newer, "a") as f:
        f.attrs["schema_version"] = "99.0"
    missing = tmp_path / "missing.h5"
    shutil.copy(good, missing)
    with h5py.File(missing, "a") as f:
        del f["snapshots/weights/token_embedding"]
        del f["snapshots/params/W_E"]
    return tmp_path


def test_a_run_without_its_embedding(work):
    """(The other bad inputs: tests/test_bad_input.py.)"""
    before = _digest(work)
    _assert_clean_error(run_cli("probe", "similarity", work / "missing.h5"), "token_embedding")
    _assert_clean_error(run_cli("probe", "similarity", work / "good.h5", "--tokens", "bogus", "--plot",
                                work / "fig.png"), "bogus")
    assert _digest(work) == before  # nothing written, not even the figure


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
