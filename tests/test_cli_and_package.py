import json
import re
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

import bayespass as bp
from bayespass.cli import app

runner = CliRunner()


def test_import_is_light():
    code = "import sys, bayespass; print(sorted(m for m in ('xarray', 'pymc', 'torch', 'pandas') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_version_and_help():
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.stdout.strip() == f"bayespass {bp.__version__}"
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0 and "estimate" in res.stdout


def test_estimate_cli(tmp_path):
    f = tmp_path / "c.csv"
    f.write_text("task,n,c\nt1,3,2\nt2,3,2\nt3,3,1\nt4,3,0\n")
    res = runner.invoke(app, ["estimate", str(f), "--k", "3", "--method", "unbiased", "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert rows[0]["pass@3"] == pytest.approx(0.75)
    assert rows[0]["avg@n"] == pytest.approx(5 / 12)
    res = runner.invoke(app, ["estimate", str(f), "--k", "1,2", "--format", "csv"])
    assert res.exit_code == 0 and res.stdout.count("\n") == 6
    assert "note:" not in res.stderr  # every task has n >= 2
    # a task with fewer samples: the unbiased '—' is explained on stderr, the table stays clean on stdout
    f.write_text("task,n,c\nt1,3,2\nt2,3,2\nt3,1,1\nt4,3,0\n")
    res = runner.invoke(app, ["estimate", str(f), "--k", "1,2", "--method", "unbiased", "--format", "json"])
    assert json.loads(res.stdout)[0]["pass@2"] is None
    assert re.search(r"undefined \(—\) for k above a config's smallest n: \S+ smallest n 1 \(1 of 4 tasks below 2\)",
                     res.stderr), res.stderr
    rows = [f"m{j},t{i},{3 + j % 2 if j < 6 else 12},1" for j in range(7) for i in range(3)]  # 6 of 7 configs short
    f.write_text("config,task,n,c\n" + "\n".join(rows) + "\n")
    res = runner.invoke(app, ["estimate", str(f), "--k", "1,10", "--method", "unbiased"])
    assert "m3 smallest n 4 (3 of 3 tasks below 10); and 2 more configs. " in res.stderr, res.stderr
    f.write_text("config,task,n,c\n" + "\n".join(r for r in rows if not r.startswith("m6")) + "\n")
    res = runner.invoke(app, ["estimate", str(f), "--k", "1,10", "--method", "unbiased"])
    assert "smallest n: every config's (smallest n 3 to 4). " in res.stderr, res.stderr  # not 6 of them, then '...'


def test_estimate_cli_says_one_sample_per_task_only_where_it_is_so(tmp_path):
    # all tasks failed, 4 samples each: the EB fits warn 'all_zero' (their text also explains 'mean_only'),
    # and the closed forms are defined; the note on one sample per task must not appear
    f = tmp_path / "c.csv"
    f.write_text("config,task,n,c\n" + "".join(f"zero,t{i},4,0\n" for i in range(6)))
    res = runner.invoke(app, ["estimate", str(f), "--k", "1,10"])
    assert res.exit_code == 0, res.output
    assert "all_zero" in res.stderr and "one sample per task" not in res.stderr
    f.write_text("config,task,n,c\n" + "".join(f"zero,t{i},4,0\none,t{i},1,{i % 2}\n" for i in range(6)))
    res = runner.invoke(app, ["estimate", str(f), "--k", "1,10", "--format", "json"])
    assert re.search(r"note: 'one' has one sample per task", res.stderr), res.stderr
    rows = {(r["config"], r["method"]): r for r in json.loads(res.stdout)}
    assert rows[("one", "bb")]["pass@10"] is None and rows[("zero", "bb")]["pass@10"] == pytest.approx(0, abs=1e-6)
    res = runner.invoke(app, ["estimate", str(f), "--k", "1,10", "--method", "naive,unbiased"])
    assert "one sample per task" not in res.stderr  # no closed form asked for


def test_estimate_cli_errors(tmp_path):
    f = tmp_path / "c.csv"
    f.write_text("task,n,c\nt1,3,4\n")
    res = runner.invoke(app, ["estimate", str(f)])
    assert res.exit_code == 2 and "c must be <= n" in res.output
    res = runner.invoke(app, ["estimate", str(f), "--format", "xml"])
    assert res.exit_code == 2 and "--format 'xml' is not supported" in res.output


def test_rcparams():
    assert bp.rcParams["stats.ci_prob"] == 0.9
    with bp.rc_context({"stats.ci_prob": 0.5}):
        assert bp.rcParams["stats.ci_prob"] == 0.5
    assert bp.rcParams["stats.ci_prob"] == 0.9
    with pytest.raises(ValueError, match="stats.ci_prob must be a probability"):
        bp.rcParams["stats.ci_prob"] = 2
    with pytest.raises(KeyError, match="not a bayespass default"):
        bp.rcParams["nope"] = 1


def test_fit_and_curve_cli(tmp_path):
    out = tmp_path / "fit.nc"
    res = runner.invoke(app, ["fit", "data/examples/counts_small.csv", "--model", "zoibb", "--method", "eb",
                              "--out", str(out), "--draws", "400", "--k", "1,7,250", "--ci-prob", "0.5"])
    assert res.exit_code == 0, res.output
    assert out.exists() and "convergence" in res.stdout
    # the table has the k and the band asked for, the numbers of `curve` on the saved fit
    import arviz as az

    assert "50% lower" in res.stdout
    want = bp.passk_curve(az.from_netcdf(str(out)), [1, 7, 250], ci_prob=0.5)
    rows = [line.split() for line in res.stdout.splitlines()]
    for cfg in want.config.values:
        for k in (1, 7, 250):
            lo, hi = want["eti"].sel(config=cfg, k=k).values
            mean = float(want["mean"].sel(config=cfg, k=k))
            assert [str(cfg), str(k), f"{mean:.4f}", f"{lo:.4f}", f"{hi:.4f}"] in rows, res.stdout
    png = tmp_path / "curve.png"
    res = runner.invoke(app, ["curve", str(out), "--k", "1,10,1000", "--plot", str(png), "--format", "csv"])
    assert res.exit_code == 0, res.output
    assert res.stdout.count("\n") == 1 + 3 * 3 and png.stat().st_size > 10_000
    res = runner.invoke(app, ["curve", str(tmp_path / "missing.nc")])
    assert res.exit_code == 2 and "does not exist" in res.output
    # the figure's format is the file's suffix (none: PNG); one matplotlib cannot write is refused first
    res = runner.invoke(app, ["curve", str(out), "--k", "1,10", "--plot", str(tmp_path / "curve.pdf")])
    assert res.exit_code == 0 and (tmp_path / "curve.pdf").read_bytes()[:5] == b"%PDF-", res.output
    res = runner.invoke(app, ["curve", str(out), "--k", "1,10", "--plot", str(tmp_path / "bare")])
    assert res.exit_code == 0 and (tmp_path / "bare.png").read_bytes()[:4] == b"\x89PNG", res.output
    assert f"wrote {tmp_path / 'bare.png'}" in res.output
    res = runner.invoke(app, ["curve", str(tmp_path / "missing.nc"), "--plot", str(tmp_path / "c.pdfx")])
    assert res.exit_code == 2 and "--plot" in res.output and "cannot write '.pdfx' figures" in res.output
    assert ".svg" in res.output and "Traceback" not in res.output
    # --bounds: the assumption-free bounds beside the band, equal to bp.passk_bounds of the fit's counts
    res = runner.invoke(app, ["curve", str(out), "--k", "1,1000", "--format", "csv", "--bounds"])
    assert res.exit_code == 0, res.output
    import io

    import pandas as pd

    got = pd.read_csv(io.StringIO(res.stdout)).set_index(["config", "k"])
    free = bp.passk_bounds(bp.read_counts("data/examples/counts_small.csv"), [1, 1000])
    for cfg in free.config.values:
        for k in (1, 1000):
            assert got.loc[(cfg, k), "no-prior lower"] == pytest.approx(float(free.sel(config=cfg, k=k)[0]), abs=1e-9)
            assert got.loc[(cfg, k), "no-prior upper"] == pytest.approx(float(free.sel(config=cfg, k=k)[1]), abs=1e-9)
            assert got.loc[(cfg, k), "no-prior lower"] <= got.loc[(cfg, k), "mean"] <= got.loc[(cfg, k), "no-prior upper"]
    # with --plot: one set of bounds serves the table and the figure; the table's columns are the same
    res = runner.invoke(app, ["curve", str(out), "--k", "1,1000", "--format", "csv", "--bounds", "--plot",
                              str(tmp_path / "b.png")])
    assert res.exit_code == 0 and (tmp_path / "b.png").stat().st_size > 10_000, res.output
    both = pd.read_csv(io.StringIO(res.stdout)).set_index(["config", "k"])
    np.testing.assert_allclose(both[["no-prior lower", "no-prior upper"]], got[["no-prior lower", "no-prior upper"]])
    # MCMC: bayespass's HMC by default, named in the output; an unknown sampler is a clear error
    res = runner.invoke(app, ["fit", "data/examples/counts_small.csv", "--model", "bb", "--method", "mcmc",
                              "--out", str(tmp_path / "mc.nc")])
    assert res.exit_code == 0 and "sampler=bayespass-hmc, convergence: ok" in res.stdout, res.output
    res = runner.invoke(app, ["fit", "data/examples/counts_small.csv", "--method", "mcmc", "--sampler", "stan",
                              "--out", str(tmp_path / "x.nc")])
    assert res.exit_code != 0 and "--sampler 'stan' is not supported" in res.output


def test_cli_prints_warnings_on_one_line_without_source(tmp_path, capsys):
    """A FitWarning under the CLI reads like its errors: 'warning: ...', not the library's file and line."""
    import warnings

    f = tmp_path / "c.csv"
    f.write_text("task,n,c\nt1,3,2\nt2,3,1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert runner.invoke(app, ["estimate", str(f), "--method", "naive"]).exit_code == 0  # the root callback ran
        capsys.readouterr()
        warnings.warn("convergence gates failed for model 'flex'", bp.FitWarning, stacklevel=1)
        err = capsys.readouterr().err
    assert err == "warning: convergence gates failed for model 'flex'\n"


def test_cli_keeps_arviz_refactor_notice_off_the_terminal(tmp_path, capsys):
    """ArviZ's once-a-day notice of its 1.0 is news about a library, not the user's data: the CLI drops it only."""
    import warnings

    f = tmp_path / "c.csv"
    f.write_text("task,n,c\nt1,3,2\nt2,3,1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert runner.invoke(app, ["estimate", str(f), "--method", "naive"]).exit_code == 0
        capsys.readouterr()
        warnings.warn("\nArviZ is undergoing a major refactor to improve flexibility", FutureWarning, stacklevel=1)
        assert capsys.readouterr().err == ""
        warnings.warn("pass@k of an unrelated future", FutureWarning, stacklevel=1)
        assert capsys.readouterr().err == "warning: pass@k of an unrelated future\n"


@pytest.mark.parametrize("command, said", [("fit", "fit did not finish; a file it writes is written whole"),
                                             ("execute", "the verdicts recorded so far are kept")])
def test_an_interrupted_command_says_so(tmp_path, monkeypatch, capsys, command, said):
    """Ctrl-C ended a command with status 130 and not a word (Typer's handling); now it says what is left."""
    from bayespass import cli
    from bayespass.execution import engine
    from bayespass.models import fit as fit_mod

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(fit_mod, "fit", interrupted)
    monkeypatch.setattr(engine, "execute", interrupted)
    f = tmp_path / "c.csv"
    f.write_text("task,n,c\nt1,3,2\nt2,3,1\n")
    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps({"task_id": "HumanEval/0", "solution": "def f(): pass"}) + "\n")
    args = {"fit": [str(f), "--out", str(tmp_path / "fit.nc")], "execute": [str(samples), "--out", str(tmp_path / "run")]}
    monkeypatch.setattr(sys, "argv", ["bayespass", command, *args[command]])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    assert exc.value.code == 130
    assert f"interrupted: {said}" in capsys.readouterr().err
    assert not (tmp_path / "fit.nc").exists()


def test_an_interrupted_run_says_what_it_kept(tmp_path, monkeypatch, capsys):
    """'run' said only "completed stages are kept"; it now counts the samples and judged programs it reuses."""
    import sqlite3

    import bayespass.pipeline as pipeline
    from bayespass import cli

    out = tmp_path / "run"

    def interrupted(out_dir, cfg, echo=print):
        out_dir.mkdir(parents=True)
        (out_dir / "samples.jsonl").write_text('{"task_id": "HumanEval/0"}\n' * 3 + "\n")
        with sqlite3.connect(out_dir / "verdicts.sqlite") as db:
            db.execute("CREATE TABLE results (task TEXT)")
            db.executemany("INSERT INTO results VALUES (?)", [("t",)] * 2)
        db.close()
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "run", interrupted)
    monkeypatch.setattr(sys, "argv", ["bayespass", "run", "--quick", "--out", str(out)])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    assert exc.value.code == 130
    err = capsys.readouterr().err
    assert (f"interrupted: kept in {out} are the completed stages (run.json), 3 samples (samples.jsonl) and 2 judged "
            "programs (verdicts.sqlite); run the same command again to resume") in " ".join(err.split())


def test_written_files_are_whole_or_absent(tmp_path):
    """An interrupted write keeps the previous file: it goes to a temporary file that replaces it when done
    (and is removed when the write fails)."""
    from bayespass.data.io import write_atomic

    out = tmp_path / "fit.nc"
    out.write_bytes(b"the previous fit")

    def half(path):
        with open(path, "wb") as fh:
            fh.write(b"half of a ")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomic(out, half)
    assert out.read_bytes() == b"the previous fit"
    assert [f.name for f in tmp_path.iterdir()] == ["fit.nc"]


def test_compare_and_allocate_cli_take_config_names_with_colons(tmp_path):
    """Ollama-style names ('llama3:8b') hold the separator of --pairs: the split that names two configs wins."""
    rng = np.random.default_rng(0)
    p = rng.beta(1, 1, 40)
    rows = [f"{m},0.2,t{i},4,{rng.binomial(4, min(1.0, q * s))}" for m, s in (("llama3:8b", 0.6), ("llama3:70b", 1.0))
            for i, q in enumerate(p)]
    f = tmp_path / "c.csv"
    f.write_text("model,temperature,task,n,c\n" + "\n".join(rows) + "\n")
    pair = "llama3:70b|T=0.2:llama3:8b|T=0.2"
    res = runner.invoke(app, ["compare", str(f), "--k", "1", "--model", "bb", "--pairs", pair, "--format", "csv"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()  # a CSV file: the header on the first line (it came after a blank line)
    assert len(lines) == 2 and lines[0].startswith("k,config,config_b,") and "llama3:70b|T=0.2,llama3:8b|T=0.2" in lines[1]
    res = runner.invoke(app, ["compare", str(f), "--k", "1", "--model", "bb", "--format", "csv"])
    board, pb = res.stdout.split("\n\n")  # the leaderboard, then P(better), a blank line between
    assert board.startswith("k,config,passk,") and len(board.splitlines()) == 3
    assert pb.startswith("k,config,config_b,") and len(pb.strip().splitlines()) == 3
    res = runner.invoke(app, ["compare", str(f), "--k", "1", "--model", "bb", "--format", "json"])
    assert res.exit_code == 0, res.output
    both = json.loads(res.stdout)  # one document (it was two arrays one after the other)
    assert [r["config"] for r in both["leaderboard"]] == ["llama3:70b|T=0.2", "llama3:8b|T=0.2"]
    assert len(both["prob_better"]) == 2 and {"prob_better", "diff"} <= set(both["prob_better"][0])
    assert (both["ci_prob"], both["model"], both["method"]) == (0.9, "bb", "eb")  # what the titles say, in JSON
    res = runner.invoke(app, ["compare", str(f), "--k", "1", "--model", "bb", "--format", "json", "--ci-prob", "0.5"])
    assert res.exit_code == 0 and json.loads(res.stdout)["ci_prob"] == 0.5, res.output
    res = runner.invoke(app, ["allocate", str(f), "--pair", pair, "--budget", "10"])
    assert res.exit_code == 0, res.output
    assert "pass@10 of llama3:70b|T=0.2 - llama3:8b|T=0.2" in res.output
    res = runner.invoke(app, ["compare", str(f), "--model", "bb", "--pairs", "llama3:70b|T=0.2:nope"])
    assert res.exit_code == 2 and "not among the configs" in res.output


def test_plan_cli(tmp_path, monkeypatch):
    import xarray as xr

    counts = bp.make_counts(np.full((1, 60), 4), np.tile(np.arange(5), 12)[None], config=["m"])
    fit_path = tmp_path / "bb.nc"
    bp.fit(counts, "bb", "eb", progressbar=False).to_netcdf(str(fit_path))
    bp.write_counts(counts, fit_path.with_suffix(".csv"))
    res = runner.invoke(app, ["plan", str(fit_path), "--width", "0.05", "--n-grid", "4,16", "--sims", "2",
                              "--format", "csv"])
    assert res.exit_code == 0, res.output
    assert not res.stdout.startswith("\n")  # a CSV file, header first
    rows = [line.split(",") for line in res.stdout.strip().splitlines()]
    assert rows[0][:3] == ["config", "n", "expected_width"] and [r[1] for r in rows[1:]] == ["4", "16"]
    w4, w16 = float(rows[1][2]), float(rows[2][2])
    assert w16 < w4  # more samples, a narrower band
    needed = rows[1][rows[0].index("n_needed")]
    assert needed in ("", "4", "16"), needed  # a count of samples (empty where no n of the grid reaches it)
    # the same forecast as bp.plan with the same settings
    ref = bp.plan(bp.fit(counts, "bb", "eb", progressbar=False), k=10, target_width=0.05, n_grid=[4, 16], n_sims=2)
    assert isinstance(ref, xr.Dataset) and np.isclose(w4, ref.expected_width.sel(config="m", n=4).item(), rtol=1e-3)
    # --target-width and --n-sims, bp.plan's names, are --width and --sims (they were 'No such option')
    same = runner.invoke(app, ["plan", str(fit_path), "--target-width", "0.05", "--n-grid", "4,16", "--n-sims", "2",
                               "--format", "csv"])
    assert same.exit_code == 0 and same.stdout == res.stdout, same.output
    # --ci-prob plans another band (bp.plan's ci_prob): the 50% band is narrower, as bp.plan forecasts it
    half = runner.invoke(app, ["plan", str(fit_path), "--width", "0.05", "--n-grid", "4,16", "--sims", "2",
                               "--ci-prob", "0.5", "--seed", "3", "--format", "csv"])
    assert half.exit_code == 0, half.output
    h4 = float(half.stdout.strip().splitlines()[1].split(",")[2])
    ref = bp.plan(bp.fit(counts, "bb", "eb", progressbar=False), k=10, target_width=0.05, n_grid=[4, 16], n_sims=2,
                  ci_prob=0.5, seed=3)
    assert np.isclose(h4, ref.expected_width.sel(config="m", n=4).item(), rtol=1e-3) and h4 < 0.8 * w4
    assert ref.attrs["ci_prob"] == 0.5
    import bayespass.models.fit as fit_module

    monkeypatch.setattr(fit_module, "fit", lambda *a, **kw: (_ for _ in ()).throw(AssertionError("fitted")))
    for bad, word in ((["--width", "0"], "--width"), (["--width", "0.05", "--sims", "0"], "--sims"),
                      (["--width", "0.05", "--k", "0"], "k must"),
                      (["--width", "0.05", "--n-grid", "10,ten"], "--n-grid must be comma-separated"),
                      (["--width", "0.05", "--n-grid", "10,0"], "--n-grid must be a positive integer; got 0"),
                      (["--width", "0.05", "--ci-prob", "1.5"], "--ci-prob"),
                      (["--width", "0.05", "--seed", "-1"], "--seed must be a non-negative integer; got -1")):
        res = runner.invoke(app, ["plan", str(fit_path.with_suffix(".csv")), *bad])
        assert res.exit_code == 2 and word in res.output and "Traceback" not in res.output, res.output


def test_allocate_and_plan_cli_read_a_run_directory_s_main_fit_without_fitting_again(tmp_path, monkeypatch):
    """A run directory is read as `bayespass curve` reads it, by its main fit (fits/<main>.nc): the same allocation
    as that fit file gives, and no fit of its counts (a refit took seconds to minutes and could differ)."""
    import json

    rng = np.random.default_rng(1)
    counts = bp.make_counts(np.full((2, 40), 4), rng.binomial(4, rng.beta(1, 1, (2, 40))), config=["a", "b"])
    run = tmp_path / "run"
    (run / "fits").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"config": {"main_model": "bb"}}))
    bp.write_counts(counts, run / "counts.nc")
    bp.fit(counts, "bb", "eb", progressbar=False).to_netcdf(str(run / "fits" / "bb-eb.nc"))
    want = runner.invoke(app, ["allocate", str(run / "fits" / "bb-eb.nc"), "--budget", "20", "--pair", "a:b"])
    assert want.exit_code == 0, want.output
    import bayespass.models.fit as fit_module

    monkeypatch.setattr(fit_module, "fit", lambda *a, **kw: (_ for _ in ()).throw(AssertionError("fitted")))
    res = runner.invoke(app, ["allocate", str(run), "--budget", "20", "--pair", "a:b"])
    assert res.exit_code == 0, res.output
    assert f"{run}: fit bb-eb" in res.output and res.stdout == want.stdout
    monkeypatch.undo()  # plan refits its simulated futures
    res = runner.invoke(app, ["plan", str(run), "--width", "0.3", "--n-grid", "8", "--sims", "1"])
    assert res.exit_code == 0, res.output
    assert f"{run}: fit bb-eb" in res.output and "simulated futures (bb)" in res.output  # the fit's model, not auto
    assert "(model bb by eb;" in res.output  # its name, not the model object's repr


def test_fit_cli_says_when_the_posterior_predictive_check_flags_the_fit(tmp_path):
    """p on four levels, 300 tasks x 20 samples: the default's histogram of c is off (bp.ppc flags it), and
    `bayespass fit` says so beside the table, pointing at the bounds; counts the fit follows get no such note."""
    from bayespass.testing import simulate_counts

    g = np.random.default_rng(0)
    bp.write_counts(simulate_counts(g.choice([0.02, 0.2, 0.5, 0.9], 300), 20, seed=100), tmp_path / "levels.csv")
    res = runner.invoke(app, ["fit", str(tmp_path / "levels.csv"), "--out", str(tmp_path / "fit.nc")])
    assert res.exit_code == 0, res.output
    assert "note: the posterior predictive check (bp.ppc) flags config-0 (" in res.output
    assert "hist_distance" in res.output and "--bounds" in res.output
    res = runner.invoke(app, ["curve", str(tmp_path / "fit.nc"), "--format", "csv"])  # and from the saved fit
    assert res.exit_code == 0 and "flags config-0 (" in res.output, res.output
    res = runner.invoke(app, ["fit", "data/examples/counts_small.csv", "--model", "bb", "--out", str(tmp_path / "b.nc")])
    assert res.exit_code == 0 and "posterior predictive check" not in res.output, res.output


def test_fit_and_estimate_merge_several_counts_inputs(tmp_path):
    """Counts of configs executed apart: 'bayespass estimate A B' and 'fit A B' read them as one dataset."""
    import io

    import pandas as pd

    rng = np.random.default_rng(7)
    p = rng.beta(1, 1.5, (2, 50))
    counts = bp.make_counts(np.full((2, 50), 5), rng.binomial(5, p), config=["a", "b"])
    a, b = tmp_path / "a.csv", tmp_path / "b.nc"
    bp.write_counts(counts.isel(config=[0]), a)
    bp.write_counts(counts.isel(config=[1], task=slice(10, None)), b)
    res = runner.invoke(app, ["estimate", str(a), str(b), "--method", "unbiased", "--k", "1", "--format", "csv"])
    assert res.exit_code == 0, res.output
    got = pd.read_csv(io.StringIO(res.stdout)).set_index("config")["pass@1"]
    assert np.isclose(got["a"], (counts.c[0] / 5).mean()) and np.isclose(got["b"], (counts.c[1, 10:] / 5).mean())
    res = runner.invoke(app, ["fit", str(a), str(b), "--model", "bb", "--out", str(tmp_path / "f.nc")])
    assert res.exit_code == 0, res.output
    fitted = bp.read_counts(tmp_path / "f.nc")  # a fit's counts
    assert list(fitted.config.values) == ["a", "b"] and int(fitted.n.sum()) == 5 * (50 + 40)
    res = runner.invoke(app, ["estimate", str(a), str(a)])
    assert res.exit_code == 2 and "both hold config 'a'" in res.output


def test_quick_takes_the_sizes_given_beside_it(tmp_path, monkeypatch):
    """'run --quick --tasks 5' ran quick's 30 tasks, silently; the sizes given on the command line now win."""
    import bayespass.pipeline as pipeline
    from bayespass import cli

    seen = []
    monkeypatch.setattr(pipeline, "run", lambda out, cfg, echo=print: seen.append(cfg) or {})
    monkeypatch.setattr(cli, "_print_run", lambda *a: None)
    for extra in ([], ["--tasks", "5"], ["--k", "3", "--temperatures", "0.2", "--fuzz-n", "0"], ["--tasks", "30"]):
        monkeypatch.setattr(sys, "argv", ["bayespass", "run", "--quick", "--out", str(tmp_path / "r"), *extra])
        with pytest.raises(SystemExit) as done:
            cli.main()
        assert done.value.code == 0
    sizes = [(c.tasks, c.k, tuple(c.temperatures), c.fuzz_n, c.n_splits) for c in seen]
    assert sizes == [(30, 5, (0.6, 1.2), 30, 50), (5, 5, (0.6, 1.2), 30, 50), (30, 3, (0.2,), 0, 50),
                     (30, 5, (0.6, 1.2), 30, 50)]
    monkeypatch.setattr(sys, "argv", ["bayespass", "run", "--out", str(tmp_path / "r"), "--tasks", "5"])
    with pytest.raises(SystemExit):
        cli.main()
    assert (seen[-1].tasks, seen[-1].k, seen[-1].n_splits) == (5, 10, pipeline.RunConfig().n_splits)


def test_compare_cli_seed_is_bp_compare_configs_seed(tmp_path, monkeypatch):
    """--seed: the same seed, the same tables; another seed, other posterior draws (P(better) of two alike configs
    moves in its Monte Carlo digits); a bad one is refused before any fit."""
    g = np.random.default_rng(5)
    p = g.beta(2, 2, 80)
    counts = bp.make_counts(np.full((2, 80), 4), g.binomial(4, np.stack([p, p])), config=["a", "b"])
    path = tmp_path / "counts.csv"
    bp.write_counts(counts, path)
    out = {}
    for seed in ("1", "1", "2"):
        res = runner.invoke(app, ["compare", str(path), "--k", "1,3", "--model", "bb", "--seed", seed,
                                  "--format", "json"])
        assert res.exit_code == 0, res.output
        out.setdefault(seed, []).append(json.loads(res.stdout))
    assert out["1"][0] == out["1"][1]
    pb = {s: [r["prob_better"] for r in out[s][0]["prob_better"]] for s in ("1", "2")}
    assert pb["1"] != pb["2"]
    ref = bp.compare_configs(bp.fit(counts, "bb", "eb", seed=2, progressbar=False), k=[1, 3], seed=2)
    want = float(ref.prob_better.sel(config="a", config_b="b", k=3))
    got = [r for r in out["2"][0]["prob_better"] if (r["config"], r["config_b"], r["k"]) == ("a", "b", 3)]
    assert np.isclose(got[0]["prob_better"], want), (got, want)
    import bayespass.models.fit as fit_module

    monkeypatch.setattr(fit_module, "fit", lambda *a, **kw: (_ for _ in ()).throw(AssertionError("fitted")))
    res = runner.invoke(app, ["compare", str(path), "--seed", "-3"])
    assert res.exit_code == 2 and "--seed must be a non-negative integer; got -3" in res.output, res.output
