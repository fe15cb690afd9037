"""Damage is detected (issue 35): snapshot files carry checksums (schema 1.4) that every reader and
`probe validate` check; bytes scribbled over a file's data are a finding of validate or one error line
naming the dataset and the snapshot, never numbers read as if nothing happened. Files written before
checksums still read, and validate says they carry none. A file that declares a huge extent (a 10^9
vocabulary) is answered at once, in bounded memory."""
import hashlib
import json
import shutil
import signal

import h5py
import numpy as np
import pytest

from probe.errors import ProbeError
from probe.format import Run

from conftest import popen_cli, run_cli
from waiting import committed, wait_for

EMB = "snapshots/weights/token_embedding"
W_E = "snapshots/params/W_E"
NOTE = "note: carries no checksums (written with schema 1.3, before 1.4): damage to its data cannot be detected"


# --- the files ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """A tiny run SIGKILLed after its snapshot at step 200 was committed (a writer that died)."""
    out = tmp_path_factory.mktemp("killed") / "killed.h5"
    proc = popen_cli("probe-train", "--preset", "tiny", "--steps", "1000000", "--snapshot-every", "20",
                     "--out", out, "--quiet", "--threads", "1")
    try:
        wait_for(lambda: committed([out], step=200), "the snapshot at step 200", proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return out


def _open(path) -> h5py.File:
    return h5py.File(path, "r", swmr=True)   # (a killed SWMR writer's file opens for a SWMR read only)


def chunks_for(path) -> list[tuple[int, int, str, tuple]]:
    """(first byte, end, dataset, chunk offset) of every stored chunk of the file, by place in the file."""
    out = []
    with _open(path) as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and obj.chunks:
                obj.id.chunk_iter(lambda c: out.append((c.byte_offset, c.byte_offset + c.size, name,
                                                        tuple(c.chunk_offset))))
        f.visititems(visit)
    return sorted(out)


def _chunk(path, dataset: str, offset: tuple) -> tuple[int, int]:
    """(first byte, end) of the chunk of ``dataset`` at ``offset``."""
    return next((a, b) for a, b, name, at in chunks_for(path) if name == dataset and at == offset)


def _scribble(src, dst, at: int, nbytes: int = 4096, seed: int = 0) -> None:
    """``dst``: a copy of ``src`` with ``nbytes`` random bytes written at byte ``at``."""
    shutil.copy(src, dst)
    with open(dst, "r+b") as fh:
        fh.seek(at)
        fh.write(np.random.default_rng(seed).bytes(nbytes))


def _step(path, i: int) -> int:
    with _open(path) as f:
        return int(f["snapshots/step"][i])


def _sha(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _weight_scribbled(src, dst, snapshot: int = 3) -> int:
    """``dst``: 4 KiB scribbled inside the token embedding's chunk of ``snapshot``; returns its step."""
    a, b = _chunk(src, W_E, (snapshot, 0, 0))
    assert b - a > 3 * 4096   # (12 KiB: the scribble stays inside it)
    _scribble(src, dst, a + 4096)
    return _step(src, snapshot)


def _roles(path) -> dict[str, str]:
    """Parameter name -> the canonical name under snapshots/weights/ that hard links it."""
    with _open(path) as f:
        by_addr = {h5py.h5o.get_info(f[f"snapshots/weights/{n}"].id).addr: f"snapshots/weights/{n}"
                   for n in _leaves(f["snapshots/weights"])}
        return {f"snapshots/params/{n}": by_addr[a] for n in f["snapshots/params"]
                if (a := h5py.h5o.get_info(f[f"snapshots/params/{n}"].id).addr) in by_addr}


def _leaves(group: h5py.Group) -> list[str]:
    out = []
    group.visititems(lambda name, obj: out.append(name) if isinstance(obj, h5py.Dataset) else None)
    return out


def _finished_slot(path) -> int:
    with _open(path) as f:
        return int(np.argmax(f["resume/slot_step"][...]))


def _without_checksums(src, dst) -> None:
    """``dst``: ``src`` as the writer wrote it before schema 1.4: the same datasets, attributes and hard
    links, time-first ones chunked as before but without the Fletcher-32 filter, the rest contiguous,
    ``schema_version`` 1.3."""
    with _open(src) as f, h5py.File(dst, "w", libver=("v110", "v110")) as g:
        for k, v in f.attrs.items():
            g.attrs[k] = v
        g.attrs["schema_version"] = "1.3"
        first: dict = {}

        def visit(name, obj):   # every link: a dataset with several hard links is visited by each
            if isinstance(obj, h5py.Group):
                for key, child in obj.items():
                    visit(f"{name}/{key}".lstrip("/"), child)
                return
            addr = h5py.h5o.get_info(obj.id).addr
            if addr in first:
                g[name] = g[first[addr]]
                return
            first[addr] = name
            try:
                data = {"data": obj[()]}
            except OSError:   # a resume slot a killed writer was filling: as the writer left it, unwritten
                data = {"shape": obj.shape}
            if obj.maxshape[:1] == (None,):
                g.create_dataset(name, **data, dtype=obj.dtype, maxshape=obj.maxshape, chunks=obj.chunks)
            else:
                g.create_dataset(name, **data, dtype=obj.dtype)

        visit("", f)


def _validate(path, *args):
    res = run_cli("probe", "validate", path, *args)
    assert res.stderr == "", res.stderr
    return res


# --- what the writer writes ------------------------------------------------------------------------

def test_every_dataset_holding_data_carries_a_checksum(tiny_run):
    unchecked, scalars = [], 0
    with h5py.File(tiny_run, "r") as f:
        assert f.attrs["schema_version"] == "1.7"
        params = len(f["snapshots/params"])

        def visit(name, obj):
            nonlocal scalars
            if not isinstance(obj, h5py.Dataset) or not obj.size or obj.dtype.kind == "O":
                return
            if obj.shape == ():
                scalars += 1
                if obj.id.get_create_plist().get_layout() != h5py.h5d.COMPACT:
                    unchecked.append(name)
            elif not obj.fletcher32:
                unchecked.append(name)

        f.visititems(visit)
    assert unchecked == [] and scalars == 2 * params   # the optimizer's step of each parameter, in each slot
    res = _validate(tiny_run)
    assert (res.returncode, res.stdout) == (0, f"{tiny_run}: valid\n")


def test_an_undamaged_killed_run_validates(killed):
    res = _validate(killed)
    assert (res.returncode, res.stdout) == (0, f"{killed}: valid\n")


def test_a_resumed_run_keeps_its_checksums(killed, tmp_path):
    out = tmp_path / "resumed.h5"
    shutil.copy(killed, out)
    res = run_cli("probe-train", "--resume", "--out", out, "--quiet", "--steps", _step(killed, -1) + 40)
    assert res.returncode == 0, res.stderr
    with h5py.File(out, "r") as f:
        assert f.attrs["schema_version"] == "1.7"
        assert f[W_E].fletcher32 and f["log/train_loss"].fletcher32 and f["run/label_dist"].fletcher32
        slot = f"resume/slot{int(np.argmax(f['resume/slot_step'][...]))}/optim/W_E"
        assert f[f"{slot}/exp_avg"].fletcher32
        assert f[f"{slot}/step"].id.get_create_plist().get_layout() == h5py.h5d.COMPACT
    assert (_validate(out).returncode, _validate(out).stdout) == (0, f"{out}: valid\n")


# --- validate finds the damage -----------------------------------------------------------------------

def test_a_scribbled_weight_chunk_is_a_finding_naming_its_snapshot(tiny_run, tmp_path):
    bad = tmp_path / "w.h5"
    step = _weight_scribbled(tiny_run, bad)
    res = _validate(bad)
    assert (res.returncode, res.stdout) == (1, f"{bad}: checksum mismatch in '{EMB}' (snapshot at step {step})\n")


def test_validate_json_and_csv_list_the_damage_as_a_finding(tiny_run, tmp_path):
    bad = tmp_path / "w.h5"
    step = _weight_scribbled(tiny_run, bad)
    finding = f"checksum mismatch in '{EMB}' (snapshot at step {step})"
    res = _validate(bad, "--format", "json")
    assert res.returncode == 1
    assert json.loads(res.stdout) == {"file": str(bad), "valid": False, "findings": [finding], "notes": []}
    res = _validate(bad, "--format", "csv")
    assert (res.returncode, res.stdout.splitlines()) == (1, ["step,metric,key,value", f",finding,{bad},{finding}"])


def test_a_scribble_in_the_resume_state_of_a_killed_run_is_a_finding(killed, tmp_path):
    slot = _finished_slot(killed)
    dataset = f"resume/slot{slot}/optim/W_E/exp_avg"
    a, _ = _chunk(killed, dataset, (0, 0))
    bad = tmp_path / "resume.h5"
    _scribble(killed, bad, a + 4096)
    res = _validate(bad)
    assert (res.returncode, res.stdout) == (1, f"{bad}: checksum mismatch in '{dataset}'\n")


def test_a_4k_scribble_over_the_metrics_names_every_dataset_it_hit(killed, tmp_path):
    a, _ = _chunk(killed, "snapshots/metrics/mem/acc", (5,))
    hit = [(name, at) for start, end, name, at in chunks_for(killed) if start < a + 4096 and end > a]
    covered = sum(min(end, a + 4096) - max(start, a) for start, end, _, _ in chunks_for(killed)
                  if start < a + 4096 and end > a)
    assert covered == 4096   # the 4 KiB fall on data chunks only: the finding is each dataset's
    bad = tmp_path / "metrics.h5"
    _scribble(killed, bad, a)
    role = _roles(killed)   # validate names a parameter by its canonical name, where it has one
    want = {f"{bad}: checksum mismatch in '{role.get(name, name)}' (snapshot at step {_step(killed, at[0])})"
            for name, at in hit}
    assert "snapshots/metrics/rsn_test/acc" in {name for name, _ in hit} and len(want) >= 5
    res = _validate(bad)
    assert res.returncode == 1 and set(res.stdout.splitlines()) == want, res.stdout


def test_damage_past_the_committed_snapshots_is_ignored(tiny_run, tmp_path):
    """Rows past len(step) are an unfinished snapshot (a killed writer's): no reader reads them, and
    validate does not hold them to their checksums."""
    path = tmp_path / "unfinished.h5"
    shutil.copy(tiny_run, path)
    with h5py.File(path, "a") as f:
        n = f["snapshots/step"].shape[0]
        f[W_E].resize(n + 1, axis=0)
        f[W_E][n] = f[W_E][n - 1]
    a, _ = _chunk(path, W_E, (n, 0, 0))
    bad = tmp_path / "bad.h5"
    _scribble(path, bad, a + 4096)
    res = _validate(bad)
    assert (res.returncode, res.stdout) == (0, f"{bad}: valid\n")
    res = run_cli("probe", "similarity", bad, "--step", "all", "--format", "json")
    assert res.returncode == 0, res.stderr


def test_a_dataset_of_a_checksummed_file_without_a_checksum_is_a_finding_and_refused(tiny_run, tmp_path):
    path = tmp_path / "nosum.h5"
    shutil.copy(tiny_run, path)
    with h5py.File(path, "a") as f:
        ps = f["run/label_dist"][...]
        del f["run/label_dist"]
        f["run/label_dist"] = ps   # contiguous, as before schema 1.4
    finding = ("'run/label_dist' carries no checksum (from schema 1.4 every dataset that holds data carries one; "
               "one added by hand needs h5py's fletcher32=True)")
    res = _validate(path)
    assert (res.returncode, res.stdout) == (1, f"{path}: {finding}\n")
    res = run_cli("probe", "theory", path)
    assert (res.returncode, res.stderr) == (2, f"Error: {path}: {finding}\n")


# --- readers: one line naming the file, the dataset and the snapshot -------------------------------

@pytest.mark.parametrize("command", [["similarity", "--step", "all"], ["rank", "--step", "all"],
                                     ["pca", "--step", "all"]])
def test_a_probe_reading_a_damaged_chunk_ends_in_one_line_naming_it(tiny_run, tmp_path, command):
    bad = tmp_path / "w.h5"
    step = _weight_scribbled(tiny_run, bad)
    res = run_cli("probe", command[0], bad, *command[1:])
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == f"Error: {bad}: damaged HDF5 file: checksum mismatch in '{EMB}' (snapshot at step {step})\n"


def test_info_reading_damaged_metrics_ends_in_one_line_naming_them(killed, tmp_path):
    n = 5
    a, b = _chunk(killed, "snapshots/metrics/mem/acc", (n,))
    bad = tmp_path / "metrics.h5"
    _scribble(killed, bad, a, nbytes=b - a - 4)   # its 8 bytes of data, not its checksum: only this chunk
    res = run_cli("probe", "info", bad)
    assert res.returncode == 2 and res.stderr == (f"Error: {bad}: damaged HDF5 file: checksum mismatch in "
                                                  f"'snapshots/metrics/mem/acc' (snapshot at step {_step(killed, n)})\n")
    res = _validate(bad)
    assert (res.returncode, res.stdout) == (
        1, f"{bad}: checksum mismatch in 'snapshots/metrics/mem/acc' (snapshot at step {_step(killed, n)})\n")


def test_the_reader_api_names_the_damage_on_every_path(tiny_run, tmp_path):
    bad = tmp_path / "w.h5"
    step = _weight_scribbled(tiny_run, bad)
    msg = f"{bad}: damaged HDF5 file: checksum mismatch in '{EMB}' (snapshot at step {step})"
    with Run(bad) as run:
        n = run.n_snapshots
        assert run.read("token_embedding", 2).shape == (201, 16)   # the snapshots around it read
        for read in (lambda: run.read("token_embedding", 3), lambda: run.read("token_embedding", 3, rows=[5, 7]),
                     lambda: run.read_many("token_embedding", range(n)), lambda: np.asarray(run.tensor("token_embedding"))):
            with pytest.raises(ProbeError) as err:
                read()
            assert str(err.value) == msg
        with pytest.raises(ProbeError) as err:   # the same data by its parameter name
            run.read("W_E", 3)
        assert str(err.value) == f"{bad}: damaged HDF5 file: checksum mismatch in '{W_E}' (snapshot at step {step})"


def test_a_damaged_step_is_refused_when_the_file_opens(tiny_run, tmp_path):
    a, b = _chunk(tiny_run, "snapshots/step", (4,))
    bad = tmp_path / "step.h5"
    _scribble(tiny_run, bad, a, nbytes=b - a - 4)
    with pytest.raises(ProbeError) as err:
        Run(bad)
    assert str(err.value) == f"{bad}: damaged HDF5 file: checksum mismatch in 'snapshots/step'"
    res = _validate(bad)
    assert (res.returncode, res.stdout) == (1, f"{bad}: checksum mismatch in 'snapshots/step' (snapshot 4)\n")


def test_a_resume_of_a_damaged_run_is_refused_and_leaves_it_unchanged(killed, tmp_path):
    bad = tmp_path / "w.h5"
    step = _weight_scribbled(killed, bad)
    before = _sha(bad)
    res = run_cli("probe-train", "--resume", "--out", bad, "--quiet")
    assert res.returncode == 2
    assert res.stderr == f"Error: {bad}: damaged HDF5 file: checksum mismatch in '{W_E}' (snapshot at step {step})\n"
    assert _sha(bad) == before and list(tmp_path.glob(".w.h5.*.new")) == []   # (no half-made copy either)


# --- files written before checksums --------------------------------------------------------------------

def test_an_old_file_without_checksums_reads_and_validate_notes_it(tiny_run, tmp_path):
    old = tmp_path / "old.h5"
    _without_checksums(tiny_run, old)
    res = _validate(old)
    assert (res.returncode, res.stdout) == (0, f"{old}: valid\n{old}: {NOTE}\n")
    new = run_cli("probe", "rank", tiny_run, "--step", "all", "--format", "json")
    res = run_cli("probe", "rank", old, "--step", "all", "--format", "json")
    assert res.returncode == 0 and json.loads(res.stdout)["results"] == json.loads(new.stdout)["results"]
    assert run_cli("probe", "info", old).returncode == 0


def test_an_old_files_note_in_json_and_csv(tiny_run, tmp_path):
    old = tmp_path / "old.h5"
    _without_checksums(tiny_run, old)
    res = _validate(old, "--format", "json")
    assert (res.returncode, json.loads(res.stdout)) == (
        0, {"file": str(old), "valid": True, "findings": [], "notes": [NOTE[len("note: "):]]})
    res = _validate(old, "--format", "csv")
    assert (res.returncode, res.stdout.splitlines()) == (
        0, ["step,metric,key,value", f',note,{old},"{NOTE[len("note: "):]}"'])


def test_an_old_killed_run_resumes_in_its_own_schema(killed, tmp_path):
    old = tmp_path / "old.h5"
    _without_checksums(killed, old)
    res = run_cli("probe-train", "--resume", "--out", old, "--quiet", "--steps", _step(killed, -1) + 40)
    assert res.returncode == 0, res.stderr
    with h5py.File(old, "r") as f:
        assert f.attrs["schema_version"] == "1.3" and not f[W_E].fletcher32
    res = _validate(old)
    assert (res.returncode, res.stdout) == (0, f"{old}: valid\n{old}: {NOTE}\n")


def test_damage_to_an_old_file_goes_unseen_as_its_note_says(tiny_run, tmp_path):
    old = tmp_path / "old.h5"
    _without_checksums(tiny_run, old)
    with h5py.File(old, "r") as f:
        a = f[W_E].id.get_chunk_info_by_coord((3, 0, 0)).byte_offset
    bad = tmp_path / "bad.h5"
    _scribble(old, bad, a + 4096)
    res = _validate(bad)
    assert (res.returncode, res.stdout) == (0, f"{bad}: valid\n{bad}: {NOTE}\n")


# --- declared sizes ------------------------------------------------------------------------------------

GIB = 1 << 30


def _limited():
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 * GIB, 3 * GIB))


