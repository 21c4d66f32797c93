"""Fixtures shared by the generation tests: the tiny local model and the HumanEval suite."""

import pytest


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from bayespass.generate.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny-llama")


@pytest.fixture(scope="module")
def suite():
    import bayespass as bp

    return bp.load_suite("humaneval", expected=False)
