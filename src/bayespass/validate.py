"""Validators shared by every stage; each returns the cleaned value."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = ["as_k", "check_choice", "check_prob", "check_positive_int", "check_torch_device", "check_torch_dtype",
           "check_wait", "check_writable_dir", "parse_list", "split_pair"]


def first_of(items: Sequence, most: int = 5, *, sep: str | None = None) -> str:
    """Show at most ``most`` of ``items``, saying how many more there are: "['a', 'b'] and 7 more".

    ``sep`` given: the items as text joined by it ("a, b and 7 more", for prose) rather than as a list.
    """
    items = list(items)
    shown = f"{items[:most]}" if sep is None else sep.join(str(x) for x in items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")


def parse_list(value: Any, *, name: str, cast=str) -> list:
    """Accept ``"1,10,100"``, a scalar or an iterable and return a list of ``cast`` values."""
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, np.ndarray) and value.ndim == 0:  # iterable by type, not by value
        items = [value.item()]
    elif isinstance(value, Iterable):
        items = list(value)
    else:
        items = [value]
    if not items:
        raise ValueError(f"{name} must not be empty")
    try:
        return [cast(v) for v in items]
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} has a value that is not a {cast.__name__}: {value!r}") from err


#: the largest k accepted: the Beta-Binomial kernels' pass@k is within about 1e-5 of a 50-digit computation
#: there (a difference of log-gamma functions of size k log k); at 10**16 it fell to about half
MAX_K = 10**12


def _integral_text(v: Any) -> Any:
    """Read a text that writes an integer ("1000", "1e3") as that int; anything else is returned as it is."""
    if not isinstance(v, str):
        return v
    try:
        return int(v)
    except ValueError:
        try:
            x = float(v)
        except ValueError:
            return v
        return int(x) if np.isfinite(x) and x == round(x) else v


def as_k(k: Any, *, name: str = "k") -> np.ndarray:
    """Return ``k`` as a sorted-as-given 1-D int array of positive integers ("1,10,1e3" too)."""
    vals = [_integral_text(v) for v in parse_list(k, name=name, cast=lambda v: v)]
    huge = [v for v in vals if isinstance(v, int | np.integer) and not isinstance(v, bool) and v > MAX_K]
    if huge:  # also those beyond int64
        raise ValueError(f"{name} must be at most 10**12 (beyond it float64 loses the k-th powers); got {huge}")
    arr = np.asarray(vals)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one integer or a flat list of them; got an array of shape {arr.shape}")
    if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
        arr = arr.astype(int)
    if arr.dtype.kind not in "iu" and arr.dtype.kind != "U":
        raise ValueError(f"{name} must hold positive integers; got {k!r}")
    try:
        arr = arr.astype(int)
    except ValueError as err:
        raise ValueError(f"{name} must hold positive integers; got {k!r}") from err
    if np.any(arr < 1):
        raise ValueError(f"{name} must hold positive integers (k >= 1); got {arr.tolist()}")
    if np.any(arr > MAX_K):
        raise ValueError(f"{name} must be at most 10**12 (beyond it float64 loses the k-th powers); got "
                         f"{arr[arr > MAX_K].tolist()}")
    if len(np.unique(arr)) != len(arr):
        raise ValueError(f"{name} has repeated values: {arr.tolist()}")
    return arr


def check_writable_dir(directory: str | os.PathLike, *, name: str, value: Any = None) -> None:
    """Raise a ValueError naming ``name`` where no file can be made in ``directory``.

    A read-only file system or no permission, found by making a file there and removing it; the message names
    ``value`` (default the directory).
    """
    import tempfile

    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".bayespass-probe-")
    except OSError as err:
        raise ValueError(f"{name}={str(value if value is not None else directory)!r}: no file can be written in "
                         f"{str(directory)!r} ({err.strerror})") from None
    os.close(fd)
    os.unlink(probe)


def check_choice(value: Any, allowed: Sequence[str], *, name: str) -> str:
    """Raise a ValueError listing the sorted allowed values when ``value`` is not one of them."""
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not supported; choose one of {sorted(allowed)}")
    return value


#: dtypes the transformers coder loads a model in ("auto": bf16/fp16 on a GPU, fp32 on a CPU)
TORCH_DTYPES = ("auto", "float32", "bfloat16", "float16")


def check_torch_device(value: Any, *, name: str = "device") -> str:
    """Check a device string of the transformers coder without importing torch: auto, cpu, mps, cuda or cuda:N."""
    if not isinstance(value, str) or not re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", value):
        raise ValueError(f"{name} must be 'auto', 'cpu', 'cuda', 'cuda:N' (N the GPU's index) or 'mps'; got {value!r}")
    return value


def check_torch_dtype(value: Any, *, name: str = "dtype") -> str:
    """Check the dtype name the transformers coder loads a model in."""
    if value not in TORCH_DTYPES:
        raise ValueError(f"{name} must be one of {', '.join(repr(d) for d in TORCH_DTYPES)}; got {value!r}")
    return value


def check_prob(value: Any, *, name: str) -> float:
    """Check a probability in the open interval (0, 1)."""
    try:
        v = float(value)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{name} must be a number in (0, 1); got {value!r}") from err
    if not 0.0 < v < 1.0:
        raise ValueError(f"{name} must be in (0, 1); got {value!r}")
    return v


def check_seed(value: Any, *, name: str = "seed") -> int:
    """Check a random seed: a non-negative integer (what numpy's generators take; bools rejected)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer; got {value!r}")
    return int(value)


def check_wait(value: Any, *, name: str = "wait_for_server") -> float:
    """Check a time to wait: a non-negative, finite number of seconds (0: do not wait; bools rejected)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
        raise ValueError(f"{name} must be a non-negative number of seconds (0: do not wait); got {value!r}")
    return float(value)


def check_positive_int(value: Any, *, name: str) -> int:
    """Check a positive integer (bools rejected)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be a positive integer; got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")
    return int(value)


def check_decoding(*, top_p: Any, max_new_tokens: Any, temperature: Any, greedy_ok: bool, coder: str,
                   name: str = "temperatures") -> None:
    """Refuse decoding settings no coder accepts, before a model is loaded.

    ``top_p`` in (0, 1], a positive ``max_new_tokens``, temperatures >= 0 (one number or a sequence, checked
    under ``name``), and 0 (greedy) only where ``greedy_ok`` (an endpoint: local models and the synthetic
    coder sample). ``bayespass generate`` and ``RunConfig`` (``bayespass run``) share this rule.
    """
    check_positive_int(max_new_tokens, name="max_new_tokens")
    if isinstance(top_p, bool) or not isinstance(top_p, int | float) or not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1]; got {top_p!r}")
    temps = tuple(temperature) if isinstance(temperature, list | tuple) else (temperature,)
    if not temps or any(isinstance(t, bool) or not isinstance(t, int | float) or not t >= 0 for t in temps):
        what = "non-negative numbers" if isinstance(temperature, list | tuple) else "a non-negative number"
        raise ValueError(f"{name} must be {what} (0: greedy, with an endpoint); got {temperature!r}")
    if 0 in temps and not greedy_ok:
        raise ValueError(f"{name} must be > 0 for coder {coder!r}, which samples; 0 (greedy) needs an endpoint "
                         f"(--endpoint); got {temperature!r}")


