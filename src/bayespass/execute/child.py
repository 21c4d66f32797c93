# bayespass sandbox child.  Stdlib only: the supervisor starts a fresh interpreter
#     python -I -B -S -c <BOOTSTRAP> <job fd> <result fd>   (no site-packages)
# and sends marshal.dumps((compiled code of this file, job)) on the job pipe; the bootstrap
# runs this code and calls main(job, result fd).  stdin/stdout/stderr are /dev/null.
# The child never sees expected outputs and never judges: it sends back each test's
# return value as tagged JSON and the supervisor compares.
#
# Start-up cost is the per-program overhead of the whole harness, so this file imports
# nothing heavy: no json (its decoder pulls in re/enum/collections, ~10 ms), the C encoder
# from _json instead; marshal for the job; ctypes only for seccomp and mounts.
#
# Job: {"code", "entry_point", "inputs": [tagged...], "start": i0,
#   "limits": {"as_mb", "cpu_s", "fsize_mb", "nofile", "nproc"}, "uid", "seccomp",
#   "private_mounts", "recursion", "output_not_none", "max_value_bytes"}
# Results (JSON lines on the result pipe): {"i", "ok": true, "v": tagged, "t"} or
#   {"i", "ok": false, "e": "ExceptionType", "t"}; first line {"ready": true}.
# A return value whose encoding would exceed max_value_bytes is sent as its canonical
# digest instead, v = {"H": hex, "n": stream length} (see canonical_digest).
import os
import sys
import time

# Runs the marshalled child code in a fresh interpreter (kept tiny: it is compiled every start).
BOOTSTRAP = ("import marshal,os,sys\n"
             "f=int(sys.argv[1]);b=[]\n"
             "while 1:\n"
             " c=os.read(f,1<<20)\n"
             " if not c:break\n"
             " b.append(c)\n"
             "os.close(f);code,job=marshal.loads(b''.join(b));del b\n"
             "g={'__name__':'__bayespass_child__','__builtins__':__builtins__}\n"
             "exec(code,g);g['main'](job,int(sys.argv[2]))\n")

_write, _perf = os.write, time.perf_counter
MAX_DEPTH = 200
# Imported before a uid drop when the stdlib is not readable by the unprivileged uid
# (e.g. under /root) and no private mount namespace is available to bind it readable
# (see stdlib_view); candidates can then import only these.
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
    if isinstance(x, dict):  # a value sent as its digest
        return Hashed(x.get("H"), x.get("n"))
    return x


class Hashed:
    """A value known only by its :func:`canonical_digest` (too large to send)."""

    __slots__ = ("h", "n")

    def __init__(self, h, n):
        if not isinstance(h, str) or not isinstance(n, int):
            raise ValueError("bad digest marker")
        self.h, self.n = h, n

    def __eq__(self, other):
        return isinstance(other, Hashed) and other.h == self.h

    def __hash__(self):
        return hash(self.h)

    def __repr__(self):
        return f"Hashed({self.h[:12]}..., n={self.n})"


def _is_num(t):
    return (issubclass(t, int) or issubclass(t, float)) and not issubclass(t, complex)


def _num_token(x):
    # Numbers equal under Python's == get one token: integral floats (and bools) as ints.
    if isinstance(x, float):
        x = float.__float__(x)
        if x.is_integer():
            return hex(int(x))
        return float.__repr__(x)
    return hex(int.__index__(x))


