"""Per-program cost of the sandbox, per isolation layer and mode (zygote fork vs fresh interpreter).

One slot runs N distinct trivial programs (one test each, ``def f(x): return x + i``), so what is
measured is the sandbox's own cost per program: isolation, start-up, the round trip of one test, judging
excluded.  Layers that cannot run here are reported as such.

Usage: python benchmarks/bench_layers.py [--n 200]
"""

from __future__ import annotations

import argparse
import time

from bayespass.execution.child import encode
from bayespass.execution.sandbox import Sandbox

LAYERS = ("seccomp+uid", "seccomp+userns", "bwrap")


def per_program(layer: str, fresh: bool, n: int) -> float:
    sb = Sandbox(layer=layer, fresh=fresh)
    try:
        sb.run("def f(x):\n    return x\n", "f", [encode((1,))], [10.0])  # warm: zygote up
        t0 = time.perf_counter()
        for i in range(n):
            out = sb.run(f"def f(x):\n    return x + {i}\n", "f", [encode((1,))], [10.0])
            assert out[0].status == "value", out[0]
        return (time.perf_counter() - t0) / n
    finally:
        sb.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    args = ap.parse_args()
    print("| layer | mode | ms per program |\n|---|---|---|")
    for layer in LAYERS:
        for fresh in (False, True):
            mode = "fresh interpreter" if fresh else "zygote"
            if layer == "bwrap" and not fresh:
                print(f"| {layer} | zygote | n/a (bwrap always starts a fresh sandbox) |")
                continue
            try:
                ms = 1000 * per_program(layer, fresh, args.n)
                print(f"| {layer} | {mode} | {ms:.1f} |", flush=True)
            except Exception as err:  # noqa: BLE001 - a layer this host cannot run
                print(f"| {layer} | {mode} | not available here ({type(err).__name__}: {str(err)[:60]}) |")


if __name__ == "__main__":
    main()
