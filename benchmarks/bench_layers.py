"""Per-program cost of the sandbox, per isolation layer and mode (zygote fork vs fresh interpreter).

One slot runs N distinct trivial programs (one test each, ``def f(x): return x + i``), so what is
measured is the sandbox's own cost per program: isolation, start-up, the round trip of one test, judging
excluded.  Layers that cannot run here are reported as such.

Usage: python benchmarks/bench_layers.py [--n 200] [--seccomp]

``--seccomp`` also times the installation of the seccomp filter in forked children (median of 80): compiled
in the child (a fresh interpreter's way) against the zygote's precompiled BPF with the child's pid written in.
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


def seccomp_install_ms(precompiled, n: int = 80) -> float:
    """Median milliseconds of ``install_seccomp`` in a forked child (the fork itself not counted)."""
    import json
    import os
    import statistics

    from bayespass.execution import child

    times = []
    for _ in range(n):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            child._libc()
            t0 = time.perf_counter()
            child.install_seccomp(precompiled)
            os.write(w, json.dumps(time.perf_counter() - t0).encode())
            os._exit(0)
        os.close(w)
        times.append(json.loads(os.read(r, 100)))
        os.close(r)
        os.waitpid(pid, 0)
    return 1000 * statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seccomp", action="store_true", help="also time installing the seccomp filter")
    args = ap.parse_args()
    if args.seccomp:
        from bayespass.execution.child import precompiled_filters

        pre = precompiled_filters()
        print(f"seccomp filter in a forked child: compiled there {seccomp_install_ms(None):.3f} ms, "
              f"precompiled by the zygote {seccomp_install_ms(pre):.3f} ms")
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
