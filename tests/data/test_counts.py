import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import bayespass as bp


def test_make_counts_layout():
    ds = bp.make_counts([[1, 2], [3, 0]], [[0, 2], [1, 0]], task=["t0", "t1"], model=["m", "m"],
                        temperature=[0.2, 0.8], benchmark="humaneval")
    assert ds.n.dims == ("config", "task") and ds.n.dtype == np.int64
    assert list(ds.config.values) == ["m|T=0.2|humaneval", "m|T=0.8|humaneval"]
    assert ds.attrs["source"] == "arrays" and "bayespass_version" in ds.attrs


@pytest.mark.parametrize("n,c,match", [
    ([3, 2], [4, 0], r"c must be <= n .*task 'task-0' has c=4, n=3"),
    ([3, -1], [0, 0], r"n must be a non-negative integer.*task 'task-1' has n=-1"),
    ([3.5, 2], [0, 0], r"n must be a non-negative integer.*n=3.5"),
    ([3, np.nan], [0, 0], r"n must be a non-negative integer.*n=nan"),
    ([0, 0], [0, 0], "no observed task"),
])
def test_validation_errors(n, c, match):
    with pytest.raises(ValueError, match=match):
        bp.make_counts(n, c)


def test_empty_and_type_errors():
    with pytest.raises(ValueError, match="empty"):
        bp.make_counts(np.zeros((1, 0)), np.zeros((1, 0)))
    with pytest.raises(TypeError, match="must be an xarray.Dataset"):
        bp.validate_counts({"n": [1]})
    with pytest.raises(ValueError, match="same shape"):
        bp.make_counts([1, 2], [1])


def test_a_long_dataframe_is_counts_everywhere_counts_are_taken():
    df = pd.DataFrame({"config": ["a"] * 3 + ["b"] * 3, "task": ["t0", "t1", "t2"] * 2,
                       "n": [4, 4, 4, 4, 4, 2], "c": [1, 4, 0, 2, 3, 2]})
    ds = bp.counts_from_frame(df)
    got = bp.validate_counts(df)
    got.attrs["created"] = ds.attrs["created"]  # a timestamp: the two calls may fall in different seconds
    xr.testing.assert_identical(got, ds)
    np.testing.assert_array_equal(bp.passk(df, k=[1, 2]).values, bp.passk(ds, k=[1, 2]).values)
    # the rows' errors name the DataFrame, the row and the value
    with pytest.raises(ValueError, match=r"counts \(a DataFrame\), row 2 \(task 't1'\): c must be <= n; got c=5, n=4"):
        bp.validate_counts(df.assign(c=[1, 5, 0, 2, 3, 2]))
    with pytest.raises(ValueError, match=r"row 3 \(task 't2'\): c must be a non-negative integer; got a missing"):
        bp.passk(df.assign(c=[1, 4, np.nan, 2, 3, 2]), k=1)


def test_csv_roundtrip_and_missing_pairs(tmp_path):
    df = pd.DataFrame({"model": ["a", "a", "b"], "temperature": [0.8, 0.8, 0.8],
                       "task": ["t1", "t2", "t1"], "n": [5, 5, 3], "c": [1, 5, 0]})
    df.to_csv(tmp_path / "x.csv", index=False)
    ds = bp.read_counts(tmp_path / "x.csv")
    assert ds.sizes == {"config": 2, "task": 2}
    assert ds.n.sel(config="b|T=0.8", task="t2").item() == 0  # missing pair -> n = 0
    bp.write_counts(ds, tmp_path / "y.nc")
    back = bp.read_counts(tmp_path / "y.nc")
    xr.testing.assert_equal(back[["n", "c"]], ds[["n", "c"]])
    bp.write_counts(ds, tmp_path / "z.csv")
    again = bp.read_counts(tmp_path / "z.csv")
    np.testing.assert_array_equal(again.n.values, ds.n.values)


