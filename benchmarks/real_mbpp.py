"""The real workload: 409,177 programs from 16 LLMs x 3 temperatures on MBPP (../shared/data/real).

Executes them against MBPP+ (base + plus tests) in bayespass's sandbox, config by
config into one resumable run directory (programs shared between configs run
once), and writes the counts to ``data/real_mbpp/counts.csv`` with provenance,
for the calibration and comparison benchmarks.

Usage:
    python benchmarks/real_mbpp.py [--configs 50|rest|all] [--out runs/real-mbpp] [--workers 2]

Interrupt it at any time and run it again: finished programs are not re-run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pandas as pd  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
REAL = SHARED / "real" / "difftrust_mbpp"
MBPP_PLUS = SHARED / "evalplus" / "MbppPlus.jsonl.gz"
OUT_DATA = REPO / "data" / "real_mbpp"
#: the 16 configs with 50 samples for (nearly) every task (see the data's README)
FIFTY = [f"{m}_temp{t}" for m in ("claude_sonnet_4", "deepseek_v3_0324", "gpt_4o", "llama_4_maverick_17b",
                                  "ministral_8b") for t in ("0.2", "0.6", "1")] + ["gemini_2_5_flash_temp0.6"]


def config_files(which: str = "50") -> list[Path]:
    """The real-generation files: the 16 fifty-sample configs (``"50"``), the others (``"rest"``), or all."""
    files = sorted(REAL.glob("MBPP__*.jsonl.gz"))
    names = {f.name[len("MBPP__"):-len(".jsonl.gz")]: f for f in files}
    first = [names[n] for n in FIFTY if n in names]
    rest = [f for f in files if f not in first]
    return {"50": first, "rest": rest}.get(which, first + rest)


def parse_name(path: Path) -> tuple[str, float]:
    """``MBPP__gpt_4o_temp0.6.jsonl.gz`` -> ("gpt_4o", 0.6)."""
    m = re.match(r"MBPP__(.+)_temp([0-9.]+)\.jsonl\.gz$", path.name)
    return m.group(1), float(m.group(2))


def read_config(path: Path, tasks: set) -> tuple[list[dict], int]:
    """Samples of one config on MBPP+ tasks (evalplus format) and the number skipped (not in MBPP+)."""
    model, temp = parse_name(path)
    recs, skipped = [], 0
    with gzip.open(path, "rt") as fh:
        for line in fh:
            r = json.loads(line)
            if r["task_id"] not in tasks:
                skipped += 1
                continue
            recs.append({"task_id": r["task_id"], "solution": r["solution"], "model": model,
                         "temperature": temp, "config": f"{model}|T={temp:g}"})
    return recs, skipped


def execute_all(which="50", out=REPO / "runs" / "real-mbpp", workers=None, echo=print, max_timeouts="default",
                write=False):
    """Execute every config; return (counts DataFrame, per-config timing rows)."""
    import bayespass as bp
    from bayespass.execution import engine

    suite = bp.load_suite("mbpp+", MBPP_PLUS)
    tasks = set(suite.tasks)
    frames, timing = [], []
    t_all = time.perf_counter()
    for path in config_files(which):
        recs, skipped = read_config(path, tasks)
        t0 = time.perf_counter()
        ds = engine.execute(recs, suite, out=out, workers=workers, detail="sample", progress=echo is not None,
                            max_timeouts=max_timeouts)
        dt = time.perf_counter() - t0
        n = ds.exists.sum("sample").values[0]
        c = ds.correct.sum("sample").values[0]
        cb = ds.base_correct.sum("sample").values[0]
        cfg = str(ds.config.values[0])
        model, temp = parse_name(path)
        frames.append(pd.DataFrame({"model": model, "temperature": temp, "task": ds.task.values, "n": n, "c": c,
                                    "c_base": cb, "n_timeout_samples": (ds.n_timeout > 0).sum("sample").values[0]}))
        timing.append({"config": cfg, "samples": len(recs), "skipped": skipped,
                       "distinct": ds.attrs["n_unique_programs"], "run": ds.attrs["n_run"],
                       "twins": ds.attrs["n_twins"], "seconds": round(dt, 1),
                       "layer": ds.attrs["sandbox_layer"], "mode": ds.attrs["mode"],
                       "load_factor": ds.attrs["load_factor"], "max_timeouts": ds.attrs["max_timeouts"],
                       "dedup": ds.attrs["dedup"]})
        if echo:
            echo(f"{cfg}: {len(recs)} samples ({skipped} skipped), {ds.attrs['n_unique_programs']} distinct, "
                 f"{ds.attrs['n_run']} run, {ds.attrs['n_twins']} twins, "
                 f"{dt:.0f} s, pass@1 {c.sum() / n.sum():.3f}")
        if write:  # counts so far, so the calibration can start before the whole set is done
            write_counts(pd.concat(frames, ignore_index=True), timing)
    if echo:
        echo(f"total {time.perf_counter() - t_all:.0f} s")
    return pd.concat(frames, ignore_index=True), timing


def _merge_existing(df: pd.DataFrame, timing: list[dict]) -> tuple[pd.DataFrame, list[dict]]:
    """Add the configs of the cached counts (and their README rows) that this run did not execute."""
    path, readme = OUT_DATA / "counts.csv", OUT_DATA / "README.md"
    if not path.exists():
        return df, timing
    old = pd.read_csv(path)
    new_cfgs = set(zip(df.model, df.temperature, strict=True))
    old = old[[(m, t) not in new_cfgs for m, t in zip(old.model, old.temperature, strict=True)]]
    done = {t["config"] for t in timing}
    rows = []
    for line in readme.read_text().splitlines() if readme.exists() else []:
        cells = line.strip().removeprefix("| ").removesuffix(" |").split(" | ")
        if line.startswith("| ") and len(cells) in (5, 7) and cells[1].isdigit() and cells[0] not in done:
            rows.append({"config": cells[0], "samples": int(cells[1]), "skipped": int(cells[2]),
                         "distinct": int(cells[3]), "seconds": float(cells[-1]),
                         **({"run": cells[4], "twins": cells[5]} if len(cells) == 7 else {})})
    return pd.concat([old, df], ignore_index=True), rows + timing


def write_counts(df: pd.DataFrame, timing: list[dict]) -> Path:
    """``data/real_mbpp/counts.csv`` and its provenance (README.md), keeping the configs this run did not touch."""
    import bayespass as bp
    from bayespass.execution.sandbox import HARNESS_VERSION

    OUT_DATA.mkdir(parents=True, exist_ok=True)
    df, timing = _merge_existing(df, timing)
    prov = next(t for t in timing if "layer" in t)  # this run's sandbox settings
    df = df.sort_values(["model", "temperature", "task"])
    df.to_csv(OUT_DATA / "counts.csv", index=False)
    n_cfg = df.groupby(["model", "temperature"]).ngroups
    lines = [
        "# Counts of real LLM generations on MBPP+ (executed by bayespass)", "",
        "`counts.csv`: one row per (model, temperature, task): `n` samples, `c` correct on MBPP+ (base and plus",
        "tests), `c_base` correct on the base tests, `n_timeout_samples` samples with at least one timeout.", "",
        "Source: `../shared/data/real/difftrust_mbpp/` (the public artifact of *Incoherence as Oracle-less Measure",
        "of Error in LLM-Based Code Generation*, GitHub mwhicks1/DiffTrust, MBPP experiment caches), executed with",
        f"`python benchmarks/real_mbpp.py` (bayespass {bp.__version__}, harness {HARNESS_VERSION}, layer "
        f"{prov['layer']}, mode {prov['mode']}, default time limits: max(1 s, 4x ground truth), "
        f"max_timeouts {prov['max_timeouts']}, dedup {prov.get('dedup', 'text')}).",
        "Task ids not in MBPP+ are skipped (counted below). Configs run one after another into one run directory:",
        "`run` counts the programs executed for that config, `twins` those given the results of a behavioural",
        "twin (same program up to docstrings, no-op strings, a `__main__` block and the names of local variables);",
        "the rest were run for an earlier config. `seconds` is the config's wall time on 2 cores.", "",
        f"{n_cfg} configs, {df.task.nunique()} tasks, {int(df.n.sum())} samples.", "",
        "| config | samples | skipped | distinct programs | run | twins | seconds |", "|---|---|---|---|---|---|---|",
        *[f"| {t['config']} | {t['samples']} | {t['skipped']} | {t['distinct']} | {t.get('run', '')} | "
          f"{t.get('twins', '')} | {t['seconds']} |" for t in timing],
    ]
    (OUT_DATA / "README.md").write_text("\n".join(lines) + "\n")
    return OUT_DATA / "counts.csv"


def sample_cells(ds, samples: list[dict]):
    """Yield (record, its cell of ``ds``) for every record of ``samples``, in order: a (config, task)'s j-th
    record is its sample j, as ``bayespass.execute`` numbers them."""
    seen: dict = {}
    for r in samples:
        key = (r["config"], r["task_id"])
        s = seen[key] = seen.get(key, -1) + 1
        yield r, ds.sel(config=r["config"], task=r["task_id"], sample=s)


def add_to_counts(delta: pd.DataFrame) -> int:
    """Add ``delta`` (model, temperature, task, dc, dcb, dt) to ``c``, ``c_base``, ``n_timeout_samples`` of
    counts.csv (a harness change measured on the programs it touches); return the number of cells changed."""
    path = OUT_DATA / "counts.csv"
    df = pd.read_csv(path)
    key = ["model", "temperature", "task"]
    m = df.merge(delta, on=key, how="left").fillna({"dc": 0, "dcb": 0, "dt": 0})
    changed = int(((m.dc != 0) | (m.dcb != 0) | (m.dt != 0)).sum())
    for col, d in (("c", "dc"), ("c_base", "dcb"), ("n_timeout_samples", "dt")):
        df[col] = (m[col] + m[d]).astype(int)
    if ((df.c < 0) | (df.c > df.n) | (df.c_base > df.n) | (df.c > df.c_base)).any():
        raise SystemExit("the patched counts are not consistent (c <= c_base <= n): not written")
    df.to_csv(path, index=False)
    return changed


def readme_section(title: str, text: str) -> None:
    """Write (or replace) the section ``## title`` of the counts' README, keeping its other sections."""
    readme = OUT_DATA / "README.md"
    head, *sections = readme.read_text().rstrip("\n").split("\n\n## ")
    sections = [s for s in sections if s.split("\n", 1)[0] != title] + [f"{title}\n\n{text}"]
    readme.write_text("\n\n## ".join([head, *sections]) + "\n")


