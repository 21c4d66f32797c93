"""Seeded simulators with known truth for tests and notebooks (re-exported from :mod:`bayespass.simulate`)."""

from .simulate import draw_zoib, oracle_passk, rng, simulate_counts, true_passk

__all__ = ["rng", "draw_zoib", "simulate_counts", "true_passk", "oracle_passk"]
