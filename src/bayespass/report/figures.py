"""The run's PNG figures (matplotlib; the backend is the user's: headless machines fall back to Agg)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["make_figures"]


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


#: the run's pass@k figure draws the assumption-free bounds (dotted) for at most this many configs (each costs
#: two linear programs per k; more dotted lines than this hide the bands), at this many k
BOUNDS_MAX_CONFIGS = 6
BOUNDS_POINTS = 12


def _figure_bounds(counts, k):
    """:func:`bayespass.passk_bounds` at :data:`BOUNDS_POINTS` k log-spaced over the figure's, or None."""
    if counts.sizes["config"] > BOUNDS_MAX_CONFIGS:
        return None
    from ..stats.bounds import passk_bounds

    pts = np.unique(np.round(np.logspace(0, np.log10(k.max()), BOUNDS_POINTS)).astype(int))
    return passk_bounds(counts, pts)


def make_figures(folder: Path, *, counts, idatas: dict, main: str | None, gated, curve, rel, inc=None,
                 truth=None, cmp=None) -> dict[str, Path]:
    """Write the run's figures: pass@k curves (truth when known), PPC, forest and P(better), gating, sets."""
    from ..stats.curve import passk_curve, plot_passk_curve
    from ..stats.gating import plot_risk_coverage
    from ..stats.incoherence import plot_incoherence
    from ..stats.panels import figure_of
    from ..stats.ppc import plot_ppc
    from ..stats.reliability import plot_set_size

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    figs: dict[str, Path] = {}
    k = np.unique(np.round(np.logspace(0, np.log10(max(200, 4 * int(counts.n.max()))), 40)).astype(int))
    if main is not None:
        truth = truth(k) if callable(truth) else None  # truth(k) -> (config, k) when the truth is known
        cur = passk_curve(idatas[main], k)
        drawn = plot_passk_curve(cur, counts=counts, truth=truth, bounds=_figure_bounds(counts, k))  # > 10: panels
        figs["passk"] = _save(figure_of(drawn), folder / "passk_curves.png")
        axes = plot_ppc(idatas[main])
        axes[0].figure.suptitle(f"Posterior predictive check ({main})", fontsize=10)
        figs["ppc"] = _save(axes[0].figure, folder / "ppc.png")
    if cmp is not None:
        from ..stats.ranking import plot_forest, plot_prob_better

        figs["forest"] = _save(plot_forest(cmp)[0].figure, folder / "forest.png")
        k_mid = int(cmp.k.values[min(1, cmp.sizes["k"] - 1)])
        figs["prob_better"] = _save(plot_prob_better(cmp, k=k_mid).figure, folder / "prob_better.png")
    # each on its own figure: one Axes for a few configs, a panel per config for more
    figs["risk_coverage"] = _save(figure_of(plot_risk_coverage(curve, gated)), folder / "risk_coverage.png")
    figs["set_size"] = _save(figure_of(plot_set_size(rel)), folder / "set_size.png")
    if inc is not None:
        figs["incoherence"] = _save(figure_of(plot_incoherence(inc)), folder / "incoherence.png")
    return figs
