"""The expected-value cache on disk: an index read at once, each task's values read on first use."""

import json
import pickle

from bayespass.data.suites import Suite, Task
from bayespass.execution import engine, groundtruth
from bayespass.execution.child import encode
from bayespass.execution.expected_cache import LazyValues, read_cache, write_cache
from bayespass.execution.sandbox import Limits

EXPECTED = {
    "t/a": {"inputs": [[1], [2]], "values": [2, ["F", "1.5"]], "times": [0.001, 0.002], "n_base": 1, "dropped": []},
    "t/b": {"inputs": [["s"]], "values": [["L", ["x" * 1000, "y"]]], "times": [0.003], "n_base": 1, "dropped": [2]},
    "t/c": {"inputs": [], "values": [], "times": [], "n_base": 0, "dropped": []},
}


def test_round_trip_reads_values_only_when_used(tmp_path):
    path = tmp_path / "expected-x.json"
    write_cache(path, EXPECTED, 0.0123)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    values_files = list(tmp_path.glob("expected-x.*.values"))
    assert len(values_files) == 1 and oct(values_files[0].stat().st_mode & 0o777) == "0o600"
    got, speed = read_cache(path)
    assert speed == 0.0123 and list(got) == list(EXPECTED)
    for tid, entry in EXPECTED.items():
        lazy = got[tid]["values"]
        assert isinstance(lazy, LazyValues) and len(lazy) == len(entry["values"]) and not lazy.loaded
        assert {k: v for k, v in got[tid].items() if k != "values"} == {k: v for k, v in entry.items()
                                                                       if k != "values"}
    assert got["t/a"]["values"][1] == ["F", "1.5"] and got["t/a"]["values"].loaded
    assert not got["t/b"]["values"].loaded  # reading one task reads no other
    assert got["t/b"]["values"] == EXPECTED["t/b"]["values"] and list(got["t/c"]["values"]) == []
    plain = pickle.loads(pickle.dumps(got["t/b"]))  # a Dask batch's task data travels as plain lists
    assert type(plain["values"]) is list and plain["values"] == EXPECTED["t/b"]["values"]


def test_a_reader_keeps_its_values_while_another_process_rewrites_the_cache(tmp_path):
    path = tmp_path / "expected-x.json"
    write_cache(path, EXPECTED, 1.0)
    first, _ = read_cache(path)
    changed = {t: e | {"values": [["S", [7]]] * len(e["values"])} for t, e in EXPECTED.items()}
    write_cache(path, changed, 2.0)
    assert len(list(tmp_path.glob("expected-x.*.values"))) == 1  # the stale values file is gone
    assert list(first["t/a"]["values"]) == EXPECTED["t/a"]["values"]  # read from the file it opened
    second, speed = read_cache(path)
    assert speed == 2.0 and list(second["t/a"]["values"]) == [["S", [7]]] * 2


def test_a_damaged_or_absent_cache_reads_as_absent(tmp_path):
    path = tmp_path / "expected-x.json"
    assert read_cache(path) is None
    write_cache(path, EXPECTED, 1.0)
    values = next(tmp_path.glob("expected-x.*.values"))
    with open(values, "r+b") as fh:
        fh.truncate(values.stat().st_size - 3)
    assert read_cache(path) is None
    path.write_text("{not json")
    assert read_cache(path) is None


def _suite(name: str) -> Suite:
    tasks = {"toy/dbl": Task("toy/dbl", "def dbl(x):\n", "dbl", "    return 2 * x\n", inputs=[[1], [5]], n_base=1)}
    return Suite(name, tasks, f"{name}hash")


def test_ground_truth_caches_in_two_files_and_judges_the_same_from_them(tmp_path, monkeypatch):
    monkeypatch.setenv("BAYESPASS_CACHE", str(tmp_path))
    computed = _suite("toy-lazy")
    groundtruth.ground_truth(computed, workers=1)
    assert [type(v) for v in computed.expected["toy/dbl"]["values"]] == [int, int]
    (index,) = tmp_path.glob("expected-toy-lazy-*-l2.json")
    assert len(list(tmp_path.glob("expected-toy-lazy-*.values"))) == 1
    cached = _suite("toy-lazy")
    groundtruth.ground_truth(cached, workers=1)
    lazy = cached.expected["toy/dbl"]["values"]
    assert isinstance(lazy, LazyValues) and not lazy.loaded and cached.tasks["toy/dbl"].inputs == [[1], [5]]
    assert list(lazy) == [2, 10] and cached.speed_ref == computed.speed_ref
    samples = [{"task_id": "toy/dbl", "completion": body, "config": name}
               for name, body in (("right", "    return x + x\n"), ("wrong", "    return x + 1\n"))]
    ds = engine.execute(samples, cached, out=tmp_path / "run", workers=1, progress=False,
                        limits=Limits(min_time_limit=1.0))
    assert ds.correct.sel(task="toy/dbl", sample=0).values.tolist() == [True, False]
    assert json.loads(index.read_text())["tasks"]["toy/dbl"]["n_values"] == 2


