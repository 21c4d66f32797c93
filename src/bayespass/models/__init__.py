"""Models of per-task success probability; each registers itself (see :mod:`bayespass.models.base`)."""

from . import bb, flex, hier, zoibb  # noqa: F401 - registration of the built-in models
