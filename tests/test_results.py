"""bayespass.Table: tables that print themselves, and the wording that follows rcParams["stats.ci_prob"]."""

import warnings
from html import escape

import numpy as np
import pandas as pd
import pytest

import bayespass as bp
from bayespass.results import Table
from bayespass.simulate import draw_zoib, simulate_counts


def test_a_table_prints_its_title_and_brief_columns_and_keeps_every_column():
    df = pd.DataFrame({"config": ["a", "b"], "k": [1, 1], "mean": [0.25, 0.5], "detail": [1.0, 2.0]})
    t = Table.of(df, "pass@k <toy>", note="A & B.", brief=("config", "mean", "absent"))
    text = str(t)
    assert text.splitlines()[0] == "== pass@k <toy> =="
    columns = t.to_text(note=False)
    assert "mean" in columns and "detail" not in columns and "0.2500" in columns
    assert list(t.to_dataframe().columns) == ["config", "k", "mean", "detail"]
    assert type(t.to_dataframe()) is pd.DataFrame
    sub = t[t["mean"] > 0.3]  # pandas operations keep the title and caption
    assert isinstance(sub, Table) and sub.title == "pass@k <toy>" and len(sub) == 1
    html = t.to_html_section()
    assert "<h2>pass@k &lt;toy&gt;</h2>" in html and "A &amp; B." in html and "detail" in html
    assert "==" not in Table.of(df, "").to_text()  # no title line without a title
    assert text.splitlines()[-2:] == ["note: A & B.", "      not shown here: k, detail (every column: "
                                      "t.to_dataframe())"]  # print shows the caption, as the CLI does
    assert "A & B." not in t.to_text()
    view = t._repr_html_()  # a notebook shows the title and the caption around pandas' own table
    assert view.startswith("<p><b>pass@k &lt;toy&gt;</b></p>") and view.endswith("<p class=note>A &amp; B.</p>")
    assert pd.DataFrame(t)._repr_html_() in view
    long = Table.of(df, "t", note="word " * 60)
    lines = long.to_text(note=True, width=50).splitlines()
    assert lines[-1].startswith("      ") and any(x.startswith("note: word") for x in lines)
    assert max(len(x) for x in lines[3:]) <= 50 and " ".join(lines).count("word") == 60
    shown = t.to_text(note=True)  # the caption's columns that print leaves out are named, and where they are
    assert "not shown here: k, detail (every column: --format csv or json)" in shown
    assert "(every column: run/tables/t.csv)" in t.to_text(note=True, where="run/tables/t.csv")
    assert "not shown" not in Table.of(df, "t", note="x").to_text(note=True)


def test_a_table_as_markdown_and_latex_for_a_paper(tmp_path):
    """The text table's columns and caption as a GitHub Markdown table and a LaTeX booktabs table, escaped."""
    import shutil
    import subprocess

    from typer.testing import CliRunner

    from bayespass.cli import app

    df = pd.DataFrame({"config": ["gpt_4o|T=1", "b&c"], "k": [1, 10], "mean": [0.25, np.nan], "detail": [1.0, 2.0],
                       "qhat": [np.inf, 2.0]})
    t = Table.of(df, "pass@k (90% band)", note="A & B; k <= n, 1 - p^k.", brief=("config", "k", "mean"))
    assert r"gpt\_4o\textbar{}T=1 & $\infty$" in Table.of(df[["config", "qhat"]], "q").to_latex_section()
    md = t.to_markdown_section().splitlines()
    assert md[:4] == ["### pass@k (90% band)", "", "| config | k | mean |", "|---|---:|---:|"]
    assert md[4:6] == ["| gpt_4o\\|T=1 | 1 | 0.2500 |", "| b&c | 10 | — |"]
    assert md[-1] == "*A & B; k <= n, 1 - p^k.*"
    tex = t.to_latex_section()
    assert r"\caption{pass@k (90\% band). A \& B; k $\le$ n, 1 - p\textasciicircum{}k.}" in tex
    assert r"\begin{tabular}{lrr}" in tex and "detail" not in tex
    assert r"gpt\_4o\textbar{}T=1 & 1 & 0.2500 \\" in tex and r"b\&c & 10 & --- \\" in tex
    if shutil.which("pdflatex"):  # it compiles where LaTeX is installed (not on the CI machine)
        doc = tmp_path / "t.tex"
        doc.write_text(r"\documentclass{article}\usepackage{booktabs}\begin{document}" + tex + r"\end{document}")
        assert subprocess.run(["pdflatex", "-halt-on-error", doc.name], cwd=tmp_path, capture_output=True).returncode == 0
    counts = tmp_path / "counts.csv"
    counts.write_text("config,task,n,c\na,t1,4,1\na,t2,4,3\nb,t1,4,4\nb,t2,4,0\n")
    res = CliRunner().invoke(app, ["estimate", str(counts), "--k", "1,2", "--method", "unbiased", "--format", "markdown"])
    assert res.exit_code == 0, res.output
    assert "| config | method | tasks | avg@n | pass@1 | pass@2 |" in res.stdout
    assert "| a | unbiased | 2 | 0.5000 | 0.5000 | 0.7500 |" in res.stdout
    res = CliRunner().invoke(app, ["estimate", str(counts), "--k", "1", "--method", "unbiased", "--format", "latex"])
    assert res.exit_code == 0 and r"\begin{tabular}{llrrr}" in res.stdout
    res = CliRunner().invoke(app, ["estimate", str(counts), "--format", "html"])
    assert res.exit_code == 2 and "'csv', 'json', 'latex', 'markdown', 'table'" in res.output


