"""How wide the data alone leave dataset pass@k: the assumption-free interval beside the default's band.

The interval is :func:`bayespass.passk_bounds` (``bayespass.stats.bounds``): every pass@k that some
distribution of p over the tasks makes consistent with the counts (a simultaneous 90% confidence box on
their histogram and on the dataset's pass@j, j <= m; two linear programs over a grid of p).  No prior,
no family: it holds the tasks' own pass@k whenever the box holds.

What it shows: how much of a band beyond the samples drawn the data can carry at all.  Every narrower
band (the default's, the oracle's) rests on an assumption about the shape of p over the tasks.

    python benchmarks/identified_set.py [--reps 50] [--ms 2,5,10,20] [--no-real] [--json out.json]
    python benchmarks/identified_set.py --report out.json --against calibration_rows.json [...]

``--against``: calibration JSON rows (``benchmarks/calibration.py --json``) whose ``auto`` and
``oracle`` widths are printed beside the assumption-free interval's, cell by cell.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import zlib
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import calibration as cal  # noqa: E402

from bayespass.stats.bounds import _bounds_one, sample_groups  # noqa: E402

KS = (1, 10, 50, 100)
ALPHA = 0.1


def interval(c: np.ndarray, m: int, ks, alpha: float = ALPHA) -> np.ndarray:
    """(K, 2): :func:`bayespass.passk_bounds` of tasks with counts ``c`` of ``m`` samples each."""
    n = np.full(c.size, m)
    return _bounds_one(n, c, sample_groups(n), np.asarray(ks), alpha)


def _row(data, family, m, reps, bands, truth):
    cover = (bands[..., 0] <= truth + 1e-9) & (truth <= bands[..., 1] + 1e-9)
    width = bands[..., 1] - bands[..., 0]
    return {"data": data, "family": family, "m": m, "reps": reps, "k": list(KS[:truth.shape[1]]),
            "coverage": np.nanmean(cover, 0).round(4).tolist(), "width": np.nanmean(width, 0).round(4).tolist(),
            "infeasible": float(np.isnan(width).mean())}


def simulate(families, ms, reps, seed):
    """The calibration benchmark's own replicates (its seeds), so the widths compare cell for cell."""
    rows = []
    for fam in families:
        for m in ms:
            counts, truth = cal.sim_cell(fam, m, reps, seed=zlib.crc32(f"{fam}:{m}".encode()) + seed)
            truth = truth[:, [cal.KS.index(k) for k in KS]]
            bands = np.array([interval(c, m, KS) for c in counts["c"].values])
            rows.append(_row("sim", fam, m, reps, bands, truth))
            print(_line(rows[-1]), flush=True)
    return rows


def real(ms, reps, seed):
    df = cal.real_counts()
    if df is None:
        print("real data absent (data/real_mbpp/counts.csv): skipped")
        return []
    rows = []
    ks = [k for k in KS if k in cal.REAL_KS]
    for m in ms:
        counts, ref, n_cfg = cal.real_cell(df, m, reps, seed=1000 + m + seed)
        ref = ref[:, [cal.REAL_KS.index(k) for k in ks]]
        bands = np.array([interval(c, m, ks) for c in counts["c"].values])
        rows.append(_row("real", f"real MBPP ({n_cfg} configs x {df.task.nunique()} tasks)", m, reps, bands, ref))
        print(_line(rows[-1]), flush=True)
    return rows


def _line(r) -> str:
    cov = " ".join(f"{x:.2f}" for x in r["coverage"])
    wid = " ".join(f"{x:.3f}" for x in r["width"])
    return f"{r['family']:22s} m={r['m']:2d}  cov {cov} | width {wid} | infeasible {r['infeasible']:.2f}"


def report(rows, against):
    """Markdown: per (family, m) the assumption-free width at each k, beside auto's and the oracle's."""
    other = defaultdict(dict)
    for path in against:
        for r in json.load(open(path)):
            if r["model"] in ("auto", "oracle"):
                other[(r["family"], r["m"])][r["model"]] = dict(zip(r["k"], r["width"], strict=True))
    print("| truth | m | " + " | ".join(f"k = {k}: free / auto / oracle" for k in KS) + " | free covers |")
    print("|---|---|" + "---|" * len(KS) + "---|")
    for r in rows:
        ents = []
        for k, w in zip(r["k"], r["width"], strict=False):
            mine = other.get((r["family"], r["m"]), {})
            a, o = mine.get("auto", {}).get(k), mine.get("oracle", {}).get(k)
            ents.append(f"{w:.3f} / {'—' if a is None else f'{a:.3f}'} / {'—' if o is None else f'{o:.3f}'}")
        ents += ["—"] * (len(KS) - len(ents))
        cov = min(r["coverage"])
        print(f"| {r['family']} | {r['m']} | " + " | ".join(ents) + f" | {cov:.2f}-{max(r['coverage']):.2f} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--real-reps", type=int, default=20)
    ap.add_argument("--ms", default="2,5,10,20")
    ap.add_argument("--families", default=",".join(cal.FAMILIES + tuple(cal.HELD_OUT)))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-sim", action="store_true")
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--report", help="print the table of a JSON written by --json")
    ap.add_argument("--against", nargs="*", default=[], help="calibration JSON rows with auto / oracle")
    args = ap.parse_args(argv)
    if args.report:
        return report(json.load(open(args.report)), args.against)
    ms = [int(x) for x in args.ms.split(",")]
    t0 = time.perf_counter()
    rows = [] if args.no_sim else simulate(args.families.split(","), ms, args.reps, args.seed)
    rows += [] if args.no_real else real(ms, args.real_reps, args.seed)
    print(f"{time.perf_counter() - t0:.0f} s")
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)
    if args.against:
        report(rows, args.against)


if __name__ == "__main__":
    main()
