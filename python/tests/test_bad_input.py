"""Files that are not results files, and damaged ones: each one ResultsError naming the file, and
never a hang or a crash of this process (the read check reads them in a child first)."""
import glob
import os
import time

import h5py
import pytest

import attnlab
from conftest import SOURCE


def test_not_results_files(tmp_path):
    text = tmp_path / "notes.h5"
    text.write_text("hello\n")
    with pytest.raises(attnlab.ResultsError, match=rf"not an attnlab results file: {text} \(not an HDF5 file\)"):
        attnlab.load(text)
    with pytest.raises(attnlab.ResultsError, match=r"\(no such file\)"):
        attnlab.load(tmp_path / "missing.h5")
    with pytest.raises(attnlab.ResultsError, match=r"\(it is a directory, not a regular file\)"):
        attnlab.load(tmp_path)
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["x"] = [1, 2, 3]
    with pytest.raises(attnlab.ResultsError, match=rf"{other} \(no root attribute 'experiment'\)"):
        attnlab.load(other)
    empty = tmp_path / "empty.h5"
    empty.write_bytes(b"")
    with pytest.raises(attnlab.ResultsError, match="not an HDF5 file"):
        attnlab.load(empty)


def test_damaged_files_are_refused_without_hanging(monkeypatch):
    """fuzz/known/results_reader: files on which HDF5 crashes, loops or allocates gigabytes. One
    of them (the zero-free-space global heap) makes h5py's HDF5 loop forever."""
    monkeypatch.setenv("ATTNLAB_READ_CHECK_SECONDS", "5")
    files = sorted(glob.glob(os.path.join(SOURCE, "fuzz", "known", "results_reader", "*.h5")))
    assert len(files) >= 10
    started = time.monotonic()
    for path in files:
        with pytest.raises(attnlab.ResultsError) as e:
            attnlab.load(path)
        assert path in str(e.value)
        assert "damaged" in str(e.value) or "not an attnlab results file" in str(e.value), str(e.value)
    assert time.monotonic() - started < 120
    loop = os.path.join(SOURCE, "fuzz", "known", "results_reader", "hdf5-global-heap-zero-free-space.h5")
    with pytest.raises(attnlab.ResultsError, match=r"did not finish reading it within 5 s"):
        attnlab.load(loop)


def test_a_damaged_file_in_a_folder(tmp_path, d2l_run, monkeypatch):
    monkeypatch.setenv("ATTNLAB_READ_CHECK_SECONDS", "5")
    import shutil
    shutil.copy(d2l_run, tmp_path / "good.h5")
    shutil.copy(os.path.join(SOURCE, "fuzz", "known", "results_reader", "hdf5-global-heap-bad-index.h5"),
                tmp_path / "bad.h5")
    with pytest.raises(attnlab.ResultsError, match=r"bad\.h5 is damaged"):
        attnlab.runs(str(tmp_path))


def test_bad_check_seconds(monkeypatch, d2l_run, tmp_path):
    import shutil
    copy = tmp_path / "copy.h5"
    shutil.copy(d2l_run, copy)
    monkeypatch.setenv("ATTNLAB_READ_CHECK_SECONDS", "0")
    with pytest.raises(attnlab.ResultsError, match="ATTNLAB_READ_CHECK_SECONDS='0'"):
        attnlab.load(copy)
