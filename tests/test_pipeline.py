"""The main job end to end (quick settings, real execution and fits), resume, report, CLI post-processors."""

import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from typer.testing import CliRunner

from bayespass.cli import app

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "evalplus"


class _Imgs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.imgs = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.imgs.append(dict(attrs))


@pytest.fixture(scope="module")
def rundir(tmp_path_factory):
    """A quick run interrupted (Ctrl-C) once its execution stage is committed, then resumed to the end.

    Every test of the run directory reads the resumed run's output, so resuming is checked by all of them;
    ``resumed`` records what the interruption left behind, for the test of resuming itself.
    """
    out = tmp_path_factory.mktemp("run") / "r"
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    args = [sys.executable, "-m", "bayespass.cli", "run", "--quick", "--out", str(out)]
    first_err = out.parent / "interrupted_stderr.txt"
    with open(first_err, "w") as err:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, env=env)
        deadline = time.time() + 600
        while time.time() < deadline and proc.poll() is None:  # interrupt once the execution stage is committed
            state = out / "run.json"
            if state.exists() and "execute" in json.loads(state.read_text()).get("stages", {}):
                break
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    resumed = {"stages": json.loads((out / "run.json").read_text())["stages"],
               "samples_mtime": (out / "samples.nc").stat().st_mtime}
    res = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    # the stage messages of both runs (execution's are the first's), for the test that reads them
    (out / "stderr.txt").write_text(first_err.read_text() + res.stderr)
    resumed["samples_mtime_after"] = (out / "samples.nc").stat().st_mtime
    resumed["stderr"] = res.stderr
    return out, res.stdout, resumed


def test_run_prints_tables_and_writes_the_run_directory(rundir):
    out, stdout, _ = rundir
    for title in ("pass@k (unbiased; main fit auto-eb", "Model comparison (PSIS-LOO", "Which config is better",
                  "Posterior predictive checks", "Gating at alpha = 0.1", "Reliability level",
                  "Incoherence", "Metrics"):
        assert f"== {title}" in stdout, title
    assert "P(rank=1)" in stdout
    # the synthetic coder's programs were judged when its pool was built: the run says so instead of running them
    stages = (out / "stderr.txt").read_text()
    assert re.search(r"\n  \d+ of 300 samples run; the others' verdicts reused", stages), stages[:2000]
    assert "executing programs: 0prog" not in stages  # no empty progress bar where nothing is run
    for rule in ("pass@1", "best-of-K", "logprob-CRC", "behaviour-CRC"):
        assert rule in stdout
    for p in ("run.json", "samples.jsonl", "samples.nc", "counts.nc", "counts.csv", "report.html",
              "fuzz/samples.nc", "figures/passk_curves.png", "figures/ppc.png", "figures/risk_coverage.png",
              "figures/set_size.png", "figures/incoherence.png", "tables/gating.csv", "figures/forest.png",
              "figures/prob_better.png", "tables/leaderboard.csv", "tables/prob_better.csv",
              "tables/prob_better_all.csv"):
        assert (out / p).exists(), p
    import bayespass as bp
    from bayespass.pipeline import fits_of

    tree = bp.load_run(out)
    assert {"samples", "fuzz_samples", "counts", "fits", "tables"} <= set(tree.children)
    main = tree.attrs["main_fit"]
    # the default main fit stacks the candidates; the weights are printed, stored and sum to one per config
    assert main == "auto-eb" and "== Stacking weights of the candidate models" in stdout
    from bayespass.models.fit import stacking_weights_of

    weights = stacking_weights_of(fits_of(tree)[main])
    assert set(weights) == set(tree["counts"].ds.config.values.tolist())
    for ws in weights.values():
        assert set(ws) == {"bb", "zoibb", "flex", "lnorm"} and abs(sum(ws.values()) - 1) < 1e-9
        assert all(w >= 0 for w in ws.values())
    assert "stacking" in (out / "report.html").read_text()
    html = (out / "report.html").read_text()
    assert "pass@k forest plot" in html and "P(better) matrix" in html and "leaderboard" in html
    assert main in tree["fits"].children and {"posterior", "log_likelihood", "passk"} <= set(tree["fits"][main].children)
    assert bp.passk_curve(fits_of(tree)[main], [1, 10]).sizes["k"] == 2
    # the post-processors run on the run tree itself
    assert bp.gate(tree, n_splits=5).sizes["rule"] == 4
    metrics = bp.metric_table(tree, k=(1, 5))  # its bayes@k from the run's main fit (was a TypeError)
    np.testing.assert_allclose(metrics["bayes@5"].values,
                               bp.passk_curve(fits_of(tree)[main], [5])["mean"].sel(k=5).values)
    inc = bp.incoherence(tree, n_mc=2000, seed=1)
    # the Monte-Carlo estimates agree with the exact ones within the Hoeffding half-width (can fail)
    ok = np.isfinite(inc.I.values)
    assert ok.sum() > 0
    for mc, exact in ((inc.I_mc, inc.I), (inc.E_mc, inc.E)):
        within = np.abs(mc.isel(repeat=0) - exact) <= inc.attrs["eps"]
        assert within.transpose(*exact.dims).values[ok].mean() >= 0.95