def _huge(src, dst, edit) -> None:
    shutil.copy(src, dst)
    with h5py.File(dst, "a") as f:
        dims = json.loads(f.attrs["dims"])
        dims["vocab"] = 10 ** 9
        f.attrs["dims"] = json.dumps(dims)
        edit(f)


def _sparse(f, path, shape, chunks, dtype="f8"):
    """``path`` replaced by a dataset of ``shape`` with nothing written: a few bytes of header."""
    del f[path]
    f.create_dataset(path, shape=shape, chunks=chunks, dtype=dtype, fletcher32=True)


def test_declared_10e9_rows_are_findings_in_bounded_memory(tiny_run, tmp_path):
    """P^s (10^9 x 10^9 float64), a token group of 10^9 ids and 10^9 steps declared, nothing behind
    them: validate (its address space held to 3 GiB) lists each, reading none of it."""
    big = tmp_path / "big.h5"
    n = 10 ** 9

    def edit(f):
        _sparse(f, "run/label_dist", (n, n), (1, 8192))
        _sparse(f, "run/token_groups/keys", (n,), (8192,), "i8")
        f["snapshots/step"].resize(n, axis=0)

    _huge(tiny_run, big, edit)
    res = run_cli("probe", "validate", big, real=True, preexec_fn=_limited, timeout=120)
    assert (res.returncode, res.stderr) == (1, "")
    never = "; the rest was never written"
    assert res.stdout.splitlines() == [f"{big}: {x}" for x in [
        f"'{EMB}' axis 1 is 201, expected vocab={n}",
        f"'snapshots/weights/unembedding' axis 2 is 201, expected vocab={n}",
        f"'run/label_dist_empirical' axis 0 is 201, expected vocab={n}",
        f"'run/label_dist_empirical' axis 1 is 201, expected vocab={n}",
        f"'run/token_freq' axis 0 is 201, expected vocab={n}",
        f"'snapshots/step' holds data in 9 of the {n} chunks of its shape ({n},){never}",   # its 9 snapshots
        f"'run/label_dist' holds data in 0 of the {n * 122071} chunks of its shape ({n}, {n}){never}",
        f"'run/token_groups/keys' holds data in 0 of the 122071 chunks of its shape ({n},){never}"]]


