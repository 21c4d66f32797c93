"""One validated registry of defaults, in the spirit of ArviZ ``rcParams``.

>>> import bayespass
>>> bayespass.rcParams["stats.ci_prob"]
0.9
>>> with bayespass.rc_context({"stats.ci_prob": 0.95}):
...     bayespass.rcParams["stats.ci_prob"]
0.95
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

__all__ = ["rcParams", "rc_context"]


def _prob(name: str, v: Any) -> float:
    v = float(v)
    if not 0.0 < v < 1.0:
        raise ValueError(f"{name} must be a probability in (0, 1); got {v!r}")
    return v


def _pos_float(name: str, v: Any) -> float:
    v = float(v)
    if not v > 0:
        raise ValueError(f"{name} must be a positive number; got {v!r}")
    return v


def _pos_int(name: str, v: Any) -> int:
    if isinstance(v, bool) or int(v) != v or int(v) < 1:
        raise ValueError(f"{name} must be a positive integer; got {v!r}")
    return int(v)


def _int(name: str, v: Any) -> int:
    if isinstance(v, bool) or int(v) != v:
        raise ValueError(f"{name} must be an integer; got {v!r}")
    return int(v)


def _bool(name: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"{name} must be True or False; got {v!r}")
    return bool(v)


def _weights(name: str, v: Any) -> dict:
    if not isinstance(v, dict) or not all(isinstance(k, str) for k in v):
        raise ValueError(f"{name} must be a dict {{model name: weight}}; got {v!r}")
    w = {k: float(x) for k, x in v.items()}
    if any(not 0.0 <= x <= 1.0 for x in w.values()) or sum(w.values()) > 1.0 + 1e-9:
        raise ValueError(f"{name} must hold weights in [0, 1] that sum to at most 1; got {v!r}")
    return w


def _choice(name: str, v: Any, allowed: tuple) -> str:
    if v not in allowed:
        raise ValueError(f"{name}={v!r} is not supported; choose one of {list(allowed)}")
    return v


def _names(name: str, v: Any) -> tuple:
    if isinstance(v, str):
        v = tuple(x.strip() for x in v.split(",") if x.strip())
    v = tuple(v)
    if len(v) < 2 or not all(isinstance(x, str) for x in v):
        raise ValueError(f"{name} must name at least two models; got {v!r}")
    return v


_SPEC: dict[str, tuple[Any, Callable[[str, Any], Any]]] = {
    "stats.ci_prob": (0.9, _prob),
    "stats.seed": (42, _int),
    "stats.linmix_m_low": (5.0, _pos_float),
    "stats.linmix_m_high": (50.0, _pos_float),
    "stats.model": ("auto", lambda name, v: _choice(name, v, ("bb", "zoibb", "flex", "lnorm", "hier", "auto"))),
    "stats.method": ("eb", lambda name, v: _choice(name, v, ("eb", "mcmc"))),
    "stats.candidates": (("bb", "zoibb", "flex", "lnorm"), _names),
    "stats.stacking_concentration": (1.5, _pos_float),
    # a stacked fit's pass@k band (bayespass.stats.curve.passk_bands) and the share of draws a candidate needs
    # to widen it
    "stats.stack_band": ("hull-short",
                         lambda name, v: _choice(name, v,
                                                 ("hull-beyond", "hull-short", "hull", "mixture", "midpoint"))),
    "stats.stack_min_share": (0.05, _prob),
    # the default's band within the samples drawn (every task has n >= 2k) holds the normal band of the unbiased
    # pass@k, which holds whatever the shape of p (bayespass.stats.curve.passk_bands)
    "stats.unbiased_band": (True, _bool),
    # the weights of a stacked fit's candidates where every task of a config has at most one sample: LOO cannot
    # weigh them there (each predicts only P(c = 1)); the candidates not named share the rest
    "stats.stack_single_weights": ({"zoibb": 0.7}, _weights),
    "eb.draws": (100, _pos_int),
    "eb.warmup": (200, _pos_int),
    "eb.chains": (16, _pos_int),
    "eb.ess_min": (200.0, _pos_float),
    "eb.rhat_max": (1.05, _pos_float),  # 16 chains of 100 draws: well-mixed split-R-hat reaches ~1.03
    "eb.reweight": (True, _bool),  # importance-resample the chains' draws (bayespass.models.reweight)
    # processes sampling the candidates of model="auto" on the fast path (forked; Linux only); threads of
    # lnorm's compiled loop on large calls and of other NumPy-heavy loops
    "eb.cores": (min(2, os.cpu_count() or 1), _pos_int),
    "mcmc.draws": (1000, _pos_int),
    "mcmc.tune": (1000, _pos_int),
    "mcmc.chains": (4, _pos_int),
    "mcmc.cores": (min(4, os.cpu_count() or 1), _pos_int),
    "mcmc.target_accept": (0.9, _prob),
    "mcmc.rhat_max": (1.01, _pos_float),
    "mcmc.ess_min": (400.0, _pos_float),
    "execute.min_time_limit": (1.0, _pos_float),
    "execute.gt_time_factor": (4.0, _pos_float),
    "execute.memory_limit_mb": (2048, _pos_int),
    "execute.workers": (os.cpu_count() or 1, _pos_int),
    "execute.max_timeouts": (1, _pos_int),
    # conformal post-processors.  Gating calibrates on 60% of tasks: its CRC threshold is a quantile of
    # per-task losses and is noisier than the reliability level's quantile of scores; both are as round 1
    # measured them (benchmarks/RESULTS.md "Gating"), not re-derived.
    "gating.alpha": (0.1, _prob),
    "gating.calib_fraction": (0.6, _prob),
    "gating.n_splits": (100, _pos_int),
    "reliability.alpha": (0.1, _prob),
    "reliability.calib_fraction": (0.5, _prob),
    "reliability.n_splits": (100, _pos_int),
    "reliability.delta": (0.1, _prob),
    "behaviour.probe_fraction": (0.5, _prob),
    "incoherence.delta": (0.05, _prob),
    "incoherence.n_mc": (1000, _pos_int),
}


class _RcParams(MutableMapping):
    def __init__(self) -> None:
        self._data = {k: v[0] for k, v in _SPEC.items()}

    def __getitem__(self, key: str) -> Any:
        if key not in self._data:
            raise KeyError(f"{key!r} is not a bayespass default; valid keys: {sorted(self._data)}")
        return self._data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in _SPEC:
            raise KeyError(f"{key!r} is not a bayespass default; valid keys: {sorted(_SPEC)}")
        self._data[key] = _SPEC[key][1](key, value)

    def __delitem__(self, key: str) -> None:
        raise TypeError("defaults cannot be deleted; set them to another value instead")

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return "\n".join(f"{k:28s} {v!r}" for k, v in sorted(self._data.items()))


rcParams = _RcParams()


def resolve(value: Any, key: str) -> Any:
    """Return ``rcParams[key]`` when ``value`` is None, else ``value`` validated as that default would be.

    The error names the parameter (the part of ``key`` after the dot), the value and what is allowed.
    """
    if value is None:
        return rcParams[key]
    return _SPEC[key][1](key.split(".", 1)[1], value)


@contextmanager
def rc_context(values: dict[str, Any]) -> Iterator[None]:
    """Temporarily set defaults inside a ``with`` block."""
    old = {k: rcParams[k] for k in values}
    try:
        for k, v in values.items():
            rcParams[k] = v
        yield
    finally:
        for k, v in old.items():
            rcParams._data[k] = v
