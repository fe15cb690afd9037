"""Hub checkpoints online, against a hub on 127.0.0.1 (tests/hubserver.py) that speaks the hub's HTTP
API: refs listed for --revisions all, config and tokenizer downloaded into the cache, safetensors
weights read by byte ranges (only the tensors a probe needs), and a hub without ranges downloading
the file once. Nothing reaches the network: HF_ENDPOINT points at the local server."""
from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pytest

from conftest import run_cli
from hubserver import HubServer
from test_hub import REPO, REVISIONS, _tiny_gpt2


@pytest.fixture(scope="module")
def revisions(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("hub-src")
    folders = {}
    for rev, scale in REVISIONS.items():
        _tiny_gpt2(root / rev, scale)
        folders[rev] = str(root / rev)
    return folders


def _env(url: str, cache: Path) -> dict:
    env = {**os.environ, "HF_ENDPOINT": url, "HF_HUB_CACHE": str(cache), "HF_HOME": str(cache.parent / "home"),
           "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_ETAG_TIMEOUT": "5", "HF_HUB_DOWNLOAD_TIMEOUT": "10"}
    env.pop("HF_HUB_OFFLINE", None)
    return env


def _rows(res) -> list[dict]:
    assert res.returncode == 0, res.stderr
    return list(csv.DictReader(io.StringIO(res.stdout)))


def test_revisions_all_lists_the_refs_and_reads_only_the_embedding(revisions, tmp_path):
    with HubServer({REPO: revisions}) as hub:
        res = run_cli("probe", "batch", f"hf:{REPO}", "--revisions", "all", "-p", "similarity", "--tokens", "0:12",
                      "--format", "csv", env=_env(hub.url, tmp_path / "cache"))
        rows = _rows(res)
        weights = hub.served("model.safetensors")
    assert not [r for r in rows if r["metric"] == "error"], rows[:3]
    mean = {r["path"]: (int(r["step"]), float(r["value"])) for r in rows if r["metric"] == "mean_offdiag"}
    assert set(mean) == {f"hf:{REPO}@{r}" for r in REVISIONS}          # every ref the hub listed
    assert mean[f"hf:{REPO}@step1000"][0] == 1000 and mean[f"hf:{REPO}@step2000"][0] == 2000
    assert mean[f"hf:{REPO}@step1000"][1] < mean[f"hf:{REPO}@step2000"][1] < mean[f"hf:{REPO}@main"][1]
    # the weights: range requests only, never the whole file, and far fewer bytes than it holds
    assert weights and all(method == "GET" and rng and rng.startswith("bytes=") for method, rng in weights)
    size = os.path.getsize(os.path.join(revisions["main"], "model.safetensors"))
    per_rev = sum(int(b) - int(a) + 1 for _, r in weights for a, b in [r[len("bytes="):].split("-")]) / len(REVISIONS)
    assert per_rev < size / 4, (per_rev, size)
    # nothing of the weights was stored; config and tokenizer-side files were
    blobs = [p for p in (tmp_path / "cache").rglob("*") if p.is_file() and p.name == "model.safetensors"]
    assert blobs == [] and list((tmp_path / "cache").rglob("config.json"))


def test_same_numbers_over_http_as_from_the_files(revisions, tmp_path):
    args = ["similarity", "--tokens", "0:12", "-f", "json"]
    local = run_cli("probe", args[0], revisions["step2000"], *args[1:])
    with HubServer({REPO: revisions}) as hub:
        remote = run_cli("probe", args[0], f"hf:{REPO}@step2000", *args[1:], env=_env(hub.url, tmp_path / "c"))
        spectrum = run_cli("probe", "spectrum", f"hf:{REPO}@step2000", "-f", "json", env=_env(hub.url, tmp_path / "c"))
    assert local.returncode == 0 and remote.returncode == 0, remote.stderr
    a, b = json.loads(local.stdout)["results"][0], json.loads(remote.stdout)["results"][0]
    assert a == b                                       # the same bytes, the same numbers
    assert spectrum.returncode == 0 and json.loads(spectrum.stdout)["results"], spectrum.stderr


def test_a_hub_without_ranges_gets_the_file_downloaded_once(revisions, tmp_path):
    cache = tmp_path / "cache"
    with HubServer({REPO: revisions}, ranges=False) as hub:
        res = run_cli("probe", "similarity", f"hf:{REPO}@step1000", "--tokens", "0:12", env=_env(hub.url, cache))
        first = list(hub.served("model.safetensors"))
        again = run_cli("probe", "similarity", f"hf:{REPO}@step1000", "--tokens", "0:12", env=_env(hub.url, cache))
        second = hub.served("model.safetensors")[len(first):]
    assert res.returncode == 0 and again.returncode == 0, (res.stderr, again.stderr)
    assert res.stdout == again.stdout
    assert [m for m, _ in first].count("GET") <= 2          # a refused range, then one download
    assert second == []                                      # the second call reads the cache
    assert list(cache.rglob("model.safetensors"))


@pytest.mark.parametrize("spec, message", [
    (f"hf:{REPO}@step9999", "has no revision 'step9999'"),
    ("hf:nobody/nothing", "no such repository"),
])
def test_bad_hub_names_are_one_line(revisions, tmp_path, spec, message):
    with HubServer({REPO: revisions}) as hub:
        res = run_cli("probe", "similarity", spec, env=_env(hub.url, tmp_path / "c"))
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("Error:") and message in lines[0], \
        res.stderr


def test_offline_after_range_reads_says_how_to_keep_the_weights(revisions, tmp_path):
    cache = tmp_path / "cache"
    with HubServer({REPO: revisions}) as hub:
        ok = run_cli("probe", "similarity", f"hf:{REPO}@step1000", "--tokens", "0:8", env=_env(hub.url, cache))
        assert ok.returncode == 0, ok.stderr
    res = run_cli("probe", "similarity", f"hf:{REPO}@step1000", "--tokens", "0:8", env={**_env("http://127.0.0.1:9", cache),
                                                                       "HF_HUB_OFFLINE": "1"})
    lines = res.stderr.strip().splitlines()
    from probe.readers.hub import cli_command      # hf download, or huggingface-cli download before hub 0.34

    assert res.returncode == 2 and len(lines) == 1 and cli_command("download", REPO) in lines[0], res.stderr