def test_a_consistently_declared_10e9_vocabulary_is_a_finding_in_bounded_memory(tiny_run, tmp_path):
    """The token embedding declared 10^9 rows wide at every snapshot, as the dims say, with only its
    201 real rows written: one finding, no read of a declared size."""
    big = tmp_path / "vocab.h5"
    n = 10 ** 9

    def edit(f):
        old = f[W_E][...]
        del f[EMB], f[W_E]
        emb = f.create_dataset(W_E, shape=(len(old), n, 16), maxshape=(None, n, 16), chunks=(1, 4096, 16),
                               dtype="f4", fletcher32=True)
        emb[:, :201] = old
        f[EMB] = emb
        for name in ("run/label_dist", "run/label_dist_empirical"):
            _sparse(f, name, (n, n), (1, 8192))
        _sparse(f, "run/token_freq", (n,), (8192,))

    _huge(tiny_run, big, edit)
    res = run_cli("probe", "validate", big, real=True, preexec_fn=_limited, timeout=120)
    assert (res.returncode, res.stderr) == (1, "")
    never = "; the rest was never written"
    assert res.stdout.splitlines() == [f"{big}: {x}" for x in [
        f"'snapshots/weights/unembedding' axis 2 is 201, expected vocab={n}",   # (not made consistent here)
        f"'run/label_dist' holds data in 0 of the {n * 122071} chunks of its shape ({n}, {n}){never}",
        f"'run/label_dist_empirical' holds data in 0 of the {n * 122071} chunks of its shape ({n}, {n}){never}",
        f"'run/token_freq' holds data in 0 of the 122071 chunks of its shape ({n},){never}",
        f"'{EMB}' holds data in 9 of the {9 * 244141} chunks of its shape (9, {n}, 16){never}"]]


