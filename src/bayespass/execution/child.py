# bayespass sandbox: the zygote and its children.  Stdlib only.
#
# The supervisor starts one "zygote" per sandbox slot:
#     python -I -B -S -c <BOOTSTRAP> <setup fd> <control fd>        (no site-packages)
# and sends marshal.dumps((compiled code of this file, config)) on the setup pipe.  The
# zygote pre-imports the stdlib modules that benchmark prompts use, then serves jobs that
# arrive on the control socket (a unix socketpair), each with the write end of a fresh
# result pipe attached (SCM_RIGHTS).  The zygote NEVER runs candidate code: for each job
# it forks a child, and the child, before the candidate is loaded,
#   1. enters new mount/network/IPC/UTS namespaces (a user namespace too when not root),
#   2. builds a minimal root: a size-capped tmpfs holding read-only binds of the stdlib, the
#      shared-library directories and the PACKAGES (numpy) only, /dev/{null,zero,urandom,random}
#      and an empty scratch /tmp, then pivot_root()s into it (nothing else of the host is reachable),
#   3. sets rlimits (hard = soft), drops to the slot's unprivileged uid (root) or all
#      capabilities (user namespace), asks to be killed with the zygote (PDEATHSIG),
#   4. installs a seccomp filter (no process creation, exec, sockets, ptrace, mounts,
#      namespaces, signals to others, io_uring, pidfds, memfd, rlimit raising); the zygote
#      compiles it to BPF once and each child writes its own pid into its copy,
# then runs the tests and reports each return value as tagged JSON on the result pipe.
# The child never sees expected outputs and never judges.  A fork leaves the zygote's own
# state untouched, so nothing a candidate does reaches the next program.
#
# Control protocol (zygote side): job = "J" with four fds: the write end of the result pipe, a memfd holding
# the marshalled job dict (the child reads it to its end), an empty memfd for the tests' inputs and the read
# end of a "go" pipe.  Only the child reads the job's memfd: the
# zygote never holds a program's text, so no later child can find an earlier program (another model's
# correct sample, say) in the heap it inherits;
# replies b"S" + pid (started) and b"E" + wait status + CPU microseconds used by the child
# (ended, after the uid sweep);
# the supervisor sends b"K" to have the running child killed.
#
# Inputs: the job carries none.  Once the child has said "loaded", the supervisor writes the marshalled
# inputs into the memfd and one byte into the go pipe; only then does the child read them.  So the
# candidate's module-level code cannot see the tests' inputs: all it could compute from them is charged to
# the first test's limit, which runs from the "loaded" line, forged or not.
#
# Results (JSON lines): {"setup_error": text} if isolation failed, else {"isolated": true} before the
# candidate is loaded; then {"loaded": true, "t"} or {"load_error": name}; then per test
# {"i", "ok": true, "v": tagged, "t"[, "np": true where the value was a numpy scalar]} or
# {"i", "ok": false, "e": "ExceptionType", "t"}.
# A value whose encoding would exceed the test's byte cap is sent as its canonical digest
# instead, v = {"H": hex, "n": stream length} (see canonical_digest).
import os
import sys
import time

# Runs the marshalled code in a fresh interpreter (kept tiny: it is compiled every start).
BOOTSTRAP = ("import marshal,os,sys\n"
             "f=int(sys.argv[1]);b=[]\n"
             "while 1:\n"
             " c=os.read(f,1<<20)\n"
             " if not c:break\n"
             " b.append(c)\n"
             "os.close(f);code,cfg=marshal.loads(b''.join(b));del b\n"
             "g={'__name__':'__bayespass_zygote__','__builtins__':__builtins__}\n"
             "exec(code,g);g['zygote'](cfg,int(sys.argv[2]))\n")