def test_a_spreadsheet_s_csv_reads_as_the_plain_one(tmp_path):
    """A ';'-separated CSV with decimal commas (a spreadsheet's in many locales) was 'missing columns'; a UTF-8
    byte-order mark (Excel's 'CSV UTF-8') and CRLF line ends read as they are."""
    df = pd.DataFrame({"model": ["a", "a", "b"], "temperature": [0.2, 0.2, 1.0],
                       "task": ["t1", "t2", "t1"], "n": [5, 5, 3], "c": [1, 5, 0]})
    df.to_csv(tmp_path / "plain.csv", index=False)
    df.to_csv(tmp_path / "semi.csv", index=False, sep=";", decimal=",")
    df.to_csv(tmp_path / "bom.csv", index=False, encoding="utf-8-sig", lineterminator="\r\n")
    assert "0,2" in (tmp_path / "semi.csv").read_text()
    plain = bp.read_counts(tmp_path / "plain.csv")
    for name in ("semi.csv", "bom.csv"):
        other = bp.read_counts(tmp_path / name)
        assert list(other.config.values) == ["a|T=0.2", "b|T=1"] == list(plain.config.values)
        xr.testing.assert_equal(other[["n", "c"]], plain[["n", "c"]])


def test_labels_survive_a_csv_round_trip(tmp_path):
    """A run labels its configs 'model|T=..' and records the suite as benchmark: reading its counts.csv
    back must give the same labels (it gave 'model|T=..|suite', so --pairs from the run's tables failed)."""
    ds = bp.make_counts([[3, 3], [2, 3]], [[1, 3], [0, 2]], task=["t1", "t2"], config=["a|T=0.2", "b|T=1"],
                        model=["a", "b"], temperature=[0.2, 1.0], benchmark=["mbpp+", "mbpp+"])
    bp.write_counts(ds, tmp_path / "counts.csv")
    back = bp.read_counts(tmp_path / "counts.csv")
    assert list(back.config.values) == ["a|T=0.2", "b|T=1"]
    assert list(back.benchmark.values) == ["mbpp+", "mbpp+"] and list(back.temperature.values) == [0.2, 1.0]
    np.testing.assert_array_equal(back.c.values, ds.c.values)
    # a config column is taken as it is; two labels that would be built alike stay apart
    f = tmp_path / "own.csv"
    f.write_text("config,model,task,n,c\nx,m,t1,2,1\ny,m,t1,2,2\n")
    own = bp.read_counts(f)
    assert list(own.config.values) == ["x", "y"] and own.c.sel(config="y").item() == 2
    # evalplus's column name task_id is read as task
    f.write_text("config,task_id,n,c\nx,t1,2,1\ny,t1,2,2\n")
    alias = bp.read_counts(f)
    assert list(alias.task.values) == ["t1"] and alias.c.sel(config="y").item() == 2