def split_pair(pair: Any, configs: Sequence[str], *, name: str = "pair") -> Any:
    """Return ``(a, b)`` from ``"A:B"``, split at the colon that leaves two of ``configs`` (names may hold ':').

    A pair that is not a string is returned as it is (its checks are the caller's); a string that no colon
    splits into two configs is split at its first colon, so the caller's error names what is not a config.
    """
    if not isinstance(pair, str):
        return pair
    cuts = [i for i, ch in enumerate(pair) if ch == ":"]
    if not cuts:
        raise ValueError(f"{name} must look like 'A:B' (two config names); got {pair!r}")
    known = [(pair[:i], pair[i + 1:]) for i in cuts if pair[:i] in configs and pair[i + 1:] in configs]
    if len(known) > 1:
        raise ValueError(f"{name} {pair!r} splits into two configs in {len(known)} ways: {known}; pass the "
                         "pair as a tuple (Python) instead")
    return known[0] if known else (pair[:cuts[0]], pair[cuts[0] + 1:])


def as_fit(idata: Any, *, what: str):
    """Return the fit of ``idata``: a fit itself, or a run's main fit (the tree of ``bp.load_run``).

    Anything else gets :func:`check_fit`'s TypeError.
    """
    if is_run_with_fits(idata):
        fits, name = idata["fits"].children, idata.attrs["main_fit"]
        if name not in fits:
            raise ValueError(f"{what}: the run has no main fit {name!r} (its fits: {sorted(fits)}); pass one of "
                             "them: bp.pipeline.fits_of(run)[NAME]")
        return fit_of_node(fits[name])
    check_fit(idata, what=what)
    return idata


def is_run_with_fits(obj: Any) -> bool:
    """Tell whether ``obj`` is a run tree (``bp.load_run``) with fits and the name of its main fit."""
    return hasattr(obj, "children") and "fits" in obj.children and "main_fit" in obj.attrs


def fit_of_node(node):
    """Return the ``arviz.InferenceData`` of a fit's node in a run tree (``fits/<name>``: one child per group)."""
    import arviz as az

    return az.InferenceData(**{g: child.to_dataset() for g, child in node.children.items()})


def is_fit(obj: Any) -> bool:
    """Tell whether ``obj`` is a fit: an InferenceData with a posterior (a DataTree's ``groups`` is not a method)."""
    return hasattr(obj, "groups") and callable(obj.groups) and "posterior" in obj.groups()


def check_fit(idata: Any, *, what: str) -> None:
    """Raise a TypeError unless ``idata`` is a fit (an InferenceData with a posterior), saying what was passed.

    A fit whose ``config`` was selected by one label (``fit.sel(config="a")``: a scalar, no dimension) is a
    ValueError that says to select by a list.
    """
    if is_fit(idata):
        post = idata.posterior
        if "config" in post.coords and "config" not in post.dims:
            label = post["config"].values.item()
            raise ValueError(f"{what}: this fit's config was selected by one label (fit.sel(config={label!r}) drops "
                             f"the config dimension); select a list to keep it: fit.sel(config=[{label!r}])")
        return
    hint = ""
    if hasattr(idata, "data_vars") and {"n", "c"} <= set(idata.data_vars):
        hint = "; these are counts: fit them first, bp.fit(counts)"
    elif is_run_with_fits(idata):
        hint = f"; a run: pass one of its fits, bp.pipeline.fits_of(run)[NAME] ({sorted(idata['fits'].children)})"
    elif hasattr(idata, "children") and "counts" in idata.children:
        hint = "; this run has no fits: fit its counts first, bp.fit(run)"
    elif hasattr(idata, "groups") and callable(idata.groups):
        hint = f"; it has no posterior group (groups {list(idata.groups())})"
    elif isinstance(idata, str | os.PathLike):
        hint = (f" {str(idata)!r}: read it first, bp.load_run(path) for a run directory (its main fit is used), "
                "arviz.from_netcdf(path) for a fit file")
    raise TypeError(f"{what} needs a fit (arviz.InferenceData from bayespass.fit); got {type(idata).__name__}{hint}")
