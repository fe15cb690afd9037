"""Broken inputs the bad-input tests share, and how they check that nothing changed.

``broken_snapshots(folder, good)`` writes the damaged copies of a good run file that several test
files feed to the CLI; ``digest(folder)`` fingerprints a folder (every regular file's sha256, the kind
of anything else: a FIFO is never opened) to show a refused command wrote or changed nothing;
``assert_clean_error`` is the bar every refusal meets.
"""
import hashlib
import os
import shutil
import stat

import h5py


def digest(folder) -> dict:
    """sha256 of every regular file under ``folder``; the kind of anything else; folders as ``name/``."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in files:
            p = os.path.join(root, name)
            mode = os.lstat(p).st_mode
            with open(p, "rb") if stat.S_ISREG(mode) else open(os.devnull, "rb") as fh:
                out[os.path.relpath(p, folder)] = (hashlib.sha256(fh.read()).hexdigest() if stat.S_ISREG(mode)
                                                   else stat.S_IFMT(mode))
        out.update({os.path.relpath(os.path.join(root, d), folder) + "/": "dir" for d in dirs})
    return out


def broken_snapshots(folder, good) -> None:
    """Beside ``good`` (a run file in ``folder``): ``notes.txt`` (not HDF5), ``truncated.h5`` (its first
    third), ``corrupt.h5`` (the root group's metadata overwritten), ``newer.h5`` (schema 99.0) and
    ``missing.h5`` (no token embedding)."""
    (folder / "notes.txt").write_text("not hdf5\n")
    data = good.read_bytes()
    (folder / "truncated.h5").write_bytes(data[: len(data) // 3])
    corrupt = bytearray(data)
    corrupt[48:4096] = b"\xff" * (4096 - 48)  # wreck the root group's metadata after the superblock
    (folder / "corrupt.h5").write_bytes(bytes(corrupt))
    shutil.copy(good, folder / "newer.h5")
    with h5py.File(folder / "newer.h5", "a") as f:
        f.attrs["schema_version"] = "99.0"
    shutil.copy(good, folder / "missing.h5")
    with h5py.File(folder / "missing.h5", "a") as f:
        del f["snapshots/weights/token_embedding"]
        del f["snapshots/params/W_E"]


def assert_clean_error(res, *fragments) -> None:
    """Exit 2, one ``Error:`` line on stderr holding each fragment, no traceback."""
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.stderr
    assert "Traceback" not in res.stderr
    for frag in fragments:
        assert frag in lines[0], lines[0]
