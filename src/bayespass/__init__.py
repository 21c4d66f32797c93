"""bayespass: honest uncertainty for code-LLM evaluation.

Public functions are imported lazily, so ``import bayespass`` stays light
(no numpy/xarray/PyMC until a function is first used).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._version import __version__

_LAZY = {
    "rcParams": "defaults",
    "rc_context": "defaults",
    "make_counts": "data.counts",
    "validate_counts": "data.counts",
    "counts_from_frame": "data.counts",
    "merge_counts": "data.counts",
    "read_counts": "data.io",
    "write_counts": "data.io",
    "passk": "stats.passk",
    "avg_at_n": "stats.passk",
    "cons_at_k": "stats.passk",
    "fit_eb": "models.eb",
    "FitWarning": "models.eb",
    "estimate_table": "stats.table",
    "testing": None,
    "fit": "models.fit",
    "stack": "models.fit",
    "build_model": "models.specs",
    "passk_draws": "models.predictive",
    "passk_curve": "stats.curve",
    "passk_bounds": "stats.bounds",
    "curve_table": "stats.curve",
    "plot_passk_curve": "stats.curve",
    "improvability": "stats.curve",
    "ppc": "stats.ppc",
    "plot_ppc": "stats.ppc",
    "compare": "stats.compare",
    "cv_elpd": "stats.compare",
    "loo": "stats.compare",
    "compare_configs": "stats.ranking",
    "plan": "stats.plan",
    "allocate": "stats.plan",
    "plot_plan": "stats.plan",
    "leaderboard": "stats.ranking",
    "prob_better_table": "stats.ranking",
    "plot_forest": "stats.ranking",
    "plot_prob_better": "stats.ranking",
    "plot_diff_curve": "stats.ranking",
    "load_suite": "execution.groundtruth",
    "execute": "execution.engine",
    "to_counts": "execution.engine",
    "Limits": "execution.sandbox",
    "run": "pipeline",
    "load_run": "pipeline",
    "RunConfig": "pipeline",
    "gate": "stats.gating",
    "CRCGate": "stats.gating",
    "ConformalReliability": "stats.reliability",
    "reliability": "stats.reliability",
    "incoherence": "stats.incoherence",
    "metric_table": "stats.metrics",
    "Table": "results",
}

_ALIASES = {"stack": "stack_fits"}

__all__ = ["__version__", *sorted(_LAZY)]


def __getattr__(name: str):
    if name in _LAZY and _LAZY[name] is None:
        return importlib.import_module(f".{name}", __name__)
    if name in _LAZY:
        attr = _ALIASES.get(name, name)
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bayespass' has no attribute {name!r}")


def __dir__() -> list[str]:
    """Return the public names and the subpackages already imported (not this module's own helpers)."""
    loaded = {k for k, v in globals().items() if not k.startswith("_") and getattr(v, "__name__", "").startswith(
        f"{__name__}.")}
    return sorted({*__all__, *loaded})


if TYPE_CHECKING:  # pragma: no cover
    from .data.counts import counts_from_frame, make_counts, merge_counts, validate_counts
    from .data.io import read_counts, write_counts
    from .defaults import rc_context, rcParams
    from .execution.engine import execute, to_counts
    from .execution.groundtruth import load_suite
    from .execution.sandbox import Limits
    from .models.eb import FitWarning, fit_eb
    from .models.fit import fit
    from .models.fit import stack_fits as stack
    from .models.predictive import passk_draws
    from .models.specs import build_model
    from .pipeline import RunConfig, load_run, run
    from .stats.compare import compare, cv_elpd, loo
    from .stats.curve import curve_table, improvability, passk_curve, plot_passk_curve
    from .stats.gating import gate
    from .stats.incoherence import incoherence
    from .stats.metrics import metric_table
    from .stats.passk import avg_at_n, cons_at_k, passk
    from .stats.plan import allocate, plan, plot_plan
    from .stats.ppc import plot_ppc, ppc
    from .stats.ranking import (
        compare_configs,
        leaderboard,
        plot_diff_curve,
        plot_forest,
        plot_prob_better,
        prob_better_table,
    )
    from .stats.reliability import reliability
    from .stats.table import estimate_table
