"""The figures bayespass makes itself hold their labels: saved as they are (``fig.savefig(path)``, no
``bbox_inches="tight"``), no axis label, tick label or title falls off the canvas."""

import matplotlib

matplotlib.use("Agg")  # this test module's choice; the library never switches backends

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import bayespass as bp  # noqa: E402

LONG = ["MBPP__llama_4_maverick_17b_temp0.2", "MBPP__llama_4_maverick_17b_temp0.6", "MBPP__llama_4_maverick_17b_temp1"]


@pytest.fixture(scope="module")
def counts():
    g = np.random.default_rng(5)
    p = np.clip(g.beta(1.2, 1, 80)[None, :] + np.array([[0.0], [-0.05], [-0.1]]), 0, 1)
    n = np.where(np.arange(80) % 5 == 0, 4, 6)  # ragged: the PPC's axis is c / n
    return bp.make_counts(np.broadcast_to(n, p.shape), g.binomial(n, p), config=LONG)


def _outside(fig) -> list[str]:
    """Texts of ``fig`` whose drawn extent leaves the canvas (a pixel of slack)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    width, height = fig.canvas.get_width_height()
    out = []
    for ax in fig.axes:
        shown = [t.label1 for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim()))
                 for t in axis.get_major_ticks() if min(lim) <= t.get_loc() <= max(lim)]
        texts = [ax.xaxis.label, ax.yaxis.label, ax.title, *shown]
        for t in texts:
            if not t.get_visible() or not t.get_text():
                continue
            b = t.get_window_extent(renderer)
            if b.x0 < -1 or b.y0 < -1 or b.x1 > width + 1 or b.y1 > height + 1:
                out.append(t.get_text())
    return out


def test_figures_keep_their_labels_on_the_canvas(counts):
    fit = bp.fit(counts, "bb", "eb", seed=0, progressbar=False)
    cmp = bp.compare_configs(counts, k=(1, 10), model="bb", method="eb")
    figures = {
        "plot_ppc": bp.plot_ppc(fit)[0].figure,  # its x label ('c / n') fell below the canvas
        "plot_forest": bp.plot_forest(cmp)[0].figure,  # long config names fell off its left edge
        "plot_prob_better": bp.plot_prob_better(cmp, k=10).figure,
        "plot_passk_curve": bp.plot_passk_curve(bp.passk_curve(fit, k=[1, 10, 100])).figure,
    }
    try:
        lost = {name: _outside(fig) for name, fig in figures.items()}
    finally:
        plt.close("all")
    assert not any(lost.values()), lost


def test_the_passk_curve_is_drawn_on_the_range_of_its_values(counts):
    """Configs within a few points of each other (real models: 0.69-0.80) were drawn on [0, 1], their bands a line."""
    fit = bp.fit(counts, "bb", "eb", seed=0, progressbar=False)
    curve = bp.passk_curve(fit, k=[1, 2, 5, 10])
    lo, hi = float(curve["eti"].min()), float(curve["eti"].max())
    ax = bp.plot_passk_curve(curve)
    bottom, top = ax.get_ylim()
    plt.close("all")
    assert 0 < bottom < lo and hi < top <= 1.01
    assert top - bottom < 1.3 * (hi - lo) + 0.05  # the values fill most of the height
    g = np.random.default_rng(1)  # a band that reaches near 0 starts at 0, never below
    low = bp.make_counts(np.full((1, 60), 5), g.binomial(5, g.uniform(0, 0.05, (1, 60))))
    curve = bp.passk_curve(bp.fit(low, "bb", "eb", seed=0, progressbar=False), k=[1, 1000])
    ax = bp.plot_passk_curve(curve)
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] > float(curve["eti"].max())
    plt.close("all")


def test_more_than_ten_configs_get_a_panel_each():
    """34 real configs on one panel were a grey mass behind a legend taller than the figure (matplotlib's ten
    colours repeat): above ten, a panel per config on shared axes, each its own config's band and estimates."""
    g = np.random.default_rng(2)
    names = [f"model_{i:02d}|T=0.{i % 9 + 1}" for i in range(12)]
    p = np.clip(g.beta(1.5, 1, 60)[None, :] - np.linspace(0, 0.4, 12)[:, None], 0, 1)
    counts = bp.make_counts(np.full(p.shape, 5), g.binomial(5, p), config=names)
    fit = bp.fit(counts, "bb", "eb", seed=0, progressbar=False)
    curve = bp.passk_curve(fit, k=[1, 2, 5, 10, 100])
    axes = bp.plot_passk_curve(curve, counts=counts)
    try:
        assert len(axes) == 12 and len({a.figure for a in axes}) == 1
        assert [a.get_title() for a in axes] == names
        assert len({a.get_ylim() for a in axes}) == 1  # shared axes: the panels compare at a glance
        for name, a in zip(names, axes, strict=True):
            band = a.collections[0].get_paths()[0].vertices[:, 1]  # the fill of its own band only
            eti = curve["eti"].sel(config=name)
            assert band.min() == pytest.approx(float(eti.min())) and band.max() == pytest.approx(float(eti.max()))
            marks = a.lines[1].get_ydata()  # the unbiased estimates at k <= 5
            assert marks == pytest.approx(bp.passk(counts.sel(config=[name]), [1, 2, 5], method="unbiased")
                                          .values[0])
        assert _outside(axes[0].figure) == []
    finally:
        plt.close("all")
    few = bp.plot_passk_curve(curve.isel(config=slice(0, 3)))  # up to ten: one panel, a colour and a legend entry each
    assert [t.get_text() for t in few.get_legend().get_texts()] == names[:3]
    _, two = plt.subplots(1, 2)
    with pytest.raises(ValueError, match="one per config"):
        bp.plot_passk_curve(curve, ax=two)
    plt.close("all")
    axes = bp.plot_ppc(fit)  # the PPC too: a grid, not a row of 12 (34 configs: 109 inches wide)
    fig = axes[0].figure
    try:
        assert [a.get_title() for a in axes] == names
        assert fig.get_size_inches()[0] < 15 and len(fig.axes) == 12
        assert [a.get_ylabel() for a in axes] == ["fraction of tasks" if i % 4 == 0 else "" for i in range(12)]
        assert _outside(fig) == []
    finally:
        plt.close("all")


def test_a_panel_above_an_empty_cell_keeps_its_x_tick_labels():
    """Five panels in a 3 x 2 grid sharing x: the third has no panel under it, so its column's ticks are its own."""
    from bayespass.stats.panels import panel_grid

    axes = panel_grid(5)
    try:
        axes[0].figure.canvas.draw()
        labelled = [any(t.get_visible() and t.get_text() for t in a.get_xticklabels()) for a in axes]
        assert labelled == [False, False, True, True, True]
        assert len(axes[0].figure.axes) == 5 and _outside(axes[0].figure) == []
    finally:
        plt.close("all")
