"""``extend_inferencedata=True`` of every post-processor: attach its result to what it was computed from."""

from __future__ import annotations

import xarray as xr

__all__ = ["attach", "attach_fit", "check_target"]


def attach(target, name: str, ds: xr.Dataset) -> None:
    """Add (or replace) group ``name`` holding ``ds`` on an InferenceData or a run tree (``xarray.DataTree``).

    Raises ``TypeError`` naming the parameter when ``target`` is neither (a plain
    Dataset has no groups to extend).
    """
    check_target(target)
    if hasattr(target, "add_groups"):
        if name in target.groups():
            del target[name]
        target.add_groups({name: ds}, warn_on_custom_groups=False)
    else:
        target[name] = xr.DataTree(ds)


def attach_fit(target, name: str, ds: xr.Dataset) -> None:
    """:func:`attach` to a fit, or to a run tree's main fit (its node ``fits/<main_fit>``)."""
    from ..validate import is_run_with_fits

    if is_run_with_fits(target):
        target = target["fits"][target.attrs["main_fit"]]
    attach(target, name, ds)


def check_target(target) -> None:
    """Raise ``TypeError`` (before any work) unless ``target`` can take a new group."""
    if not ((hasattr(target, "add_groups") and hasattr(target, "groups")) or isinstance(target, xr.DataTree)):
        raise TypeError(f"extend_inferencedata=True needs an arviz.InferenceData or the run tree "
                        f"(bayespass.load_run) to extend; got a {type(target).__name__}")
