"""generate.coders.make_coder: the one builder that 'bayespass run' and 'bayespass generate' share."""

import pytest

from bayespass.generate.coders import make_coder
from bayespass.pipeline.config import RunConfig
from bayespass.pipeline.config import make_coder as run_coder


def test_an_endpoint_coder_carries_every_setting():
    c = make_coder("tiny-llama", None, endpoint="http://127.0.0.1:9/v1/", api="completions", concurrency=3,
                   max_new_tokens=77, top_p=0.5, max_retries=2, timeout=9.5)
    assert type(c).__name__ == "OpenAICompatibleCoder"
    assert (c.base_url, c.model_id, c.api, c.concurrency, c.max_new_tokens, c.top_p, c.max_retries, c.timeout) == \
        ("http://127.0.0.1:9/v1", "tiny-llama", "completions", 3, 77, 0.5, 2, 9.5)


def test_a_run_builds_the_coder_generate_builds_from_the_same_settings():
    cfg = RunConfig(coder="tiny-llama", endpoint="http://127.0.0.1:9/v1", api="chat", concurrency=5,
                    max_new_tokens=33, top_p=0.7, max_retries=1, timeout=4.0)
    a = run_coder(cfg, None, None, None)
    b = make_coder("tiny-llama", None, endpoint="http://127.0.0.1:9/v1", api="chat", concurrency=5,
                   max_new_tokens=33, top_p=0.7, max_retries=1, timeout=4.0)
    keys = ("base_url", "model_id", "api", "style", "stop", "concurrency", "max_new_tokens", "top_p", "max_retries",
            "timeout")
    assert {k: getattr(a, k) for k in keys} == {k: getattr(b, k) for k in keys}


def test_a_transformers_model_gets_its_device_dtype_and_decoding(tiny):
    c = make_coder(str(tiny), None, device="cpu", dtype="float32", max_new_tokens=12, top_p=0.9)
    assert type(c).__name__ == "HFCoder"
    assert (str(c.device), str(c.dtype), c.max_new_tokens, c.top_p) == ("cpu", "torch.float32", 12, 0.9)


def test_a_bad_setting_is_refused_by_the_coder_it_applies_to():
    with pytest.raises(ValueError, match="concurrency"):
        make_coder("tiny-llama", None, endpoint="http://127.0.0.1:9/v1", concurrency=0)
