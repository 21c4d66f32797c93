"""Models of per-task success probability; each registers itself (see :mod:`bayespass.models.base`)."""

from . import bb, flex, hier, lnorm, shared, zoibb  # noqa: F401 - registration of the built-in models
