"""Trusted supervisor for running untrusted programs (see SANDBOX.md in the docs).

Each program runs in a fresh ``python -I -B -S`` child (never a fork of this
process) with a clean environment, stdin/stdout/stderr on /dev/null, all other
descriptors closed except a job pipe and a size-capped result pipe (their
numbers are passed on the child's command line); the job pipe carries the child's
code, compiled here, and the job, both marshalled.  The child sets rlimits,
drops to a per-slot unprivileged uid when the supervisor is root, installs a
seccomp filter when libseccomp is available,
and only *reports* return values as tagged JSON; this supervisor parses them
with ``json.loads`` and judges.  A per-test watchdog kills the child's whole
process group (and, after a uid drop, every process of that uid); remaining
tests continue in a new child.

Isolation layers (the one in use is reported as ``Sandbox.layer``):

* ``bwrap``: bubblewrap with every namespace unshared, read-only /usr and
  interpreter, private /tmp, no network, capabilities dropped; plus all of
  the below inside it;
* ``seccomp+uid`` (root): own session, own mount and network namespace with
  private tmpfs over /tmp, /var/tmp, /dev/shm (the stdlib bound read-only
  into it when the uid could not read it otherwise), per-slot uid, seccomp,
  rlimits;
* ``seccomp`` (not root): own session, seccomp, rlimits;
* ``rlimit``: own session and rlimits only (not root, no libseccomp): weak,
  and said so.
"""

from __future__ import annotations

import json
import marshal
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .child import BOOTSTRAP

__all__ = ["Limits", "Outcome", "Sandbox", "probe_layer", "HARNESS_VERSION"]

HARNESS_VERSION = "6"
_CHILD_SRC = (Path(__file__).with_name("child.py")).read_text()


@lru_cache(maxsize=1)
def _child_code():
    """Compile the child once here; it is sent marshalled (same interpreter)."""
    return compile(_CHILD_SRC, "<bayespass-child>", "exec")


