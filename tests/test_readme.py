"""The README's Python blocks run as written.

Every ```python block of README.md is executed, in order, in one fresh interpreter with warnings as errors
(but a dependency's notice that an API will change, as in the rest of the suite: pyproject's filterwarnings).
Two blocks use names a reader brings (``counts``, two fits, configs called "A" and "B"): a preamble before
them defines those from the shipped example counts, and nothing else is added. A renamed function, a changed
signature or a new warning on the documented path fails this test.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
EXAMPLE = ROOT / "data" / "examples" / "counts_small.csv"

# what a reader of the "Models, fits and curves" and "Which config is better" blocks already has
READER = f"""
import bayespass as bp
counts = bp.read_counts({str(EXAMPLE)!r})
counts = counts.assign_coords(config=["A", "B", "C"][: counts.sizes["config"]])
fit_bb, fit_zoibb = bp.fit(counts, "bb"), bp.fit(counts, "zoibb")
"""


def python_blocks(text: str) -> list[str]:
    """The bodies of the ```python blocks of a Markdown text, in order."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_python_blocks_are_found():
    blocks = python_blocks(README.read_text())
    assert len(blocks) >= 5
    assert all(b.strip() for b in blocks)
    assert python_blocks("a\n```python\nx = 1\n```\n```console\n$ y\n```\n") == ["x = 1\n"]


def _program(blocks: list[str]) -> str:
    """One script running every block in order; each block's outcome is reported as a JSON line."""
    lines = ["import json, sys, traceback", "_ns = {}"]
    for i, block in enumerate(blocks):
        # `with ...: ...` is the README's way of saying "your code here"
        src = re.sub(r":\s*\.\.\.\s*(#.*)?$", ": pass", block, flags=re.M)
        if re.search(r"\bcounts\b", src) and not re.search(r"^counts\s*=", src, flags=re.M):
            src = READER + src
        lines += ["try:", f"    exec(compile({src!r}, 'README python block {i}', 'exec'), _ns)",
                  f"    print(json.dumps({{'block': {i}, 'ok': True}}), flush=True)",
                  "except BaseException:",
                  f"    print(json.dumps({{'block': {i}, 'ok': False, 'error': traceback.format_exc()}}), flush=True)",
                  "    sys.exit(1)"]
    return "\n".join(lines) + "\n"


def _pytest_filters() -> list[str]:
    import tomllib

    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["pytest"]["ini_options"]["filterwarnings"]


@pytest.mark.slow
def test_readme_python_blocks_run_as_written(tmp_path):
    blocks = python_blocks(README.read_text())
    script = tmp_path / "readme_blocks.py"
    script.write_text(_program(blocks))
    # the same rule as pytest's own (pyproject's filterwarnings): errors, but a dependency's notice of change
    notices = [f"-W{f}" for f in _pytest_filters() if f.startswith("default::")]
    assert notices, "pyproject's filterwarnings lost its default:: entries"
    proc = subprocess.run([sys.executable, "-W", "error", *notices, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=1800)
    reports = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"block"')]
    failed = [r for r in reports if not r["ok"]]
    assert not failed, f"README python block {failed[0]['block']} failed:\n{failed[0]['error']}"
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["block"] for r in reports] == list(range(len(blocks)))


def cli_lines(text: str) -> list[str]:
    """The ``bayespass ...`` command lines of a Markdown text's console and bash blocks (continuations joined)."""
    lines = []
    for block in re.findall(r"^```(?:console|bash)\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip().removeprefix("$ ")
            if line.startswith("bayespass "):
                lines.append(line)
    return lines


def test_readme_command_lines_parse():
    """Every ``bayespass`` command of the README names a subcommand that exists, with options it takes and values
    of the right type (parsed by the CLI's own parser; nothing is run)."""
    import shlex

    import typer

    from bayespass.cli import app

    try:  # typer vendors its own click from 0.16 on
        from typer._click.exceptions import UsageError
    except ImportError:  # pragma: no cover
        from click import UsageError

    cmd = typer.main.get_command(app)
    lines = cli_lines(README.read_text())
    assert len(lines) >= 15
    bad = []
    for line in lines + ["bayespass fit counts.csv --no-such-option 3"]:
        args = shlex.split(line, comments=True)[1:]
        ctx = cmd.context_class(cmd, info_name="bayespass")
        try:
            name, sub, rest = cmd.resolve_command(ctx, args)
            sub.make_context(name, rest, parent=ctx)
        except UsageError as err:
            bad.append(f"{line}\n    {err.format_message()}")
    assert len(bad) == 1 and "--no-such-option" in bad[0], "\n".join(bad)  # the one made up here, only
