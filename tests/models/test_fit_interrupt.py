"""Interrupting the default fit: its forked workers end with it (Ctrl-C, ``kill -INT``, ``kill``).

The workers' sampling is replaced by a function that never returns, so what is checked does not depend
on how fast the machine is: before the fix a ``kill -INT`` of the fitting process never ended it (the
pool waited for its workers), and a ``kill`` left the workers running, orphaned.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers: Linux only")

EXAMPLE = Path(__file__).resolve().parents[2] / "data" / "examples" / "counts_small.csv"

SCRIPT = """
import os, sys, time
import bayespass as bp
import bayespass.models.fit as F

marks = sys.argv[1]

def stuck(*args, **kwargs):  # a candidate that never ends; says which process samples it
    open(os.path.join(marks, str(os.getpid())), "w").close()
    while True:
        time.sleep(1)

F._sample_by_name = stuck
counts = bp.read_counts(sys.argv[2])
bp.fit(counts, "auto", "eb", cores=2, progressbar=False)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def _wait(cond, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


@pytest.mark.parametrize("how", ["SIGINT to the process", "SIGINT to its group (Ctrl-C)", "SIGTERM"])
def test_an_interrupted_default_fit_ends_with_its_workers(tmp_path, how):
    marks = tmp_path / "workers"
    marks.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(marks), str(EXAMPLE)], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=os.environ | {"OPENBLAS_NUM_THREADS": "1"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert _wait(lambda: len(os.listdir(marks)) == 2 or proc.poll() is not None, 300), "workers never started"
        assert proc.poll() is None, proc.stderr.read().decode()
        workers = [int(p) for p in os.listdir(marks)]
        if how == "SIGTERM":
            proc.send_signal(signal.SIGTERM)
        elif how.endswith("(Ctrl-C)"):
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{how}: the fitting process did not end (it waited for its workers)")
        assert proc.returncode != 0
        if how != "SIGTERM":
            assert b"KeyboardInterrupt" in err
            assert b"BrokenProcessPool" not in err and err.count(b"Traceback") == 1, err.decode()
        assert _wait(lambda: not any(map(_alive, workers)), 60), f"{how}: workers left running {workers}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in (int(p) for p in os.listdir(marks)):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_pymc_fit_cut_short_by_ctrl_c_is_not_returned_as_a_fit(monkeypatch):
    """PyMC catches KeyboardInterrupt and returns the draws so far: bp.fit returned them as the fit."""
    import pymc as pm

    import bayespass as bp

    real = pm.sample

    def cut_short(*args, draws, **kwargs):  # what PyMC returns after Ctrl-C: fewer draws than asked for
        return real(*args, draws=draws // 2, **kwargs)

    monkeypatch.setattr(pm, "sample", cut_short)
    counts = bp.read_counts(EXAMPLE)
    with pytest.raises(KeyboardInterrupt, match=r"interrupted: PyMC returned 2 chains of 50 draws, not 2 of 100"):
        bp.fit(counts, "bb", "mcmc", sampler="pymc", draws=100, tune=100, chains=2, cores=1, progressbar=False)
