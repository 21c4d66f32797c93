"""The tables of a run, computed by the post-processors from the stages' results."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ..results import Table

__all__ = ["all_tables", "passk_table"]


def passk_table(counts, idatas: dict, k, truth=None, *, main: str | None = None, checked=None) -> Table:
    """pass@k per config and k: unbiased estimate, each fit's mean and interval, truth when known.

    Printed: the unbiased estimate, the ``main`` fit's mean and interval and the truth; every fit's
    columns are in the frame (``to_dataframe``, the CSV and the report).  The note names what the ``main``
    fit's posterior predictive check flags (``checked``: that check, if made already).
    """
    from ..defaults import rcParams
    from ..stats.curve import counts_notes, passk_curve
    from ..stats.passk import passk

    k = np.asarray(k)
    frames = [passk(counts, k, method="unbiased").to_dataframe(name="unbiased")[["unbiased"]]]
    for name, idata in idatas.items():
        cur = passk_curve(idata, k)
        eti = cur["eti"].to_dataframe().unstack("ci_bound")["eti"]
        frames.append(cur["mean"].to_dataframe().join(eti).set_axis([name, f"{name}_lo", f"{name}_hi"], axis=1))
    from ..stats.bounds import passk_bounds

    free = passk_bounds(counts, k).to_dataframe().unstack("ci_bound")["passk_bounds"]
    frames.append(free.set_axis(["no_prior_lo", "no_prior_hi"], axis=1))
    if truth is not None:
        frames.append(truth.to_dataframe(name="truth")[["truth"]])
    df = pd.concat(frames, axis=1).reset_index()
    ci = rcParams["stats.ci_prob"]
    df.attrs.update(ci_prob=ci, main=main)
    brief = ["config", "k", "unbiased"] + ([main, f"{main}_lo", f"{main}_hi"] if main in idatas else []) + ["truth"]
    known = truth is not None
    from ..stats.ppc import misfit_note

    misfit = misfit_note(idatas[main], checked) if main in idatas else ""
    return Table.of(df, f"pass@k (unbiased; main fit {main}: posterior mean and {ci:.0%} equal-tailed interval"
                    + ("; truth when known)" if known else ")"),
                    note=f"Unbiased estimator where k <= n, Bayesian posterior mean with its {ci:.0%} equal-tailed "
                    "interval for every fit (columns NAME, NAME_lo, NAME_hi; any k, also k > n)"
                    + (", " if known else " and ") + "the bounds that hold under any spread of p over the tasks, no "
                    "prior (no_prior_lo, no_prior_hi: bp.passk_bounds)"
                    + (", and the synthetic coder's truth (truth)." if known else ".")
                    + (f" Main fit: {misfit}." if misfit else "") + counts_notes(counts), brief=brief)


def _ppc_table(checks: dict) -> pd.DataFrame:
    rows = []
    for name, check in checks.items():
        p = check["p_value"].to_pandas()
        p.columns.name = None
        p.insert(0, "fit", name)
        rows.append(p.reset_index())
    table = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
    return Table.of(table, "Posterior predictive checks (Bayesian p-values)",
                    note="Mid-p values per statistic and fit, not the statistics themselves; values near 0 or 1 "
                         "flag a misfit (hist_distance, a distance to the expected histogram: only values near 0).")


def _loo_tables(cfg, idatas: dict) -> dict:
    from ..stats.compare import compare, laplace_shared

    out = {}
    for method in cfg.methods:
        pair = {m: idatas[f"{m}-{method}"] for m in cfg.models if f"{m}-{method}" in idatas}
        if len(pair) >= 2:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                df = compare(pair).reset_index()
            name = "empirical Bayes" if method == "eb" else "MCMC"
            bad = sorted(set(df.loc[df["pareto_k_max"] > 0.7, "model"])) if "pareto_k_max" in df else []
            flag = f"; Pareto k > 0.7: elpd of {', '.join(bad)} approximate" if bad else ""
            for name in laplace_shared(pair):  # bp.compare's warning, silenced above
                flag += f"; {name} by EB: its elpd is biased low (Laplace draws), compare it by MCMC"
            out[f"loo_{method}"] = Table.of(df, f"Model comparison (PSIS-LOO, {name} fits{flag})",
                                            note="pareto_k_max above 0.7 means some tasks sway that model's "
                                                 "hyperparameters so much that importance sampling cannot leave "
                                                 "them out reliably: its elpd_loo, and the stacking weight built "
                                                 "on it, are then approximate (more tasks or samples help).",
                                            brief=[c for c in ("config", "model", "rank", "elpd_loo", "elpd_diff",
                                                               "se", "dse", "weight", "pareto_k_max") if c in df])
    return out


def all_tables(ctx, truth_passk) -> tuple[dict, dict]:
    """Every table of a run (also written to tables/*.csv) and the post-processors' datasets."""
    from ..stats.gating import gate, gate_diagnostics, gate_table
    from ..stats.incoherence import incoherence, incoherence_summary
    from ..stats.metrics import metric_table
    from ..stats.ppc import ppc
    from ..stats.reliability import reliability, reliability_table

    cfg, samples, main = ctx.cfg, ctx.samples, ctx.main
    checks = {name: ppc(idata) for name, idata in ctx.idatas.items()}  # the PPC table's, and the main fit's note
    tables = {"passk": passk_table(ctx.counts, ctx.idatas, cfg.passk_k,
                                   truth_passk(ctx.out, ctx.counts, np.asarray(cfg.passk_k)), main=main,
                                   checked=checks.get(main))}
    if main in ctx.idatas:
        from ..models.fit import stacking_table

        if (weights := stacking_table(ctx.idatas[main])) is not None:
            tables["stacking"] = weights
    tables["ppc"] = _ppc_table(checks)
    tables |= _loo_tables(cfg, ctx.idatas)
    post = {"gated": gate(samples, alpha=cfg.alpha, n_splits=cfg.n_splits, seed=cfg.seed, tie_break=cfg.tie_break),
            "rel": reliability(samples, alpha=cfg.alpha, n_splits=cfg.n_splits, seed=cfg.seed)}
    tables["gating"] = gate_table(post["gated"])
    tables["gating_diagnostics"] = gate_diagnostics(samples)
    tables["reliability"] = reliability_table(post["rel"])
    if ctx.fuzz is not None:
        post["inc"] = incoherence(ctx.fuzz, samples=samples, n_mc=1000, n_repeats=1, seed=cfg.seed)
        tables["incoherence"] = incoherence_summary(post["inc"])
    if ctx.counts.sizes["config"] > 1:
        from ..stats.ranking import compare_configs, leaderboard, prob_better_table

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            post["cmp"] = compare_configs(ctx.counts, k=cfg.passk_k, model="shared", seed=cfg.seed,
                                          band_fit=_per_config_fit(ctx.idatas.get(main)))
        _pass_on_data_warnings(caught)
        tables["leaderboard"] = leaderboard(post["cmp"])
        tables["prob_better"] = prob_better_table(post["cmp"])
    from .adaptive import rounds_table

    if (rounds := rounds_table(ctx.out)) is not None:
        tables["rounds"] = rounds
    tables["metrics"] = metric_table(samples, idata=ctx.idatas.get(main), k=[x for x in (1, 5, 10) if x <= cfg.k])
    return tables, post


def _pass_on_data_warnings(caught) -> None:
    """Warn again what the comparison said about the counts (configs on different task sets, one sample per task).

    Convergence (a FitWarning: recorded in the fit) and numerical warnings stay quiet; the comparison's warnings
    about the data were silenced with them, so the run's leaderboard compared configs on different tasks without
    saying so, where ``bayespass compare`` did.
    """
    from ..models.eb import FitWarning

    for w in caught:
        if issubclass(w.category, UserWarning) and not issubclass(w.category, FitWarning):
            warnings.warn(str(w.message), w.category, stacklevel=2)


def _per_config_fit(idata):
    """Return the run's main fit if it is per-config (the leaderboard joins its band beyond the samples), else None."""
    from ..models.base import is_joint
    from ..models.predictive import model_of

    return None if idata is None or is_joint(model_of(idata)) else idata