def _stream(x, out, depth=0):
    """Append the canonical text of ``x`` to the list ``out`` (see canonical_digest)."""
    if depth > MAX_DEPTH:
        raise TypeError("nesting too deep")
    t = type(x)
    if x is None:
        out.append("N")
    elif isinstance(x, str):
        x = str.__str__(x)
        out.append(f"s{len(x)}:")
        out.append(x)
    elif _is_num(t):
        out.append("n" + _num_token(x) + ";")
    elif isinstance(x, complex):
        out.append(f"c{float.__repr__(x.real)},{float.__repr__(x.imag)};")
    elif isinstance(x, bytes):
        out.append("b" + bytes.hex(x) + ";")
    elif isinstance(x, list | tuple):
        if t is list or t is tuple:
            items = x
        else:
            items = list(list.__iter__(x) if isinstance(x, list) else tuple.__iter__(x))
        tag = "L" if isinstance(x, list) else "T"
        if items:
            try:  # succeeds exactly when every item is a str (join reads str data, no hooks)
                joined = "\x00".join(items)
            except TypeError:
                joined = None
            if joined is not None and joined.count("\x00") == len(items) - 1:  # no NUL inside
                out.append(f"{tag}{len(items)}s{len(joined)}:")
                out.append(joined)
                return
            if joined is None:
                kinds = set(map(type, items))
                body = None
                if kinds == {int}:
                    body = ",".join(map(hex, items))
                elif all(_is_num(k) for k in kinds):
                    if kinds == {float} and not any(map(float.is_integer, items)):
                        body = ",".join(map(float.__repr__, items))
                    else:
                        body = ",".join(map(_num_token, items))
                if body is not None:
                    out.append(f"{tag}{len(items)}n{body};")
                    return
        out.append(f"{tag}{len(items)}[")
        for e in items:
            _stream(e, out, depth + 1)
        out.append("]")
    elif isinstance(x, set | frozenset):
        items = set.__iter__(x) if isinstance(x, set) else frozenset.__iter__(x)
        parts = []
        for e in items:
            sub = []
            _stream(e, sub, depth + 1)
            parts.append("".join(sub))
        parts.sort()
        out.append(f"S{len(parts)}{{")
        out.extend(parts)
        out.append("}")
    elif isinstance(x, dict):
        parts = []
        for k, v in dict.items(x):
            sub = []
            _stream(k, sub, depth + 1)
            _stream(v, sub, depth + 1)
            parts.append("".join(sub))
        parts.sort()
        out.append(f"D{len(parts)}{{")
        out.extend(parts)
        out.append("}")
    else:
        raise TypeError(f"unsupported return type {t.__name__}")


def canonical_digest(x):
    """Return ``(hex digest, length)`` of a canonical text of ``x``.

    Values equal under Python's ``==`` (built-in types; 1 == 1.0 == True, sets and
    dicts in any order) get the same digest, so a value too large to send can be
    judged exactly by its digest.  No float tolerance applies.
    """
    from _blake2 import blake2b  # = hashlib.blake2b, without hashlib's imports

    h = blake2b(digest_size=20)
    parts = []
    _stream(x, parts)
    n = 0
    for i in range(0, len(parts), 4096):
        text = "".join(parts[i:i + 4096])
        n += len(text)
        h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest(), n


def _size_over(x, cap, depth=0):
    """Estimate (from below) the encoded size of ``x``; stop once it passes ``cap``."""
    if depth > MAX_DEPTH:
        return 0
    if isinstance(x, str):
        return len(x) + 2
    if isinstance(x, list | tuple | set | frozenset):
        items = list(x) if not isinstance(x, list) else x
        kinds = set(map(type, items))
        if kinds and all(issubclass(k, str) for k in kinds):
            return sum(map(len, items)) + 4 * len(items) + 8
        if kinds and all(_is_num(k) for k in kinds):  # ints ~ digits, floats ~ ["F", "repr"]
            return (26 if float in kinds else 4) * len(items) + 8
        total = 8
        for e in items:
            total += _size_over(e, cap, depth + 1)
            if total > cap:
                break
        return total
    if isinstance(x, dict):
        total = 8
        for k, v in dict.items(x):
            total += _size_over(k, cap, depth + 1) + _size_over(v, cap, depth + 1)
            if total > cap:
                break
        return total
    return 26 if isinstance(x, float | complex) else 4


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


def _readable_by_others(path):
    """Tell whether a uid that is neither owner nor in the group can list and traverse ``path``."""
    import stat

    try:
        if not os.stat(path).st_mode & stat.S_IROTH:
            return False
        while True:
            if not os.stat(path).st_mode & stat.S_IXOTH:
                return False
            parent = os.path.dirname(path)
            if parent == path:
                return True
            path = parent
    except OSError:
        return False


STDLIB_VIEW = "/tmp/.bayespass-stdlib"


