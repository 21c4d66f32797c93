"""Fixtures shared by the tests of every folder."""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _load_benchmark(name: str):
    """Load benchmarks/<name>.py as a module (with its folder on sys.path: some import a sibling by name)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return mod


@pytest.fixture(scope="session")
def load_benchmark():
    """A function that loads ``benchmarks/<name>.py`` by its name (without ``.py``)."""
    return _load_benchmark
