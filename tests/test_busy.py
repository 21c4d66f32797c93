"""One bayespass process per run directory or samples file: a second one is refused at once, by name."""

import subprocess
import sys

import pytest
from typer.testing import CliRunner

import bayespass as bp
from bayespass._busy import BusyError, exclusive
from bayespass.cli import app
from bayespass.generate.hf import generate_to_jsonl

HOLD = ("import sys, time\nfrom bayespass._busy import exclusive\n"
        "with exclusive(sys.argv[1], directory=sys.argv[2] == 'dir'):\n"
        "    print('held', flush=True)\n    time.sleep(120)\n")


class Holder:
    """Another process holding ``path`` until ``release()`` (killed: its lock ends with it)."""

    def __init__(self, path, directory=True):
        self.proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path), "dir" if directory else "file"],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "held"

    def release(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()


@pytest.fixture
def held_dir(tmp_path):
    holder = Holder(tmp_path / "run")
    yield tmp_path / "run", holder
    holder.release()


def test_a_run_directory_held_by_another_process_is_refused_before_any_work(held_dir):
    out, holder = held_dir
    with pytest.raises(BusyError, match=rf"out='{out}' is in use by another bayespass process \(pid "
                                        rf"{holder.proc.pid}, since "):
        bp.run(out, bp.RunConfig(k=2, temperatures=(0.4,), tasks=2), echo=None)
    assert sorted(p.name for p in out.iterdir()) == [".lock"]  # nothing written


def test_the_command_line_says_so_and_a_killed_holder_leaves_no_lock(held_dir):
    out, holder = held_dir
    res = CliRunner().invoke(app, ["run", "--out", str(out), "--k", "2", "--temperatures", "0.4", "--tasks", "2"])
    assert res.exit_code == 2 and f"pid {holder.proc.pid}" in res.output, res.output
    holder.release()  # kill -9: flock ends with the process
    with exclusive(out):
        pass


def test_execute_into_a_held_directory_is_refused(held_dir):
    from tests.execution.conftest import toy_suite

    out, _ = held_dir
    samples = [{"task_id": "toy/add1", "solution": "def add1(x):\n    return x + 1\n"}]
    with pytest.raises(BusyError, match="in use by another bayespass process"):
        bp.execute(samples, toy_suite(), out=out, progress=False)
    assert not (out / "verdicts.sqlite").exists()


def test_a_samples_file_held_by_another_process_is_refused(tmp_path):
    path = tmp_path / "samples.jsonl"
    path.write_text('{"task_id": "HumanEval/0", "solution": "x"}\n')
    holder = Holder(path, directory=False)
    try:
        with pytest.raises(BusyError, match="samples.jsonl' is in use"):
            generate_to_jsonl(None, None, path, k=2, temperature=0.8)
    finally:
        holder.release()
    assert path.read_text() == '{"task_id": "HumanEval/0", "solution": "x"}\n'


def test_the_same_process_may_hold_a_directory_twice(tmp_path):
    # run holds its directory and its execute stage takes it again; a second process still may not
    with exclusive(tmp_path), exclusive(tmp_path):
        res = subprocess.run([sys.executable, "-c", HOLD, str(tmp_path), "dir"], capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 1 and "BusyError" in res.stderr
    with exclusive(tmp_path):
        pass
