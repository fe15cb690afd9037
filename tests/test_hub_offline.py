"""Hub sources with no network, without a network: HF_ENDPOINT points at a host name that cannot
resolve (.invalid, RFC 2606), at a closed port on 127.0.0.1 (connection refused), and at a socket on
127.0.0.1 that accepts connections and never answers. Each is said in one line, naming what failed
and the installed hub CLI's command that stores a revision for offline work, at once or within the
hub library's timeout for metadata requests (HF_HUB_ETAG_TIMEOUT; before, the hub library's retries
took 24 s). The time is the wall clock of the whole process, start-up on a busy machine included: it
only has to stay far below the 24 s of retries."""
from __future__ import annotations

import errno
import os
import shutil
import socket
import sys
import time
from pathlib import Path

import pytest

from conftest import popen_cli, run_cli

WALL_LIMIT = 10.0          # the whole process, start-up on a busy machine included (retries took 24 s)


def _env(endpoint: str, home: Path, **extra) -> dict:
    env = {**os.environ, "HF_ENDPOINT": endpoint, "HF_HOME": str(home), "HF_HUB_CACHE": str(home / "hub"),
           "HF_HUB_DISABLE_TELEMETRY": "1", **extra}
    env.pop("HF_HUB_OFFLINE", None)
    if "HF_HUB_ETAG_TIMEOUT" not in extra:
        env.pop("HF_HUB_ETAG_TIMEOUT", None)
    return env


def _store(repo: str, rev: str | None = None) -> str:
    from probe.readers.hub import cli_command

    return cli_command("download", repo, *(("--revision", rev) if rev else ()))


