"""The one job runner (probe.jobs): results and failures come back as each job ends, a process that dies is
an Ended, and a stop or an error in the caller's loop leaves no process behind. Forked processes (fast);
batch's and the trainers' own paths: test_batch.py, test_faults_workers.py, test_signals.py."""
import multiprocessing
import os
import signal
from contextlib import closing

import pytest

from probe.jobs import Ended, run
from probe.signals import ask_stop, stop_asked, stoppable

FORK = multiprocessing.get_context("fork")


def _job(x):
    if x == "fail":
        raise ValueError("no")
    if x == "die":
        os._exit(3)
    if x == "hang":   # until it is stopped; with a grace a job hears the stop signals once it unblocks them
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
        signal.pause()
    return x * 2


@pytest.mark.parametrize("reuse", [False, True], ids=["a-process-each", "reused-workers"])
def test_results_failures_and_deaths_come_back_each_once(reuse):
    with closing(run(_job, [1, "fail", 2, "die", 3], at_once=2, context=FORK, reuse=reuse)) as ends:
        got = {item: (result, exc) for item, result, exc in ends}
    assert {k: v[0] for k, v in got.items() if k in (1, 2, 3)} == {1: 2, 2: 4, 3: 6}
    assert isinstance(got["fail"][1], ValueError) and str(got["fail"][1]) == "no"
    assert isinstance(got["die"][1], Ended) and got["die"][1].exitcode == 3
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize("grace, code", [(0.0, -signal.SIGKILL), (30.0, -signal.SIGTERM)], ids=["kill", "terminate"])
def test_an_error_in_the_callers_loop_stops_the_running_ones(grace, code):
    with pytest.raises(RuntimeError), closing(run(_job, ["hang", "hang", 1], at_once=3, context=FORK,
                                                  grace=grace)) as ends:
        for _ in ends:
            running = multiprocessing.active_children()
            raise RuntimeError("the caller's")
    assert len(running) == 2 and [p.exitcode for p in running] == [code, code]
    assert multiprocessing.active_children() == []


def test_a_stop_ends_the_run_and_its_jobs():
    ends_seen = []
    with stoppable(), closing(run(_job, ["hang", 1, "hang"], at_once=3, context=FORK, reuse=True)) as ends:
        for item, _, _ in ends:
            ends_seen.append(item)
            ask_stop()
        assert stop_asked()
    assert ends_seen == [1]
    assert multiprocessing.active_children() == []


def test_prepare_gives_what_the_job_gets_and_none_leaves_an_item_out():
    with closing(run(_job, [1, 2, 3], context=FORK, prepare=lambda x: None if x == 2 else x + 10)) as ends:
        assert sorted((item, result) for item, result, _ in ends) == [(1, 22), (3, 26)]
