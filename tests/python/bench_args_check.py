"""bench/run's argument checks: a bad value is one clear error naming the option, exit 2, and no
results file; nothing is run."""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "bench", "python", "bench.py")

CASES = [
    (["--only", "transformer_d2l017", "nosuch"], "--only nosuch: no workload's peer or experiment contains it"),
    (["--reps", "0"], "--reps must be at least 1, found 0"),
    (["--threads", "-2"], "--threads must be at least 1, found -2"),
    (["--epoch-scale", "0"], "--epoch-scale must be above 0, found 0.0"),
    (["--ddp-epochs", "0"], "--ddp-epochs must be at least 1, found 0"),
    (["--threads", "x"], "argument --threads: invalid int value: 'x'"),
]

failures = 0
with tempfile.TemporaryDirectory() as out:
    for extra, expected in CASES:
        r = subprocess.run([sys.executable, BENCH, "--runner", "/nonexistent/runner", "--out-dir", out, *extra],
                           capture_output=True, text=True, timeout=120)
        ok = (r.returncode == 2 and expected in r.stderr and "Traceback" not in r.stderr
              and len(r.stderr.strip().splitlines()) == 1)  # the error alone, no usage block first
        if not ok:
            failures += 1
            print(f"FAIL {extra}: exit {r.returncode}, stderr:\n{r.stderr}")
        else:
            print(f"ok   {extra}: {r.stderr.strip().splitlines()[-1]}")
    if os.listdir(out):
        failures += 1
        print(f"FAIL: files written: {os.listdir(out)}")
# bench/run itself: an option without its value.
for option in ("--runner", "--omp-wait-policy"):
    r = subprocess.run([os.path.join(ROOT, "bench", "run"), option], capture_output=True, text=True, timeout=120)
    expected = f"bench/run: {option} needs a value (bench/run --help)\n"
    if r.returncode != 2 or r.stderr != expected:
        failures += 1
        print(f"FAIL bench/run {option}: exit {r.returncode}, stderr:\n{r.stderr}")
    else:
        print(f"ok   bench/run {option}: {r.stderr.strip()}")
sys.exit(1 if failures else 0)
