"""The transformers coder on a tiny locally built model (no download)."""

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from collections import Counter

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from bayespass.generate.hf import HFCoder, ReplayCoder, load_model_config, write_samples  # noqa: E402
from bayespass.generate.tiny import build_tiny_model  # noqa: E402

pytestmark = pytest.mark.hf


@pytest.fixture(scope="module")
def coder(tiny):
    return HFCoder(str(tiny), max_new_tokens=24)


def test_one_batched_call_per_task_and_fields(coder, suite):
    tasks = list(suite.tasks)[:3]
    before = coder.prefill_calls
    recs = coder.generate(suite, 5, temperature=0.8, seed=1, tasks=tasks)
    assert coder.prefill_calls - before == len(tasks)  # one prompt prefill per task for all K samples
    assert len(recs) == 15 and [r["sample"] for r in recs[:5]] == list(range(5))
    for r in recs:
        assert {"solution", "raw", "n_tokens", "mean_logprob", "finish_reason", "gen_time", "model",
                "temperature"} <= set(r)
        assert 1 <= r["n_tokens"] <= 24 and r["finish_reason"] in ("stop", "eos", "length")
        assert np.isfinite(r["mean_logprob"]) and r["mean_logprob"] < 0


def test_same_seed_same_samples_and_logprob_recomputed(coder, suite):
    tasks = list(suite.tasks)[3:5]
    a = coder.generate(suite, 4, temperature=1.0, seed=7, tasks=tasks)
    b = coder.generate(suite, 4, temperature=1.0, seed=7, tasks=tasks[::-1])  # order does not matter
    key = lambda rs: sorted((r["task_id"], r["sample"], r["raw"]) for r in rs)  # noqa: E731
    assert key(a) == key(b)
    c = coder.generate(suite, 4, temperature=1.0, seed=8, tasks=tasks)
    assert key(a) != key(c)
    # the recorded log-probabilities come from the decode steps, the check from one forward pass over the whole
    # sequence: equal to rounding, which in bf16 / fp16 (the default on a GPU) is about 1e-2 per token
    tol = 1e-4 if coder.dtype == torch.float32 else 2e-2
    diffs = [abs(coder.mean_logprob(suite.tasks[r["task_id"]], r["token_ids"]) - r["mean_logprob"]) for r in a]
    assert max(diffs) < tol, (coder.dtype, diffs)


def test_stop_sequences_cut(tiny, suite):
    c = HFCoder(str(tiny), max_new_tokens=40, stop=["e", "a"])
    recs = c.generate(suite, 6, temperature=1.0, seed=3, tasks=list(suite.tasks)[:2])
    stopped = [r for r in recs if r["finish_reason"] == "stop"]
    assert stopped
    for r in stopped:
        assert "e" not in r["completion"] and "a" not in r["completion"]
        assert r["raw"].startswith(r["completion"])
        nxt = r["raw"][len(r["completion"])]
        assert nxt in ("e", "a")
        # generation stopped at the token that completed the stop sequence
        assert nxt in c.tokenizer.decode(r["token_ids"][-1:])


def _stop_ends_every_step(tok, rows, stops, eos):
    """The criterion's answer by a whole decode at every step: (tokens kept, reason) per row."""
    out = []
    for h in rows:
        end = (None, "length")
        for n in range(1, len(h) + 1):
            if h[n - 1] in eos:
                end = (n, "eos")
                break
            if any(s in tok.decode(h[:n], skip_special_tokens=True) for s in stops):
                end = (n, "stop")
                break
        out.append(end)
    return out


