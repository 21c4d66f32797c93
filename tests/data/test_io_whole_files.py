"""Files written whole: a full disk is a clear error naming the file, with no half or temporary file left and no
crash at exit; a damaged file is an error naming it."""

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
import uuid

import numpy as np
import pytest

from bayespass.cli import disk_full
from bayespass.data.io import atomic_netcdf, write_atomic


@contextlib.contextmanager
def _tmpfs(where, options: str):
    """Mount a 64 KiB tmpfs at ``where`` with ``options`` (needs root and a mount namespace that allows it;
    the test is skipped elsewhere)."""
    where.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size=64k{options}", "tmpfs", str(where)],
                          capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs: a disk that fills up."""
    with _tmpfs(tmp_path / f"small-{uuid.uuid4().hex[:6]}", "") as where:
        yield where


WRITE_FIT = """
import json, sys
import arviz as az, numpy as np
from bayespass.data.io import atomic_netcdf
idata = az.from_dict(posterior={"x": np.random.default_rng(0).random((4, 20000))})
idata.attrs["model"] = "bb"
try:
    atomic_netcdf(idata, sys.argv[1])
except OSError as err:
    print(json.dumps([err.errno, err.filename]))
"""


def test_a_fit_written_to_a_full_disk_is_an_oserror_naming_the_file_and_the_process_exits_cleanly(small_disk):
    """HDF5 writing straight to a disk that fills up left a file it could not close: the interpreter crashed at
    exit (status 139, a page of HDF5 tracebacks) and the temporary file stayed. The fit is now encoded in memory
    and written with plain file I/O."""
    target = small_disk / "fit.nc"
    res = subprocess.run([sys.executable, "-c", WRITE_FIT, str(target)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout) == [errno.ENOSPC, str(target)]
    assert "Traceback" not in res.stderr
    assert list(small_disk.iterdir()) == []  # neither fit.nc nor fit.nc.tmp


def test_a_failed_write_names_its_file_and_leaves_no_temporary_file(tmp_path):
    out = tmp_path / "counts.csv"

    def full(path):
        with open(path, "wb") as fh:
            fh.write(b"task,n")
        raise OSError(errno.ENOSPC, "No space left on device")  # as a failed write() reports it: no file name

    with pytest.raises(OSError) as exc:
        write_atomic(out, full)
    assert (exc.value.errno, exc.value.filename) == (errno.ENOSPC, str(out))
    assert list(tmp_path.iterdir()) == []


def test_netcdf_written_in_memory_reads_back_as_arviz_and_xarray_write_it(tmp_path):
    import arviz as az
    import xarray as xr

    rng = np.random.default_rng(1)
    idata = az.from_dict(posterior={"mu": rng.random((2, 50)), "k": rng.integers(0, 9, (2, 50))},
                         observed_data={"c": np.arange(4)}, attrs={"model": "flex"})
    ours, theirs = tmp_path / "ours.nc", tmp_path / "theirs.nc"
    atomic_netcdf(idata, ours)
    idata.to_netcdf(str(theirs))
    a, b = az.from_netcdf(ours), az.from_netcdf(theirs)
    assert a.groups() == b.groups() == ["posterior", "observed_data"]
    assert dict(a.attrs) == dict(b.attrs) == {"model": "flex"}
    assert all(a[g].identical(b[g]) for g in a.groups())
    ds = xr.Dataset({"n": (("task",), np.arange(3))}, coords={"task": ["a", "b", "c"]}, attrs={"suite": "x"})
    atomic_netcdf(ds, tmp_path / "counts.nc")
    assert xr.load_dataset(tmp_path / "counts.nc").identical(ds)


def test_an_object_above_the_in_memory_limit_is_written_by_hdf5_the_same(tmp_path, monkeypatch):
    import arviz as az
    import xarray as xr

    from bayespass.data import io

    idata = az.from_dict(posterior={"mu": np.arange(10.0).reshape(2, 5)}, attrs={"model": "bb"})
    ds = xr.Dataset({"n": (("task",), np.arange(3))}, attrs={"suite": "x"})
    for limit in (0, io.IN_MEMORY_MAX):
        monkeypatch.setattr(io, "IN_MEMORY_MAX", limit)
        atomic_netcdf(idata, tmp_path / f"fit{limit}.nc")
        atomic_netcdf(ds, tmp_path / f"ds{limit}.nc")
    a, b = az.from_netcdf(tmp_path / "fit0.nc"), az.from_netcdf(tmp_path / f"fit{io.IN_MEMORY_MAX}.nc")
    assert a.posterior.identical(b.posterior) and dict(a.attrs) == dict(b.attrs) == {"model": "bb"}
    assert xr.load_dataset(tmp_path / "ds0.nc").identical(xr.load_dataset(tmp_path / f"ds{io.IN_MEMORY_MAX}.nc"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["fit0.nc", "ds0.nc", f"fit{io.IN_MEMORY_MAX}.nc", f"ds{io.IN_MEMORY_MAX}.nc"])


def test_full_disk_errors_are_told_from_others():
    import sqlite3

    assert disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert disk_full(sqlite3.OperationalError("database or disk is full"))
    assert not disk_full(OSError(errno.EACCES, "Permission denied"))
    assert not disk_full(sqlite3.OperationalError("database is locked"))
    assert not disk_full(ValueError("No space left on device"))


def test_fit_on_a_full_disk_says_so_in_one_line(small_disk, tmp_path, monkeypatch, capsys):
    from bayespass import cli

    counts = tmp_path / "c.csv"
    counts.write_text("task,n,c\n" + "".join(f"t{i},10,{i % 11}\n" for i in range(40)))
    monkeypatch.setattr(sys, "argv", ["bayespass", "fit", str(counts), "--model", "bb", "--method", "eb",
                                      "--out", str(small_disk / "fit.nc")])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"error: no space left on the device writing '{small_disk / 'fit.nc'}'; free some space" in err, err
    assert "Traceback" not in err and list(small_disk.iterdir()) == []


def test_a_run_on_a_full_disk_says_what_it_kept(tmp_path, monkeypatch, capsys):
    import bayespass.pipeline as pipeline
    from bayespass import cli

    out = tmp_path / "run"

    def full(out_dir, cfg, echo=print):
        out_dir.mkdir(parents=True)
        (out_dir / "samples.jsonl").write_text('{"task_id": "HumanEval/0"}\n' * 3)
        raise OSError(errno.ENOSPC, "No space left on device", str(out_dir / "fits" / "bb-eb.nc"))

    monkeypatch.setattr(pipeline, "run", full)
    monkeypatch.setattr(sys, "argv", ["bayespass", "run", "--quick", "--out", str(out)])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    assert exc.value.code == 2
    assert (f"error: no space left on the device writing '{out}/fits/bb-eb.nc'; kept in {out} are the completed "
            "stages (run.json) and 3 samples (samples.jsonl): free some space and run the same command again to "
            "resume") in " ".join(capsys.readouterr().err.split())


def test_a_truncated_fit_or_dataset_is_an_error_naming_the_file(tmp_path):
    import arviz as az
    import xarray as xr

    from bayespass.data.io import read_fit, read_netcdf

    fit, ds = tmp_path / "fit.nc", tmp_path / "samples.nc"
    atomic_netcdf(az.from_dict(posterior={"x": np.zeros((2, 500))}), fit)
    atomic_netcdf(xr.Dataset({"c": ("task", np.arange(500))}), ds)
    assert read_fit(fit).posterior.x.shape == (2, 500) and read_netcdf(ds).c.size == 500
    for path in (fit, ds):
        path.write_bytes(path.read_bytes()[:2000])
    with pytest.raises(ValueError, match=rf"'{fit}' is not a readable fit: Unable to .*truncated file.* fit it again"):
        read_fit(fit)
    with pytest.raises(ValueError, match=rf"'{ds}' is not a readable netCDF file: .*truncated file"):
        read_netcdf(ds)
    with pytest.raises(FileNotFoundError):
        read_fit(tmp_path / "none.nc")


@pytest.fixture
def read_only_dir(tmp_path):
    """A read-only tmpfs: what a user without write permission meets."""
    with _tmpfs(tmp_path / "ro", ",ro") as where:
        yield where


def test_an_output_that_cannot_be_written_is_refused_before_any_work(read_only_dir, tmp_path):
    """A read-only --out ended 'fit' (after the fit), 'run', 'execute', 'generate' and every --plot in an OSError
    traceback; each is now refused first, naming the option."""
    from typer.testing import CliRunner

    from bayespass.cli import app

    counts = tmp_path / "c.csv"
    counts.write_text("task,n,c\n" + "".join(f"t{i},10,{i % 11}\n" for i in range(20)))
    ro = read_only_dir
    cases = [(["fit", str(counts), "--out", str(ro / "f.nc")], f"--out '{ro}/f.nc': no file can be written in '{ro}'"),
             (["curve", str(counts), "--plot", str(ro / "x.png")], f"--plot '{ro}/x.png': no file can be written in '{ro}'"),
             (["run", "--quick", "--out", str(ro / "q" / "r")], f"--out '{ro}/q/r': no file can be written in '{ro}'"),
             (["execute", str(counts), "--out", str(ro / "q")], f"--out '{ro}/q': no file can be written in '{ro}'"),
             (["generate", "--model", "synthetic", "--out", str(ro / "s.jsonl")],
              f"--out '{ro}/s.jsonl': no file can be written in '{ro}'")]
    for args, said in cases:
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 2 and f"error: {said} (Read-only file system)" in res.output, (args, res.output)
    from bayespass.validate import check_writable_dir

    check_writable_dir(tmp_path, name="out")  # a writable one passes and leaves nothing behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.csv", "ro"]
