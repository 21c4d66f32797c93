"""Numba compilation of the models' compiled loops, shared.

The loops are ``_lnorm_kernel``, ``_flex_kernel``, ``_bb_kernel`` and ``_shared_kernel``.

A kernel module defines plain Python functions; :func:`compiled` replaces them in the module's namespace by
Numba dispatchers (so that they call each other compiled) on the first use, once per process, and returns
the entry point.  Numba is imported only then: ``import bayespass`` does not pay for it.

Each kernel module is self-contained: its compiled functions call only functions of the same file. Numba's
disk cache is invalidated by the caller's own file alone (its mtime and size), so a helper shared from another
file and edited later would stay stale inside every cached caller. The few lines the kernels have in common
(the atoms' masses and blend, a softmax) are therefore written in each, on purpose.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["compiled", "arg"]

_LOCK = threading.Lock()


def compiled(namespace: dict, names: tuple[str, ...], entry: str):
    """Return ``namespace[entry]`` compiled, compiling ``names`` in ``namespace`` on the first call.

    Compiled code is cached on disk (next to the module, or in Numba's user cache directory). Where
    neither is writable Numba refuses to cache, and the functions are compiled in memory instead (a few
    seconds per process).
    """
    import numba

    with _LOCK:  # the stack fits its candidates in threads: compile once
        if not isinstance(namespace[entry], numba.core.dispatcher.Dispatcher):
            originals = {name: namespace[name] for name in names}
            try:
                _jit_all(namespace, originals, cache=True)
            except RuntimeError:  # numba: "cannot cache function ...: no locator available for file ..."
                _jit_all(namespace, originals, cache=False)
    return namespace[entry]


def _jit_all(namespace: dict, originals: dict, *, cache: bool) -> None:
    import numba

    jit = numba.njit(cache=cache, nogil=True, error_model="numpy")
    # compiled lazily, at the first call, against the namespace's names (by then all dispatchers)
    namespace.update({name: jit(fn) for name, fn in originals.items()})


def arg(a, shape=None, dtype=np.float64) -> np.ndarray:
    """Return ``a`` (broadcast to ``shape``) as a writeable C-ordered ``dtype`` array, copied only if it is not one.

    One array type per argument: Numba compiles (and caches) a kernel once per combination of argument types,
    and read-only or strided views would each add one.
    """
    a = np.asarray(a)
    if shape is not None and a.shape != tuple(shape):
        a = np.broadcast_to(a, shape)
    return np.require(a, dtype=dtype, requirements=["C", "W"])
