"""What the names of generation and result files say about their config (evalplus's naming)."""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["file_config", "file_model_temperature", "evalplus_results_name"]

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


def file_config(path) -> str:
    """Return the config a samples file or directory names its records that name none (its name, less .jsonl.gz).

    A directory keeps its whole name: evalplus's ``Qwen--Qwen2.5-Coder-7B-Instruct_vllm_temp_0.8`` has no suffix
    to drop (read as one, it named the config ``..._temp_0``).
    """
    path = Path(os.fspath(path))
    if path.is_dir():
        return path.name
    return Path(_without_gz(path.name)).stem


def evalplus_results_name(path) -> str:
    """Return the config an evalplus results file names: its samples' name.

    evalplus writes ``X.eval_results.json`` (``X_eval_results.json`` before) beside samples ``X.jsonl``, and
    ``DIR/eval_results.json`` for a samples directory ``DIR``; all of ``evalplus_results/humaneval/`` was named
    ``humaneval``, so two models' results there could not be read together.
    """
    path = Path(os.fspath(path))
    name = _without_gz(path.name)
    for suffix in (".eval_results.json", "_eval_results.json"):
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    if name.lower() == "eval_results.json":
        return path.resolve().parent.name or "model"
    return file_config(path)


def _without_gz(name: str) -> str:
    return name[:-3] if name.lower().endswith(".gz") else name