def test_csv_errors_name_file_and_row(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("task,n,c\nt1,5,2\nt2,3,4\n")
    with pytest.raises(ValueError, match=r"bad.csv, row 2 \(task 't2'\): c must be <= n"):
        bp.read_counts(f)
    f.write_text("task,n,c\nt1,5,2\nt1,5,1\n")
    with pytest.raises(ValueError, match=r"row 2: duplicate row"):
        bp.read_counts(f)
    f.write_text("task,n\nt1,5\n")
    with pytest.raises(ValueError, match=r"missing column\(s\) \['c'\]"):
        bp.read_counts(f)
    f.write_text("task,n,c\nt1,five,2\n")
    with pytest.raises(ValueError, match=r"row 1 .* n must be a non-negative integer; got 'five'"):
        bp.read_counts(f)
    # the value as written, not numpy's repr ("got np.float64(5.5)"); an empty cell said in words
    for cell, shown in (("5.5", "5.5"), ("", r"a missing value \(empty or NaN\)"), ("-5", "-5")):
        f.write_text(f"task,n,c\nt1,5,2\nt2,{cell},1\n")
        with pytest.raises(ValueError, match=rf"row 2 \(task 't2'\): n must be a non-negative integer; got {shown}$"):
            bp.read_counts(f)
    # an empty config or task cell was read as the label '' (a blank row in every table) or 'nan'
    for text, col in (("config,task,n,c\nx,t1,5,2\n,t1,5,3\n", "config"),
                      ('config,task,n,c\nx,t1,5,2\n" ",t1,5,3\n', "config"),
                      ("config,task,n,c\nx,t1,5,2\nx,,5,3\n", "task")):
        f.write_text(text)
        with pytest.raises(ValueError, match=rf"bad.csv, row 2: {col} is empty .*; every row needs a {col} name"):
            bp.read_counts(f)
    with pytest.raises(ValueError, match=r"config labels in counts must be non-empty names; got ' ' \(position 1"):
        bp.make_counts(np.array([[5], [5]]), np.array([[2], [3]]), config=["x", " "], task=["t1"])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        bp.read_counts(tmp_path / "nope.csv")
    with pytest.raises(ValueError, match="cannot tell the format"):
        (tmp_path / "x.txt").write_text("")
        bp.read_counts(tmp_path / "x.txt")


def test_jsonl(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text('{"task": "a", "n": 4, "c": 1}\n\n{"task": "b", "n": 4, "c": 4}\n')
    assert bp.read_counts(f).c.values.tolist() == [[1, 4]]
    f.write_text('{"task": "a", "n": 4, "c": 1}\n{oops\n')
    with pytest.raises(ValueError, match=r"c.jsonl, line 2: invalid JSON"):
        bp.read_counts(f)


def test_evalplus_results(tmp_path):
    doc = {"date": "x", "hash": "h", "eval": {
        "HumanEval/0": [{"task_id": "HumanEval/0", "solution": "", "base_status": "pass",
                         "plus_status": "pass"},
                        {"task_id": "HumanEval/0", "solution": "", "base_status": "pass",
                         "plus_status": "fail"}],
        "HumanEval/1": [{"task_id": "HumanEval/1", "solution": "", "base_status": "fail",
                         "plus_status": "fail"}]}}
    f = tmp_path / "eval_results.json"
    f.write_text(json.dumps(doc))
    plus = bp.read_counts(f, model="qwen", temperature=0.8)
    assert plus.c.values.tolist() == [[1, 0]] and plus.n.values.tolist() == [[2, 1]]
    assert plus.config.item() == "qwen|T=0.8"
    base = bp.read_counts(f, correctness="base")
    assert base.c.values.tolist() == [[2, 0]]
    with pytest.raises(ValueError, match="correctness='all' is not supported"):
        bp.read_counts(f, correctness="all")
    assert base.config.item() == tmp_path.name  # a samples directory's results: named by the directory
    # evalplus's results of samples files, side by side in evalplus_results/humaneval/ (both were 'humaneval',
    # so reading them together was refused): each named by its samples, model and temperature from the name
    d = tmp_path / "evalplus_results" / "humaneval"
    d.mkdir(parents=True)
    (d / "org--coder_vllm_temp_0.2.eval_results.json").write_text(json.dumps(doc))
    (d / "org--coder_vllm_temp_0.8_eval_results.json").write_text(json.dumps(doc))  # evalplus's older suffix
    (d / "my_model.eval_results.json").write_text(json.dumps(doc))
    both = bp.merge_counts([bp.read_counts(p) for p in sorted(d.iterdir())])
    assert both.config.values.tolist() == ["my_model", "org--coder_vllm_temp_0.2", "org--coder_vllm_temp_0.8"]
    assert both.model.values.tolist() == ["my_model", "org/coder", "org/coder"]
    np.testing.assert_array_equal(both.temperature.values, [np.nan, 0.2, 0.8])
    assert bp.read_counts(d / "my_model.eval_results.json", model="m").config.item() == "m"
    f.write_text('{"eval": 3}')
    with pytest.raises(ValueError, match="not an evalplus eval_results.json"):
        bp.read_counts(f)


def test_gzipped_counts_read_as_their_plain_text(tmp_path):
    import gzip

    rows = 'task,n,c\na,4,1\nb,4,4\n'
    jsonl = '{"task": "a", "n": 4, "c": 1}\n{"task": "b", "n": 4, "c": 4}\n'
    doc = {"eval": {"T/0": [{"base_status": "pass", "plus_status": "pass"}, {"base_status": "fail"}],
                    "T/1": [{"base_status": "pass", "plus_status": "fail"}]}}
    for name, text, c in (("c.csv.gz", rows, [[1, 4]]), ("c.jsonl.gz", jsonl, [[1, 4]]),
                          ("eval_results.json.gz", json.dumps(doc), [[1, 1]])):
        (tmp_path / name).write_bytes(gzip.compress(text.encode()))
        assert bp.read_counts(tmp_path / name, correctness="base" if "eval" in name else "plus").c.values.tolist() \
            == c, name
    cut = gzip.compress(jsonl.encode() * 200)
    (tmp_path / "cut.jsonl.gz").write_bytes(cut[: len(cut) // 2])  # an interrupted download
    with pytest.raises(ValueError, match=r"cut\.jsonl\.gz: a damaged or incomplete gzip file after line \d+"):
        bp.read_counts(tmp_path / "cut.jsonl.gz")


def test_parquet_tables_read_as_their_csv(tmp_path):
    """Parquet (Hugging Face datasets' and many eval logs' format) was 'cannot tell the format'."""
    counts = pd.DataFrame({"model": "m", "temperature": 0.8, "benchmark": "humaneval", "task": ["a", "b", "c"],
                           "n": [4, 4, 2], "c": [1, 4, 0]})
    per_sample = pd.DataFrame({"task_id": ["a"] * 3 + ["b"] * 2, "correct": [True, False, True, False, False]})
    for name, df in (("counts", counts), ("samples", per_sample)):
        df.to_parquet(tmp_path / f"{name}.parquet")
        df.to_csv(tmp_path / f"{name}.csv", index=False)
        xr.testing.assert_identical(bp.read_counts(tmp_path / f"{name}.parquet").drop_attrs(),
                                    bp.read_counts(tmp_path / f"{name}.csv").drop_attrs())
    assert bp.read_counts(tmp_path / "samples.parquet").c.values.tolist() == [[2, 0]]
    (tmp_path / "bad.parquet").write_text("task,n,c\na,1,1\n")
    with pytest.raises(ValueError, match=r"bad\.parquet': not a readable Parquet table"):
        bp.read_counts(tmp_path / "bad.parquet")


def test_one_config_selected_by_label_is_that_config_s_counts():
    """counts.sel(config="b") (config a scalar coordinate) was "must have dims ('config', 'task'); got ('task',)"."""
    rng = np.random.default_rng(0)
    counts = bp.make_counts(np.full((2, 40), 5), rng.binomial(5, 0.5, (2, 40)), config=["a", "b"],
                            model=["m1", "m2"], temperature=[0.2, 0.8], benchmark="humaneval")
    xr.testing.assert_identical(bp.validate_counts(counts.sel(config="b")), bp.validate_counts(counts.sel(config=["b"])))
    fit = bp.fit(counts.sel(config="b"), "bb", "eb", seed=1, progressbar=False)
    ref = bp.fit(counts.sel(config=["b"]), "bb", "eb", seed=1, progressbar=False)
    xr.testing.assert_equal(bp.passk_curve(fit, [1, 10])["mean"], bp.passk_curve(ref, [1, 10])["mean"])
    with pytest.raises(ValueError, match=r"got \('task',\) \(one config: counts.expand_dims\(config=\['name'\]\)\)"):
        bp.validate_counts(counts.sel(config="b").drop_vars("config"))


def test_counts_concatenated_by_xarray_say_how_to_combine_them():
    """xr.concat of counts on different tasks fills the pairs one side lacks with NaN: the error says so and names
    merge_counts, whose result .fillna(0) also gives."""
    a = bp.make_counts(np.full((1, 3), 4), [[1, 2, 3]], config=["a"], task=["t0", "t1", "t2"])
    b = bp.make_counts(np.full((1, 2), 4), [[4, 0]], config=["b"], task=["t1", "t3"])
    cat = xr.concat([a, b], dim="config", join="outer")
    with pytest.raises(ValueError, match=r"task 't3' has n=nan; xr.concat and xr.merge fill .* bayespass.merge_counts"):
        bp.validate_counts(cat)
    merged = bp.merge_counts([a, b])
    xr.testing.assert_equal(bp.validate_counts(cat.fillna(0))[["n", "c"]], merged[["n", "c"]])
    assert merged.n.values.tolist() == [[4, 4, 4, 0], [0, 4, 0, 4]]


@pytest.mark.parametrize("backend", ["numpy_nullable", "pyarrow"])
def test_nullable_and_pyarrow_columns_count_as_numpy_ones_and_their_missing_cells_are_named(backend):
    """pd.read_parquet(..., dtype_backend="pyarrow") and convert_dtypes() give columns whose missing cell is pd.NA:
    it raised "cannot convert NA to integer", "float() argument must be ... not 'NAType'" or "boolean value of NA
    is ambiguous" instead of the row-numbered errors a NaN gets."""
    base = pd.DataFrame({"model": "m", "temperature": [0.2, 0.2, 0.2], "task": ["a", "b", "c"], "n": [4, 4, 2],
                         "c": [1, 4, 0]})
    typed = base.convert_dtypes(dtype_backend=backend)

    def same(a, b):  # but the 'created' timestamp: two calls may fall in different seconds (it failed CI once)
        xr.testing.assert_identical(a, b.assign_attrs(created=a.attrs["created"]))

    same(bp.validate_counts(typed), bp.validate_counts(base))
    for col in ("n", "c"):
        with pytest.raises(ValueError, match=rf"row 2 \(task 'b'\): {col} must be a non-negative integer; got a "
                                             r"missing value"):
            bp.validate_counts(typed.assign(**{col: typed[col].where(typed.task != "b")}))
    unknown = bp.validate_counts(typed.assign(temperature=typed.temperature.where(typed.task != "b")))
    with_nan = bp.validate_counts(base.assign(temperature=[0.2, np.nan, 0.2]))
    same(unknown, with_nan)  # an empty temperature: its own config, as in a CSV
    samples = pd.DataFrame({"task_id": ["a", "a", "b"], "passed": [True, False, True]}).convert_dtypes(
        dtype_backend=backend)
    assert bp.to_counts(samples).c.values.tolist() == [[1, 1]]
    with pytest.raises(ValueError, match=r"row 3: column 'passed' must say whether.*got a missing value"):
        bp.to_counts(samples.assign(passed=samples.passed.where(samples.task_id != "b")))


def test_a_fit_file_reads_as_the_counts_it_was_made_on(tmp_path):
    rng = np.random.default_rng(0)
    counts = bp.make_counts(rng.integers(3, 6, (2, 30)), np.zeros((2, 30), int), config=["A", "B"])
    counts["c"] = xr.DataArray(rng.binomial(counts.n.values, 0.4), dims=("config", "task"))
    path = tmp_path / "fit.nc"
    bp.fit(counts, "bb", "eb", draws=100, progressbar=False).to_netcdf(str(path))
    got = bp.read_counts(path)  # 'bayespass estimate FIT.nc' said "counts dataset has no variable 'n'"
    np.testing.assert_array_equal(got.n.values, counts.n.values)
    np.testing.assert_array_equal(got.c.values, counts.c.values)
    assert list(got.config.values) == ["A", "B"] and list(got.task.values) == list(counts.task.values)
    xr.Dataset({"x": 1}).to_netcdf(tmp_path / "other.nc")  # any other netCDF: the counts' own error
    with pytest.raises(ValueError, match="counts dataset has no variable 'n'"):
        bp.read_counts(tmp_path / "other.nc")



def test_a_hand_built_dataset_of_n_and_c_alone_fits_and_compares_as_make_counts_does():
    """Counts built as an xarray.Dataset of n and c only (no model, temperature, benchmark coordinates).

    bp.fit and bp.compare_configs raised KeyError 'model' deep inside on them; they now get the coordinates
    make_counts writes when not told, so every number equals the one from make_counts of the same arrays.
    """
    rng = np.random.default_rng(3)
    p = rng.beta(0.6, 0.5, size=(2, 40))
    p[1] = np.clip(p[1] + 0.1, 0, 1)
    n = np.full((2, 40), 6)
    c = rng.binomial(n, p)
    labels, tasks = ["a", "b"], [f"t{i}" for i in range(40)]
    bare = xr.Dataset({"n": (("config", "task"), n), "c": (("config", "task"), c)},
                      coords={"config": labels, "task": tasks})
    made = bp.make_counts(n, c, config=labels, task=tasks)
    got = bp.validate_counts(bare)
    assert list(got["model"].values) == labels and np.isnan(got["temperature"].values).all()
    assert list(got["benchmark"].values) == ["", ""]
    f_bare, f_made = (bp.fit(ds, model="bb", method="eb", seed=1, progressbar=False) for ds in (bare, made))
    np.testing.assert_array_equal(bp.passk_curve(f_bare, k=[1, 5, 50])["eti"].values,
                                  bp.passk_curve(f_made, k=[1, 5, 50])["eti"].values)
    cmp_bare, cmp_made = (bp.compare_configs(ds, k=[1, 5]) for ds in (bare, made))
    np.testing.assert_array_equal(cmp_bare["prob_better"].values, cmp_made["prob_better"].values)
    with pytest.raises(ValueError, match=r"counts\['model'\] must be a coordinate over \('config',\)"):
        bp.validate_counts(bare.assign_coords(model=("task", tasks)))
    # numbers as labels are names, as make_counts makes them (compare_configs' .sel on them raised KeyError)
    numbered = bare.assign_coords(config=[0, 1], task=np.arange(40))
    assert list(bp.validate_counts(numbered).config.values) == ["0", "1"]
    cmp_num = bp.compare_configs(numbered, k=[1, 5])
    assert list(cmp_num.config.values) == ["0", "1"]
    np.testing.assert_array_equal(cmp_num["prob_better"].values, cmp_made["prob_better"].values)


def test_results_judged_elsewhere_one_row_per_sample_are_counted(tmp_path):
    """bp.to_counts of a per-sample DataFrame or boolean array (it took only bp.execute's samples), and files so."""
    rng = np.random.default_rng(5)
    df = pd.DataFrame([dict(model="m", temperature=t, task_id=f"t{i}", sample=s, passed=bool(rng.random() < 0.3 + i / 10))
                       for t in (0.2, 0.8) for i in range(5) for s in range(4 + i)])
    brute = df.groupby(["temperature", "task_id"]).passed.agg(["size", "sum"])
    got = bp.to_counts(df)
    assert list(got.config.values) == ["m|T=0.2", "m|T=0.8"] and list(got.task.values) == [f"t{i}" for i in range(5)]
    np.testing.assert_array_equal(got.n.values.ravel(), brute["size"].values)
    np.testing.assert_array_equal(got.c.values.ravel(), brute["sum"].values)
    xr.testing.assert_equal(bp.validate_counts(df)[["n", "c"]], got[["n", "c"]])  # so wherever counts are taken
    np.testing.assert_array_equal(bp.passk(df, k=[1, 3]).values, bp.passk(got, k=[1, 3]).values)
    status = df.assign(status=np.where(df.passed, "pass", "fail")).drop(columns="passed")
    xr.testing.assert_equal(bp.to_counts(status)[["n", "c"]], got[["n", "c"]])
    xr.testing.assert_equal(bp.to_counts(df.rename(columns={"passed": "ok"}), passed="ok")[["n", "c"]],
                            got[["n", "c"]])
    for name in ("samples.csv", "samples.jsonl"):  # the command line reads such files as counts
        path = tmp_path / name
        df.to_csv(path, index=False) if name.endswith("csv") else df.to_json(path, orient="records", lines=True)
        xr.testing.assert_equal(bp.read_counts(path)[["n", "c"]], got[["n", "c"]])
    with pytest.raises(ValueError, match=r"row 3: column 'passed' must say whether the sample passed.*got 2"):
        bp.to_counts(df.assign(passed=[True, False, 2] + [True] * (len(df) - 3)))
    # counts under other names ('total', 'correct'): the per-sample reading's error says what counts are called
    with pytest.raises(ValueError, match=r"got 3; a table of counts, a row per task, names its columns n \(samples "
                                         r"drawn\) and c \(samples passed\)"):
        bp.to_counts(pd.DataFrame({"task_id": ["a", "b"], "total": [10, 10], "correct": [3, 10]}))
    with pytest.raises(ValueError, match=r"got 0.5$"):  # not a count: no such hint
        bp.to_counts(df.assign(passed=[0.5] * len(df)))
    # written-out booleans count as such (a string 'True' is not a failure); an unknown word is an error
    words = df.assign(passed=df.passed.map({True: "True", False: "timeout"}))
    xr.testing.assert_equal(bp.to_counts(words)[["n", "c"]], got[["n", "c"]])
    with pytest.raises(ValueError, match=r"row 2: column 'passed' must say.*got 'maybe'"):
        bp.to_counts(words.assign(passed=["True", "maybe"] + ["True"] * (len(df) - 2)))
    with pytest.raises(ValueError, match=r"a column saying whether each sample passed \(one of passed, correct"):
        bp.to_counts(df.drop(columns="passed"))
    generations = tmp_path / "generations.jsonl"  # not judged yet: the error says what runs them
    df.drop(columns="passed").assign(solution="def f(): pass").to_json(generations, orient="records", lines=True)
    with pytest.raises(ValueError, match=r"its 'solution' column looks like generations, which 'bayespass execute'"):
        bp.read_counts(generations)
    # a boolean array over (config, task, sample); NaN marks a sample not drawn
    arr = xr.DataArray(np.where(rng.random((2, 3, 4)) < 0.5, 1.0, 0.0), dims=("config", "task", "sample"),
                       coords={"config": ["a", "b"], "task": ["x", "y", "z"]})
    arr[0, 1, :2] = np.nan
    counts = bp.to_counts(arr)
    np.testing.assert_array_equal(counts.n.values, [[4, 2, 4], [4, 4, 4]])
    np.testing.assert_array_equal(counts.c.values, np.nansum(arr.values, axis=-1))
    with pytest.raises(ValueError, match=r"must have dims \('task', 'sample'\) or \('config', 'task', 'sample'\)"):
        bp.to_counts(arr.rename(sample="draw"))
