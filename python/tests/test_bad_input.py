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


LOOP = os.path.join(SOURCE, "fuzz", "known", "results_reader", "hdf5-global-heap-zero-free-space.h5")


def _processes_reading(path: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if path.encode() in f.read():
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


def _gone(path: str, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while _processes_reading(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_the_read_check_child_ends_with_its_caller(how, tmp_path):
    """Ctrl-C in the notebook (SIGINT: KeyboardInterrupt in attnlab.load) or a kernel killed outright
    while the child loops in HDF5: the child must not spin on, re-parented to init."""
    import shutil
    import signal
    import subprocess
    import sys
    loop = str(tmp_path / f"loop-{how}.h5")
    shutil.copy(LOOP, loop)
    env = dict(os.environ, ATTNLAB_READ_CHECK_SECONDS="600")
    caller = subprocess.Popen([sys.executable, "-c", "import sys, attnlab; attnlab.load(sys.argv[1])", loop], env=env,
                              stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(_processes_reading(loop)) < 2:  # the caller and its child
        assert time.monotonic() < deadline, "the read check did not start"
        assert caller.poll() is None, caller.stderr.read()
        time.sleep(0.1)
    time.sleep(1)  # the child is inside HDF5's loop
    caller.send_signal(getattr(signal, how))
    caller.wait(timeout=30)
    err = caller.stderr.read().decode()
    caller.stderr.close()
    if how == "SIGINT":
        assert "KeyboardInterrupt" in err, err
    assert _gone(loop), f"still running: {_processes_reading(loop)}"


def test_the_read_check_child_keeps_its_own_time_limit(tmp_path):
    """The child's CPU-time limit ends it even when no caller watches the clock."""
    import json
    import signal
    import subprocess
    import sys
    from attnlab import _check
    child = subprocess.Popen([sys.executable, "-c", _check._CHILD, LOOP], stdout=subprocess.PIPE,
                             env=dict(os.environ, ATTNLAB_READ_CHECK_PARENT=str(os.getpid()),
                                      ATTNLAB_READ_CHECK_LIMITS=json.dumps([2])))
    started = time.monotonic()
    code = child.wait(timeout=60)
    child.stdout.close()
    assert code == -signal.SIGXCPU
    assert time.monotonic() - started < 30


def test_a_damaged_file_in_a_folder(tmp_path, d2l_run, monkeypatch):
    monkeypatch.setenv("ATTNLAB_READ_CHECK_SECONDS", "5")
    import shutil
    shutil.copy(d2l_run, tmp_path / "good.h5")
    shutil.copy(os.path.join(SOURCE, "fuzz", "known", "results_reader", "hdf5-global-heap-bad-index.h5"),
                tmp_path / "bad.h5")
    truncated = tmp_path / "truncated.h5"
    truncated.write_bytes((tmp_path / "good.h5").read_bytes()[:5000])
    with pytest.warns(UserWarning, match=r"2 of 3 results files could not be read"):
        table = attnlab.runs(str(tmp_path))
    assert list(table["name"]) == ["bad", "good", "truncated"]
    assert list(table["status"]) == ["unreadable", "completed", "unreadable"]
    assert "bad.h5 is damaged" in table["error"].iloc[0]
    assert "truncated.h5" in table["error"].iloc[2]
    assert table["error"].isna().iloc[1]
    assert "error" not in table.config_keys and "error" not in table.differing
    assert table.run(1).status == "completed"
    with pytest.raises(attnlab.ResultsError, match=r"bad\.h5 is damaged"):
        table.run(0)
    with pytest.raises(attnlab.ResultsError, match=r"bad\.h5 is damaged"):
        attnlab.runs(str(tmp_path), strict=True)


def test_bad_check_seconds(monkeypatch, d2l_run, tmp_path):
    import shutil
    copy = tmp_path / "copy.h5"
    shutil.copy(d2l_run, copy)
    monkeypatch.setenv("ATTNLAB_READ_CHECK_SECONDS", "0")
    with pytest.raises(attnlab.ResultsError, match="ATTNLAB_READ_CHECK_SECONDS='0'"):
        attnlab.load(copy)


def test_arguments_of_the_wrong_type_name_the_argument(d2l_run, tmp_path, monkeypatch):
    """TypeError or ValueError naming the argument and what it takes, before anything starts."""
    import matplotlib
    matplotlib.use("Agg")
    monkeypatch.setenv("ATTNLAB_RUNNER", "/bin/false")  # nothing may reach the runner
    exp = os.path.join(SOURCE, "experiments", "tests", "tiny_corners.yaml")
    with pytest.raises(TypeError, match=r"overrides must be a dict .* got the string 'trainer.max_epochs=1' "
                                        r"\(put it in a list: \['trainer.max_epochs=1'\]\)"):
        attnlab.run(exp, "trainer.max_epochs=1")
    with pytest.raises(TypeError, match=r"overrides: each item must be a 'key=value' string; got 5"):
        attnlab.run(exp, [5])
    with pytest.raises(TypeError, match=r"overrides: a key must be a 'key.path' string; got 1"):
        attnlab.run(exp, {1: 2})
    with pytest.raises(TypeError, match=r"experiment must be a path \(str or os.PathLike\); got int 3"):
        attnlab.run(3)
    with pytest.raises(TypeError, match=r"results must be a path .* got list"):
        attnlab.run(exp, results=["a.h5"])
    with pytest.raises(TypeError, match=r"axes must be a dict of key -> values .* got list \['seed'\]"):
        attnlab.sweep(exp, axes=["seed"])
    with pytest.raises(TypeError, match=r"axes\['seed'\] must be a list of values or a string .* got int 3"):
        attnlab.sweep(exp, axes={"seed": 3})
    with pytest.raises(ValueError, match=r"jobs must be a whole number of at least 1; got 0"):
        attnlab.sweep(exp, axes={"seed": [0, 1]}, jobs=0)
    with pytest.raises(TypeError, match=r"source must be a folder or results file .* got int 123"):
        attnlab.runs(123)
    with pytest.raises(TypeError, match=r"source must be a folder or results file .* got list \[1\]"):
        attnlab.runs([1])
    att = attnlab.load(d2l_run).attention()
    with pytest.raises(TypeError, match=r"layer must be a whole number \(layers are numbered from 1: \[1, 2\]\); "
                                        r"got str '1'"):
        att.weights("encoder_self", layer="1")
    with pytest.raises(TypeError, match=r"heads must be a list of head numbers \(from 1\), e.g. heads=\[2\]; got int 2"):
        att.show("encoder_self", heads=2)
    assert len([a for a in att.show("encoder_self", layer=1, heads=[2]).axes if a.images]) == 1