def test_report_embeds_every_figure(rundir):
    out, _, _ = rundir
    html = (out / "report.html").read_text()
    p = _Imgs()
    p.feed(html)
    assert len(p.imgs) >= 5
    for img in p.imgs:
        assert img["src"].startswith("data:image/png;base64,")
        import base64

        raw = base64.b64decode(img["src"].split(",", 1)[1])
        assert raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) > 5000
    assert not re.search(r'src="(http|file|/)', html)  # self-contained


@pytest.mark.skipif(shutil.which("chromium") is None, reason="headless Chromium not installed")
def test_report_renders_in_headless_chromium(rundir, tmp_path):
    out, _, _ = rundir
    shot = tmp_path / "shot.png"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1200,3000", (out / "report.html").as_uri()], capture_output=True, timeout=120)
    assert shot.exists()
    from PIL import Image

    im = Image.open(shot).convert("L")
    hist = im.histogram()
    assert sum(hist[:200]) > 0.02 * im.size[0] * im.size[1]  # not a blank page: figures drawn


@pytest.mark.parametrize("cmd", [["gate", "--splits", "20"], ["reliability", "--n-splits", "20"], ["incoherence"],
                                 ["curve", "--k", "1,10,1000"]])
def test_cli_post_processors_over_run_directory(rundir, tmp_path, cmd):
    out, _, _ = rundir
    plot = tmp_path / "p.png"
    res = CliRunner().invoke(app, [cmd[0], str(out), *cmd[1:], "--plot", str(plot)])
    assert res.exit_code == 0, res.output
    assert plot.exists() and plot.stat().st_size > 5000
    assert "synthetic|T=0.6" in res.output


@pytest.mark.parametrize(("args", "needle"), [
    (["gate", "--format", "yaml"], "--format 'yaml' is not supported"),
    (["reliability", "--plot", "{missing}/p.png"], "directory '{missing}' does not exist"),
    (["incoherence", "--plot", "{tmp}"], "is a directory; give a file path in it"),
    (["curve", "--plot", "{missing}/p.png"], "does not exist"),
    (["gate", "--plot", "{tmp}/risk.pngg"], "--plot '{tmp}/risk.pngg': cannot write '.pngg' figures"),
    (["compare", "--plot", "{tmp}"], "e.g. '{tmp}/compare'"),
    (["gate", "--splits", "0"], "--splits must be a positive integer; got 0"),
    (["gate", "--calib-fraction", "1.5"], "--calib-fraction must be a probability in (0, 1); got 1.5"),
    (["reliability", "--delta", "0"], "--delta must be a probability in (0, 1)"),
    (["reliability", "--ci-prob", "1.5"], "--ci-prob must be in (0, 1); got 1.5"),
    (["incoherence", "--n-mc", "-1"], "--n-mc must be a positive integer; got -1"),
])
def test_cli_post_processor_options_are_checked_before_work_and_named_as_options(rundir, tmp_path, args, needle):
    out, _, _ = rundir
    fill = {"missing": str(tmp_path / "missing"), "tmp": str(tmp_path)}
    res = CliRunner().invoke(app, [args[0], str(out), *(a.format(**fill) for a in args[1:])])
    assert res.exit_code == 2 and needle.format(**fill) in res.output, res.output
    assert "Traceback" not in res.output and "wrote" not in res.output


def test_cli_post_processor_errors(tmp_path):
    res = CliRunner().invoke(app, ["gate", str(tmp_path)])
    assert res.exit_code == 2 and "not a run directory" in res.output


def test_cli_curve_picks_a_fit_of_a_run_directory(rundir):
    out, _, _ = rundir
    res = CliRunner().invoke(app, ["curve", str(out), "--fit", "bb-eb", "--k", "5"])
    assert res.exit_code == 0, res.output
    assert "fit bb-eb" in res.output and "model bb by eb" in res.output
    for args, msg in ((["curve", str(out), "--fit", "nope"], "has no fits/nope.nc; it has ['auto-eb'"),
                      (["curve", str(out / "counts.csv")], "is not a fit"),
                      (["curve", str(out / "fits" / "bb-eb.nc"), "--fit", "x"], "--fit applies to a run directory")):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 2 and msg in res.output, res.output


def test_cli_compare_of_a_run_directory_gives_its_leaderboard_again(rundir, monkeypatch):
    """`bayespass compare RUN` draws with the run's seed and joins the run's own default fit beyond the samples
    (fits/auto-eb.nc, not fitted again: half a minute to a minute on 34 configs): the run's leaderboard and
    P(better), digit for digit. Another --seed gives other draws."""
    import pandas as pd

    import bayespass.stats.ranking as ranking

    out, _, _ = rundir
    ks = ",".join(str(k) for k in json.loads((out / "run.json").read_text())["config"]["passk_k"])
    monkeypatch.setattr(ranking, "_fit_default", lambda *a, **kw: (_ for _ in ()).throw(AssertionError("fitted")))
    res = CliRunner().invoke(app, ["compare", str(out), "--k", ks, "--format", "csv"])
    assert res.exit_code == 0, res.output
    assert "the run's fits/auto-eb.nc" in res.output
    board, pb = (pd.read_csv(io.StringIO(t)) for t in res.stdout.split("\n\n"))
    pd.testing.assert_frame_equal(board, pd.read_csv(out / "tables" / "leaderboard.csv"))
    pd.testing.assert_frame_equal(pb, pd.read_csv(out / "tables" / "prob_better_all.csv"))
    other = CliRunner().invoke(app, ["compare", str(out), "--k", ks, "--format", "csv", "--seed", "1"])
    assert other.exit_code == 0 and other.stdout != res.stdout, other.output


