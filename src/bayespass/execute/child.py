# bayespass sandbox child.  Stdlib only: the supervisor runs this source as
#     python -I -B -S -c <this file> <job fd> <result fd>   (fresh interpreter, no site-packages)
# with a job pipe to read and a result pipe to write; stdin/stdout/stderr are /dev/null.
# The child never sees expected outputs and never judges: it sends back each test's
# return value as tagged JSON and the supervisor compares.
#
# Job (JSON on the job pipe): {"code", "entry_point", "inputs": [tagged...], "start": i0,
#   "limits": {"as_mb", "cpu_s", "fsize_mb", "nofile", "nproc"}, "uid", "seccomp",
#   "recursion", "output_not_none", "max_value_bytes"}
# Results (JSON lines on the result pipe): {"i", "ok": true, "v": tagged, "t"} or
#   {"i", "ok": false, "e": "ExceptionType", "t"}; first line {"ready": true}.
import json
import os
import sys
import time

_write, _perf, _dumps = os.write, time.perf_counter, json.dumps
MAX_DEPTH = 200
# Imported before a uid drop: the interpreter's stdlib may not be readable by the
# unprivileged uid (e.g. under /root); candidates can still import these.
PRELOAD = ("copy", "ctypes", "errno", "socket", "resource", "math", "cmath", "re", "collections",
           "collections.abc", "itertools", "functools", "heapq", "bisect", "string", "operator",
           "statistics", "fractions", "decimal", "random", "typing", "datetime", "hashlib",
           "array", "numbers", "unicodedata", "textwrap", "struct", "sys", "os", "time", "json",
           "threading", "queue", "dataclasses", "enum", "abc", "keyword", "calendar", "difflib",
           "pprint", "base64", "binascii", "zlib", "io", "contextlib", "copyreg", "weakref",
           "ast", "inspect", "types", "warnings", "locale", "shlex", "glob", "fnmatch", "pathlib",
           "subprocess", "signal")


def encode(x, depth=0):
    """Tagged JSON for built-in value types only; anything else raises TypeError.

    Subclasses of built-in containers/scalars (Counter, namedtuple, ...) are
    encoded through the *base* class's own methods, so overridden ``__eq__``
    or ``items`` can only change what is reported, never how it is judged.
    """
    if depth > MAX_DEPTH:
        raise TypeError("nesting too deep")
    t = type(x)
    if x is None or t is bool:
        return x
    if isinstance(x, str):
        return str.__str__(x)
    if isinstance(x, int):
        v = int.__index__(x)
        return ["I", hex(v)] if abs(v) > 2**53 else v  # hex: no int/str digit limit
    if isinstance(x, float):
        return ["F", float.__repr__(x)]
    if isinstance(x, complex):
        return ["C", [float.__repr__(x.real), float.__repr__(x.imag)]]
    if isinstance(x, list):
        return ["L", [encode(v, depth + 1) for v in list.__iter__(x)]]
    if isinstance(x, tuple):
        return ["T", [encode(v, depth + 1) for v in tuple.__iter__(x)]]
    if isinstance(x, set | frozenset):
        return ["S", [encode(v, depth + 1) for v in (set.__iter__(x) if isinstance(x, set) else frozenset.__iter__(x))]]
    if isinstance(x, dict):
        return ["D", [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in dict.items(x)]]
    if isinstance(x, bytes):
        return ["B", bytes.hex(x)]
    raise TypeError(f"unsupported return type {t.__name__}")


def decode(x):
    """Inverse of :func:`encode`."""
    if isinstance(x, list):
        tag, v = x
        if tag == "I":
            return int(v, 16)
        if tag == "F":
            return float(v)
        if tag == "L":
            return [decode(e) for e in v]
        if tag == "T":
            return tuple(decode(e) for e in v)
        if tag == "S":
            return set(decode(e) for e in v)
        if tag == "D":
            return {decode(k): decode(e) for k, e in v}
        if tag == "B":
            return bytes.fromhex(v)
        if tag == "C":
            return complex(float(v[0]), float(v[1]))
        raise ValueError(tag)
    return x


def set_limits(lim):
    """Apply rlimits (hard = soft, so they cannot be raised again)."""
    import resource as r

    mb = 1024 * 1024
    pairs = [(r.RLIMIT_AS, lim["as_mb"] * mb), (r.RLIMIT_CPU, lim["cpu_s"]),
             (r.RLIMIT_FSIZE, lim["fsize_mb"] * mb), (r.RLIMIT_NOFILE, lim["nofile"]),
             (r.RLIMIT_CORE, 0)]
    if lim.get("nproc"):
        pairs.append((r.RLIMIT_NPROC, lim["nproc"]))
    for res, val in pairs:
        r.setrlimit(res, (val, val))


