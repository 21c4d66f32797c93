"""Batched K-sample generation (one generate call per task) vs K separate calls, and the memory it holds.

Usage: python benchmarks/bench_generate.py [--k 8] [--tasks 10] [--tokens 64] [--size 0.5b] [--seq-tasks N]
       python benchmarks/bench_generate.py --stop-check [--k 200] [--tokens 512]

Prints the wall time and generated tokens per second of both and their ratio (same machine, same run).  With
the default tiny model (2 layers, hidden 64) the ratio mostly measures per-call overhead and batching.
``--size 0.5b`` (or ``1.5b``) builds a random model of Qwen2.5-Coder-0.5B's (1.5B's) shape, its vocabulary
of 151,936 included (the tokenizer stays the tiny one's; ids beyond it decode to nothing): on a GPU the
batched decode then amortises the weight reads of every decode step across the K sequences.  On CUDA it
also prints the peak memory of the coder's generate call against the same call keeping every step's raw
logits (``output_logits=True``, how the coder took log-probabilities before it kept one step at a time).

``--stop-check`` times the stop criterion alone (the host's work each decode step, no model): K rows of
random tokens of the tiny tokenizer, ``--tokens`` steps, the base models' stop sequences (evalplus's),
decoded whole every step (as before the tail check) against the tail check with a whole decode every
``FULL_DECODE_EVERY`` tokens; both must end every row alike.
"""

import argparse
import tempfile
import time
from pathlib import Path

import bayespass as bp
from bayespass.generate.hf import HFCoder
from bayespass.generate.tiny import build_tiny_model

#: real models' shapes (Qwen2.5-Coder 0.5B and 1.5B), random weights
SIZES = {
    "tiny": None,
    "0.5b": {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
             "num_key_value_heads": 2, "vocab_size": 151936},
    "1.5b": {"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28, "num_attention_heads": 12,
             "num_key_value_heads": 2, "vocab_size": 151936},
}


def _timed(coder, suite, k, tasks, seed):
    """(seconds, generated tokens) of one generate call per task with k samples each."""
    import torch

    if coder.device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    recs = coder.generate(suite, k, temperature=1.0, seed=seed, tasks=tasks)
    if coder.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0, sum(len(r["token_ids"]) for r in recs)


def peak_memory(coder, suite, k, task_id):
    """Peak CUDA memory (GiB) above the model's of the coder's call, and of generate keeping every step's logits."""
    import torch

    task = suite.tasks[task_id]
    out = {}
    for arm in ("coder", "output_logits"):
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        if arm == "coder":
            coder.generate(suite, k, temperature=1.0, seed=1, tasks=[task_id])
        else:
            enc = coder.tokenizer(coder.prompt_text(task), return_tensors="pt").to(coder.device)
            torch.manual_seed(1)
            with torch.no_grad():
                res = coder.model.generate(**enc, do_sample=True, temperature=1.0, top_p=coder.top_p, top_k=0,
                                           num_return_sequences=k, max_new_tokens=coder.max_new_tokens,
                                           min_new_tokens=coder.max_new_tokens, output_logits=True,
                                           return_dict_in_generate=True, pad_token_id=coder.tokenizer.pad_token_id)
                logp = torch.log_softmax(torch.stack(res.logits, dim=1).float(), dim=-1)  # as the coder did
                del logp, res
        torch.cuda.synchronize()
        out[arm] = (torch.cuda.max_memory_allocated() - base) / 2**30
    return out


def stop_check_cost(tok, k: int, steps: int, seed: int = 0) -> dict:
    """Host seconds per decode step of the stop criterion: whole decodes every step against the tail check."""
    import numpy as np
    import torch
    import transformers

    from bayespass.generate.hf import _BASE_STOPS, _row_stopper

    stops = _BASE_STOPS
    rows = np.random.default_rng(seed).integers(3, tok.vocab_size, size=(k, steps))
    ids = torch.as_tensor(np.c_[np.zeros((k, 4), dtype=np.int64), rows])
    out = {}
    for arm, window in (("every step", 10**9), ("tail", None)):
        crit = _row_stopper(transformers, torch, tok, 4, k, stops, frozenset(), window=window)
        t0 = time.perf_counter()
        for n in range(1, steps + 1):
            crit(ids[:, : 4 + n], None)
        crit.finish()
        out[arm] = ((time.perf_counter() - t0) / steps, list(zip(crit.ends, crit.reasons, strict=True)))
    if out["every step"][1] != out["tail"][1]:
        raise AssertionError("the tail check ended rows otherwise than a whole decode every step")
    return {arm: secs for arm, (secs, _) in out.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--size", choices=list(SIZES), default="tiny")
    ap.add_argument("--seq-tasks", type=int, default=None, help="tasks of the K-calls arm (all; 0: none)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--stop-check", action="store_true", help="time the stop criterion alone (no model)")
    args = ap.parse_args()
    if args.stop_check:
        import transformers

        with tempfile.TemporaryDirectory() as tmp:
            tok = transformers.AutoTokenizer.from_pretrained(build_tiny_model(Path(tmp) / "tiny"))
        cost = stop_check_cost(tok, args.k, args.tokens)
        print(f"stop criterion, K={args.k} rows x {args.tokens} steps (no stop reached): whole decode every step "
              f"{cost['every step'] * 1e3:.2f} ms/step, tail check {cost['tail'] * 1e3:.2f} ms/step, "
              f"{cost['every step'] / cost['tail']:.1f}x")
        return
    suite = bp.load_suite("humaneval", expected=False)
    tasks = list(suite.tasks)[: args.tasks]
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_model(Path(tmp) / f"model-{args.size}", size=SIZES[args.size])
        coder = HFCoder(str(path), max_new_tokens=args.tokens, stop=[], device=args.device)
        n_params = sum(p.numel() for p in coder.model.parameters())
        coder.generate(suite, 2, temperature=1.0, tasks=tasks[:1])  # warm-up
        p0 = coder.prefill_calls
        batched, tok_b = _timed(coder, suite, args.k, tasks, seed=1)
        pre_b = coder.prefill_calls - p0
        print(f"model {args.size} ({n_params / 1e6:.0f}M parameters, {coder.dtype}), device {coder.device}; "
              f"K={args.k}, {args.tokens} new tokens at most")
        print(f"batched   : {batched:7.2f} s for {len(tasks)} tasks, {tok_b / batched:8.0f} tokens/s "
              f"({pre_b} prompt prefills)")
        if args.seq_tasks != 0:
            seq_tasks = tasks[: args.seq_tasks or len(tasks)]
            p0, sequential, tok_s = coder.prefill_calls, 0.0, 0
            for i in range(args.k):
                secs, toks = _timed(coder, suite, 1, seq_tasks, seed=100 + i)
                sequential, tok_s = sequential + secs, tok_s + toks
            pre_s = coder.prefill_calls - p0
            print(f"sequential: {sequential:7.2f} s for {len(seq_tasks)} tasks, {tok_s / sequential:8.0f} tokens/s "
                  f"({pre_s} prompt prefills)")
            print(f"speed-up  : {(tok_b / batched) / (tok_s / sequential):.1f}x in generated tokens per second")
        if coder.device.type == "cuda":
            for k in sorted({args.k, 4 * args.k}):
                mem = peak_memory(coder, suite, k, tasks[0])
                print(f"peak memory above the model's, K={k}, {args.tokens} tokens: coder {mem['coder']:.2f} GiB, "
                      f"keeping every step's logits {mem['output_logits']:.2f} GiB")


if __name__ == "__main__":
    main()