def test_a_cache_of_the_single_file_layout_is_converted_not_recomputed(tmp_path, monkeypatch):
    monkeypatch.setenv("BAYESPASS_CACHE", str(tmp_path))
    suite = _suite("toy-old")
    stem = (f"expected-toy-old-{suite.source_hash[:16]}-h{groundtruth.VALUES_VERSION}-"
            f"{groundtruth._TIMES_FORMAT}")
    # values no canonical run would give: the test sees that they were read, not computed
    old = {"tasks": {"toy/dbl": {"inputs": [encode((1,)), encode((5,))], "values": [111, 555],
                                 "times": [0.01, 0.01], "n_base": 1, "dropped": [], "transient": []}},
           "speed_ref": 0.5}
    (tmp_path / f"{stem}.json").write_text(json.dumps(old))

    def no_sandbox(*args, **kwargs):
        raise AssertionError("the cache was recomputed")

    monkeypatch.setattr(groundtruth, "expected_outputs", no_sandbox)
    groundtruth.ground_truth(suite, workers=1)
    assert list(suite.expected["toy/dbl"]["values"]) == [111, 555] and suite.speed_ref == 0.5
    assert not (tmp_path / f"{stem}.json").exists()
    assert (tmp_path / f"{stem}-l2.json").exists()
    again = _suite("toy-old")
    groundtruth.ground_truth(again, workers=1)
    assert list(again.expected["toy/dbl"]["values"]) == [111, 555]


def _two_tasks(name: str) -> Suite:
    tasks = {"toy/dbl": Task("toy/dbl", "def dbl(x):\n", "dbl", "    return 2 * x\n", inputs=[[1], [5]], n_base=1),
             "toy/neg": Task("toy/neg", "def neg(x):\n", "neg", "    return -x\n", inputs=[[3]], n_base=1)}
    return Suite(name, tasks, f"{name}hash")


def test_only_the_tasks_used_are_computed_and_the_cache_grows_by_the_others(tmp_path, monkeypatch):
    """A first run on five tasks of MBPP+ ran all 378 canonical solutions (40-60 s on 2 cores) before any sample."""
    monkeypatch.setenv("BAYESPASS_CACHE", str(tmp_path))
    asked = []
    computed = groundtruth.expected_outputs

    def recorded(suite, **kw):
        asked.append(list(kw["tasks"]) if kw.get("tasks") is not None else sorted(suite.tasks))
        return computed(suite, **kw)

    monkeypatch.setattr(groundtruth, "expected_outputs", recorded)
    samples = [{"task_id": "toy/dbl", "completion": "    return x + x\n", "config": "right"}]
    ds = engine.execute(samples, _two_tasks("toy-part"), out=tmp_path / "run", workers=1, progress=False,
                        limits=Limits(min_time_limit=1.0))
    assert asked == [["toy/dbl"]] and ds.correct.values.ravel().tolist() == [True]
    (index,) = tmp_path.glob("expected-toy-part-*-l2.json")
    assert list(json.loads(index.read_text())["tasks"]) == ["toy/dbl"]
    whole = _two_tasks("toy-part")
    groundtruth.ground_truth(whole, workers=1)  # every task: the cached one is read, the other computed
    assert asked == [["toy/dbl"], ["toy/neg"]]
    assert sorted(json.loads(index.read_text())["tasks"]) == ["toy/dbl", "toy/neg"]
    assert len(list(tmp_path.glob("expected-toy-part-*.values"))) == 1  # the first values file replaced
    again = _two_tasks("toy-part")
    groundtruth.ground_truth(again, workers=1)
    assert asked == [["toy/dbl"], ["toy/neg"]]  # nothing computed
    assert list(again.expected["toy/dbl"]["values"]) == [2, 10] and list(again.expected["toy/neg"]["values"]) == [-3]
    assert again.speed_ref == whole.speed_ref == json.loads(index.read_text())["speed_ref"]


def test_a_cache_that_cannot_be_written_is_warned_about_and_the_command_goes_on(tmp_path, monkeypatch):
    """A full disk under the cache directory ended the command that had just computed what it would cache."""
    import errno

    import pytest

    from bayespass.data.suites import write_cached

    monkeypatch.setenv("BAYESPASS_CACHE", str(tmp_path))

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(groundtruth, "write_cache", full)
    suite = _suite("toy-full")
    with pytest.warns(RuntimeWarning, match=r"could not write the cache file .*expected-toy-full.* \(No space left "
                                            r"on device\); what it holds is computed again next time"):
        groundtruth.ground_truth(suite, workers=1)
    assert list(suite.expected["toy/dbl"]["values"]) == [2, 10]
    monkeypatch.setattr(type(tmp_path), "write_text", full)
    with pytest.warns(RuntimeWarning, match="could not write the cache file"):
        assert write_cached(tmp_path / "fuzz.json", "{}") is False
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_cache_write_leaves_the_previous_cache(tmp_path, monkeypatch):
    path = tmp_path / "expected-x-l2.json"
    write_cache(path, EXPECTED, 0.5)
    before = sorted(p.name for p in tmp_path.iterdir())
    real = json.dumps

    def cut(obj, *a, **k):
        if isinstance(obj, dict) and "values_file" in obj:  # the index, after the values file is in place
            raise KeyboardInterrupt
        return real(obj, *a, **k)

    monkeypatch.setattr(json, "dumps", cut)
    try:
        write_cache(path, EXPECTED, 0.7)
    except KeyboardInterrupt:
        pass
    monkeypatch.setattr(json, "dumps", real)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    got, speed = read_cache(path)
    assert speed == 0.5 and list(got["t/a"]["values"]) == [2, ["F", "1.5"]]


def test_a_damaged_cache_file_is_computed_again(tmp_path):
    from bayespass.data.suites import read_cached, write_cached

    path = tmp_path / "pools.json"
    assert read_cached(path) is None
    assert write_cached(path, json.dumps({"t": [1]})) and read_cached(path) == {"t": [1]}
    path.write_text('{"t": [1')  # cut short by an older writer
    assert read_cached(path) is None