def load_counts(min_n: int = 1, path: Path | None = None):
    """The cached real counts as a bayespass counts dataset (configs with every task at n >= ``min_n``)."""
    import bayespass as bp

    df = pd.read_csv(path or OUT_DATA / "counts.csv")
    df = df[df.n >= min_n]
    ds = bp.counts_from_frame(df[["model", "temperature", "task", "n", "c"]].assign(benchmark="mbpp+"))
    return ds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", choices=["50", "rest", "all"], default="50",
                    help="the 16 fifty-sample configs, the 18 others (10 samples per task), or all 34")
    ap.add_argument("--out", default=str(REPO / "runs" / "real-mbpp"))
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--max-timeouts", type=int, default=None,
                    help="timeouts before the rest of a program shares the budget (default: bayespass's)")
    args = ap.parse_args()
    if not REAL.exists():
        raise SystemExit(f"{REAL} is absent: the real generations are not on this machine")
    mt = "default" if args.max_timeouts is None else args.max_timeouts
    df, timing = execute_all(args.configs, Path(args.out), args.workers, max_timeouts=mt, write=True)
    path = write_counts(df, timing)
    print(f"wrote {path}")
    print(json.dumps(timing, indent=1))
    print(f"pass@1 by config:\n{df.groupby(['model', 'temperature']).apply(lambda g: g.c.sum() / g.n.sum())}")


if __name__ == "__main__":
    main()