def stdlib_view():
    """As root, inside the private mounts: make the stdlib importable after the uid drop.

    When the interpreter lives under a directory the slot uid cannot enter
    (e.g. /root), bind it read-only under the private /tmp and point
    ``sys.path`` and the imported packages' ``__path__`` there, so the
    candidate can import any stdlib module, as under bubblewrap.
    Returns True if the stdlib is readable afterwards.
    """
    import ctypes

    lib = getattr(sys, "_stdlib_dir", None) or os.path.dirname(os.__file__)
    if _readable_by_others(lib):
        return True
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        os.mkdir(STDLIB_VIEW, 0o755)
    except OSError:
        return False
    MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 32, 4096, 16384
    if libc.mount(lib.encode(), STDLIB_VIEW.encode(), None, MS_BIND | MS_REC, None) != 0:
        return False
    if libc.mount(b"none", STDLIB_VIEW.encode(), None,
                  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None) != 0:
        return False
    site = STDLIB_VIEW + "/site-packages"  # the stdlib only, not the base interpreter's packages
    if os.path.isdir(site) and libc.mount(b"tmpfs", site.encode(), b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV,
                                          b"size=4k,mode=755") != 0:
        return False

    def moved(p):
        return STDLIB_VIEW + p[len(lib):] if p == lib or p.startswith(lib + "/") else p

    sys.path[:] = [moved(p) for p in sys.path]
    for mod in list(sys.modules.values()):
        path = getattr(mod, "__path__", None)
        if isinstance(path, list):
            path[:] = [moved(p) for p in path]
    sys.path_importer_cache.clear()
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

    AF_UNIX = 1  # socket.AF_UNIX on Linux (the socket module costs ~3 ms to import)
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
    rule("socket", eperm, (0, NE, AF_UNIX, 0))
    pid = os.getpid()
    for name in ("kill", "tkill"):
        rule(name, eperm, (0, NE, pid, 0))
    rule("tgkill", eperm, (0, NE, pid, 0))
    if lib.seccomp_load(ctx) != 0:
        raise OSError("seccomp_load failed")
    return True


def _json_dumps():
    """``json.dumps`` for the plain values this child sends, via the C encoder alone."""
    import _json

    enc = _json.make_encoder(None, None, _json.encode_basestring_ascii, None, ":", ",", False, False, True)
    return lambda obj: "".join(enc(obj, 0))


def main(job, out_fd):
    """Lock down, run the program test by test, report results (called by BOOTSTRAP)."""
    _dumps = _json_dumps()
    sys.setrecursionlimit(job.get("recursion", 3000))
    import _blake2  # noqa: F401 - for canonical_digest, while the stdlib is still readable

    mounts = private_mounts() if job.get("private_mounts") else False
    if job.get("uid") is not None and not (mounts and stdlib_view()):
        # no private mount namespace: import what candidates commonly need while still root
        import importlib

        for mod in PRELOAD:
            try:
                importlib.import_module(mod)
            except ImportError:
                pass
    set_limits(job["limits"])
    drop_privileges(job.get("uid"))
    seccomp = install_seccomp() if job.get("seccomp", True) else False
    raw_inputs = job["inputs"]
    entry, start = job["entry_point"], job.get("start", 0)
    not_none = job.get("output_not_none", False)
    cap = job.get("max_value_bytes", 1 << 26)

    def emit(obj):
        data = (_dumps(obj) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[_write(out_fd, view):]

    def emit_raw(line):
        view = memoryview(line.encode())
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
    job = None

    for i in range(start, len(raw_inputs)):
        args = decode(raw_inputs[i])  # fresh objects for every test: a mutated input never leaks
        t0 = _perf()
        try:
            out = fn(*args)
            dt = _perf() - t0
            emit({"i": i, "returned": True, "t": dt})  # encoding/transfer time is not charged
            if not_none and type(out) is not bool:
                out = out is not None
            try:
                enc = None if _size_over(out, cap) > cap else _dumps(encode(out))
                if enc is None or len(enc) > cap:  # too large to send: send its digest
                    h, n = canonical_digest(out)
                    enc = _dumps({"H": h, "n": n})
            except (TypeError, ValueError, RecursionError) as err:
                enc, err_msg = None, "Unencodable:" + str(err)[:80]
            # free a large value before the result line starts the next test's clock
            out = args = None
            if enc is None:
                emit({"i": i, "ok": False, "e": err_msg, "t": dt})
            else:
                emit_raw(f'{{"i": {i}, "ok": true, "t": {dt!r}, "v": {enc}}}\n')
        except BaseException as err:  # noqa: BLE001
            emit({"i": i, "ok": False, "e": type(err).__name__, "t": _perf() - t0})