@pytest.mark.parametrize("window,full_every", [(None, 64), (1, 5), (3, 1000)])
def test_the_stop_check_ends_each_row_where_a_whole_decode_every_step_does(tiny, window, full_every):
    """The criterion decodes a row whole only when its tail holds a stop and every ``full_every`` tokens. With a
    one-token tail it misses stops that span tokens; the whole decode finds them later, and their first step."""
    import transformers

    from bayespass.generate.hf import _row_stopper

    tok = transformers.AutoTokenizer.from_pretrained(str(tiny))
    rng = np.random.default_rng(5)
    k, steps, n_prompt = 12, 150, 4
    rows = rng.integers(3, tok.vocab_size, size=(k, steps)).tolist()
    texts = [tok.decode(h, skip_special_tokens=True) for h in rows]
    stops = [t[i: i + int(rng.integers(2, 7))] for t, i in zip(texts[:4], (40, 90, 150, 300), strict=True)]
    stops = [s for s in stops if s.strip()]
    eos = frozenset({int(rows[5][60]), int(rows[7][20])})
    crit = _row_stopper(transformers, torch, tok, n_prompt, k, stops, eos, window=window, full_every=full_every)
    ids = torch.as_tensor(np.c_[np.zeros((k, n_prompt), dtype=int), np.array(rows)])
    for n in range(1, steps + 1):
        done = crit(ids[:, : n_prompt + n], None)
        if bool(done.all()):
            break
    crit.finish()
    want = _stop_ends_every_step(tok, rows, stops, eos)
    assert list(zip(crit.ends, crit.reasons, strict=True)) == want
    assert {r for _, r in want} >= {"stop", "eos"}
    if window is None:  # rows past the tail's length are decoded whole every full_every tokens, not every step
        never = _row_stopper(transformers, torch, tok, n_prompt, k, ["\x00never"], frozenset())
        for n in range(1, steps + 1):
            never(ids[:, : n_prompt + n], None)
        never.finish()
        assert never.ends == [None] * k
        assert never.full_decodes == k * (10 + (steps - 10) // 64 + 1)  # window 10: 6 bytes + 4


def test_a_row_ended_by_any_of_the_models_eos_tokens_is_cut_there(tiny, suite):
    """Instruct models list several EOS tokens in their generation config (Llama 3: three, Qwen2.5: two), and
    ``generate`` ends a row at any of them, then pads it. The coder read only the tokenizer's, so such a row kept
    its padding: its token count, mean log-probability and finish reason ("length") were those of a full row."""
    c = HFCoder(str(tiny), max_new_tokens=30, stop=[])
    tasks = list(suite.tasks)[:3]
    free = c.generate(suite, 6, temperature=1.0, seed=11, tasks=tasks)
    # the second EOS: tokens the tiny model draws early in most rows, none of them the tokenizer's EOS
    early = Counter(t for r in free for t in r["token_ids"][:8] if t != c.tokenizer.eos_token_id)
    extra = [t for t, _ in early.most_common(20)]
    c.model.generation_config.eos_token_id = [c.tokenizer.eos_token_id, *extra]
    ends = set(c.model.generation_config.eos_token_id)
    recs = c.generate(suite, 6, temperature=1.0, seed=11, tasks=tasks)
    cut = [r for r in recs if r["finish_reason"] == "eos"]
    assert len(cut) >= len(recs) // 2
    for r in recs:
        toks = r["token_ids"]
        first = next((i for i, t in enumerate(toks) if t in ends), None)
        if r["finish_reason"] == "eos":
            assert first == len(toks) - 1 and r["n_tokens"] == len(toks)  # cut at its first EOS, kept
        else:
            assert first is None and r["n_tokens"] == 30
        again = c.mean_logprob(suite.tasks[r["task_id"]], toks)
        assert abs(again - r["mean_logprob"]) < 1e-4  # the log-probabilities of the kept tokens only


def test_chat_style_uses_the_template(tmp_path, suite):
    path = build_tiny_model(tmp_path / "tiny-chat", chat=True)
    c = HFCoder(str(path), max_new_tokens=8, style="auto")
    assert c.style == "chat"
    text = c.prompt_text(suite.tasks["HumanEval/0"])
    assert text.startswith("<user>Complete the following Python function") and text.endswith("<assistant>")
    assert load_model_config("Qwen/Qwen2.5-Coder-1.5B-Instruct")["style"] == "chat"


def test_a_hub_id_loads_from_the_hugging_face_cache(tiny, tmp_path):
    """'org/name' was taken for a local folder because it holds a '/', and refused as missing: the README's
    'bayespass run --model Qwen/Qwen2.5-Coder-1.5B-Instruct' could not load a cached model. Here a hub cache holds
    the tiny model as 'bayespass-test/tiny-coder' (huggingface_hub's layout), read offline."""
    import shutil

    from bayespass.generate.hf import _check_model_id

    snapshot = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hf" / "hub" / "models--bayespass-test--tiny-coder"
    shutil.copytree(tiny, repo / "snapshots" / snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snapshot)
    code = ("from bayespass.generate.hf import HFCoder\n"
            "print(HFCoder('bayespass-test/tiny-coder', max_new_tokens=4).style)\n"
            "try:\n    HFCoder('bayespass-test/no-such-model')\n"
            "except FileNotFoundError as err:\n    print(err)\n")
    env = dict(os.environ, HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    first, second = res.stdout.splitlines()[:2]
    assert first == "base"  # loaded (the tiny model has no chat template)
    assert second.startswith("model 'bayespass-test/no-such-model' is not a local folder, and the Hugging Face hub "
                             "id could not be loaded")
    for path in ("./no/such/model", "/no/such", "~/no-such", "a/b/c"):  # folders, missing: refused before loading
        with pytest.raises(FileNotFoundError, match=f"model folder '{path}' does not exist"):
            _check_model_id(path)
    for hub_id in ("Qwen/Qwen2.5-Coder-1.5B-Instruct", "gpt2", str(tiny)):
        _check_model_id(hub_id)  # a hub id, or a folder that exists


def test_an_uncached_hub_id_without_a_connection_is_refused_at_once(tiny, monkeypatch):
    """No internet and a hub id not in the cache: transformers retried for about 50 s before saying so; one
    request to the hub's endpoint (here a closed local port) says it before transformers is called. A cached id,
    HF_HUB_OFFLINE and a local folder are not probed."""
    import socket

    import huggingface_hub
    import transformers
    from huggingface_hub import constants

    from bayespass.generate.hf import _check_hub_reachable

    with socket.socket() as s:  # a port nothing listens on: the connection is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda *a, **kw: None)  # not cached
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained",
                        lambda *a, **kw: (_ for _ in ()).throw(AssertionError("transformers was asked")))
    with pytest.raises(FileNotFoundError, match=rf"'bayespass-test/not-cached' is not a local folder nor in the "
                                                rf"Hugging Face cache .* http://127.0.0.1:{port} cannot be reached "
                                                r"\(ConnectError.*'hf download bayespass-test/not-cached'"):
        HFCoder("bayespass-test/not-cached")
    import huggingface_hub.utils as hub_utils

    monkeypatch.setattr(hub_utils, "get_session", lambda: (_ for _ in ()).throw(AssertionError("probed")))
    _check_hub_reachable(str(tiny))  # a local folder
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda *a, **kw: "/cache/config.json")
    _check_hub_reachable("bayespass-test/cached")  # in the cache
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda *a, **kw: None)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    _check_hub_reachable("bayespass-test/not-cached")  # offline: transformers reads the cache alone, at once


