"""One self-contained HTML report (figures embedded as base64 PNG, no external resources)."""

from __future__ import annotations

import base64
import html
import os
from dataclasses import asdict
from pathlib import Path

from .._version import __version__

__all__ = ["write_report"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#222;line-height:1.45}
h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;font-size:.82em;margin:.6em 0}td,th{border:1px solid #ddd;padding:.25em .5em;
text-align:right}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
img{max-width:100%;border:1px solid #eee;margin:.4em 0}.note{color:#555;font-size:.9em}
code{background:#f4f4f4;padding:0 .2em}
"""

_SECTIONS = [
    ("passk", "pass@k with credible intervals",
     "Unbiased estimator where k <= n, Bayesian posterior mean with its {ci}% equal-tailed interval for every fit"
     " (any k, also k > n), and the synthetic truth when the coder is synthetic."),
    ("rounds", "Rounds of generation (--until-width)",
     "Samples drawn in rounds: K per task first, then each round's samples go to the tasks (and configs) where"
     " they shrink the {ci}% band of pass@k most (bayespass.allocate); the widest band after each round, and"
     " why the rounds stopped."),
    ("leaderboard", "Which config is better: leaderboard",
     "Configs by expected rank of their pass@k (rank 1 = best) under the joint model 'shared' (task difficulty"
     " shared by the configs): posterior mean with its {ci}%"
     " band, the central {ci}% interval of the rank, P(best), and the unbiased estimate where every task has"
     " n >= k. The matrix shows P(pass@k of row > column) from the same posterior draws."),
    ("prob_better", "P(better) for every pair of configs", "Posterior probability and difference with its band."),
    ("metrics", "Metric table", "avg@n, cons@K (majority of the K samples correct), maj@K (the dominant behaviour"
     " cluster passes the gold tests) and how to read pass@K against cons@K."),
    ("ppc", "Posterior predictive checks", "Mid-p values per statistic; values near 0 or 1 flag a misfit."),
    ("loo_eb", "Model comparison (PSIS-LOO, empirical Bayes)", ""),
    ("loo_mcmc", "Model comparison (PSIS-LOO, MCMC)", ""),
    ("gating", "Deployment gating at the target silent-failure rate",
     "Mean over random calibration/test splits. Behaviour-CRC answers a task iff its largest behaviour cluster"
     " holds at least a share lambda of the K samples (lambda chosen by conformal risk control)."),
    ("gating_diagnostics", "Behaviour diagnostics of the K-sample bundles", ""),
    ("reliability", "Conformal reliability level",
     "Level = share of calibration tasks whose most frequent behaviour class is correct, over n+1 (Wilson {ci}%"
     " bounds); coverage and set size of the conformal sets; samples saved by Hoeffding sequential stopping."),
    ("incoherence", "Incoherence on fuzzed inputs (oracle-free lower bound on error)",
     "I = P(two sampled programs disagree on a fuzzed input), E = P(a sampled program disagrees with the"
     " canonical solution); I <= 2E always, so I > 0 certifies an error without a reference solution."),
]

_FIGS = [("passk", "pass@k curves"), ("ppc", "Posterior predictive check"), ("forest", "pass@k forest plot"),
         ("prob_better", "P(better) matrix"),
         ("risk_coverage", "Risk-coverage"), ("set_size", "Conformal set size vs entropy"),
         ("incoherence", "Incoherence vs error")]


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"></figure>'


def write_report(path: str | os.PathLike, *, cfg, tables: dict, figures: dict, samples=None, main=None,
                 timings=None) -> Path:
    """Write the report; every table and figure of the run, settings and timings."""
    from ..defaults import rcParams

    path = Path(path)
    ci_prob = rcParams["stats.ci_prob"]
    parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>bayespass run report</title>"
             f"<style>{_CSS}</style></head><body>",
             "<h1>bayespass run report</h1>",
             f"<p class=note>bayespass {__version__}; suite <code>{html.escape(cfg.suite)}</code>; coder "
             f"<code>{html.escape(str(cfg.coder))}</code>; K = {cfg.k}; temperatures "
             f"{', '.join(map(str, cfg.temperatures))}; main fit <code>{html.escape(str(main))}</code>.</p>"]
    weights = tables["passk"].attrs.get("stacking_weights") if "passk" in tables else None
    if weights:
        rows = "".join(f"<tr><td>{html.escape(c)}</td>" + "".join(f"<td>{w:.2f}</td>" for w in ws.values())
                       + "</tr>" for c, ws in weights.items())
        head = "".join(f"<th>{html.escape(m)}</th>" for m in next(iter(weights.values())))
        parts.append("<p class=note>The main fit stacks the candidate models by their PSIS-LOO predictive "
                     "density (Bayesian stacking); the weights per config:</p>"
                     f"<table><tr><th>config</th>{head}</tr>{rows}</table>")
    if samples is not None:
        parts.append(f"<p class=note>{samples.sizes['task']} tasks, {int(samples.exists.sum())} samples, "
                     f"{samples.attrs.get('n_unique_programs', '?')} distinct programs, sandbox layer "
                     f"<code>{html.escape(str(samples.attrs.get('sandbox_layer', '?')))}</code>.</p>")
    figs_done = set()
    for key, title, note in _SECTIONS:
        if key not in tables or tables[key] is None or len(tables[key]) == 0:
            continue
        parts.append(f"<h2>{html.escape(title)}</h2>")
        if note:
            parts.append(f"<p class=note>{html.escape(note.format(ci=round(100 * ci_prob)))}</p>")
        parts.append(tables[key].to_html(index=False, float_format=lambda v: f"{v:.3f}", na_rep="—", border=0))
        fig_keys = {"passk": ["passk"], "ppc": ["ppc"], "gating": ["risk_coverage"], "reliability": ["set_size"],
                    "incoherence": ["incoherence"], "leaderboard": ["forest", "prob_better"]}.get(key, [])
        for fk in fig_keys:
            if fk in figures:
                parts.append(_img(figures[fk], dict(_FIGS)[fk]))
                figs_done.add(fk)
    for fk, alt in _FIGS:
        if fk in figures and fk not in figs_done:
            parts.append(f"<h2>{html.escape(alt)}</h2>" + _img(figures[fk], alt))
    parts.append("<h2>Settings</h2><pre>" + html.escape(str(asdict(cfg))) + "</pre>")
    if timings:
        parts.append("<p class=note>Stage timings (s): " + html.escape(", ".join(f"{k} {v}" for k, v in
                                                                                  timings.items())) + "</p>")
    parts.append("<p class=note>Guarantees assume exchangeable tasks (calibration and test drawn alike) and"
                 " independent samples per task; they do not hold under distribution shift.</p></body></html>")
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(parts), encoding="utf-8")
    os.replace(tmp, path)
    return path
