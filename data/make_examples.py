"""Make the small example datasets shipped in data/examples/ (deterministic).

Run: python data/make_examples.py
"""

from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).parent / "examples"


def main() -> None:
    rng = np.random.default_rng(20261122)
    HERE.mkdir(exist_ok=True)
    rows = []
    # three synthetic "models" on 164 HumanEval-like tasks, 20 samples each, ZOIB truth
    specs = [("coder-small", 0.8, (0.4, 0.9, 0.25, 0.05)),
             ("coder-small", 0.2, (0.3, 0.6, 0.30, 0.10)),
             ("coder-large", 0.8, (1.2, 0.8, 0.10, 0.20))]
    for model, temp, (a, b, pi0, pi1) in specs:
        u = rng.random(164)
        p = np.where(u < pi0, 0.0, np.where(u < pi0 + pi1, 1.0, rng.beta(a, b, 164)))
        c = rng.binomial(20, p)
        for i in range(164):
            rows.append({"model": model, "temperature": temp, "benchmark": "humaneval",
                         "task": f"HumanEval/{i}", "n": 20, "c": int(c[i])})
    pd.DataFrame(rows).to_csv(HERE / "counts_small.csv", index=False)


if __name__ == "__main__":
    main()