def private_mounts():
    """As root: own mount + network namespace, private tmpfs over world-writable dirs."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x00020000 | 0x40000000) != 0:  # CLONE_NEWNS | CLONE_NEWNET
        return False
    libc.mount(b"none", b"/", None, 0x4000 | (1 << 18), None)  # MS_REC | MS_PRIVATE
    for d in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock"):
        if os.path.isdir(d) and not os.path.islink(d):
            if libc.mount(b"tmpfs", d.encode(), b"tmpfs", 0, b"size=64m,mode=1777") != 0:
                return False
    return True


def drop_privileges(uid):
    """Switch to the unprivileged slot uid (root only)."""
    if os.getuid() != 0 or uid is None:
        return
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def install_seccomp():
    """Deny process creation, non-unix sockets, signals to others, exec, ptrace, mounts."""
    import ctypes
    import errno
    import socket

    try:
        lib = ctypes.CDLL("libseccomp.so.2")
    except OSError:
        return False

    class Cmp(ctypes.Structure):
        _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                    ("a", ctypes.c_uint64), ("b", ctypes.c_uint64)]

    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.POINTER(Cmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    ALLOW, NE, MASKED_EQ = 0x7FFF0000, 1, 7

    def errno_act(e):
        return 0x00050000 | (e & 0xFFFF)

    ctx = lib.seccomp_init(ALLOW)

    def rule(name, act, *cmps):
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:
            return
        arr = (Cmp * max(len(cmps), 1))(*[Cmp(*c) for c in cmps])
        if lib.seccomp_rule_add_array(ctx, act, nr, len(cmps), arr) != 0:
            raise OSError(f"seccomp rule for {name} failed")

    eperm = errno_act(errno.EPERM)
    for name in ("fork", "vfork", "execve", "execveat", "ptrace", "mount", "umount2", "unshare",
                 "setns", "pivot_root", "chroot", "process_vm_writev", "process_vm_readv",
                 "kexec_load", "reboot", "swapon", "bpf", "perf_event_open", "setrlimit",
                 "prlimit64", "seccomp", "keyctl", "add_key"):
        rule(name, eperm)
    rule("clone", eperm, (0, MASKED_EQ, 0x00010000, 0))  # clone without CLONE_THREAD
    rule("clone3", errno_act(errno.ENOSYS))  # ENOSYS so libc falls back to clone for threads
    rule("socket", eperm, (0, NE, socket.AF_UNIX, 0))
    pid = os.getpid()
    for name in ("kill", "tkill"):
        rule(name, eperm, (0, NE, pid, 0))
    rule("tgkill", eperm, (0, NE, pid, 0))
    if lib.seccomp_load(ctx) != 0:
        raise OSError("seccomp_load failed")
    return True


def main():
    """Read the job, lock down, run the program test by test, report results."""
    job_fd, out_fd = int(sys.argv[1]), int(sys.argv[2])
    chunks = []
    while True:
        chunk = os.read(job_fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(job_fd)
    job = json.loads(b"".join(chunks))
    sys.setrecursionlimit(job.get("recursion", 3000))
    if job.get("uid") is not None:
        import importlib

        for mod in PRELOAD:
            try:
                importlib.import_module(mod)
            except ImportError:
                pass
    mounts = private_mounts() if job.get("private_mounts") else False
    set_limits(job["limits"])
    drop_privileges(job.get("uid"))
    seccomp = install_seccomp() if job.get("seccomp", True) else False
    inputs = [decode(x) for x in job["inputs"]]
    entry, start = job["entry_point"], job.get("start", 0)
    not_none = job.get("output_not_none", False)
    cap = job.get("max_value_bytes", 1 << 26)

    def emit(obj):
        data = (_dumps(obj) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[_write(out_fd, view):]

    emit({"ready": True, "seccomp": seccomp, "uid": os.getuid(), "private_mounts": mounts})
    ns = {"__name__": "__candidate__", "__builtins__": __builtins__}
    t0 = _perf()
    try:
        exec(compile(job["code"], "<candidate>", "exec"), ns)
        fn = ns[entry]
    except BaseException as err:  # noqa: BLE001 - anything the program does is a verdict
        emit({"load_error": type(err).__name__, "t": _perf() - t0})
        return
    emit({"loaded": True, "t": _perf() - t0})
    import copy

    for i in range(start, len(inputs)):
        args = copy.deepcopy(inputs[i])
        t0 = _perf()
        try:
            out = fn(*args)
            dt = _perf() - t0
            emit({"i": i, "returned": True, "t": dt})  # encoding/transfer time is not charged
            if not_none and type(out) is not bool:
                out = out is not None
            try:
                enc = _dumps(encode(out))
            except (TypeError, ValueError, RecursionError) as err:
                emit({"i": i, "ok": False, "e": "Unencodable:" + str(err)[:80], "t": dt})
                continue
            if len(enc) > cap:
                emit({"i": i, "ok": False, "e": "Oversize", "t": dt})
                continue
            emit({"i": i, "ok": True, "v": json.loads(enc), "t": dt})
        except BaseException as err:  # noqa: BLE001
            emit({"i": i, "ok": False, "e": type(err).__name__, "t": _perf() - t0})


if __name__ == "__main__":
    main()
