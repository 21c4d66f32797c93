"""benchmarks/ppc_power.py: the histogram check's p-value before (10 bins of c / n) from a fit's own replicates."""

import numpy as np

import bayespass as bp
from bayespass.testing import simulate_counts


def test_the_binned_p_value_is_the_products_where_the_product_bins_by_c_over_n(load_benchmark):
    """Above 25 samples per task bp.ppc keeps 10 bins of c / n: the benchmark's 'before' must equal it there, and
    differ from it at 20 samples per task, where bp.ppc has one bin per c."""
    bench = load_benchmark("ppc_power")
    g = np.random.default_rng(3)
    p = g.choice([0.02, 0.2, 0.5, 0.9], 200)
    for m, same in ((30, True), (20, False)):
        fit = bp.fit(simulate_counts(p, m, seed=m), "bb", "eb", seed=0)
        ours = bp.ppc(fit).p_value.sel(statistic="hist_distance").item()
        assert np.isclose(bench.binned_p_value(fit)[0], ours) == same