_write, _perf = os.write, time.perf_counter
MAX_DEPTH = 200
#: third-party packages a candidate may import, bound read-only into the child's root at PACKAGE_ROOT (with a
#: wheel's ``<name>.libs`` of bundled shared libraries beside it), as evalplus's candidates can import whatever
#: its own environment holds, numpy included: of the real MBPP generations' programs that import numpy, evalplus
#: passed 276 of 453 on MBPP+ and the sandbox without it none (benchmarks/RESULTS.md)
PACKAGES = ("numpy",)
PACKAGE_ROOT = "/opt/bayespass/site-packages"
#: a package's BLAS and OpenMP start one thread, not one per core (the environment is cleared before the zygote)
PACKAGE_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made at run time (a candidate's), never one of numpy's C types
# Imported once by the zygote (benchmark prompts import these); children inherit them.
PRELOAD = ("math", "cmath", "re", "collections", "collections.abc", "itertools", "functools", "heapq",
           "bisect", "string", "operator", "statistics", "fractions", "decimal", "random", "typing",
           "datetime", "hashlib", "array", "numbers", "unicodedata", "textwrap", "struct", "json",
           "dataclasses", "enum", "copy", "calendar", "difflib", "ast", "inspect", "types", "io",
           "contextlib", "weakref", "string", "sys", "os", "time")


# ----------------------------------------------------------------------------- encoding
# Only built-in value types are reported.  Dispatch is on the exact type; an instance of a
# subclass of a built-in type is reported as its base type through the base type's own C
# methods (list.__iter__, dict.items, int.__index__, ...), so no method defined by the
# candidate (__iter__, __len__, __class__, __eq__, ...) ever runs while encoding.
_BASES = (bool, int, float, complex, str, bytes, list, tuple, set, frozenset, dict)
#: built-in values with nothing inside them
_LEAVES = (bool, int, float, complex, str, bytes, type(None))


def _base(t):
    if t in _BASES or t is type(None):
        return t
    for b in _BASES:  # issubclass reads the type's MRO in C (no metaclass hook on built-ins)
        if issubclass(t, b):
            return b
    return None


def _items(x, b):
    """Elements of a list/tuple/set/frozenset ``x`` of base type ``b`` as an exact list."""
    if b is list:
        return x if type(x) is list else list(list.__iter__(x))
    if b is tuple:
        return list(tuple.__iter__(x))
    if b is set:
        return list(set.__iter__(x))
    return list(frozenset.__iter__(x))


def _numpy_scalar(x):
    """Return the Python value of a numpy scalar (``np.int64``, ``np.float32``, ``np.bool_``, ...), else ``x``.

    evalplus compares with ``==``, which a numpy scalar answers like the Python number it holds.  Only numpy's
    own C types count, read with ``type``'s getters (a class the candidate makes is a heap type, whatever it
    calls itself), and ``item`` is numpy's C method: no method of the candidate's runs.  Arrays stay as they
    are (unsupported, as ``==`` on an array fails evalplus's check too).
    """
    t = type(x)
    get = type.__getattribute__
    if get(t, "__flags__") & _HEAPTYPE or get(t, "__module__") != "numpy":
        return x
    if not any(get(b, "__name__") == "generic" and get(b, "__module__") == "numpy" for b in get(t, "__mro__")):
        return x
    return get(t, "item")(x)


def plain(x, depth=0):
    """``x`` with every numpy scalar in it (in built-in containers of exact type) made a Python value."""
    if depth > MAX_DEPTH:
        raise TypeError("nesting too deep")
    t = type(x)
    if t is list or t is tuple or t is set or t is frozenset:
        items = _items(x, t)
        if all(type(e) in _LEAVES for e in items):  # nothing to convert (the usual case): no copy
            return x
        items = [plain(e, depth + 1) for e in items]
        return items if t is list else t(items)
    if t is dict:
        return {plain(k, depth + 1): plain(v, depth + 1) for k, v in dict.items(x)}
    if x is None or t in _BASES:
        return x
    return _numpy_scalar(x)


def encode(x, depth=0):
    """Tagged JSON for built-in value types only; anything else raises TypeError."""
    if depth > MAX_DEPTH:
        raise TypeError("nesting too deep")
    b = _base(type(x))
    if x is None or b is bool:
        return None if x is None else bool(int.__index__(x))
    if b is str:
        return str.__str__(x)
    if b is int:
        v = int.__index__(x)
        return ["I", hex(v)] if abs(v) > 2**53 else v  # hex: no int/str digit limit
    if b is float:
        return ["F", float.__repr__(x)]
    if b is complex:
        return ["C", [float.__repr__(complex.real.__get__(x)), float.__repr__(complex.imag.__get__(x))]]
    if b is list or b is tuple or b is set or b is frozenset:
        items = _items(x, b)
        kinds = set(map(type, items))  # exact types: a subclass takes the general path
        if kinds <= {str} or (kinds <= {int} and all(-2**53 <= v <= 2**53 for v in items)):
            enc = list(items)  # such leaves encode to themselves
        else:
            enc = [encode(v, depth + 1) for v in items]
        return ["L" if b is list else "T" if b is tuple else "S", enc]
    if b is dict:
        return ["D", [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in dict.items(x)]]
    if b is bytes:
        return ["B", bytes.hex(x)]
    raise TypeError(f"unsupported return type {type(x).__name__}")


def decode(x):
    """Inverse of :func:`encode`."""
    if isinstance(x, list):
        tag, v = x
        if tag == "I":
            return int(v, 16)
        if tag == "F":
            return float(v)
        if tag in ("L", "T", "S"):
            if any(isinstance(e, list | dict) for e in v):
                v = [decode(e) for e in v]  # leaves (numbers, strings, None) decode to themselves
            return list(v) if tag == "L" else tuple(v) if tag == "T" else set(v)
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
    if issubclass(type(x), float):
        x = float.__float__(x)
        if x.is_integer():
            return hex(int(x))
        return float.__repr__(x)
    return hex(int.__index__(x))


def _stream_seq(items, tag, out, depth):
    if items:
        kinds = set(map(type, items))
        if kinds == {str}:
            joined = "\x00".join(items)
            if joined.count("\x00") == len(items) - 1:  # no NUL inside an item
                out.append(f"{tag}{len(items)}s{len(joined)}:")
                out.append(joined)
                return
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


def _stream_unordered(pairs, tag, out, depth):
    parts = []
    for group in pairs:
        sub = []
        for e in group:
            _stream(e, sub, depth + 1)
        parts.append("".join(sub))
    parts.sort()
    out.append(f"{tag}{len(parts)}{{")
    out.extend(parts)
    out.append("}")


def _stream(x, out, depth=0):
    """Append the canonical text of ``x`` to the list ``out`` (see canonical_digest)."""
    if depth > MAX_DEPTH:
        raise TypeError("nesting too deep")
    b = _base(type(x))
    if x is None:
        out.append("N")
    elif b is str:
        x = str.__str__(x)
        out.append(f"s{len(x)}:")
        out.append(x)
    elif b is bool or b is int or b is float:
        out.append("n" + _num_token(x) + ";")
    elif b is complex:
        out.append(f"c{float.__repr__(complex.real.__get__(x))},{float.__repr__(complex.imag.__get__(x))};")
    elif b is bytes:
        out.append("b" + bytes.hex(x) + ";")
    elif b is list or b is tuple:
        _stream_seq(_items(x, b), "L" if b is list else "T", out, depth)
    elif b is set or b is frozenset:
        _stream_unordered(((e,) for e in _items(x, b)), "S", out, depth)
    elif b is dict:
        _stream_unordered(dict.items(x), "D", out, depth)
    else:
        raise TypeError(f"unsupported return type {type(x).__name__}")


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
    b = _base(type(x))
    if b is str:
        return str.__len__(x) + 2
    if b is bytes:
        return 2 * bytes.__len__(x) + 8
    if b in (list, tuple, set, frozenset):
        items = _items(x, b)
        kinds = set(map(type, items))
        if kinds and kinds <= {str}:
            return sum(map(len, items)) + 4 * len(items) + 8
        if kinds and kinds <= {int, float, bool}:  # ints ~ digits, floats ~ ["F", "repr"]
            return (26 if float in kinds else 4) * len(items) + 8
        total = 8
        for e in items:
            total += _size_over(e, cap, depth + 1)
            if total > cap:
                break
        return total
    if b is dict:
        total = 8
        for k, v in dict.items(x):
            total += _size_over(k, cap, depth + 1) + _size_over(v, cap, depth + 1)
            if total > cap:
                break
        return total
    return 26 if b in (float, complex) else 4


# ----------------------------------------------------------------------------- isolation
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18)
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP = 1, 4, 24
_SYS = {"x86_64": {"pivot_root": 155, "capset": 126},
        "aarch64": {"pivot_root": 41, "capset": 91}}.get(os.uname().machine, {"pivot_root": 155, "capset": 126})
