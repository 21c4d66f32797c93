"""Batched K-sample generation (one generate call per task) vs K separate calls, on the tiny local model.

Usage: python benchmarks/bench_generate.py [--k 8] [--tasks 10] [--tokens 64]
Prints the wall time of both and their ratio (same machine, same run).  The tiny model's compute is tiny,
so the ratio mostly measures per-call overhead and batching; with a real model on a GPU the batched decode
also amortises the weight reads of every decode step across the K sequences.
"""

import argparse
import tempfile
import time
from pathlib import Path

import bayespass as bp
from bayespass.generate.hf import HFCoder
from bayespass.generate.tiny import build_tiny_model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--tokens", type=int, default=64)
    args = ap.parse_args()
    suite = bp.load_suite("humaneval", expected=False)
    tasks = list(suite.tasks)[: args.tasks]
    with tempfile.TemporaryDirectory() as tmp:
        coder = HFCoder(str(build_tiny_model(Path(tmp) / "tiny-llama")), max_new_tokens=args.tokens, stop=[])
        coder.generate(suite, 2, temperature=1.0, tasks=tasks[:1])  # warm-up
        t0 = time.perf_counter()
        p0 = coder.prefill_calls
        coder.generate(suite, args.k, temperature=1.0, seed=1, tasks=tasks)
        batched, pre_b = time.perf_counter() - t0, coder.prefill_calls - p0
        t0 = time.perf_counter()
        p0 = coder.prefill_calls
        for i in range(args.k):
            coder.generate(suite, 1, temperature=1.0, seed=100 + i, tasks=tasks)
        sequential, pre_s = time.perf_counter() - t0, coder.prefill_calls - p0
    print(f"K={args.k}, {len(tasks)} tasks, {args.tokens} new tokens, device {coder.device}")
    print(f"batched   : {batched:7.2f} s  ({pre_b} prompt prefills)")
    print(f"sequential: {sequential:7.2f} s  ({pre_s} prompt prefills)")
    print(f"speed-up  : {sequential / batched:.1f}x")


if __name__ == "__main__":
    main()