@pytest.mark.parametrize(("cmd", "table", "said", "other"), [
    ("gate", "gating", "--alpha 0.1, --splits 50, --seed 42, --tie-break none", ["--splits", "20"]),
    ("reliability", "reliability", "--alpha 0.1, --splits 50, --seed 42", ["--seed", "1"]),
    ("incoherence", "incoherence", "--seed 42", None),  # its table is exact: the seed moves the Monte Carlo's only
])
def test_post_processors_of_a_run_directory_take_its_own_settings(rundir, cmd, table, said, other):
    """'bayespass gate RUN' (reliability, incoherence) with no option prints the run's own table, digit for digit:
    the run's seed, alpha, splits and tie-break (a quick run's 50 splits, not rcParams' 100), and says so; an option
    given changes it."""
    import pandas as pd

    out, _, _ = rundir
    res = CliRunner().invoke(app, [cmd, str(out), "--format", "csv"])
    assert res.exit_code == 0, res.output
    assert f"the run's own {said} (give the option to change it)" in res.output
    got = pd.read_csv(io.StringIO(res.stdout))
    pd.testing.assert_frame_equal(got, pd.read_csv(out / "tables" / f"{table}.csv"))
    if other is None:
        return
    changed = CliRunner().invoke(app, [cmd, str(out), "--format", "csv", *other])
    assert changed.exit_code == 0 and changed.stdout != res.stdout, changed.output
    assert other[0] not in changed.output.split("(give the option")[0].split("the run's own")[-1]


def test_python_post_processors_of_a_run_take_its_own_settings(rundir, monkeypatch):
    """bp.gate(run) (reliability, incoherence, compare_configs, passk_curve) of bp.load_run's tree or of the run
    directory gives the run's own table again: its seed, alpha, splits (a quick run's 50, not rcParams' 100) and
    band probability, and its own default fit beyond the samples; an argument given replaces the run's."""
    import pandas as pd

    import bayespass as bp
    import bayespass.stats.ranking as ranking
    from bayespass.stats.gating import gate_table
    from bayespass.stats.incoherence import incoherence_summary
    from bayespass.stats.reliability import reliability_table

    def same(table, name):
        got = pd.read_csv(io.StringIO(table.to_csv(index=False)))
        pd.testing.assert_frame_equal(got, pd.read_csv(out / "tables" / f"{name}.csv"))

    out, _, _ = rundir
    tree = bp.load_run(out)
    g = bp.gate(tree)
    assert (g.attrs["n_splits"], g.attrs["seed"], g.attrs["tie_break"]) == (50, 42, "none")
    same(gate_table(g), "gating")
    assert bp.gate(tree, n_splits=20, tie_break="random").attrs["n_splits"] == 20
    r = bp.reliability(tree)
    assert (r.attrs["n_splits"], r.attrs["seed"]) == (50, 42)
    same(reliability_table(r), "reliability")
    assert bp.reliability(tree, seed=1, ci_prob=0.5).attrs["seed"] == 1
    inc = bp.incoherence(tree)
    same(incoherence_summary(inc), "incoherence")
    assert inc["I_mc"].equals(bp.incoherence(tree, seed=42)["I_mc"])  # the Monte Carlo's draws: the run's seed
    assert not inc["I_mc"].equals(bp.incoherence(tree, seed=1)["I_mc"])
    ks = json.loads((out / "run.json").read_text())["config"]["passk_k"]
    monkeypatch.setattr(ranking, "_fit_default", lambda *a, **kw: (_ for _ in ()).throw(AssertionError("fitted")))
    for run in (tree, out):  # the tree or the directory: the run's seed and its fits/auto-eb, not fitted again
        cmp = bp.compare_configs(run, k=ks)
        same(bp.leaderboard(cmp), "leaderboard")
        same(bp.prob_better_table(cmp, pairs="all"), "prob_better_all")
    assert not bp.compare_configs(tree, k=ks, seed=1)["prob_better"].equals(cmp["prob_better"])
    tree.attrs["config"] = json.dumps(json.loads(tree.attrs["config"]) | {"ci_prob": 0.5})
    assert bp.passk_curve(tree, k=[1, 10]).attrs["ci_prob"] == 0.5
    assert bp.passk_curve(tree, k=[1, 10], ci_prob=0.8).attrs["ci_prob"] == 0.8
    assert bp.compare_configs(tree, k=ks).attrs["ci_prob"] == 0.5
    assert bp.passk_curve(bp.pipeline.fits_of(tree)["auto-eb"], k=[1, 10]).attrs["ci_prob"] == 0.9  # a fit: rcParams