_UID_BASE = 61000


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed child.

    Parameters
    ----------
    memory_mb : int
        Address-space limit (RLIMIT_AS).
    cpu_s : int
        CPU seconds for one child (RLIMIT_CPU); the per-test wall-clock
        watchdog is separate.
    min_time_limit, gt_time_factor : float
        Per-test wall limit ``max(min_time_limit, gt_time_factor * gt_time)``
        (evalplus defaults 1 s and 4x).
    load_time_limit : float
        Wall seconds allowed for interpreter start-up plus loading the program.
    fsize_mb, nofile, nproc : int
        RLIMIT_FSIZE, RLIMIT_NOFILE, RLIMIT_NPROC (nproc applies after a uid drop).
    max_value_bytes : int
        Largest encoded return value sent back for one test; a larger one is
        sent as its canonical digest and judged by exact equality of digests.
    encode_time_limit : float
        Wall seconds, after the function has returned, for encoding and
        sending its value (not charged to the test's time limit).
    recursion : int
        Python recursion limit in the child.
    """

    memory_mb: int = 2048
    cpu_s: int = 60
    min_time_limit: float = 1.0
    gt_time_factor: float = 4.0
    load_time_limit: float = 10.0
    fsize_mb: int = 16
    nofile: int = 64
    nproc: int = 16
    max_value_bytes: int = 1 << 26
    recursion: int = 3000
    encode_time_limit: float = 20.0

    def time_limit(self, gt_time: float) -> float:
        """Per-test wall-clock limit from the ground truth's time."""
        return max(self.min_time_limit, self.gt_time_factor * float(gt_time))


@dataclass
class Outcome:
    """What one test produced: ``status`` is value/error/timeout/crash/oversize/not_run."""

    status: str
    value: object = None  # tagged JSON of the return value (status == "value")
    error: str = ""
    duration: float = 0.0


@lru_cache(maxsize=1)
def _libseccomp() -> bool:
    import ctypes

    try:
        ctypes.CDLL("libseccomp.so.2")
        return True
    except OSError:
        return False


def _python() -> tuple[str, str]:
    return sys._base_executable, sys.base_prefix  # type: ignore[attr-defined]


def _bwrap_prefix(uid: int | None) -> list[str]:
    exe, prefix = _python()
    cmd = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
           "--clearenv", "--ro-bind", "/usr", "/usr"]
    for link in ("lib", "lib64", "bin", "sbin"):
        target = Path("/") / link
        if target.is_symlink():
            cmd += ["--symlink", os.readlink(target), str(target)]
        elif target.exists():
            cmd += ["--ro-bind", str(target), str(target)]
    if not prefix.startswith("/usr/"):
        cmd += ["--ro-bind", prefix, prefix]
    site = Path(prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    if site.is_dir():  # the stdlib only, not the base interpreter's installed packages
        cmd += ["--tmpfs", str(site), "--remount-ro", str(site)]
    cmd += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/tmp"]
    if uid is not None:
        cmd += ["--uid", str(uid), "--gid", str(uid)]
    return cmd


@lru_cache(maxsize=1)
def probe_layer() -> str:
    """Return the strongest isolation layer that works here (probed once per process)."""
    if shutil.which("bwrap"):
        exe, _ = _python()
        try:
            res = subprocess.run(_bwrap_prefix(65534 if os.getuid() == 0 else None)
                                 + [exe, "-I", "-S", "-c", "print(7*6)"],
                                 capture_output=True, timeout=20, stdin=subprocess.DEVNULL)
            if res.returncode == 0 and res.stdout.strip() == b"42":
                return "bwrap"
        except (OSError, subprocess.SubprocessError):
            pass
    if os.getuid() == 0 or _libseccomp():
        return "seccomp+uid" if os.getuid() == 0 else "seccomp"
    return "rlimit"


@dataclass
class Sandbox:
    """Runs programs test by test in isolated children (one ``Sandbox`` per worker slot).

    Parameters
    ----------
    limits : Limits
        Resource limits.
    layer : {"auto", "bwrap", "seccomp+uid", "seccomp", "rlimit"}
        ``"auto"`` picks :func:`probe_layer`.
    slot : int
        Worker slot; selects the unprivileged uid (61000 + slot) when root.
    """

    limits: Limits = field(default_factory=Limits)
    layer: str = "auto"
    slot: int = 0

    def __post_init__(self) -> None:
        allowed = ("auto", "bwrap", "seccomp+uid", "seccomp", "rlimit")
        if self.layer not in allowed:
            raise ValueError(f"layer={self.layer!r} is not supported; choose one of {sorted(allowed)}")
        if self.layer == "auto":
            self.layer = probe_layer()
        self.uid = _UID_BASE + self.slot if os.getuid() == 0 else None

    # -- one child ----------------------------------------------------------------------
    def _spawn(self, job: dict) -> tuple[subprocess.Popen, int, str]:
        exe, _ = _python()
        workdir = tempfile.mkdtemp(prefix="bp-sbx-")
        if self.uid is not None:
            os.chown(workdir, self.uid, self.uid)
        os.chmod(workdir, 0o700)
        job_r, job_w = os.pipe()
        res_r, res_w = os.pipe()
        # The pipes keep whatever descriptor numbers they have; the child is told them on its
        # command line (pass_fds with fixed numbers would race with other worker threads).
        inner = [exe, "-I", "-B", "-S", "-c", BOOTSTRAP, str(job_r), str(res_w)]
        uid_in_job = self.uid
        if self.layer == "bwrap":
            cmd = _bwrap_prefix(self.uid) + inner
            uid_in_job = None  # bwrap already switched uid inside its user namespace
        else:
            cmd = inner
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd=workdir, env={"PATH": "/usr/bin:/bin"},
                                start_new_session=True, close_fds=True, pass_fds=(job_r, res_w))
        os.close(job_r)
        os.close(res_w)
        job = dict(job, uid=uid_in_job, seccomp=self.layer != "rlimit",
                   private_mounts=self.layer == "seccomp+uid")
        try:
            data = marshal.dumps((_child_code(), job))
            view = memoryview(data)
            while view:
                view = view[os.write(job_w, view):]
        except BrokenPipeError:
            pass
        finally:
            os.close(job_w)
        return proc, res_r, workdir

    def _kill(self, proc: subprocess.Popen, workdir: str, grace: float = 0.0) -> int:
        if grace:  # let a child that ended by itself report its own exit status
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the whole group, even after the leader exited
        except ProcessLookupError:
            pass
        rc = proc.wait()  # Popen keeps the first status it collected
        if self.uid is not None and self.layer != "bwrap":
            # Anything the program left behind under its uid (seccomp should make this empty).
            subprocess.run(["/bin/kill", "-9", "-1"], user=self.uid, group=self.uid,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        shutil.rmtree(workdir, ignore_errors=True)
        return rc

    def run(self, code: str, entry_point: str, inputs: list, time_limits: list[float], *,
            output_not_none: bool = False, stop=None) -> list[Outcome]:
        """Run ``entry_point(*inputs[i])`` for every i; return one :class:`Outcome` per input.

        ``inputs`` are tagged-JSON encoded argument tuples (see ``child.encode``).
        ``stop(i, outcome) -> bool`` may end the run early (remaining tests ``not_run``).
        """
        lim = self.limits
        outcomes: list[Outcome | None] = [None] * len(inputs)
        start = 0
        while start < len(inputs):
            job = {"code": code, "entry_point": entry_point, "inputs": inputs, "start": start,
                   "limits": {"as_mb": lim.memory_mb, "cpu_s": lim.cpu_s, "fsize_mb": lim.fsize_mb,
                              "nofile": lim.nofile, "nproc": lim.nproc if self.uid is not None else 0},
                   "recursion": lim.recursion, "output_not_none": output_not_none,
                   "max_value_bytes": lim.max_value_bytes}
            proc, fd, workdir = self._spawn(job)
            try:
                start, ended = self._read(proc, fd, start, time_limits, outcomes, stop)
            finally:
                os.close(fd)
                rc = self._kill(proc, workdir, grace=0.5 if ended else 0.0)
            if start < 0:  # the program failed to load: every remaining test gets that verdict
                break
            if ended and start < len(inputs):
                # The child ended without reporting test `start`: a crash (or a CPU-limit kill).
                cpu = rc in (-signal.SIGXCPU, 128 + signal.SIGXCPU)
                outcomes[start] = Outcome("timeout" if cpu else "crash", error=f"exit {rc}")
                if stop is not None and stop(start, outcomes[start]):
                    break
                start += 1
        return [o if o is not None else Outcome("not_run") for o in outcomes]

    def _read(self, proc, fd, start, time_limits, outcomes, stop=None) -> tuple[int, bool]:
        """Read results until the child ends or a limit is hit.

        Returns the next index to run (-1: nothing more) and whether the child
        ended by itself before reporting that index.
        """
        lim = self.limits
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        buf = bytearray()
        scanned = 0  # bytes of buf already searched for a newline
        cap = lim.max_value_bytes + 4096
        phase = "load"
        deadline = time.monotonic() + lim.load_time_limit
        nxt = start
        t_start = time.monotonic()
        try:
            while nxt < len(outcomes):
                timeout = deadline - time.monotonic()
                if timeout <= 0 or not sel.select(timeout):
                    if phase == "load":
                        for i in range(nxt, len(outcomes)):
                            outcomes[i] = Outcome("timeout", error="load")
                        return -1, False
                    outcomes[nxt] = Outcome("timeout", duration=time.monotonic() - t_start)
                    if stop is not None and stop(nxt, outcomes[nxt]):
                        return -1, False
                    return nxt + 1, False
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return nxt, True
                buf += chunk
                while True:
                    cut = buf.find(b"\n", scanned)
                    if cut < 0:
                        scanned = len(buf)
                        break
                    line = bytes(buf[:cut])
                    del buf[:cut + 1]
                    scanned = 0
                    msg = _parse(line)
                    if msg is None:
                        continue
                    if "load_error" in msg:
                        for i in range(nxt, len(outcomes)):
                            outcomes[i] = Outcome("error", error=f"load:{msg['load_error']}"[:100])
                        return -1, False
                    if "loaded" in msg:
                        phase = "tests"
                        t_start = time.monotonic()
                        deadline = t_start + time_limits[nxt]
                        continue
                    if phase != "tests" or msg.get("i") != nxt:
                        continue  # results are accepted in order, each index once
                    if msg.get("returned") is True:
                        deadline = time.monotonic() + lim.encode_time_limit
                        continue
                    dur = _num(msg.get("t"))
                    outcomes[nxt] = (Outcome("value", value=msg.get("v"), duration=dur) if msg.get("ok") is True
                                     else Outcome("oversize" if msg.get("e") == "Oversize" else "error",
                                                  error=str(msg.get("e"))[:100], duration=dur))
                    if stop is not None and stop(nxt, outcomes[nxt]):
                        return -1, False
                    nxt += 1
                    t_start = time.monotonic()
                    if nxt < len(outcomes):
                        deadline = t_start + time_limits[nxt]
                if len(buf) > cap:
                    outcomes[nxt] = Outcome("oversize", error="result stream over the cap")
                    return nxt + 1, False
            return nxt, False
        finally:
            sel.close()


def _parse(line: bytes):
    try:
        msg = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return msg if isinstance(msg, dict) else None


def _num(x) -> float:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else 0.0
