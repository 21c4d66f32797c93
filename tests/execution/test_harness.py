"""The slot pool: items in order, and an interrupt that does not run the queue first."""

import threading

import pytest

from bayespass.execution.harness import SlotPool


def test_results_come_back_in_item_order_whatever_finishes_first():
    with SlotPool(2) as pool:
        out = pool.map(lambda sb, x: x * x, range(20))
    assert out == [x * x for x in range(20)]


def test_an_interrupt_cancels_the_programs_not_yet_started():
    # Ctrl-C in `bayespass execute` used to run every queued program (5 minutes of a real MBPP config)
    # before it stopped, and threw their results away; only the ones in flight may finish now
    ran, first_done = [], threading.Event()

    def fn(sb, x):
        if x:
            first_done.wait(30)
        ran.append(x)
        return x

    def on_done(item, res):
        first_done.set()
        raise KeyboardInterrupt

    with SlotPool(2) as pool, pytest.raises(KeyboardInterrupt):
        pool.map(fn, range(200), on_done=on_done)
    assert 1 <= len(ran) <= 1 + pool.workers, ran