def _timed(args, env) -> tuple[float, str]:
    """(wall seconds, the Error line) of one call."""
    start = time.monotonic()
    proc = popen_cli("probe", *args, env=env)
    out, err = proc.communicate(timeout=120)
    wall = time.monotonic() - start
    assert proc.returncode == 2, (proc.returncode, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    return wall, lines[0]


@pytest.fixture
def refused_port() -> int:
    """A port on 127.0.0.1 with nothing listening: bound, then closed."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def silent_server():
    """A listening socket that never accepts: the kernel completes the handshake, no byte comes back."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    yield f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()


def test_no_name_lookup_is_no_network_in_one_line(tmp_path):
    res = run_cli("probe", "similarity", "hf:gpt2@main", env=_env("http://nonexistent.invalid", tmp_path))
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert lines[0] == ("Error: hf:gpt2@main: no network: cannot reach http://nonexistent.invalid (name lookup "
                        f"failed); to work offline, store the files with `{_store('gpt2', 'main')}` and set "
                        "HF_HUB_OFFLINE=1"), lines[0]
    assert "refused" not in lines[0]
    assert not (tmp_path / "hub").exists() or not any((tmp_path / "hub").rglob("*"))   # nothing written


@pytest.mark.parametrize("case", ["name lookup", "refused", "silent"])
def test_each_way_of_missing_the_hub_is_said_within_the_deadline(case, tmp_path, refused_port, silent_server):
    endpoint = {"name lookup": "http://nonexistent.invalid", "refused": f"http://127.0.0.1:{refused_port}",
                "silent": silent_server}[case]
    wall, line = _timed(["similarity", "hf:toy/tiny@step1000"], _env(endpoint, tmp_path, HF_HUB_ETAG_TIMEOUT="1"))
    why = {"name lookup": "no network: cannot reach http://nonexistent.invalid (name lookup failed)",
           "refused": f"cannot reach {endpoint} (connection refused)",
           "silent": f"cannot reach {endpoint} (no answer within 1 s)"}[case]
    assert line.startswith(f"Error: hf:toy/tiny@step1000: {why}; "), line
    assert f"`{_store('toy/tiny', 'step1000')}` and set HF_HUB_OFFLINE=1" in line, line
    assert wall < WALL_LIMIT, wall


def test_revisions_all_and_batch_say_it_too(tmp_path, refused_port):
    env = _env(f"http://127.0.0.1:{refused_port}", tmp_path)
    res = run_cli("probe", "batch", "hf:toy/tiny", "--revisions", "all", "-p", "similarity", env=env)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert "cannot reach" in lines[0] and "(connection refused)" in lines[0] and _store("toy/tiny") in lines[0]


def test_the_deadline_is_the_hub_librarys_own(tmp_path, silent_server):
    # HF_HUB_ETAG_TIMEOUT (whole seconds, 10 by default): huggingface_hub's timeout for metadata requests
    wall, line = _timed(["similarity", "hf:toy/tiny"], _env(silent_server, tmp_path, HF_HUB_ETAG_TIMEOUT="3"))
    assert "(no answer within 3 s)" in line and 3.0 <= wall < 3.0 + WALL_LIMIT, (wall, line)


@pytest.mark.parametrize("value", ["soon", "1.5"])
def test_a_bad_deadline_is_one_line(tmp_path, value):
    res = run_cli("probe", "similarity", "hf:toy/tiny", env=_env("http://nonexistent.invalid", tmp_path,
                                                                  HF_HUB_ETAG_TIMEOUT=value))
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and "HF_HUB_ETAG_TIMEOUT" in lines[0], res.stderr


def test_offline_mode_skips_the_check_and_names_the_installed_cli(tmp_path):
    # HF_HUB_OFFLINE=1 reads the cache only: no check of the (unreachable) endpoint, the cache's message
    step_free = run_cli("probe", "similarity", "hf:toy/tiny@step1000",
                        env={**_env("http://nonexistent.invalid", tmp_path), "HF_HUB_OFFLINE": "1"})
    lines = step_free.stderr.strip().splitlines()
    assert step_free.returncode == 2 and len(lines) == 1, step_free.stderr
    assert "not in the hub cache" in lines[0] and f"`{_store('toy/tiny', 'step1000')}` stores them" in lines[0]
    assert "cannot reach" not in lines[0]


def test_the_named_cli_is_the_installed_one():
    from probe.readers.hub import cli_command

    # the program the messages name is a console script of the installed huggingface_hub
    program = _store("gpt2").split()[0]
    assert shutil.which(program, path=str(Path(sys.executable).parent)) or shutil.which(program), program
    # hf from huggingface_hub 0.34 on (the only one from 1.0), huggingface-cli before
    assert cli_command("download", "a/b", "--revision", "r", scripts={"hf", "huggingface-cli"}) == \
        "hf download a/b --revision r"
    assert cli_command("download", "a/b", scripts={"huggingface-cli"}) == "huggingface-cli download a/b"
    assert cli_command("login", scripts={"hf"}) == "hf auth login"
    assert cli_command("login", scripts={"huggingface-cli"}) == "huggingface-cli login"


def test_readme_names_the_command_the_messages_name():
    readme = (Path(__file__).resolve().parents[1] / "docs" / "how-to" / "external-checkpoints.md").read_text()
    assert "`hf download ORG/NAME --revision REV`" in readme and "HF_HUB_OFFLINE=1" in readme


def test_what_counts_as_a_lost_connection(monkeypatch):
    """After the first request, an error of the hub library is 'lost the connection' only when it is
    one, in the forms of the socket, requests (huggingface_hub < 1.0) and httpx (>= 1.0); an HTTP
    answer, which requests makes an OSError too, is not."""
    from probe.readers import hub
    from probe.readers.hub import _explain, _unreachable

    # online, whatever an earlier test of this process left in huggingface_hub.constants
    monkeypatch.setattr(hub, "offline", lambda: False)

    class ConnectError(Exception): ...              # httpx's name
    class ReadTimeout(OSError): ...                  # requests' name (a RequestException is an OSError)
    class HTTPError(OSError): ...                    # requests' HTTP answer: not a lost connection

    wrapped = RuntimeError("while listing")
    wrapped.__cause__ = socket.gaierror(-2, "Name or service not known")
    for exc in (socket.gaierror(-2, "x"), ConnectionRefusedError(111, "refused"), TimeoutError(), ConnectError("x"),
                ReadTimeout("x"), wrapped):
        assert _unreachable(exc), exc
    for exc in (HTTPError("500 Server Error"), ValueError("x"), FileNotFoundError(2, "x")):
        assert _unreachable(exc) is None, exc
    assert _unreachable(OSError(errno.ENETUNREACH, "x")) == (True, "network is unreachable")   # no network
    msg = str(_explain("hf:toy/tiny@main", ConnectError("[Errno 111] Connection refused")))
    assert msg.startswith("hf:toy/tiny@main: lost the connection to ") and "HF_HUB_OFFLINE=1" in msg, msg
    assert str(_explain("hf:toy/tiny@main", HTTPError("500 Server Error"))).startswith(
        "hf:toy/tiny@main: the hub refused (HTTPError: 500 Server Error)")
