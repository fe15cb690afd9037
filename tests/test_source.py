"""One source protocol (issue 49): a snapshot file's Run and an external checkpoint's CheckpointRun are
both a probe.source.Source, and the same probe functions read the same numbers through either."""
import json

import numpy as np
import pytest

import probe
from probe.api import TokenRows, select_tokens
from probe.errors import ProbeError
from probe.format import Run
from probe.readers.source import CheckpointRun, open_source
from probe.source import Source


@pytest.fixture(scope="module")
def exported(tiny_run, tmp_path_factory):
    """The tiny run's latest weights as a safetensors checkpoint folder of this toolkit's own layout."""
    from safetensors.numpy import save_file

    folder = tmp_path_factory.mktemp("exported")
    with Run(tiny_run) as run:
        last = run.step_indices("latest")[0]
        save_file({n: np.ascontiguousarray(run.read(n, last)) for n in run.weights()},
                  str(folder / "model.safetensors"))
        (folder / "config.json").write_text(json.dumps({"layout": "gamma-probe", "dims": run.dims}))
        step = int(run.steps[last])
    return folder, step


def test_a_run_and_a_checkpoint_are_both_a_source(tiny_run, exported):
    folder, step = exported
    with open_source(tiny_run) as run, open_source(folder) as ckpt:
        assert isinstance(run, Run) and isinstance(ckpt, CheckpointRun)
        assert isinstance(run, Source) and isinstance(ckpt, Source)
        assert run.provenance["written_by"] == "probe-train" and ckpt.provenance["layout"] == "gamma-probe"
        assert run.stores_activations and not ckpt.stores_activations
        assert run.step_of(run.step_indices("latest")[0]) == step and ckpt.step_of(0) is None
        assert run.label("layer0/W_V") == ckpt.label("layer0/W_V") == "layer0/W_V"
        assert set(ckpt.matrices()) <= set(run.matrices())
        # the same selection and rows through either
        ids, _ = select_tokens(run, "0:8")
        assert list(select_tokens(ckpt, "0:8")[0]) == list(ids)
        a = TokenRows(run, "0:8", None, None, "token_embedding", "latest", False, "similarity", 2, "the test")
        b = TokenRows(ckpt, "0:8", None, None, "token_embedding", "latest", False, "similarity", 2, "the test")
        np.testing.assert_array_equal(a.vectors[0], b.vectors[0])
        assert a.texts.get() == b.texts.get() is None       # a synthetic task: no vocabulary either way
        # where a kind cannot answer, its own method says so
        assert run.forward(None, "norms", "latest", window=8, max_tokens=64) is None
        with pytest.raises(ProbeError, match="needs activations"):
            ckpt.forward(None, "norms", "latest", window=8, max_tokens=64)


def test_the_same_probe_functions_read_the_same_numbers_through_both(tiny_run, exported):
    folder, _ = exported
    for name, fn in (("similarity", lambda p: probe.similarity(p, "0:8")), ("rank", probe.rank)):
        got, want = fn(folder)[0].summary(), fn(tiny_run)[0].summary()
        assert got.keys() == want.keys()
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-6, err_msg=f"{name}: {k}")
    a, b = probe.spectrum(tiny_run)[0].layers, probe.spectrum(folder)[0].layers
    by_name = {layer.name: layer for layer in a}
    assert b and all(layer.name in by_name for layer in b)          # a checkpoint's 2-D tensors, by name
    for layer in b:
        assert layer.alpha == pytest.approx(by_name[layer.name].alpha, rel=1e-6)
