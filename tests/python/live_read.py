#!/usr/bin/env python3
"""Read a live run with h5py, as docs/RESULTS.md ("Reading a live run") tells users to.

    python tests/python/live_read.py --runner build/bin/runner --source-dir .

1. Trains the tiny corners experiment for 40 epochs and, while it runs, opens its results file
   with h5py over and over (`swmr=True` and plain, in turn), reading the status and the metric
   series. Every open that succeeds must show a whole number of epochs (train/loss, val/loss and
   epoch/index of equal length) and the run must be seen running at three or more epoch counts,
   then completed with all 40. An open that meets the writer mid-write fails with errno 11 and is
   retried, as the docs say.
2. Trains it again on the same path (--overwrite) while a reader keeps the first run's file open: that reader
   still reads the whole first run (the new run writes a new file). A second reader opens the new
   run once it has an epoch and keeps it open to the end, with ATTNLAB_RESULTS_LOCK_WAIT=0.3: the
   run must finish (completed, 40 epochs) and warn once that it writes beside a reader.
Prints OK and exits 0, or what went wrong and exits 1. Run by ctest as python.live_read.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import h5py

EPOCHS = 40


def status_of(f):
    s = f.attrs["status"]
    return s.decode() if isinstance(s, bytes) else str(s)


def rows(f, series):
    return len(f[f"metrics/{series}"]) if f"metrics/{series}" in f else 0


def start(args, path, env=None, extra=()):
    cmd = [args.runner, os.path.join(args.source_dir, "experiments/tests/tiny_corners.yaml"),
           f"trainer.max_epochs={EPOCHS}", "--results", path, *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})})


def poll_while_running(args, path, problems):
    run = start(args, path)
    seen, opened, refused = set(), 0, 0
    deadline = time.time() + 240
    final = None
    while time.time() < deadline:
        if not os.path.exists(path):
            time.sleep(0.005)
            continue
        try:
            with h5py.File(path, "r", swmr=(opened % 2 == 0)) as f:
                status = status_of(f)
                n = [rows(f, s) for s in ("train/loss", "val/loss", "epoch/index")]
            opened += 1
            if len(set(n)) != 1:
                problems.append(f"a read saw part of an epoch: train/loss, val/loss, epoch/index rows {n}")
            seen.add((status, n[0]))
            if status != "running":
                final = (status, n[0])
                break
        except OSError as e:
            if "errno = 11" not in str(e) and "file signature not found" not in str(e):
                problems.append(f"h5py could not open the live run: {e}")
                break
            refused += 1
        time.sleep(0.002)
    out, _ = run.communicate(timeout=240)
    if run.returncode != 0:
        problems.append(f"the run failed ({run.returncode}):\n{out}")
    running = sorted(n for s, n in seen if s == "running" and n > 0)
    if len(running) < 3:
        problems.append(f"saw the run running at only {len(running)} epoch counts: {sorted(seen)}")
    if final != ("completed", EPOCHS):
        problems.append(f"the last read saw {final}, expected ('completed', {EPOCHS})")
    if refused > opened:
        problems.append(f"h5py was refused more often ({refused}) than it opened the file ({opened})")
    print(f"live read: {opened} opens, {refused} refused mid-write, "
          f"running at {len(running)} epoch counts, then {final}")


def hold_open_through_a_run(args, path, problems):
    # A reader of the finished first run keeps it open while a new run takes the path: the new run
    # writes a new file there, and the reader goes on reading the old one, whole.
    old = h5py.File(path, "r", swmr=True)
    run = start(args, path, {"ATTNLAB_RESULTS_LOCK_WAIT": "0.3"}, ["--overwrite"])
    held = None
    deadline = time.time() + 240
    while held is None and time.time() < deadline and run.poll() is None:
        try:  # a second reader opens the new run once it has an epoch, and keeps it open
            f = h5py.File(path, "r", swmr=True)
            if status_of(f) == "running" and rows(f, "train/loss") > 0:
                held = f
            else:
                f.close()
        except OSError:
            pass
        time.sleep(0.002)
    out, _ = run.communicate(timeout=240)
    got_old = (status_of(old), rows(old, "train/loss"))
    old.close()
    if held is None:
        problems.append("never saw the second run running with an epoch written")
    else:
        held.close()
    if got_old != ("completed", EPOCHS):
        problems.append(f"the reader of the replaced file saw {got_old}, expected its whole run")
    if run.returncode != 0:
        problems.append(f"the run beside an open reader failed ({run.returncode}):\n{out}")
    warnings = out.count("is held open by a reader in another process")
    if held is not None and warnings != 1:
        problems.append(f"expected one warning about the open reader, found {warnings}:\n{out}")
    with h5py.File(path, "r") as f:
        got = (status_of(f), rows(f, "train/loss"))
    if got != ("completed", EPOCHS):
        problems.append(f"after the run beside an open reader the file holds {got}")
    print(f"beside an open reader: {got}, {warnings} warning; the replaced file's reader saw {got_old}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runner", required=True)
    ap.add_argument("--source-dir", required=True)
    args = ap.parse_args()
    problems = []
    with tempfile.TemporaryDirectory(prefix="attnlab-live-") as tmp:
        path = os.path.join(tmp, "live.h5")
        poll_while_running(args, path, problems)
        hold_open_through_a_run(args, path, problems)
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
