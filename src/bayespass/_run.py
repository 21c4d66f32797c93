"""A run's own settings and fits, for the post-processors given a run (``bp.load_run``'s tree or its directory).

A run's tables were made with its seed, alpha, splits, tie-break and band probability (``run.json``'s
``config``); ``bp.gate(run)``, ``bp.reliability(run)``, ``bp.incoherence(run)``, ``bp.passk_curve(run)`` and
``bp.compare_configs(run)`` take them for the arguments not given, as the command line does, so that they give
the run's tables again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def read_run_json(rundir: str | os.PathLike) -> dict:
    """Return a run directory's ``run.json`` ({} where it has none); a damaged one is a ValueError naming it."""
    path = Path(rundir) / "run.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {type(data).__name__}, not an object")
    except ValueError as err:  # also UnicodeDecodeError
        raise ValueError(f"{str(path)!r} is damaged ({err}); it records the run's settings and finished stages: "
                         "run the same 'bayespass run' again to write it anew (its samples and verdicts are "
                         "reused)") from err
    return data


def settings_of(obj: Any) -> dict:
    """Return the settings of a run (``run.json``'s config): of a run tree or a run directory; else {}.

    A run directory whose ``run.json`` is damaged is a ValueError naming it (its own settings are not known).
    """
    if isinstance(obj, str | os.PathLike):
        own = read_run_json(obj).get("config", {})
        return own if isinstance(own, dict) else {}
    try:
        if hasattr(obj, "children") and hasattr(obj, "attrs"):  # an xarray.DataTree (bp.load_run)
            own = json.loads(obj.attrs["config"]) if "config" in obj.attrs else {}
        else:
            own = {}
    except (ValueError, TypeError):  # not a run's settings
        own = {}
    return own if isinstance(own, dict) else {}


def own(obj: Any, **given) -> dict:
    """Return ``given`` with each argument left None taken from the run's own setting of that name, if it has one.

    The names are ``RunConfig``'s: alpha, n_splits, seed, tie_break, ci_prob. Anything but a run: ``given``.
    """
    settings = settings_of(obj)
    return given | {name: settings[name] for name, v in given.items() if v is None and settings.get(name) is not None}


def default_fit_of(obj: Any):
    """Return the default model's EB fit a run holds (``fits/auto-eb``), or None (not a run, or no such fit)."""
    from .defaults import rcParams

    name = f"{rcParams['stats.model']}-eb"
    if hasattr(obj, "children") and "fits" in obj.children and name in obj["fits"].children:
        from .validate import fit_of_node

        return fit_of_node(obj["fits"][name])
    if isinstance(obj, str | os.PathLike) and (Path(obj) / "run.json").is_file() \
            and (path := Path(obj) / "fits" / f"{name}.nc").is_file():
        from .data.io import read_fit

        return read_fit(path)
    return None
