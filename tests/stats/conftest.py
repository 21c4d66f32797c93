import numpy as np
import pytest
import xarray as xr


def samples_ds(verdict, *, digest=None, program=None, is_plus=None, logprob=None, ref=None):
    """A hand-made executed-samples dataset (config, task, sample, test)."""
    verdict = np.asarray(verdict, np.int8)
    c, t, k, m = verdict.shape
    exists = (verdict >= 0).any(-1)
    digest = np.zeros(verdict.shape, np.int64) if digest is None else np.asarray(digest, np.int64)
    program = np.arange(c * t * k).reshape(c, t, k) if program is None else np.asarray(program)
    is_plus = np.zeros((t, m), np.int8) if is_plus is None else np.asarray(is_plus, np.int8)
    dims = ("config", "task", "sample", "test")
    ds = xr.Dataset({"verdict": (dims, verdict), "digest": (dims, digest), "exists": (dims[:3], exists),
                     "program": (dims[:3], program), "is_plus": (("task", "test"), is_plus),
                     "correct": (dims[:3], exists & ((verdict == 1) | (verdict < 0)).all(-1))},
                    coords={"config": [f"c{i}" for i in range(c)], "task": [f"t{i}" for i in range(t)],
                            "sample": np.arange(k), "test": np.arange(m)})
    if logprob is not None:
        ds["mean_logprob"] = (dims[:3], np.asarray(logprob, float))
    if ref is not None:
        ds["reference_digest"] = (("task", "test"), np.asarray(ref, np.int64))
    return ds


@pytest.fixture
def make_samples():
    return samples_ds
