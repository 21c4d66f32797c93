"""What the names of generation and result files say about their config (evalplus's naming)."""

from __future__ import annotations

import re

__all__ = ["file_model_temperature"]

#: evalplus's codegen names its output ``<model, / as -->_<backend>_temp_<T>.jsonl`` (a directory without .jsonl;
#: ``-sanitized`` after its sanitizer), and other harnesses end a file's name in ``_temp0.6`` or ``-temperature-0.8``
_TEMP_IN_NAME = re.compile(
    r"^(?P<model>.+?)(?:_(?:vllm|hf|openai|anthropic|google|bedrock|ollama|gptqmodel|hf-gaudi))?"
    r"[_-]temp(?:erature)?[_=-]?(?P<t>\d+(?:\.\d*)?)(?:[-_.](?:sanitized|raw))?$", re.IGNORECASE)


def file_model_temperature(name: str) -> tuple[str, float] | None:
    """Return the model and temperature a samples file's name gives (evalplus's naming), or None.

    ``Qwen--Qwen2.5-Coder-7B-Instruct_vllm_temp_0.8`` (evalplus's codegen) gives
    ``("Qwen/Qwen2.5-Coder-7B-Instruct", 0.8)``, ``MBPP__gpt_4o_temp0.6`` gives ``("MBPP__gpt_4o", 0.6)``; a name
    without a temperature at its end gives None.
    """
    m = _TEMP_IN_NAME.match(name)
    if m is None or not m["model"].strip("_-. "):
        return None
    return m["model"].replace("--", "/"), float(m["t"])
