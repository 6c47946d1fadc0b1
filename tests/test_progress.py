"""Progress from inside tasks (``jsmf_dask._progress``): channels kept apart on one client."""

from __future__ import annotations

import time

import dask
import pytest

from jsmf_dask import _progress
from jsmf_dask.cluster import connect


def _emit(channel: str, value: int) -> int:
    _progress.report(channel, {"value": value})
    return value


def _wait_for(predicate, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.mark.slow
def test_two_channels_listening_through_one_client_each_get_only_their_own_messages():
    """Two fits from one driver: the inner one ending must not cut the outer one's progress."""
    outer, inner = [], []
    with connect(n_workers=1, dashboard=False):
        with _progress.listen("outer", outer.append):
            with _progress.listen("inner", inner.append):
                dask.compute(dask.delayed(_emit)("outer", 1), dask.delayed(_emit)("inner", 2))
                _wait_for(lambda: outer and inner)
            dask.compute(dask.delayed(_emit)("outer", 3, dask_key_name="emit-after-inner-closed"))
            _wait_for(lambda: len(outer) == 2)
        assert [m["value"] for m in outer] == [1, 3]  # (distributed adds the sending worker's address)
        assert [m["value"] for m in inner] == [2]
        assert not _progress._subscriptions  # the last channel out dropped the client's subscription


def test_without_a_cluster_the_listener_is_called_in_process():
    got = []
    with dask.config.set(scheduler="synchronous"), _progress.listen("here", got.append):
        dask.compute(dask.delayed(_emit)("here", 5), dask.delayed(_emit)("elsewhere", 6))
    assert got == [{"value": 5}]


def test_the_local_progress_bar_draws_and_lets_the_computation_return_at_once():
    """The bar's drawing thread must not hold the computation's return for its redraw interval: with a redraw
    interval of 10 minutes, a computation that takes milliseconds returns (dask's own bar would sleep those 10
    minutes first), and the bar is drawn complete."""
    import io
    import threading

    out = io.StringIO()
    done = threading.Event()

    def run():
        with _progress._ProgressBar(minimum=0, dt=600, out=out):
            assert dask.compute(dask.delayed(sum)([1, 2, 3]), scheduler="threads") == (6,)
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert done.wait(timeout=60), "the computation waited for the bar's redraw interval"
    assert "100% Completed" in out.getvalue()
