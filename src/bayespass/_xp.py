"""Array backends for formulas written once: NumPy (``NP``) and PyTensor (:func:`pt_backend`).

A formula that takes ``xp`` and calls only the names below (``xp.log``,
``xp.gammaln``, ``xp.softmax``, ...) evaluates the same expression with NumPy
arrays or builds it as a PyTensor graph for PyMC, so a model's likelihood and
priors are defined in one place for both.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from scipy.special import betaln as _sp_betaln
from scipy.special import expit, gammaln, log_ndtr

__all__ = ["NP", "pt_backend", "log_binom", "betaln"]


def _np_logsumexp(x, axis=-1):
    """``log(sum(exp(x)))`` along ``axis`` (plain NumPy: scipy's version costs ~50 us a call)."""
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(x - m), axis=axis)) + np.squeeze(m, axis=axis)


def _np_softmax(x, axis=-1):
    """Softmax along ``axis`` (plain NumPy)."""
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


NP = SimpleNamespace(
    name="numpy", log=np.log, log1p=np.log1p, exp=np.exp, expm1=np.expm1, sqrt=np.sqrt, sigmoid=expit,
    gammaln=gammaln, betaln=_sp_betaln, softmax=_np_softmax, logsumexp=_np_logsumexp,
    where=np.where, stack=lambda xs, axis=-1: np.stack(xs, axis=axis), sum=np.sum,
    concatenate=lambda xs, axis=-1: np.concatenate(xs, axis=axis), zeros_like=np.zeros_like,
    eq=np.equal, square=np.square, clip=np.clip, matmul=np.matmul, tanh=np.tanh, log_ndtr=log_ndtr,
    softplus=lambda x: np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x))),  # log(1 + e^x), stable
)


def pt_backend() -> SimpleNamespace:
    """Return the PyTensor counterpart of :data:`NP` (imported lazily)."""
    import pytensor.tensor as pt

    def logsumexp_pt(x, axis=-1):
        m = pt.max(x, axis=axis, keepdims=True)
        m = pt.switch(pt.isinf(m), 0.0, m)
        return pt.squeeze(m, axis=axis) + pt.log(pt.sum(pt.exp(x - m), axis=axis))

    def log_ndtr_pt(z):
        # log Phi(z): the scaled complementary error function below 0 (no underflow), erfc above; each
        # branch sees only its own half so that neither overflows (a switch's gradient takes both)
        zn, zp = pt.minimum(z, 0.0), pt.maximum(z, 0.0)
        return pt.switch(z < 0, pt.log(0.5 * pt.erfcx(-zn / np.sqrt(2.0))) - 0.5 * pt.square(zn),
                         pt.log1p(-0.5 * pt.erfc(zp / np.sqrt(2.0))))

    return SimpleNamespace(
        name="pytensor", log=pt.log, log1p=pt.log1p, exp=pt.exp, expm1=pt.expm1, sqrt=pt.sqrt,
        sigmoid=pt.sigmoid, gammaln=pt.gammaln, betaln=pt.special.betaln,
        softmax=lambda x, axis=-1: pt.special.softmax(x, axis=axis),
        logsumexp=logsumexp_pt, where=pt.switch, stack=lambda xs, axis=-1: pt.stack(xs, axis=axis),
        sum=pt.sum, concatenate=lambda xs, axis=-1: pt.concatenate(xs, axis=axis), zeros_like=pt.zeros_like,
        eq=pt.eq, square=pt.square, clip=pt.clip, matmul=pt.matmul, tanh=pt.tanh, log_ndtr=log_ndtr_pt,
        softplus=pt.softplus,
    )


def log_binom(n, c, xp=NP):
    """``log C(n, c)`` in the backend ``xp``."""
    return xp.gammaln(n + 1) - xp.gammaln(c + 1) - xp.gammaln(n - c + 1)


def betaln(a, b, xp=NP):
    """``log B(a, b)`` in the backend ``xp`` (scipy's betaln with NumPy: accurate for large arguments)."""
    return xp.betaln(a, b)