def test_bad_input(tiny):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        HFCoder("./no/such/model")
    with pytest.raises(ValueError, match="top_p"):
        HFCoder(str(tiny), top_p=1.5)
    with pytest.raises(ValueError, match=r"device must be 'auto', 'cpu', 'cuda', 'cuda:N'.*got 'gpu0'"):
        HFCoder(str(tiny), device="gpu0")
    with pytest.raises(ValueError, match=r"dtype must be one of 'auto', 'float32', 'bfloat16', 'float16'; got 'int8'"):
        HFCoder(str(tiny), dtype="int8")


def test_a_device_the_machine_lacks_is_refused_before_the_weights_load(tiny, monkeypatch):
    import transformers

    def no_loading(*a, **kw):
        raise AssertionError("the weights were loaded before the device was checked")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", no_loading)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"device='cuda': CUDA is not available here \(torch "):
            HFCoder(str(tiny), device="cuda")
    n = torch.cuda.device_count()
    with pytest.raises(ValueError, match=f"device='cuda:{n}'"):
        HFCoder(str(tiny), device=f"cuda:{n}")  # one past the last GPU (or any GPU on a machine with none)


def test_the_model_loads_in_the_dtype_asked_for(tiny, suite):
    c = HFCoder(str(tiny), device="cpu", dtype="bfloat16", max_new_tokens=6)
    assert c.dtype == torch.bfloat16 and next(c.model.parameters()).dtype == torch.bfloat16
    assert c.device.type == "cpu"
    recs = c.generate(suite, 2, temperature=1.0, seed=1, tasks=list(suite.tasks)[:1])
    assert len(recs) == 2 and all(np.isfinite(r["mean_logprob"]) for r in recs)


def test_replay_coder_round_trips_evalplus_samples(tmp_path, suite):
    recs = [{"task_id": t, "solution": suite.tasks[t].reference_program + f"\n# {i}\n"} for t in
            list(suite.tasks)[:4] for i in range(3)]
    path = write_samples(recs, tmp_path / "samples.jsonl")
    back = ReplayCoder(path).generate(suite, 3, temperature=0.8)
    assert [(r["task_id"], r["solution"]) for r in back] == [(r["task_id"], r["solution"]) for r in recs]
    assert len(ReplayCoder(path).generate(suite, 2)) == 8
    # and the evalplus samples-directory layout
    d = tmp_path / "dir"
    for i, r in enumerate(recs):
        f = d / r["task_id"].replace("/", "_") / f"{i % 3}.py"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(r["solution"])
    assert [r["solution"] for r in ReplayCoder(d).generate(suite)] == [r["solution"] for r in recs]


def _cli(tiny, out):
    return [sys.executable, "-m", "bayespass.cli", "generate", "--model", str(tiny), "--k", "3", "--tasks", "12",
            "--max-new-tokens", "16", "--seed", "5", "--out", str(out)]


def test_kill_and_resume_gives_the_same_file(tiny, tmp_path):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    full = tmp_path / "full.jsonl"
    subprocess.run(_cli(tiny, full), check=True, env=env, capture_output=True, timeout=600)
    part = tmp_path / "part.jsonl"
    proc = subprocess.Popen(_cli(tiny, part), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and (not part.exists() or part.read_text().count("\n") < 9):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    n_lines = part.read_text().count("\n")
    assert 9 <= n_lines < 36  # really interrupted
    subprocess.run(_cli(tiny, part), check=True, env=env, capture_output=True, timeout=600)
    assert part.read_bytes() == full.read_bytes()
    assert len([json.loads(x) for x in full.read_text().splitlines()]) == 36


def test_run_until_width_with_a_real_coder_draws_new_samples_each_round(tiny, tmp_path):
    from bayespass.pipeline import RunConfig, run

    cfg = RunConfig(coder=str(tiny), k=2, temperatures=(0.8,), tasks=4, max_new_tokens=16, until_width=1e-9,
                    max_samples=16, models=("bb",), main_model="bb", methods=("eb",), fuzz_n=0, n_splits=10)
    run(tmp_path / "r", cfg, echo=None)
    recs = [json.loads(x) for x in (tmp_path / "r" / "samples.jsonl").read_text().splitlines()]
    rounds = json.loads((tmp_path / "r" / "rounds.json").read_text())["rounds"]
    assert [r["samples"] for r in rounds] == [8, 12, 16] and rounds[-1]["stop"] == "max_samples (16) drawn"
    assert len(recs) == 16 and {r["model"] for r in recs} == {str(tiny)}
    # each extra sample of a task is drawn with its own seed (the j-th sample's), never a repeat of an earlier call
    for task in {r["task_id"] for r in recs}:
        seeds = [r["seed"] for r in recs if r["task_id"] == task]
        assert len(seeds) >= 2 and len(set(seeds[2:])) == len(seeds[2:]) and seeds[0] not in seeds[2:]


def test_replay_keeps_each_records_config_and_reads_several_files(tmp_path, suite):
    """A file whose records name their configs replayed as one config (the file's) before: two models' samples
    became one config with twice the samples per task."""
    tasks = list(suite.tasks)[:3]
    recs = [{"task_id": t, "solution": suite.tasks[t].reference_program, "config": c} for c in ("A", "B")
            for t in tasks for _ in range(2)]
    mixed = write_samples(recs, tmp_path / "mixed.jsonl")
    back = ReplayCoder(mixed).generate(suite, temperature=0.8)
    from bayespass.execution.samples_io import read_samples

    assert read_samples(back).groupby("config").size().to_dict() == {"A": 6, "B": 6}
    # records that name a model keep it (and take the temperature); records that name nothing take the file's
    named = write_samples([{"task_id": t, "solution": "x", "model": "m"} for t in tasks], tmp_path / "named.jsonl")
    plain = write_samples([{"task_id": t, "solution": "y"} for t in tasks], tmp_path / "plain.jsonl")
    both = ReplayCoder([named, plain]).generate(suite, temperature=0.8)
    assert read_samples(both).groupby("config").size().to_dict() == {"m|T=0.8": 3, "plain|T=0.8": 3}
    assert read_samples(ReplayCoder(plain, model="other").generate(suite))["config"].unique().tolist() == ["other"]
    with pytest.raises(ValueError, match="model='x' would name the samples of 2 files one model"):
        ReplayCoder([named, plain], model="x")


def test_a_second_generation_with_the_same_seed_repeats_draws_counted_once(coder, suite, tmp_path):
    # generating again with the same seed, for more samples, draws the same samples: a file concatenated from
    # both runs counted them as independent (n doubled per task, bands too narrow)
    from bayespass.execution.samples_io import read_samples

    tasks = list(suite.tasks)[5:7]
    first = coder.generate(suite, 2, temperature=0.8, seed=3, tasks=tasks)
    again = coder.generate(suite, 2, temperature=0.8, seed=3, tasks=tasks)
    assert [r["raw"] for r in again] == [r["raw"] for r in first]  # the same draws again
    path = write_samples(first + again, tmp_path / "both.jsonl")
    with pytest.warns(UserWarning, match=r"4 of 8 records repeat the draw of an earlier record .*each draw is "
                                         r"counted once"):
        df = read_samples(path)
    assert df.groupby("task").size().tolist() == [2, 2] and df["raw"].tolist() == [r["raw"] for r in first]
    other = coder.generate(suite, 2, temperature=0.8, seed=4, tasks=tasks)  # another seed: new draws, all kept
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(read_samples(write_samples(first + other, tmp_path / "two_seeds.jsonl"))) == 8


def test_a_file_shared_by_temperatures_keeps_each_ones_samples(coder, suite, tmp_path):
    # one samples file, T = 0.8 at k = 3 then T = 0.2 at k = 4: every T = 0.8 record was dropped as "cut short"
    # (fewer than 4 per task) and the file held only T = 0.2
    from bayespass.generate.hf import generate_to_jsonl

    path, tasks = tmp_path / "s.jsonl", list(suite.tasks)[:2]
    generate_to_jsonl(coder, suite, path, k=3, temperature=0.8, seed=1, tasks=tasks, progress=False)
    first = path.read_text().splitlines()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        generate_to_jsonl(coder, suite, path, k=4, temperature=0.2, seed=1, tasks=tasks, progress=False)
    lines = path.read_text().splitlines()
    assert lines[:6] == first and Counter(json.loads(x)["temperature"] for x in lines) == {0.8: 6, 0.2: 8}
    # more samples of T = 0.8: its tasks are drawn again at k = 5 (a fresh k = 5 run's samples), said so
    with pytest.warns(UserWarning, match=r"2 task\(s\) of .* at temperature 0.8 hold fewer than k = 5 samples "
                                         r"\(an earlier run with a smaller k\): their 6 samples are replaced"):
        generate_to_jsonl(coder, suite, path, k=5, temperature=0.8, seed=1, tasks=tasks, progress=False)
    recs = [json.loads(x) for x in path.read_text().splitlines()]
    assert Counter(r["temperature"] for r in recs) == {0.8: 10, 0.2: 8}
    fresh = tmp_path / "fresh.jsonl"
    generate_to_jsonl(coder, suite, fresh, k=5, temperature=0.8, seed=1, tasks=tasks, progress=False)
    assert [r["raw"] for r in recs if r["temperature"] == 0.8] == [json.loads(x)["raw"] for x in
                                                                    fresh.read_text().splitlines()]