_NEWROOT = "/tmp"  # the tmpfs mounted here (inside the private mount namespace) becomes /


class SetupError(Exception):
    """Isolation could not be set up (the program is not run)."""


def _libc():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return libc


def _check(rc, what):
    if rc != 0:
        import ctypes

        raise SetupError(f"{what}: {os.strerror(ctypes.get_errno())}")


def _mount(libc, src, dst, fstype, flags, data=None):
    _check(libc.mount(src.encode() if src else None, dst.encode(), fstype.encode() if fstype else None,
                      flags, data.encode() if data else None), f"mount {dst}")


def _bind_ro(libc, src, dst):
    os.makedirs(dst, exist_ok=True)
    _mount(libc, src, dst, None, MS_BIND | MS_REC)
    _mount(libc, None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def minimal_root(view, user_ns, scratch_mb):
    """Enter new namespaces and pivot into a tmpfs root holding only ``view`` (see module doc).

    ``view``: {"dirs": [read-only directories], "hide": [directories to cover with an empty
    read-only tmpfs], "links": [[path, target]], "devices": [paths], "packages": [[host directory,
    its place under PACKAGE_ROOT]] (read-only)}.
    """
    libc = _libc()
    uid, gid = os.getuid(), os.getgid()
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # the zygote is not dumpable; /proc/self must be ours
    flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | (CLONE_NEWUSER if user_ns else 0)
    _check(libc.unshare(flags), "unshare")
    if user_ns:  # map this uid to itself: full capabilities inside the new user namespace only
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
    _mount(libc, "none", "/", None, MS_REC | MS_PRIVATE)
    new = _NEWROOT
    # a package may live under /tmp (a virtual environment there), which the new root's tmpfs is about to hide:
    # hold each by a descriptor and bind it from there
    packages = [(os.open(src, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC), dst) for src, dst in view.get("packages", ())]
    _mount(libc, "tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, f"size={scratch_mb}m,mode=755")
    for d in view["dirs"]:
        _bind_ro(libc, d, new + d)
    for fd, dst in packages:
        _bind_ro(libc, f"/proc/self/fd/{fd}", new + dst)
        os.close(fd)
    for d in view["hide"]:
        if os.path.isdir(new + d):
            _mount(libc, "tmpfs", new + d, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=755")
    for path, target in view["links"]:
        if not os.path.lexists(new + path):
            os.makedirs(os.path.dirname(new + path), exist_ok=True)
            os.symlink(target, new + path)
    for dev in view["devices"]:  # device nodes stay writable (writes to /dev/null must work)
        if os.path.exists(dev):
            os.makedirs(os.path.dirname(new + dev), exist_ok=True)
            open(new + dev, "a").close()
            _mount(libc, dev, new + dev, None, MS_BIND)
            _mount(libc, None, new + dev, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC)
    os.makedirs(new + "/tmp", exist_ok=True)
    os.makedirs(new + "/.old", exist_ok=True)
    os.chdir(new)
    _check(libc.syscall(_SYS["pivot_root"], b".", b".old"), "pivot_root")
    os.chdir("/")
    _check(libc.umount2(b"/.old", MNT_DETACH), "umount old root")
    os.rmdir("/.old")
    _mount(libc, "tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, f"size={scratch_mb}m,mode=1777")
    _mount(libc, None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chdir("/tmp")
    return libc


def set_limits(lim):
    """Apply rlimits (hard = soft, so they cannot be raised again).

    The CPU limit's hard one is a second later, so a child over it gets SIGXCPU, read as a timeout, before
    the SIGKILL of the hard limit.
    """
    import resource as r

    mb = 1024 * 1024
    pairs = [(r.RLIMIT_AS, lim["as_mb"] * mb), (r.RLIMIT_CPU, lim["cpu_s"]),
             (r.RLIMIT_FSIZE, lim["fsize_mb"] * mb), (r.RLIMIT_NOFILE, lim["nofile"]),
             (r.RLIMIT_CORE, 0)]
    if lim.get("nproc"):
        pairs.append((r.RLIMIT_NPROC, lim["nproc"]))
    for res, val in pairs:
        r.setrlimit(res, (val, val + 1 if res == r.RLIMIT_CPU else val))


def drop_privileges(libc, uid, user_ns):
    """Root: switch to the slot uid.  User namespace: drop every capability."""
    if uid is not None and os.getuid() == 0 and not user_ns:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    elif user_ns:
        import ctypes

        for cap in range(64):
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)

        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        data = (ctypes.c_uint32 * 6)()
        _check(libc.syscall(_SYS["capset"], ctypes.byref(Header(0x20080522, 0)), data), "capset")
    libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # die with the zygote (after the uid change, which clears it)
    if os.getppid() == 1:
        os._exit(1)


_DENIED = ("fork", "vfork", "execve", "execveat", "ptrace", "mount", "umount2", "unshare",
           "setns", "pivot_root", "chroot", "process_vm_writev", "process_vm_readv",
           "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "bpf", "perf_event_open",
           "setrlimit", "seccomp", "keyctl", "add_key", "request_key", "socket", "socketpair",
           "io_uring_setup", "io_uring_enter", "io_uring_register", "pidfd_open", "pidfd_send_signal",
           "pidfd_getfd", "memfd_create", "memfd_secret", "userfaultfd", "open_by_handle_at",
           "name_to_handle_at", "kcmp", "fsopen", "fsmount", "fsconfig", "move_mount", "open_tree",
           "mount_setattr", "quotactl", "acct", "settimeofday", "clock_settime", "adjtimex",
           "init_module", "finit_module", "delete_module", "iopl", "ioperm", "personality",
           "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
           "capset", "mknod", "mknodat")
_ALLOW, _NE, _MASKED_EQ = 0x7FFF0000, 1, 7
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


def _errno_act(e):
    return 0x00050000 | (e & 0xFFFF)


def _static_rules():
    """Return the rules that do not depend on the child's pid: (syscall, action, comparisons)."""
    import errno

    eperm = _errno_act(errno.EPERM)
    rules = [(name, eperm) for name in _DENIED]
    # getrlimit() is prlimit64(0, res, NULL, old): reading a limit is allowed, setting one is not
    rules += [("prlimit64", eperm, (2, _NE, 0, 0)), ("prlimit64", eperm, (0, _NE, 0, 0)),
              ("clone", eperm, (0, _MASKED_EQ, 0x00010000, 0)),  # clone without CLONE_THREAD
              ("clone3", _errno_act(errno.ENOSYS))]  # ENOSYS so libc falls back to clone for threads
    return rules


def _pid_rules(pid):
    """Return the rules that allow signals only to oneself."""
    import errno

    eperm = _errno_act(errno.EPERM)
    return [("kill", eperm, (0, _NE, pid, 0)), ("tkill", eperm, (0, _NE, pid, 0)),
            ("tgkill", eperm, (0, _NE, pid, 0))]


def _seccomp_lib():
    """Return libseccomp with its argument types and the comparison struct (None, None without it)."""
    import ctypes

    try:
        lib = ctypes.CDLL("libseccomp.so.2")
    except OSError:
        return None, None

    class Cmp(ctypes.Structure):
        _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                    ("a", ctypes.c_uint64), ("b", ctypes.c_uint64)]

    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.POINTER(Cmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib, Cmp


def _seccomp_ctx(lib, cmp_type, rules):
    """Return a libseccomp filter context that allows everything but ``rules``."""
    ctx = lib.seccomp_init(_ALLOW)
    for name, act, *cmps in rules:
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:
            continue
        arr = (cmp_type * max(len(cmps), 1))(*[cmp_type(*c) for c in cmps])
        if lib.seccomp_rule_add_array(ctx, act, nr, len(cmps), arr) != 0:
            raise SetupError(f"seccomp rule for {name} failed")
    return ctx


_PID_MARK = 0x3A5CE1F7  # stands for the child's pid in the precompiled filter (pids are below 2**22)


def _export(lib, ctx):
    """Return the BPF program of a libseccomp context (None if it cannot be exported)."""
    r, w = os.pipe()
    try:
        ok = lib.seccomp_export_bpf(ctx, w) == 0
        os.close(w)
        w = None
        bpf = b""
        while chunk := os.read(r, 1 << 16):
            bpf += chunk
    finally:
        os.close(r)
        if w is not None:
            os.close(w)
        lib.seccomp_release(ctx)
    return bpf if ok and bpf and len(bpf) % 8 == 0 else None


def precompiled_filters():
    """Compile the filter once (in the zygote), ready to install in a forked child.

    Two BPF programs: the pid rules with a placeholder where the pid goes, and the static rules, each in
    a ``sock_fprog`` (a forked child has its own copy to write its pid into).  None without libseccomp.
    """
    import ctypes
    import struct

    lib, cmp_type = _seccomp_lib()
    if lib is None:
        return None
    static = _export(lib, _seccomp_ctx(lib, cmp_type, _static_rules()))
    template = _export(lib, _seccomp_ctx(lib, cmp_type, _pid_rules(_PID_MARK)))
    if static is None or template is None:
        return None
    # the k field of each jump that compares with the placeholder (BPF_JMP class)
    insns = [(at, *struct.unpack_from("=HBBI", template, at)) for at in range(0, len(template), 8)]
    marks = [at + 4 for at, code, _, _, k in insns if k == _PID_MARK and code & 0x07 == 0x05]
    if not marks:
        return None

    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    bufs = [ctypes.create_string_buffer(bpf, len(bpf)) for bpf in (template, static)]
    progs = [Prog(len(buf) // 8, ctypes.addressof(buf)) for buf in bufs]
    return {"progs": progs, "bufs": bufs, "marks": marks, "libc": _libc()}


def install_seccomp(precompiled=None):
    """Deny process creation, exec, sockets, signals to others, ptrace, mounts and namespaces.

    ``precompiled``: :func:`precompiled_filters`, compiled once by the zygote; the child then only writes
    its pid into the second program and installs both.  Without it the filter is compiled here.
    """
    if precompiled:
        import ctypes
        import struct

        (pid_prog, static_prog), pid_buf, libc = precompiled["progs"], precompiled["bufs"][0], precompiled["libc"]
        for at in precompiled["marks"]:
            struct.pack_into("=I", pid_buf, at, os.getpid())
        _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        for prog in (pid_prog, static_prog):  # stacked: the strictest answer wins; the second denies seccomp(2)
            _check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0), "seccomp")
        return True
    lib, cmp_type = _seccomp_lib()
    if lib is None:
        return False
    if lib.seccomp_load(_seccomp_ctx(lib, cmp_type, _pid_rules(os.getpid()) + _static_rules())) != 0:
        raise SetupError("seccomp_load failed")
    return True


# ----------------------------------------------------------------------------- one program
def _json_dumps():
    """``json.dumps`` for the plain values this child sends, via the C encoder alone."""
    import _json

    enc = _json.make_encoder(None, None, _json.encode_basestring_ascii, None, ":", ",", False, False, True)
    return lambda obj: "".join(enc(obj, 0))


def _emitter(fd):
    def emit_raw(line):
        view = memoryview(line.encode())
        while view:
            view = view[_write(fd, view):]

    return emit_raw


def isolate(cfg, job):
    """Everything between fork and the candidate: namespaces, root, limits, uid, seccomp."""
    libc = None
    if cfg.get("minimal_root"):
        libc = minimal_root(cfg["view"], cfg.get("user_ns", False), cfg["scratch_mb"])
    elif cfg.get("scratch_dir"):
        os.chdir(cfg["scratch_dir"])
    if cfg.get("view", {}).get("packages"):
        sys.path.append(PACKAGE_ROOT)
        os.environ.update(PACKAGE_ENV)
    set_limits(job["limits"])
    drop_privileges(libc or _libc(), cfg.get("uid"), cfg.get("user_ns", False))
    if cfg.get("seccomp", True) and not install_seccomp(cfg.get("seccomp_bpf")):
        if cfg.get("require_seccomp"):
            raise SetupError("libseccomp is not available")


def _read_inputs(inputs_fd, go_fd):
    """Wait for the supervisor's go, then read the marshalled inputs it wrote into the memfd."""
    if os.read(go_fd, 1) != b"G":
        os._exit(5)  # the supervisor is gone
    os.close(go_fd)
    return _load_memfd(inputs_fd)


def _load_memfd(fd):
    """Read a memfd the supervisor filled to its end, close it and unmarshal what it holds."""
    import marshal

    chunks, at = [], 0
    while chunk := os.pread(fd, 1 << 20, at):
        chunks.append(chunk)
        at += len(chunk)
    os.close(fd)
    return marshal.loads(b"".join(chunks))


def run_tests(job, out_fd, inputs_fd, go_fd):
    """Load the candidate and run tests ``start`` .. ``end`` (called in the isolated child)."""
    _dumps = _json_dumps()
    emit_raw = _emitter(out_fd)
    caps = job["caps"]
    entry, first = job["entry_point"], job["start"]
    not_none = job.get("output_not_none", False)
    sys.setrecursionlimit(job.get("recursion", 3000))
    modules = sys.modules  # the interpreter's own table, whatever the program later binds to sys.modules
    ns = {"__name__": "__candidate__", "__builtins__": __builtins__}
    t0 = _perf()
    try:
        exec(compile(job["code"], "<candidate>", "exec"), ns)
        fn = ns[entry]
    except BaseException as err:  # noqa: BLE001 - anything the program does is a verdict
        emit_raw(_dumps({"load_error": type(err).__name__, "t": _perf() - t0}) + "\n")
        return
    emit_raw(_dumps({"loaded": True, "t": _perf() - t0}) + "\n")
    job = None
    raw_inputs = _read_inputs(inputs_fd, go_fd)
    for j, raw in enumerate(raw_inputs):
        i = first + j
        args = decode(raw)  # fresh objects for every test: a mutated input never leaks
        t0 = _perf()
        try:
            out = fn(*args)
            dt = _perf() - t0
            if not_none and type(out) is not bool:
                out = out is not None
            cap = caps[j]
            try:  # under the same wall-clock limit as the call (the supervisor's clock)
                tag = ""
                if dict.__contains__(modules, "numpy"):
                    value = _numpy_scalar(out)
                    if value is not out:  # evalplus's type check: it passes by == alone
                        tag = ', "np": true'
                        out = value
                    else:
                        out = plain(out)
                    value = None
                enc = None if _size_over(out, cap) > cap else _dumps(encode(out))
                if enc is None or len(enc) > cap:  # too large to send: send its digest
                    h, n = canonical_digest(out)
                    enc = _dumps({"H": h, "n": n})
                line = f'{{"i": {i}, "ok": true, "t": {dt!r}, "v": {enc}{tag}}}\n'
            except (TypeError, ValueError, RecursionError) as err:
                line = _dumps({"i": i, "ok": False, "e": "Unencodable:" + str(err)[:80], "t": dt}) + "\n"
            out = args = enc = None
            emit_raw(line)
            line = None
        except BaseException as err:  # noqa: BLE001
            emit_raw(_dumps({"i": i, "ok": False, "e": type(err).__name__, "t": _perf() - t0}) + "\n")


def _child(cfg, res_fd, job_fd, inputs_fd, go_fd):
    try:
        job = _load_memfd(job_fd)  # the program and its settings: read here, in the child only
        isolate(cfg, job)
    except BaseException as err:  # noqa: BLE001 - reported, never run unisolated
        try:
            _emitter(res_fd)(_json_dumps()({"setup_error": str(err)[:200]}) + "\n")
        finally:
            os._exit(3)
    try:
        # before any candidate code: the supervisor believes a setup error only before this line (a program
        # could write one on its pipe to stop the whole evaluation)
        _emitter(res_fd)('{"isolated": true}\n')
        run_tests(job, res_fd, inputs_fd, go_fd)
    except BaseException:  # noqa: BLE001 - a bug here must not look like a verdict
        if cfg.get("debug"):
            import traceback

            traceback.print_exc()
        os._exit(4)
    os._exit(0)


# ----------------------------------------------------------------------------- the zygote
def _sweep(uid):
    """Kill every process left under the slot uid (root only; nothing should be left)."""
    if uid is None or os.getuid() != 0:
        return
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.kill(-1, 9)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _zygote_setup(cfg, ctrl_fd):
    """Tie the zygote to the supervisor, pre-import what children need; return the control socket."""
    import signal
    import socket

    sock = socket.socket(fileno=ctrl_fd)
    libc = _libc()
    libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # die with the supervisor
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no /proc/<zygote>/mem for same-uid processes
    # orphaned already? (in bwrap's pid namespace the parent is pid 1, and --die-with-parent does this)
    if os.getppid() == 1 and not cfg.get("pid_ns"):
        os._exit(1)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    for mod in PRELOAD if cfg.get("preload", True) else ():
        try:
            __import__(mod)
        except ImportError:
            pass
    import _blake2  # noqa: F401 - for canonical_digest
    import _json  # noqa: F401
    import ctypes  # noqa: F401
    import errno  # noqa: F401
    import resource  # noqa: F401

    _silence_diagnostics()
    if cfg.get("seccomp", True) and cfg.get("preload", True):  # a zygote that serves many programs
        cfg["seccomp_bpf"] = precompiled_filters()
    import gc

    gc.collect()
    gc.freeze()  # the children's collections skip the zygote's objects (fewer pages copied)
    return sock


def _quiet(*args, **kwargs):
    return None


def _silence_diagnostics():
    """Make the interpreter write nothing about a program.

    No traceback of a thread, of an exception raised in ``__del__`` or while a generator closes, no warning.
    A candidate's stderr was /dev/null already, but a program can point it (``sys.stderr``, or its descriptor
    2) at a file it reads back: those texts hold line numbers and local names, which behavioural twins do not
    share (``twins.py``), so two twins could tell themselves apart. The children inherit these hooks; a
    program that resets one names it, and is nobody's twin.
    """
    import threading
    import warnings

    sys.unraisablehook = _quiet
    threading.excepthook = _quiet
    warnings.showwarning = _quiet


def _recv_job(sock):
    """Return the next job's four descriptors (see the control protocol), or None when the supervisor is gone.

    A job starts with ``J``. Any ``K`` before it is a kill request that crossed the zygote's "E" (the child had
    ended on its own, e.g. after a load error, as the supervisor decided to kill it): it is dropped here. Read as
    part of the header it once made the zygote wait for a body that never came, and the slot stalled 30 s.
    """
    import socket

    head, fds = b"", []
    while not head:
        msg, got, _, _ = socket.recv_fds(sock, 1, 4)
        fds += got
        if not msg:
            break
        head = msg.lstrip(b"K")
    if head != b"J" or len(fds) != 4:
        for fd in fds:
            os.close(fd)
        return None
    return fds


def _supervise(sock, pid, cfg):
    """Wait for the child (killing it on request); (status, CPU microseconds), or None if the supervisor left."""
    import select

    pfd = os.pidfd_open(pid)
    try:
        while True:
            ready, _, _ = select.select([sock, pfd], [], [])
            if sock in ready:
                cmd = sock.recv(1)
                if cmd == b"K" or not cmd:
                    os.kill(pid, 9)
                    if not cmd:
                        os.waitpid(pid, 0)
                        _sweep(cfg.get("uid"))
                        return None
            if pfd in ready:
                _, status, usage = os.wait4(pid, 0)
                return status, int(1e6 * (usage.ru_utime + usage.ru_stime))
    finally:
        os.close(pfd)


def zygote(cfg, ctrl_fd):
    """Serve jobs: fork an isolated child per job; never run candidate code here."""
    sock = _zygote_setup(cfg, ctrl_fd)
    sock.sendall(b"R")
    while True:
        fds = _recv_job(sock)
        if fds is None:
            return
        pid = os.fork()
        if pid == 0:
            sock.close()
            _child(cfg, *fds)
        for fd in fds:
            os.close(fd)
        sock.sendall(b"S" + pid.to_bytes(4, "little"))
        ended = _supervise(sock, pid, cfg)
        if ended is None:
            return
        status, cpu_us = ended
        _sweep(cfg.get("uid"))
        sock.sendall(b"E" + (status & 0xFFFFFFFF).to_bytes(4, "little") + cpu_us.to_bytes(8, "little"))