def test_a_value_that_rounds_to_zero_prints_without_a_sign():
    df = pd.DataFrame({"diff": [-1e-7, -0.2, float("-inf"), 1e-7], "x": [-1e-9, 0.0, 1.0, 2.0]})
    text = Table.of(df, "d").to_text(title=False)
    assert "-0.0000" not in text and "-0.2000" in text and "-inf" in text
    assert "-0.000" not in Table.of(df, "d").to_html_section()


@pytest.fixture(scope="module")
def fitted():
    counts = simulate_counts(draw_zoib((2, 80), 0.7, 1.3, 0.2, 0.1, seed=3), 6, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return counts, bp.fit(counts, "bb", "eb", seed=1)


def _samples(seed=0):
    from tests.stats.conftest import samples_ds

    rng = np.random.default_rng(seed)
    ok = rng.random((2, 40, 1, 1)) < rng.random((2, 40, 1, 1))  # per-task success rate
    verdict = np.where(rng.random((2, 40, 6, 3)) < 0.5 + 0.4 * ok, 1, 0)
    return samples_ds(verdict)


def _tables(counts, idata):
    from bayespass.pipeline.tables import passk_table
    from bayespass.stats.ranking import prob_better_table
    from bayespass.stats.reliability import reliability_table

    cmp = bp.compare_configs(idata, k=[1, 10])
    return {"passk": passk_table(counts, {"bb-eb": idata}, [1, 10], main="bb-eb"),
            "leaderboard": bp.leaderboard(cmp), "prob_better": prob_better_table(cmp),
            "reliability": reliability_table(bp.reliability(_samples(), n_splits=5, seed=0))}


def test_every_table_title_caption_and_the_report_follow_ci_prob(fitted, tmp_path):
    from bayespass.pipeline import RunConfig
    from bayespass.report.html import write_report

    counts, idata = fitted
    with bp.rc_context({"stats.ci_prob": 0.8}):
        curve = bp.curve_table(bp.passk_curve(idata, [1, 10]))
        tables = _tables(counts, idata)
        html = write_report(tmp_path / "r.html", cfg=RunConfig(), tables=tables, figures={}).read_text()
    assert "80% equal-tailed interval" in curve.title and "80% lower" in curve.columns
    for key in ("passk", "leaderboard", "reliability"):
        assert "80%" in tables[key].title, (key, tables[key].title)
    assert "80%" in tables["prob_better"].note
    assert "80%" in html and "Wilson 80%" in html and "90%" not in html
    for t in tables.values():  # every section of the report is the table's own title
        assert f"<h2>{escape(t.title)}</h2>" in html
    default = _tables(counts, idata)
    assert all("80%" not in t.title and "80%" not in t.note for t in default.values())


def test_the_passk_table_prints_the_main_fit_and_keeps_every_fit(fitted):
    from bayespass.pipeline.tables import passk_table

    counts, idata = fitted
    t = passk_table(counts, {"bb-eb": idata, "other": idata}, [1, 10], main="bb-eb")
    assert {"other", "other_lo", "other_hi"} <= set(t.to_dataframe().columns)
    free = bp.passk_bounds(counts, [1, 10])  # and the assumption-free bounds, in the frame, not printed
    got = t.to_dataframe().set_index(["config", "k"])
    for cfg in counts.config.values:
        assert got.loc[(cfg, 10), "no_prior_hi"] == pytest.approx(float(free.sel(config=cfg, k=10)[1]), abs=1e-12)
    shown = t.to_text(note=False)  # the columns print shows; its caption names the others
    assert "no_prior" not in shown
    assert "other_lo" not in shown and "bb-eb_lo" in shown
    assert t.attrs["main"] == "bb-eb" and t.attrs["ci_prob"] == 0.9


def test_name_list_names_a_few_and_counts_the_rest():
    from bayespass.results import name_list

    assert name_list(["a", "b"]) == "a, b"
    assert name_list(list("abcdef")) == "a, b, c, d and 2 more"
    assert name_list(list("abcdef"), most=2) == "a, b and 4 more"
    assert name_list(list("abc"), total=3) == "all 3 configs"
    assert name_list(["a"], total=1) == "a"  # one config is named
    assert name_list(list("ab"), total=5) == "a, b"