def test_curve_and_plan_of_a_run_at_another_band_probability_use_it(rundir, tmp_path):
    """A run made with --ci-prob 0.5: 'bayespass curve RUN' prints its 50% band (its table's), as the run's
    report does, unless --ci-prob says otherwise; 'plan' plans that band's width."""
    out, _, _ = rundir
    run = tmp_path / "half"
    run.mkdir()
    state = json.loads((out / "run.json").read_text())
    state["config"]["ci_prob"] = 0.5
    (run / "run.json").write_text(json.dumps(state))
    (run / "fits").symlink_to(out / "fits")
    res = CliRunner().invoke(app, ["curve", str(run), "--k", "1,10", "--format", "csv"])
    assert res.exit_code == 0, res.output
    assert "the run's own --ci-prob 0.5" in res.output and "50% lower" in res.stdout.splitlines()[0]
    res = CliRunner().invoke(app, ["curve", str(run), "--k", "1,10", "--format", "csv", "--ci-prob", "0.8"])
    assert res.exit_code == 0 and "80% lower" in res.stdout and "the run's own" not in res.output, res.output
    res = CliRunner().invoke(app, ["plan", str(run), "--width", "0.9", "--k", "1"])
    assert res.exit_code == 0 and "The 50% band of pass@1 is already at most 0.9 wide" in res.output, res.output


def test_interrupted_run_resumes(rundir):
    out, _, resumed = rundir
    assert "execute" in resumed["stages"] and "report" not in resumed["stages"]
    assert resumed["samples_mtime_after"] == resumed["samples_mtime"]  # not re-executed
    # and the resumed run says so (its stage numbers jumped from [1/7] to [3/7] without a word)
    assert re.search(r"\n  done before with these settings, read from \S+: generate, execute\n", resumed["stderr"]), \
        resumed["stderr"][:2000]
    assert "[2/7]" not in resumed["stderr"] and "[3/7] fitting" in resumed["stderr"]
    assert "report" in json.loads((out / "run.json").read_text())["stages"]
    assert (out / "report.html").exists()


