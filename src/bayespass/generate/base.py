"""The coder interface shared by the synthetic, transformers and replay coders."""

from __future__ import annotations

from abc import ABC, abstractmethod

__all__ = ["Coder"]


class Coder(ABC):
    """Produces evalplus-format sample records (``task_id`` plus ``solution`` or ``completion``).

    Every record also carries ``model`` and ``temperature`` (the config) and
    may carry ``mean_logprob`` and ``n_tokens``.
    """

    name: str = "coder"

    @abstractmethod
    def generate(self, suite, k: int, *, temperature: float, seed: int = 0, tasks=None) -> list[dict]:
        """Return ``k`` sample records per task of ``suite`` (or of ``tasks``)."""