def test_a_damaged_scalar_is_caught_by_its_object_headers_checksum(killed, tmp_path):
    """The optimizer's step count of a parameter is a scalar, stored inside its object header (compact),
    which HDF5 checksums: a changed byte of it is a finding of validate, and a resume refuses the file."""
    slot = _finished_slot(killed)
    dataset = f"resume/slot{slot}/optim/W_E/step"
    with _open(killed) as f:
        ds = f[dataset]
        value, header = ds[()].tobytes(), h5py.h5o.get_info(ds.id).addr
    with open(killed, "rb") as fh:
        fh.seek(header)
        at = header + fh.read(1024).index(value)   # its 4 bytes, inside the header
    bad = tmp_path / "scalar.h5"
    _scribble(killed, bad, at, nbytes=4, seed=1)
    res = _validate(bad)
    assert (res.returncode, res.stdout) == (1, f"{bad}: checksum mismatch in '{dataset}'\n")
    before = _sha(bad)
    res = run_cli("probe-train", "--resume", "--out", bad, "--quiet")
    assert (res.returncode, res.stderr) == (2, f"Error: {bad}: damaged HDF5 file: checksum mismatch in '{dataset}'\n")
    assert _sha(bad) == before


def test_a_reader_of_a_killed_run_reads_each_snapshots_own_data(killed):
    """Under SWMR a reader refreshes each dataset before it reads it, and HDF5 refreshing a dataset
    that two ids hold makes both read the wrong chunks (the last one read, checksum and all): a Run
    holds one id per dataset, whatever asks for it and by whichever name."""
    with _open(killed) as f:   # each snapshot read on its own id, never refreshed: the truth
        truth = [f[W_E][i] for i in range(f["snapshots/step"].shape[0])]
        steps = f["snapshots/step"][...]
    with Run(killed) as run:
        assert run.h5.swmr_mode
        emb = run.tensor("token_embedding")
        emb[3]
        run.tensors(), run.weights(), run.weight_matrices(), run.check_all(resume_slots=True)
        for i in (8, len(truth) - 1):
            np.testing.assert_array_equal(emb[i], truth[i])
            np.testing.assert_array_equal(run.read("W_E", i), truth[i])
            np.testing.assert_array_equal(run.read_many("token_embedding", [i])[0], truth[i])
        np.testing.assert_array_equal(run.steps, steps)
