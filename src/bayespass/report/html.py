"""One self-contained HTML report (figures embedded as base64 PNG, no external resources)."""

from __future__ import annotations

import base64
import html
import os
from dataclasses import asdict
from pathlib import Path

from .._version import __version__
from ..results import Table

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

# the order of the report's sections; each table brings its own title and caption (bayespass.Table)
SECTION_ORDER = ("passk", "stacking", "rounds", "leaderboard", "prob_better", "metrics", "ppc", "loo_eb", "loo_mcmc",
                 "gating", "gating_diagnostics", "reliability", "incoherence")
_SECTION_FIGS = {"passk": ["passk"], "ppc": ["ppc"], "gating": ["risk_coverage"], "reliability": ["set_size"],
                 "incoherence": ["incoherence"], "leaderboard": ["forest", "prob_better"]}

_FIGS = [("passk", "pass@k curves"), ("ppc", "Posterior predictive check"), ("forest", "pass@k forest plot"),
         ("prob_better", "P(better) matrix"),
         ("risk_coverage", "Risk-coverage"), ("set_size", "Conformal set size vs entropy"),
         ("incoherence", "Incoherence vs error")]


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"></figure>'


def _drawn(cfg, samples) -> str:
    """Say what was sampled: the settings of a coder run here, or what imported samples hold (not defaults)."""
    if getattr(cfg, "coder", None) != "samples":
        return f"K = {cfg.k}; temperatures {', '.join(map(str, cfg.temperatures))}"
    from ..execution.samples_io import sample_paths

    files = sample_paths(getattr(cfg, "samples", None)) or []
    src = "from " + ", ".join(f"<code>{html.escape(str(f))}</code>" for f in files)
    if samples is None:
        return src
    k = int(samples["exists"].sum("sample").max())
    configs = [str(c) for c in samples.config.values]
    shown = ", ".join(f"<code>{html.escape(c)}</code>" for c in configs[:6]) + (", ..." if len(configs) > 6 else "")
    return f"{src}: {len(configs)} config(s) ({shown}), up to {k} samples per task"


def write_report(path: str | os.PathLike, *, cfg, tables: dict, figures: dict, samples=None, main=None,
                 timings=None, warnings: dict | None = None) -> Path:
    """Write the report; what the run warned (per stage, ``warnings``), every table and figure, settings, timings."""
    path = Path(path)
    parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>bayespass run report</title>"
             f"<style>{_CSS}</style></head><body>",
             "<h1>bayespass run report</h1>",
             f"<p class=note>bayespass {__version__}; suite <code>{html.escape(cfg.suite)}</code>; coder "
             f"<code>{html.escape(str(cfg.coder))}</code>; {_drawn(cfg, samples)}; main fit "
             f"<code>{html.escape(str(main))}</code>.</p>"]
    if samples is not None:
        parts.append(f"<p class=note>{samples.sizes['task']} tasks, {int(samples.exists.sum())} samples, "
                     f"{samples.attrs.get('n_unique_programs', '?')} distinct programs, sandbox layer "
                     f"<code>{html.escape(str(samples.attrs.get('sandbox_layer', '?')))}</code>.</p>")
    if warnings:
        items = [f"<li><code>{html.escape(stage)}</code>: {html.escape(msg)}</li>"
                 for stage, msgs in warnings.items() for msg in msgs]
        parts.append("<h2>Warnings</h2><p class=note>What the run said about its input and fits, stage by "
                     "stage (also on screen); read them before the numbers.</p><ul>" + "".join(items) + "</ul>")
    figs_done = set()
    for key in [k for k in SECTION_ORDER if k in tables] + [k for k in tables if k not in SECTION_ORDER]:
        table = tables[key]
        if table is None or len(table) == 0:
            continue
        if not isinstance(table, Table):  # a plain DataFrame: its key is its title
            table = Table.of(table, key)
        parts.append(table.to_html_section())
        for fk in _SECTION_FIGS.get(key, []):
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
