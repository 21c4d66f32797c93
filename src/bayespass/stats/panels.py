"""Panels for figures of many configs: one Axes per config in a square-ish grid, on one figure.

A figure that draws every config on one Axes (pass@k curves, risk-coverage, conformal sets) is legible for a
handful of configs; 34 real configs made one grey mass behind a legend taller than the figure. Above a figure's
own limit each config gets a panel, as ArviZ draws one variable per panel.
"""

from __future__ import annotations

import numpy as np


def panel_grid(n: int, *, size: tuple[float, float] = (2.3, 1.9), ncols: int | None = None, sharex: bool = True,
               sharey: bool = True) -> np.ndarray:
    """Return ``n`` Axes of one new figure, row by row in a grid of ``ncols`` columns (default about sqrt(n)).

    ``size``: inches per panel. Cells of the grid past the ``n``-th are removed.
    """
    import matplotlib.pyplot as plt

    ncols = int(np.ceil(np.sqrt(n))) if ncols is None else int(ncols)
    nrows = int(np.ceil(n / ncols))
    _, grid = plt.subplots(nrows, ncols, sharex=sharex, sharey=sharey, squeeze=False, layout="constrained",
                           figsize=(size[0] * ncols + 0.6, size[1] * nrows + 0.9))
    for j in range(n, nrows * ncols):  # empty cells, all in the last row
        grid.flat[j].remove()
        if sharex and nrows > 1:  # the panel above an empty cell is the last of its column: its x ticks labelled
            grid[-2, j % ncols].tick_params(labelbottom=True)
    return grid.ravel()[:n]


def panels_of(ax, n: int, *, most_on_one: int, size: tuple[float, float] = (2.3, 1.9),
              one_size: tuple[float, float] = (6.5, 4.5)) -> np.ndarray:
    """Return the Axes to draw ``n`` configs on, as an array (one Axes, or one per config).

    ``ax`` given: its Axes; else a new figure with one Axes (``one_size`` inches) where ``n <= most_on_one``,
    one per config above. Another number of Axes given is refused, naming ``ax``.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        if n > most_on_one:
            return panel_grid(n, size=size)
        return np.array([plt.subplots(figsize=one_size, layout="constrained")[1]], dtype=object)
    panels = np.ravel(np.asarray(ax, dtype=object))
    if panels.size not in (1, n):
        raise ValueError(f"ax must be one Axes or one per config ({n}); got {panels.size}")
    return panels


def config_panel(panels: np.ndarray, i: int, title: str, *, fontsize: float = 8):
    """Return the Axes the ``i``-th config draws on: the one Axes, or its own panel, titled ``title``."""
    if panels.size == 1:
        return panels[0]
    panels[i].set_title(title, fontsize=fontsize)
    return panels[i]


def figure_of(drawn):
    """Return the figure of what a plot function returned: one Axes, or an array of them."""
    return np.ravel(np.asarray(drawn, dtype=object))[0].figure


def label_panels(panels: np.ndarray, xlabel: str, ylabel: str, title: str, *, fontsize: float | None = None) -> None:
    """Label one Axes, or the figure of several panels (its x and y labels once, the title above them all)."""
    if panels.size == 1:
        panels[0].set_xlabel(xlabel)
        panels[0].set_ylabel(ylabel)
        panels[0].set_title(title, fontsize=fontsize)
        return
    fig = panels[0].figure
    fig.suptitle(title, fontsize=10)
    fig.supxlabel(xlabel, fontsize=9)
    fig.supylabel(ylabel, fontsize=9)