def test_a_damaged_file_in_a_run_directory_is_said_and_its_stage_done_again(rundir, tmp_path):
    """A truncated fit (a copy cut short) made the resumed run, 'curve' and bp.load_run end in an HDF5 traceback."""
    import bayespass as bp

    out = tmp_path / "copy"
    shutil.copytree(rundir[0], out)
    fit = out / "fits" / "bb-eb.nc"
    fit.write_bytes(fit.read_bytes()[:3000])
    (out / "samples.nc").write_text("not netCDF")
    res = CliRunner().invoke(app, ["curve", str(out), "--fit", "bb-eb", "--k", "1"])
    assert res.exit_code == 2 and f"error: '{fit}' is not a readable fit: Unable to " in res.output, res.output
    with pytest.raises(ValueError, match=f"'{out}/samples.nc' is not a readable netCDF file: "):
        bp.load_run(out)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    res = subprocess.run([sys.executable, "-m", "bayespass.cli", "run", "--quick", "--out", str(out)],
                         capture_output=True, text=True, env=env, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    said = " ".join(res.stderr.split())
    assert f"execute: could not read back samples.nc from {out} (" in said, said[:3000]
    assert f"fit:bb-eb: could not read back fits/bb-eb.nc from {out} (" in said and "[3/7] fitting bb by eb" in said
    assert "[3/7] fitting zoibb" not in said  # the others are read back
    assert bp.load_run(out)["fits"]["bb-eb"]["posterior"].sizes["draw"] > 0


def test_a_damaged_run_json_is_named_and_a_resumed_run_does_every_stage_again(rundir, tmp_path):
    import bayespass as bp
    from bayespass.pipeline import RunConfig, State

    out = tmp_path / "copy"
    shutil.copytree(rundir[0], out)
    (out / "run.json").write_text('{"config": {"seed": 4')
    for args in (["curve", str(out), "--k", "1"], ["gate", str(out)], ["plan", str(out), "--width", "0.1"]):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 2 and f"error: '{out}/run.json' is damaged (" in res.output, (args, res.output)
    with pytest.raises(ValueError, match="run.json' is damaged"):
        bp.load_run(out)
    state = State(out, RunConfig.quick())
    assert state.data["stages"] == {} and state.note.startswith(f"{out}/run.json is damaged (")
    assert "every stage is done again" in state.note


def test_a_swallowed_interrupt_records_no_stage(tmp_path):
    from bayespass.pipeline import config as pipeline
    from bayespass.pipeline.config import RunConfig, State, _on_sigint

    st = State(tmp_path, RunConfig.quick())

    st.mark("generate", "k1")
    try:
        with pytest.raises(KeyboardInterrupt):
            _on_sigint(signal.SIGINT, None)  # what Ctrl-C does; PyMC would catch this and return early
        with pytest.raises(KeyboardInterrupt, match="'fit:zoibb-mcmc' is not recorded"):
            st.mark("fit:zoibb-mcmc", "k2")
    finally:
        pipeline.INTERRUPTED.clear()
    assert json.loads((tmp_path / "run.json").read_text())["stages"] == {"generate": "k1"}


def test_a_ctrl_c_in_a_weakref_callback_prints_no_traceback():
    # Ctrl-C while the garbage collector ran a weakref callback printed "Exception ignored in ..." and a
    # traceback in the middle of a run (the run still stopped at the stage's end, as INTERRUPTED was set)
    import weakref

    from bayespass.pipeline.config import _interrupt_unraisable

    class Thing:
        pass

    seen, previous = [], sys.unraisablehook
    sys.unraisablehook = _interrupt_unraisable(lambda u: seen.append(u.exc_type))
    try:
        for exc in (KeyboardInterrupt, ValueError):
            def callback(ref, exc=exc):
                raise exc("in a callback")

            thing = Thing()
            ref = weakref.ref(thing, callback)
            del thing  # the callback runs here; Python cannot raise its exception, hands it to the hook
            assert ref() is None
    finally:
        sys.unraisablehook = previous
    assert seen == [ValueError]  # the interrupt dropped, anything else handed on


def test_run_from_existing_samples(tmp_path):
    import bayespass as bp
    from bayespass.generate.hf import write_samples
    from bayespass.generate.synthetic import SyntheticCoder
    from bayespass.pipeline import RunConfig, run

    suite = bp.load_suite("humaneval")
    coder = SyntheticCoder(suite, tasks=list(suite.tasks)[:30], max_mutants=10)
    recs = [{"task_id": r["task_id"], "solution": r["solution"], "model": "mine", "temperature": 0.8,
             "mean_logprob": r["mean_logprob"]} for r in coder.generate(k=4, temperature=0.8, seed=3)]
    stray = [dict(recs[0], task_id="HumanEval/9999") for _ in range(4)]  # a task the suite lacks: skipped
    path = write_samples(recs + stray, tmp_path / "mine.jsonl")
    cfg = RunConfig(coder="samples", samples=str(path), methods=("eb",), fuzz_n=0, n_splits=10)
    said = []
    with pytest.warns(UserWarning, match="not in suite 'humaneval' and are skipped"):
        tables = run(tmp_path / "r", cfg, echo=said.append)
    assert tables["metrics"]["tasks"].tolist() == [30]
    # counted over the samples of the suite's tasks (the stray four are not run, nor reused)
    ran = [s for s in said if "samples run;" in s]  # duplicate programs among the 120 are run once
    assert len(ran) == 1 and " of 120 samples run" in ran[0], said
    assert "truth" not in tables["passk"].title + tables["passk"].note  # imported samples: no truth to speak of
    assert abs(tables["metrics"]["pass@1"].iloc[0] - sum(r["correct_true"] for r in coder.generate(
        k=4, temperature=0.8, seed=3)) / len(recs)) < 1e-12
    assert "logprob-CRC" in set(tables["gating"]["rule"])
    assert (tmp_path / "r" / "report.html").exists() and "incoherence" not in tables
    head = (tmp_path / "r" / "report.html").read_text().split("</p>")[0]  # what was sampled: the file's, not defaults
    assert "mine.jsonl" in head and "1 config(s) (<code>mine|T=0.8</code>), up to 4 samples per task" in head
    assert "temperatures" not in head


@pytest.mark.skipif(not (SHARED / "MbppPlus.jsonl.gz").exists(), reason="shared evalplus data not present")
def test_a_run_whose_dataset_was_found_redoes_its_stages_when_the_file_changes(tmp_path, monkeypatch):
    """Without --dataset, MBPP+ comes from MBPP_OVERRIDE_PATH or evalplus's cache, which can name another file on
    the next run into the same directory (another release): the stages done on the first file are done again,
    not reused. Here the second file lacks the first's last task, whose samples are then skipped."""
    import gzip

    import bayespass as bp
    from bayespass.generate.hf import write_samples
    from bayespass.pipeline import RunConfig, run

    lines = gzip.decompress((SHARED / "MbppPlus.jsonl.gz").read_bytes()).split(b"\n")[:5]
    five, four = tmp_path / "five.jsonl", tmp_path / "four.jsonl"
    five.write_bytes(b"\n".join(lines) + b"\n")
    four.write_bytes(b"\n".join(lines[:4]) + b"\n")
    suite = bp.load_suite("mbpp+", five, expected=False)
    recs = [{"task_id": t.task_id, "solution": t.reference_program, "config": "right"}
            for t in suite.tasks.values() for _ in range(2)]
    path = write_samples(recs, tmp_path / "mbpp.jsonl")
    cfg = RunConfig(coder="samples", samples=str(path), suite="mbpp+", models=("bb",), main_model="bb",
                    methods=("eb",), fuzz_n=0, n_splits=10)
    monkeypatch.setenv("MBPP_OVERRIDE_PATH", str(five))
    said = []
    tables = run(tmp_path / "r", cfg, echo=said.append)
    assert tables["metrics"]["tasks"].tolist() == [5] and f"  mbpp+: {five}" in said
    monkeypatch.setenv("MBPP_OVERRIDE_PATH", str(four))
    with pytest.warns(UserWarning, match=r"1 sample task id\(s\) are not in suite 'mbpp\+' and are skipped"):
        tables = run(tmp_path / "r", cfg, echo=None)
    assert tables["metrics"]["tasks"].tolist() == [4]
    assert bp.read_counts(tmp_path / "r" / "counts.nc").sizes["task"] == 4


@pytest.mark.skipif(not (SHARED / "MbppPlus.jsonl.gz").exists(), reason="shared evalplus data not present")
def test_an_mbpp_plus_run_measures_incoherence(tmp_path):
    # MBPP+'s contracts belong inside the def of the canonical solution; prompt + contract + canonical was not
    # Python, fuzzing kept no input for any task and the run stopped at its incoherence stage
    import bayespass as bp
    from bayespass.generate.hf import write_samples
    from bayespass.pipeline import RunConfig, run

    data = SHARED / "MbppPlus.jsonl.gz"
    suite = bp.load_suite("mbpp+", data, expected=False)
    tasks = list(suite.tasks.values())[:5]
    recs = [{"task_id": t.task_id, "solution": prog, "config": cfg}
            for t in tasks for cfg, prog in (("right", t.reference_program),
                                             ("wrong", f"def {t.entry_point}(*args):\n    return None\n"))
            for _ in range(3)]
    path = write_samples(recs, tmp_path / "mbpp.jsonl")
    cfg = RunConfig(coder="samples", samples=str(path), suite="mbpp+", dataset=str(data), models=("bb",),
                    main_model="bb", methods=("eb",), fuzz_n=30, n_splits=10)
    tables = run(tmp_path / "r", cfg, echo=None)
    inc = tables["incoherence"].set_index("config")
    assert inc.loc["right", "tasks"] == inc.loc["wrong", "tasks"] == 5
    assert inc.loc["right", "mean_error"] == 0 and inc.loc["wrong", "mean_error"] > 0.5


def test_a_run_from_several_samples_files_has_a_config_each(tmp_path):
    import bayespass as bp
    from bayespass.generate.hf import write_samples
    from bayespass.pipeline import RunConfig, run

    suite = bp.load_suite("humaneval")
    tasks = list(suite.tasks.values())[:6]
    right = write_samples([{"task_id": t.task_id, "solution": t.reference_program} for t in tasks for _ in range(2)],
                          tmp_path / "right.jsonl")
    wrong = write_samples([{"task_id": t.task_id, "solution": f"def {t.entry_point}(*a):\n    return None\n"}
                           for t in tasks[:5] for _ in range(2)] + [{"task_id": "HumanEval/9999", "solution": "x"}],
                          tmp_path / "wrong.jsonl")
    cfg = RunConfig(coder="samples", samples=[str(right), str(wrong)], models=("bb",), main_model="bb",
                    methods=("eb",), fuzz_n=0, n_splits=10)
    # the leaderboard compares configs on different task sets: the run says so, as 'bayespass compare' does,
    # and so does the report, at its top, also after a resumed run that skipped the stages that warned
    for _ in range(2):
        said = []
        with pytest.warns(UserWarning) as caught:
            tables = run(tmp_path / "r", cfg, echo=said.append)
        assert "[1/7] suite humaneval and samples (read from right.jsonl, wrong.jsonl)" in said  # was '(samples)'
        assert any(re.search(r"not all evaluated on the same tasks \('wrong' on 5 of 6", str(w.message)) for w in caught)
        page = (tmp_path / "r" / "report.html").read_text()
        said = page.split("<h2>Warnings</h2>")[1].split("<h2>")[0]
        assert "<code>post</code>: the configs were not all evaluated on the same tasks" in said
        assert "<code>execute</code>: 1 sample task id(s) are not in suite" in said  # skipped when resumed
        assert page.index("Warnings") < page.index("pass@k")
    kept = json.loads((tmp_path / "r" / "run.json").read_text())["warnings"]
    assert [len(kept[s]) for s in ("suite", "execute", "fit:bb-eb", "post")] == [0, 1, 0, 1]
    assert tables["metrics"].set_index("config")["pass@1"].to_dict() == {"right": 1.0, "wrong": 0.0}
    head = (tmp_path / "r" / "report.html").read_text().split("</p>")[0]
    assert "right.jsonl</code>, <code>" in head and "2 config(s)" in head
    # samples are read only by the samples coder, which needs them (each file there before any work)
    for bad, match in ((dict(coder="samples"), "coder='samples' needs samples"),
                       (dict(samples=str(right)), "are read only with coder='samples'"),
                       (dict(coder="samples", samples=[str(right), str(tmp_path / "gone.jsonl")]),
                        "gone.jsonl' do not exist")):
        with pytest.raises((ValueError, FileNotFoundError), match=match):
            RunConfig(**bad)


def test_every_post_processor_extends_the_run_tree_or_inferencedata(rundir):
    import bayespass as bp
    from bayespass.pipeline import fits_of

    out, _, _ = rundir
    tree = bp.load_run(out)
    fits = fits_of(tree)
    idata, bb = fits[tree.attrs["main_fit"]], fits["bb-eb"]
    results = {
        "gating": bp.gate(tree, n_splits=3, extend_inferencedata=True),
        "reliability": bp.reliability(tree, n_splits=3, extend_inferencedata=True),
        "incoherence": bp.incoherence(tree, n_mc=200, seed=1, extend_inferencedata=True),
        "cv_elpd": bp.cv_elpd(tree, folds=5, extend_inferencedata=True),
    }
    for name, ds in results.items():
        assert name in tree.children
        xr_ds = tree[name].to_dataset()
        for v in ds.data_vars:
            np.testing.assert_array_equal(xr_ds[v].values, ds[v].values)
    for name, ds in (("ppc", bp.ppc(idata, extend_inferencedata=True)),
                     ("passk_curve", bp.passk_curve(idata, [1, 10], extend_inferencedata=True)),
                     ("improvability", bp.improvability(bb, extend_inferencedata=True)),
                     ("loo_compare", xr.Dataset.from_dataframe(bp.compare(
                         {"bb": bb, "zoibb": fits["zoibb-eb"]}, extend_inferencedata=True).rename_axis(
                         index={"model": "candidate"})))):
        target = bb if name in ("improvability", "loo_compare") else idata
        assert name in target.groups()
        np.testing.assert_array_equal(target[name][next(iter(ds.data_vars))].values,
                                      ds[next(iter(ds.data_vars))].values)
    # a plain Dataset has nothing to extend: a clear error before any work
    samples = tree["samples"].to_dataset()
    for fn in (bp.gate, bp.reliability):
        with pytest.raises(TypeError, match="extend_inferencedata=True needs"):
            fn(samples, extend_inferencedata=True)


def test_the_post_processors_of_fits_and_of_counts_take_the_run_tree(rundir):
    import bayespass as bp
    from bayespass.pipeline import fits_of

    out, _, _ = rundir
    tree = bp.load_run(out)
    main = fits_of(tree)[tree.attrs["main_fit"]]
    counts = tree["counts"].to_dataset()
    # those of a fit: the run's main fit
    cur = bp.passk_curve(tree, [1, 10, 100], extend_inferencedata=True)
    xr.testing.assert_identical(cur, bp.passk_curve(main, [1, 10, 100]))
    assert "passk_curve" in tree["fits"][tree.attrs["main_fit"]].children  # stored with the main fit
    xr.testing.assert_identical(bp.ppc(tree), bp.ppc(main))
    np.testing.assert_array_equal(bp.allocate(tree, k=10, budget=20)["n_more"].values,
                                  bp.allocate(main, k=10, budget=20)["n_more"].values)
    xr.testing.assert_identical(bp.passk_draws(tree, [1, 50]), bp.passk_draws(main, [1, 50]))  # was a ValueError
    xr.testing.assert_identical(bp.loo(tree).loo_i, bp.loo(main).loo_i)
    # improvability of the stacked main fit: its bb candidate's concentration (refused before), the stack's pass@1
    imp, of_bb = bp.improvability(tree), bp.improvability(fits_of(tree)["bb-eb"])
    xr.testing.assert_equal(imp[["dpass", "dpass_eti"]], of_bb[["dpass", "dpass_eti"]])
    assert imp.attrs["dpass_from"].startswith("bb_kappa") and of_bb.attrs["dpass_from"] == "kappa"
    xr.testing.assert_equal(imp["pass1"], bp.passk_curve(main, [1])["mean"].isel(k=0, drop=True))
    with pytest.raises(ValueError, match="improvability needs a Beta concentration.*'lnorm' fit has none"):
        bp.improvability(fits_of(tree)["lnorm-eb"])
    # those of several fits say where a run keeps them (they tried the tree's children as fits)
    with pytest.raises(ValueError, match=r"got DataTree; a run's fits are bp.pipeline.fits_of\(run\)"):
        bp.compare(tree)
    with pytest.raises(TypeError, match=r"got DataTree \(a run: its fits are bp.pipeline.fits_of\(run\)\)"):
        bp.stack(tree)
    with pytest.raises(TypeError, match=r"\(fit 'a'\) needs a fit .* got DataTree; a run: pass one of its fits, "
                                        r"bp.pipeline.fits_of\(run\)\[NAME\] \(\['auto-eb', 'auto-mcmc', "):
        bp.compare({"a": tree, "b": main})  # said "this run has no fits"
    for show in (bp.leaderboard, bp.prob_better_table, bp.plot_forest):  # those of a comparison say how to get one
        with pytest.raises(TypeError, match=r"got DataTree; a run: compare its configs first, bp.compare_configs\(run"):
            show(tree)
    # those of counts: the run's counts
    pd.testing.assert_frame_equal(bp.estimate_table(tree, [1, 5]), bp.estimate_table(counts, [1, 5]))  # AttributeError
    xr.testing.assert_identical(bp.passk(tree, [1, 5]), bp.passk(counts, [1, 5]))
    xr.testing.assert_identical(bp.passk_bounds(tree, [1, 50]), bp.passk_bounds(counts, [1, 50]))
    kw = dict(k=[1, 10], model="bb", method="eb", seed=3)
    xr.testing.assert_identical(bp.compare_configs(tree, **kw), bp.compare_configs(counts, **kw))
    # a run without its main fit says which fits it has
    del tree["fits"][tree.attrs["main_fit"]]
    with pytest.raises(ValueError, match=r"passk_curve: the run has no main fit '\S+' \(its fits: \['auto-mcmc', 'bb-eb'"):
        bp.passk_curve(tree, [1])
    del tree["fits"]  # as 'bayespass execute' leaves it
    with pytest.raises(TypeError, match=r"plan needs a fit .* got DataTree; this run has no fits: fit its counts"):
        bp.plan(tree, k=10, target_width=0.1)
    assert bp.fit(tree, "bb", "eb", progressbar=False).posterior.sizes["config"] == counts.sizes["config"]


def test_the_run_figure_draws_the_no_prior_bounds_for_a_few_configs():
    """figures/passk_curves.png: bp.passk_bounds at log-spaced k up to the figure's, for at most 6 configs."""
    import bayespass as bp
    from bayespass.report.figures import BOUNDS_MAX_CONFIGS, _figure_bounds

    rng = np.random.default_rng(0)
    n = np.full((2, 80), 5)
    counts = bp.make_counts(n, rng.binomial(n, rng.beta(0.5, 0.5, (2, 80))))
    k = np.arange(1, 201)
    got = _figure_bounds(counts, k)
    assert got.k.values[0] == 1 and got.k.values[-1] == 200 and got.sizes["k"] >= 10
    np.testing.assert_allclose(got.values, bp.passk_bounds(counts, got.k.values).values)
    many = bp.make_counts(np.full((BOUNDS_MAX_CONFIGS + 1, 10), 5), np.ones((BOUNDS_MAX_CONFIGS + 1, 10), int))
    assert _figure_bounds(many, k) is None


def test_the_loo_table_says_when_shared_by_eb_is_compared():
    """bp.compare warns of shared's EB elpd (biased low); the run silences warnings there, so its title says it."""
    from types import SimpleNamespace

    import bayespass as bp
    from bayespass.pipeline.tables import _loo_tables

    rng = np.random.default_rng(0)
    n = np.full((2, 60), 4)
    counts = bp.make_counts(n, rng.binomial(n, rng.beta(1, 1, (2, 60))))
    fits = {f"{m}-eb": bp.fit(counts, m, "eb", progressbar=False) for m in ("bb", "zoibb", "shared")}
    with_shared = _loo_tables(SimpleNamespace(methods=("eb",), models=("bb", "shared")), fits)
    assert "shared by EB: its elpd is biased low" in with_shared["loo_eb"].title
    without = _loo_tables(SimpleNamespace(methods=("eb",), models=("bb", "zoibb")), fits)
    assert "shared" not in without["loo_eb"].title


def test_a_run_at_another_band_probability(tmp_path):
    """``ci_prob`` (``run --ci-prob``) sets every band of a run; a resumed run without it is back at 90%."""
    import arviz as az

    import bayespass as bp
    from bayespass.generate.hf import write_samples
    from bayespass.pipeline import RunConfig, run

    suite = bp.load_suite("humaneval")
    tasks = list(suite.tasks.values())[:8]
    rows = [{"task_id": t.task_id, "solution": t.reference_program if j < i % 5 else
             f"def {t.entry_point}(*a):\n    return None\n"} for i, t in enumerate(tasks) for j in range(4)]
    path = write_samples(rows, tmp_path / "s.jsonl")
    kw = dict(coder="samples", samples=str(path), models=("bb",), main_model="bb", methods=("eb",), fuzz_n=0,
              n_splits=10)
    bands = {}
    for prob, tie in ((0.5, "none"), (None, "random")):  # the second run resumes the first: only the tables are new
        tables = run(tmp_path / "r", RunConfig(**kw, ci_prob=prob, tie_break=tie), echo=None)
        t = tables["passk"].set_index("k")
        bands[prob] = t[["bb-eb_lo", "bb-eb_hi"]].to_numpy()
        assert f"{prob or 0.9:.0%} equal-tailed interval" in tables["passk"].title
        assert ("ties broken at random" in tables["gating"].title) is (tie == "random")  # run --tie-break
    fit = az.from_netcdf(str(tmp_path / "r" / "fits" / "bb-eb.nc"))
    ks = list(t.index)
    for prob, band in bands.items():
        eti = bp.passk_curve(fit, ks, ci_prob=prob or 0.9)["eti"].squeeze().transpose("k", "ci_bound").values
        np.testing.assert_allclose(band, eti, rtol=1e-9)
    narrower = (bands[0.5][:, 1] - bands[0.5][:, 0]) < 0.8 * (bands[None][:, 1] - bands[None][:, 0])
    assert narrower.all(), (bands[0.5], bands[None])
    assert json.loads((tmp_path / "r" / "run.json").read_text())["config"]["ci_prob"] is None
    # the rounds of --until-width stop on the band at ci_prob: a new probability goes on from the samples drawn
    same = RunConfig(**kw).key("k"), RunConfig(**kw, ci_prob=0.8).key("k")
    assert same[0] == same[1]
    rounds = dict(kw, until_width=0.1)
    assert RunConfig(**rounds).key("until_width") != RunConfig(**rounds, ci_prob=0.8).key("until_width")
    with pytest.raises(ValueError, match=r"ci_prob must be in \(0, 1\); got 1.5"):
        RunConfig(**kw, ci_prob=1.5)
    with pytest.raises(ValueError, match="tie_break must be 'none' or 'random'; got 'coin'"):
        RunConfig(**kw, tie_break="coin")


def test_cli_run_names_a_bad_band_probability_or_tie_break_as_its_option(tmp_path):
    for args, said in ((["--ci-prob", "0"], "--ci-prob must be in (0, 1); got 0"),
                       (["--tie-break", "coin"], "--tie-break must be 'none' or 'random'; got 'coin'")):
        res = CliRunner().invoke(app, ["run", *args, "--out", str(tmp_path / "r")])
        assert res.exit_code != 0 and said in res.output, res.output
        assert not (tmp_path / "r").exists()  # refused before any work
