"""Markdown tables and issue 15's target checks from the JSON rows of ``benchmarks/calibration.py``.

    python benchmarks/calibration_report.py sim.json [real.json ...] [--default auto]

Per cell (data x m): coverage of the 90% interval, mean width, interval (Winkler)
score and MAE of every model at each k.  Then the targets for the default model,
each cell that misses listed, and, where the rows hold the ``oracle`` (the exact
posterior under each simulated replicate's true prior), what a perfect method
covers on the same replicates.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

import numpy as np


def load(paths):
    rows = []
    for p in paths:
        rows += json.load(open(p))
    return rows


def cell_tables(rows) -> str:
    """One table per (data, m): a row per model, a column per k, each entry coverage / width / IS / MAE."""
    by = defaultdict(dict)
    for r in rows:
        by[(r["data"], r["family"], r["m"])][r["model"]] = r
    out = ["\nEach entry: coverage of the 90% interval / mean width / interval score / MAE of the posterior "
           "mean (naive: MAE only)."]
    for (_data, fam, m), models in by.items():
        any_row = next(iter(models.values()))
        ks = any_row["k"]
        out.append(f"\n**{fam}, m = {m}** ({any_row['reps']} replicates)\n")
        out.append("| model | " + " | ".join(f"k = {k}" for k in ks) + " |")
        out.append("|---|" + "---|" * len(ks))
        for name, r in models.items():
            ents = []
            for i in range(len(ks)):
                if r["coverage"][i] is None:
                    ents.append(f"— / — / — / {r['mae'][i]:.3f}")
                else:
                    ents.append(f"{r['coverage'][i]:.2f} / {r['width'][i]:.3f} / {r['interval_score'][i]:.3f} / "
                                f"{r['mae'][i]:.3f}")
            out.append(f"| {name} | " + " | ".join(ents) + " |")
    return "\n".join(out)


def cells(rows, model):
    """(data, family, m, k) -> row fields of one model."""
    out = {}
    for r in rows:
        if r["model"] != model:
            continue
        for i, k in enumerate(r["k"]):
            out[(r["data"], r["family"], r["m"], k)] = {f: r[f][i] for f in ("coverage", "width", "interval_score",
                                                                             "mae", "bias")}
    return out


def _where(missed: list, cells_: list) -> str:
    """Where a target's missed cells lie: within the samples drawn (k <= m) or beyond them, and at m = 1."""
    def split(cs):
        return (sum(c[3] <= c[2] for c in cs), sum(c[3] > c[2] and c[2] >= 2 for c in cs),
                sum(c[2] == 1 and c[3] > 1 for c in cs))

    (mi, mb, m1), (ti, tb, t1) = split(missed), split(cells_)
    return (f"  - missed within the samples drawn (k <= m): {mi} of {ti} cells; beyond them (k > m >= 2): {mb} of "
            f"{tb}; at m = 1 (k > 1): {m1} of {t1}")


