"""The one place a coder is built from its name: synthetic, a served endpoint or a transformers model.

``bayespass run`` (through its RunConfig) and ``bayespass generate`` both call :func:`make_coder`, so the two
commands build the same coder from the same settings.
"""

from __future__ import annotations

__all__ = ["make_coder"]


def make_coder(name: str, suite, *, tasks=None, endpoint: str | None = None, device: str = "auto",
               dtype: str = "auto", max_new_tokens: int = 512, top_p: float = 0.95, api: str = "auto",
               concurrency: int = 8, api_key_env: str = "OPENAI_API_KEY", max_retries: int = 8,
               timeout: float = 120.0, max_mutants: int = 20, workers=None, progress: bool = False,
               wait_for_server: float = 0.0):
    """Return the coder called ``name``.

    ``endpoint`` given: the model ``name`` served there (OpenAI-compatible API; ``api``, ``concurrency``,
    ``api_key_env``, ``max_retries``, ``timeout`` and ``wait_for_server`` apply). Otherwise ``"synthetic"``: the
    synthetic coder of ``suite`` (``tasks``, ``max_mutants``, ``workers`` and ``progress`` apply); any other name:
    a transformers model id or local path (``device`` and ``dtype`` apply). ``max_new_tokens`` and ``top_p`` apply
    to both real coders.
    """
    if endpoint is not None:
        from .endpoint import OpenAICompatibleCoder

        return OpenAICompatibleCoder(endpoint, name, api=api, concurrency=concurrency, max_new_tokens=max_new_tokens,
                                     top_p=top_p, api_key_env=api_key_env, max_retries=max_retries, timeout=timeout,
                                     wait_for_server=wait_for_server)
    if name == "synthetic":
        from .synthetic import SyntheticCoder

        return SyntheticCoder(suite, seed=0, tasks=tasks, max_mutants=max_mutants, workers=workers,
                              progress=progress)
    from .hf import HFCoder

    return HFCoder(name, device=device, dtype=dtype, max_new_tokens=max_new_tokens, top_p=top_p)
