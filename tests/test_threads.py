"""bayespass._threads.thread_map: its pool is kept between calls, and nested or forked calls still finish."""

import os
import subprocess
import sys
import textwrap
import threading

from bayespass._threads import thread_map


def test_results_keep_their_order_and_the_threads_are_kept():
    names = set()

    def f(x):
        names.add(threading.current_thread().name)
        return x * x

    assert thread_map(f, range(50), workers=2) == [x * x for x in range(50)]
    before = {t.ident for t in threading.enumerate()}
    assert thread_map(f, range(50), workers=2) == [x * x for x in range(50)]
    assert {t.ident for t in threading.enumerate()} == before  # no thread started or ended by the second call
    assert all(n.startswith("bayespass") for n in names)


def test_nested_and_forked_calls_finish():
    # in a child process, so that a deadlock fails the test by its timeout instead of hanging the suite
    code = textwrap.dedent("""
        import os, threading
        from bayespass._threads import thread_map
        gate = threading.Barrier(2)
        def outer(x):  # both workers busy until both arrive: a nested call on the same pool would wait forever
            gate.wait(timeout=60)
            return sum(thread_map(lambda y: y + x, range(4), workers=2))
        assert thread_map(outer, [0, 1], workers=2) == [6, 10]
        pid = os.fork()
        if pid == 0:  # the child has the parent's pool object but none of its threads
            os._exit(0 if thread_map(lambda y: 2 * y, range(6), workers=2) == [0, 2, 4, 6, 8, 10] else 1)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=os.environ | {"OPENBLAS_NUM_THREADS": "1"})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