def targets(rows, default: str) -> str:
    d, bb, zo, nv, orc = (cells(rows, m) for m in (default, "bb", "zoibb", "naive", "oracle"))
    lines = [f"\nTargets for the default (`{default}`):\n"]
    for data in ("sim", "real"):
        main = {c: v for c, v in d.items() if c[0] == data and c[2] >= 2 and c[3] <= 100}
        one = {c: v for c, v in d.items() if c[0] == data and c[2] == 1 and c[3] <= 100}
        if not main:
            continue
        cov = np.array([v["coverage"] for v in main.values()])
        low = sorted((c for c, v in main.items() if v["coverage"] < 0.80), key=lambda c: main[c]["coverage"])
        ok = 0.87 <= cov.mean() <= 0.95 and not low
        inside = [v["coverage"] for c, v in main.items() if c[3] <= c[2]]
        beyond = [v["coverage"] for c, v in main.items() if c[3] > c[2]]
        split = ", ".join(f"{name} {np.mean(v):.3f} ({len(v)} cells)" for name, v in
                          (("within the samples drawn (k <= m)", inside), ("beyond them", beyond)) if v)
        lines.append(f"- {data}, m >= 2, k <= 100 ({len(main)} cells): mean coverage {cov.mean():.3f} "
                     f"(target [0.87, 0.95]), min {cov.min():.2f} (target >= 0.80): "
                     + ("**met**" if ok else "**missed**") + f"; {split}")
        for c in low:
            lines.append(f"  - below 0.80: {c[1]}, m = {c[2]}, k = {c[3]}: {main[c]['coverage']:.2f}"
                         + (f" (oracle {orc[c]['coverage']:.2f})" if c in orc else ""))
        shared = [c for c in main if c in orc]
        if shared:
            oc = np.array([orc[c]["coverage"] for c in shared])
            dc = np.array([main[c]["coverage"] for c in shared])
            # (an oracle of width 0, a prior with one atom, has no ratio)
            wr = np.median([main[c]["width"] / orc[c]["width"] for c in shared if orc[c]["width"] > 0] or [np.nan])
            lines.append(f"  - oracle (exact posterior under each replicate's true prior, the same {len(shared)} "
                         f"cells): mean coverage {oc.mean():.3f}, min {oc.min():.2f}, {int((oc < 0.80).sum())} "
                         f"below 0.80; the default's band is {wr:.1f}x the oracle's width (median over cells)")
            under = [c for c in shared if main[c]["coverage"] < 0.87]
            for c in sorted(under, key=lambda c: main[c]["coverage"]):
                lines.append(f"    - under 0.87: {c[1]}, m = {c[2]}, k = {c[3]}: {main[c]['coverage']:.2f}, "
                             f"oracle {orc[c]['coverage']:.2f}")
            lines.append(f"    - default minus oracle per cell: mean {np.mean(dc - oc):+.3f}, "
                         f"correlation {np.corrcoef(dc, oc)[0, 1]:.2f}")
        if one:
            c1 = np.mean([v["coverage"] for v in one.values()])
            lines.append(f"- {data}, m = 1, k <= 100: mean coverage {c1:.3f} (target >= 0.80): "
                         + ("**met**" if c1 >= 0.80 else "**missed**"))
    if orc:
        both = [c for c in d if c in orc]
        ratio = np.array([d[c]["mae"] / max(orc[c]["mae"], 1e-12) for c in both])
        lines.append(f"- MAE against the oracle's (the Bayes floor with the prior known), {len(both)} simulated "
                     f"cells: median ratio {np.median(ratio):.2f}, 90th percentile {np.quantile(ratio, 0.9):.2f}")
    common = [c for c in d if c in bb and c in zo]
    if common:
        good = [c for c in common if d[c]["mae"] <= 1.10 * min(bb[c]["mae"], zo[c]["mae"]) + 1e-12]
        frac = len(good) / len(common)
        lines.append(f"- MAE <= min(bb, zoibb) + 10%: {len(good)}/{len(common)} cells ({frac:.0%}; target >= 90%): "
                     + ("**met**" if frac >= 0.9 else "**missed**"))
        bad = [c for c in common if c not in good]
        lines.append(_where(bad, common))
        for c in bad:
            lines.append(f"  - {c[0]} {c[1]}, m = {c[2]}, k = {c[3]}: {d[c]['mae']:.4f} vs bb {bb[c]['mae']:.4f}, "
                         f"zoibb {zo[c]['mae']:.4f}")
    if nv:
        # at k = 1 every model's mean is the naive rate up to shrinkage: ties within 2% are not "worse"
        worse = [c for c in d if c in nv and d[c]["mae"] > 1.02 * nv[c]["mae"] + 1e-12]
        lines.append(f"- never worse than naive (MAE more than 2% above naive's): {len(worse)} of {len(d)} cells "
                     + ("(**met**)" if not worse else "(**missed**)"))
        for c in worse:
            lines.append(f"  - {c[0]} {c[1]}, m = {c[2]}, k = {c[3]}: {d[c]['mae']:.4f} vs naive {nv[c]['mae']:.4f}")
    iv = [c for c in d if c in bb and d[c]["coverage"] is not None and bb[c]["coverage"] is not None]
    if iv:
        good = [c for c in iv if d[c]["interval_score"] <= 1.15 * bb[c]["interval_score"]]
        frac = len(good) / len(iv)
        lines.append(f"- interval score <= 1.15 x bb's: {len(good)}/{len(iv)} cells ({frac:.0%}; target >= 80%): "
                     + ("**met**" if frac >= 0.8 else "**missed**"))
        lines.append(_where([c for c in iv if c not in good], iv))
        weak = [c for c in iv if bb[c]["coverage"] < 0.85]
        if weak:
            a = np.mean([d[c]["interval_score"] for c in weak])
            b = np.mean([bb[c]["interval_score"] for c in weak])
            lines.append(f"- where bb covers < 0.85 ({len(weak)} cells): mean interval score {a:.3f} vs bb {b:.3f} "
                         "(target: lower): " + ("**met**" if a < b else "**missed**"))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("json", nargs="+")
    ap.add_argument("--default", default="auto")
    args = ap.parse_args()
    rows = load(args.json)
    print(targets(rows, args.default))
    print(cell_tables(rows))


if __name__ == "__main__":
    main()
