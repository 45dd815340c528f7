"""bench/run's driver: attnlab's runner and the Python peers side by side, A/B alternating.

For each workload and repetition it runs both sides as child processes with the same experiment
file and the same overrides (epochs, seed = experiment seed + repetition, threads, validation and
evaluation off), reads attnlab's per-epoch seconds and losses from its results file and the
peer's from its JSON lines, and measures each child's peak RSS and CPU time with wait4(2).
Then: a matmul micro-benchmark, achieved FLOP/s of the transformer steps, the cost of evaluation
and attention recording, `runner plugins` wall time. Writes bench/results/<date>-<HHMM>-<host>.{md,csv}."""
import argparse
import csv
import datetime
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import config  # noqa: E402
import ddp  # noqa: E402
import flops  # noqa: E402
import fra_eng  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
PEER = os.path.join(HERE, "peer.py")


class Workload:
    def __init__(self, name, experiment, peer, epochs, overrides=(), steps_per_epoch=None):
        self.name, self.experiment, self.peer, self.epochs = name, experiment, peer, epochs
        self.overrides = list(overrides)  # extra key=value for both sides
        # A trainer that counts optimizer steps (lm: max_steps, a report every eval_every steps):
        # one report interval of this many steps is the bench's "epoch".
        self.steps_per_epoch = steps_per_epoch

    def length(self, epochs):
        """The overrides that make a run `epochs` epochs (report intervals) long."""
        if self.steps_per_epoch:
            return [f"trainer.max_steps={epochs * self.steps_per_epoch}", f"trainer.eval_every={self.steps_per_epoch}"]
        return [f"trainer.max_epochs={epochs}"]

    def run_overrides(self, epochs, seed):
        return [*self.length(epochs), f"seed={seed}", "evaluate={}", *self.overrides]


# Validation and evaluation are switched off for the timed runs (only train steps are timed).
WORKLOADS = [
    Workload("seed000 transformer (H 256)", "experiments/transformer_fra_eng.yaml", "transformer_d2l103", 6,
             ["trainer.validate=false"]),
    Workload("d2l 0.17 transformer (H 32)", "experiments/transformer_fra_eng_d2l017.yaml", "transformer_d2l017", 20),
    Workload("d2l 0.17 Bahdanau GRU (H 32)", "experiments/bahdanau_fra_eng.yaml", "bahdanau_d2l017", 20),
    Workload("corners norm-first (d 6)", "experiments/corners_norm_first.yaml", "corners", 20,
             ["trainer.validate=false", "trainer.attention_samples=0"]),
    Workload("Multi30K Transformer (3+3, H 256), 2000 pairs", "experiments/transformer_multi30k_de_en.yaml",
             "transformer_multi30k", 3, ["trainer.validate=false", "dataset.num_train=2000"]),
    # The first steps of the experiment's 2000-step run (its cosine schedule: total_steps fixed at
    # 2000 whatever max_steps), a report every 25 steps; no validation, no checkpoints.
    Workload("character GPT (4 blocks, H 128), 25-step intervals", "experiments/gpt_char.yaml", "gpt_char", 4,
             ["trainer.validate=false", "trainer.checkpoints=false", "trainer.schedule.total_steps=2000"],
             steps_per_epoch=25),
]


def run_child(cmd, log, env=None):
    """Runs cmd (stdout+stderr to log); returns (exit code, wall s, peak RSS KiB, CPU s)."""
    with open(log, "w") as out:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, wall, ru.ru_maxrss, ru.ru_utime + ru.ru_stime


def tail(path, n=3):
    with open(path, errors="replace") as f:
        return " | ".join(line.strip() for line in f.readlines()[-n:])


class Bench:
    def __init__(self, args):
        self.a = args
        self.tmp = tempfile.mkdtemp(prefix="attnlab-bench-")
        self.lines = []  # markdown output

    def say(self, text=""):
        print(text, flush=True)
        self.lines.append(text)

    # ------------------------------------------------------------------------------ one run each
    def run_attnlab(self, w, overrides, tag):
        h5 = os.path.join(self.tmp, f"{tag}.h5")
        # --overwrite: the bench's own scratch folder, where two workloads of one peer share a tag.
        cmd = [self.a.runner, w.experiment, *overrides, f"threads={self.a.threads}", f"device={self.a.device}", "-q",
               "--results", h5, "--overwrite"]
        rc, wall, rss, cpu = run_child(cmd, h5 + ".log")
        if rc != 0:
            raise RuntimeError(f"runner exit {rc}: {tail(h5 + '.log')}")
        with h5py.File(h5, "r") as f:
            train = f["metrics/train"]
            seconds = [float(x) for x in train["seconds"][()]]
            loss = [float(x) for x in train["loss"][()]]
            tps = [float(x) for x in train["tokens_per_s"][()]] if "tokens_per_s" in train else None
        tokens = [t * s for t, s in zip(tps, seconds)] if tps else None
        return {"seconds": seconds, "loss": loss, "tokens": tokens, "wall": wall, "rss": rss, "cpu": cpu}

    def graph_attrs(self, tag):
        with h5py.File(os.path.join(self.tmp, f"{tag}.h5"), "r") as f:
            return {k: (f.attrs[k].item() if hasattr(f.attrs[k], "item") else f.attrs[k])
                    for k in f.attrs if str(k).startswith("cuda_graph")}

    def peer_env(self):
        """--peer-mkl-override: the peer's MKL gets the runner's answer to its CPU-vendor check
        (framework/src/cli/mkl_cpu.cpp) through LD_PRELOAD, so both sides run the same GEMM kernels."""
        if not self.a.peer_mkl_override:
            return None
        lib = os.path.join(self.tmp, "libmkl_cpu.so")
        if not os.path.exists(lib):
            subprocess.run(["g++", "-shared", "-fPIC", "-O2", "-o", lib,
                            os.path.join(ROOT, "framework", "src", "cli", "mkl_cpu.cpp")], check=True)
        return {**os.environ, "LD_PRELOAD": lib}

    def run_peer(self, w, overrides, tag, extra=()):
        log = os.path.join(self.tmp, f"{tag}.jsonl")
        cmd = [self.a.python, PEER, "run", w.peer, w.experiment, *overrides, "--threads", str(self.a.threads),
               "--device", self.a.device, "--runner", self.a.runner, *extra]
        rc, wall, rss, cpu = run_child(cmd, log, self.peer_env())
        if rc != 0:
            raise RuntimeError(f"python peer exit {rc}: {tail(log)}")
        epochs = []
        with open(log) as f:
            for line in f:
                if line.startswith("{") and '"epoch"' in line:
                    epochs.append(json.loads(line))
        return {"seconds": [e["train_seconds"] for e in epochs], "loss": [e["train_loss"] for e in epochs],
                "tokens": [e["tokens"] for e in epochs], "wall": wall, "rss": rss, "cpu": cpu}

    # ------------------------------------------------------------------------------- workloads
    def workload(self, w):
        row = {"workload": w.name, "experiment": w.experiment}
        if not os.path.isfile(os.path.join(ROOT, w.experiment)):
            row["status"] = "not yet (no experiment file)"
            return row
        cfg = config.load_experiment(os.path.join(ROOT, w.experiment))
        epochs = max(2, round(w.epochs * self.a.epoch_scale))
        sides = ["attnlab", "python"] + ([] if self.a.skip_compile else ["compile"])
        runs = {side: [] for side in sides}
        for rep in range(self.a.reps):
            seed = cfg.get('seed', 0) + rep
            ov = w.run_overrides(epochs, seed)
            order = sides[rep % len(sides):] + sides[:rep % len(sides)]  # rotating: each side first in turn
            for side in order:
                tag = f"{w.peer}-{side}-{rep}"
                if side == "attnlab":
                    run = self.run_attnlab
                else:  # the peer, eager or under torch.compile (bench/python/peer.py --compile)
                    def run(w, ov, tag, extra=["--compile"] if side == "compile" else []):
                        return self.run_peer(w, ov, tag, extra)
                try:
                    r = run(w, ov, tag)
                    # CPU time per steady epoch, robust to load: (CPU of this run - CPU of a
                    # 1-epoch run) / (epochs - 1); startup, the warm-up epoch and compilation cancel.
                    short = run(w, w.run_overrides(1, seed), tag + "-short")
                except RuntimeError as e:
                    if side == "compile":  # the peer's compiler failing is the peer's result, not ours
                        row["compile_status"] = f"failed: {e}"[:300]
                        print(f"  {w.name} compile: FAILED {e}", flush=True)
                        sides.remove("compile")
                        runs.pop("compile")
                        continue
                    row["status"] = f"failed: {side}: {e}"
                    return row
                r["cpu_per_epoch"] = (r["cpu"] - short["cpu"]) / (epochs - 1)
                runs[side].append(r)
                print(f"  {w.name} rep {rep} {side}: epochs {[round(s, 3) for s in r['seconds']]} s, "
                      f"final loss {r['loss'][-1]:.4f}, wall {r['wall']:.1f} s", flush=True)
        for side, rs in runs.items():
            steady = [s for r in rs for s in r["seconds"][1:]]  # skip each run's warm-up epoch
            tokens = rs[0]["tokens"][1] if rs[0]["tokens"] else runs["python"][0]["tokens"][1]
            finals = [r["loss"][-1] for r in rs]
            row[f"{side}_epoch_s"] = statistics.median(steady)
            row[f"{side}_epoch_s_min"] = min(steady)
            row[f"{side}_tokens_per_s"] = tokens / row[f"{side}_epoch_s"]
            row[f"{side}_final_loss"] = statistics.median(finals)
            row[f"{side}_final_loss_sd"] = statistics.stdev(finals) if len(finals) > 1 else 0.0
            row[f"{side}_peak_rss_mib"] = max(r["rss"] for r in rs) / 1024
            row[f"{side}_cpu_s"] = statistics.median(r["cpu"] for r in rs)
            row[f"{side}_cpu_epoch_s"] = statistics.median(r["cpu_per_epoch"] for r in rs)
        row["ratio"] = row["python_epoch_s"] / row["attnlab_epoch_s"]
        row["cpu_ratio"] = row["python_cpu_epoch_s"] / row["attnlab_cpu_epoch_s"]
        if "compile" in runs:
            # Compilation happens in the first epoch (and again for a new shape, e.g. a last short
            # batch, which is why epoch 2 can be slow too): the first epoch beyond a steady one.
            row["compile_ratio"] = row["compile_epoch_s"] / row["attnlab_epoch_s"]
            row["compile_seconds"] = statistics.median(r["seconds"][0] - row["compile_epoch_s"] for r in runs["compile"])
        # The peers' final losses against ours: "ok" within max(5%, 3 sd of either side's repetitions).
        for side, key in (("python", "loss_check"), ("compile", "compile_loss_check")):
            if side not in runs:
                continue
            la, lp = row["attnlab_final_loss"], row[f"{side}_final_loss"]
            tol = max(0.05 * abs(la + lp) / 2, 3 * max(row["attnlab_final_loss_sd"], row[f"{side}_final_loss_sd"]))
            row[key] = "ok" if abs(la - lp) <= tol else f"CHECK (|diff| {abs(la - lp):.3f} > {tol:.3f})"
        row["epochs"], row["reps"], row["status"] = epochs, self.a.reps, "ok"
        fl = self.flops_of(cfg, w)
        if fl:
            row["train_flops_per_epoch"], row["train_flops_per_step"] = fl
            for side in ("attnlab", "python"):
                row[f"{side}_gflops"] = fl[0] / row[f"{side}_epoch_s"] / 1e9
        return row

    # ------------------------------------------------------------------------ --graphs (issue 18)
    GRAPH_VARIANTS = [("attnlab eager", "attnlab", ["trainer.cuda_graphs=off"], []),
                      ("attnlab graphs", "attnlab", ["trainer.cuda_graphs=on"], []),
                      ("python eager", "python", [], []),
                      ("python compile", "python", [], ["--compile"])]

    def graphs_workload(self, w, precision):
        """One workload at one precision: attnlab eager and graphed, the Python peer eager and
        torch.compile(mode="reduce-overhead"), A/B/C/D rotating over the reps."""
        cfg = config.load_experiment(os.path.join(ROOT, w.experiment))
        epochs = max(3, round(w.epochs * self.a.epoch_scale))
        runs = {name: [] for name, *_ in self.GRAPH_VARIANTS}
        row = {"workload": w.name, "precision": precision, "epochs": epochs, "reps": self.a.reps}
        for rep in range(self.a.reps):
            ov = w.run_overrides(epochs, cfg.get('seed', 0) + rep)
            order = self.GRAPH_VARIANTS[rep % 4:] + self.GRAPH_VARIANTS[:rep % 4]
            for name, side, side_ov, extra in order:
                if self.a.skip_compile and extra:
                    continue
                tag = f"{w.peer}-{name.replace(' ', '_')}-{precision}-{rep}"
                try:
                    if side == "attnlab":
                        r = self.run_attnlab(w, [*ov, *side_ov, f"precision={precision}"], tag)
                        r["attrs"] = self.graph_attrs(tag)
                    else:
                        r = self.run_peer(w, ov, tag, ["--precision", precision, *extra])
                except RuntimeError as e:
                    row[f"{name} status"] = f"failed: {e}"[:300]
                    print(f"  {w.name} {precision} {name}: FAILED {e}", flush=True)
                    continue
                runs[name].append(r)
                print(f"  {w.name} {precision} rep {rep} {name}: epochs {[round(x, 4) for x in r['seconds']]} s, "
                      f"final loss {r['loss'][-1]:.4f}, wall {r['wall']:.1f} s", flush=True)
        for name, rs in runs.items():
            if not rs:
                continue
            steady = [x for r in rs for x in r["seconds"][1:]]  # each run's first epoch: warm-up, capture, compile
            row[f"{name} epoch s"] = statistics.median(steady)
            row[f"{name} final loss"] = statistics.median(r["loss"][-1] for r in rs)
            row[f"{name} peak RSS MiB"] = max(r["rss"] for r in rs) / 1024
            if rs[0].get("attrs"):
                row[f"{name} graphs"] = ", ".join(f"{k.replace('cuda_graph_', '')} {v}" for k, v in
                                                 sorted(rs[0]["attrs"].items()) if k != "cuda_graphs")
        return row

    def selected(self):
        """The workloads --only names (a substring of the peer or the experiment), else all."""
        return [w for w in WORKLOADS
                if not self.a.only or any(o in w.peer or o in w.experiment for o in self.a.only)]

    def graphs_main(self):
        m = self.machine()
        started = datetime.datetime.now()
        rows = []
        for w in self.selected():
            for precision in self.a.precisions:
                print(f"== {w.name} ({precision})", flush=True)
                rows.append(self.graphs_workload(w, precision))
        g = "attnlab graphs epoch s"
        self.say(f"# CUDA graphs: attnlab vs PyTorch eager and torch.compile, {started:%Y-%m-%d %H:%M}")
        self.say()
        self.say(f"- machine: {m['host']}, {m['cpu']}, {m['cpus']} CPUs; device {self.a.device}: {m['gpu']}")
        self.say(f"- versions: torch {m['torch']} (both sides), attnlab {m['attnlab_commit']}, Python {m['python']}")
        self.say(f"- {self.a.reps} repetition(s), the four variants rotating; median epoch time over all epochs but "
                 "each run's first (warm-up: attnlab's eager first step and graph captures, torch.compile's "
                 "compilation and its CUDA graph recording); validation and evaluation off")
        self.say(f"- command: bench/run {' '.join(self.a.argv)}")
        self.say()
        self.say("| workload | precision | epochs x reps | attnlab eager s | attnlab graphs s | python eager s | "
                 "python compile s | graphs vs eager (ours) | **vs python eager** | **vs python compile** | "
                 "final loss: ours eager / graphs / py eager / py compile | graphs |")
        self.say("|---|---|---|---|---|---|---|---|---|---|---|---|")

        def f(r, k, fmt="{:.4f}"):
            return fmt.format(r[k]) if k in r else "-"

        def ratio(r, a):
            return f"{r[a] / r[g]:.2f}x" if a in r and g in r else "-"
        for r in rows:
            losses = " / ".join(f(r, f"{n} final loss") for n, *_ in self.GRAPH_VARIANTS)
            failed = "; ".join(f"{k}: {v}" for k, v in r.items() if k.endswith("status"))
            self.say(f"| {r['workload']} | {r['precision']} | {r['epochs']} x {r['reps']} | "
                     f"{f(r, 'attnlab eager epoch s')} | {f(r, g)} | {f(r, 'python eager epoch s')} | "
                     f"{f(r, 'python compile epoch s')} | {ratio(r, 'attnlab eager epoch s')} | "
                     f"{ratio(r, 'python eager epoch s')} | {ratio(r, 'python compile epoch s')} | {losses} | "
                     f"{r.get('attnlab graphs graphs', '-')}{' ' + failed if failed else ''} |")
        self.say()
        self.write(rows, m, started, suffix="-cuda-graphs")

    def op_counts(self, w, row):
        """ATen ops, top-level ATen ops and autograd nodes per training step, both sides: the second
        epoch of a 2-epoch run (attnlab: ATTNLAB_OP_COUNTS; the peer: --op-counts, the same rules),
        divided by the peer's steps in that epoch (the same batches on both sides)."""
        cfg = config.load_experiment(os.path.join(ROOT, w.experiment))
        ov = w.run_overrides(2, cfg.get('seed', 0))
        counts = {}
        for side in ("attnlab", "python"):
            path = os.path.join(self.tmp, f"{w.peer}-{side}-ops.jsonl")
            os.environ["ATTNLAB_OP_COUNTS"] = path
            try:
                if side == "attnlab":
                    self.run_attnlab(w, ov, f"{w.peer}-ops")
                else:
                    log = os.path.join(self.tmp, f"{w.peer}-python-ops.log")
                    cmd = [self.a.python, PEER, "run", w.peer, w.experiment, *ov, "--threads", str(self.a.threads),
                           "--device", self.a.device, "--runner", self.a.runner, "--op-counts", path]
                    rc, _, _, _ = run_child(cmd, log)
                    if rc != 0:
                        raise RuntimeError(f"python peer exit {rc}: {tail(log)}")
                    with open(log) as f:
                        reports = [json.loads(x) for x in f if x.startswith("{") and '"epoch"' in x]
                    steps = reports[-1]["steps"]
            finally:
                del os.environ["ATTNLAB_OP_COUNTS"]
            with open(path) as f:
                counts[side] = [json.loads(x) for x in f][-1]
        for side, c in counts.items():
            for k in ("aten_ops", "top_level_aten_ops", "backward_nodes"):
                row[f"{side}_{k}_per_step"] = c[k] / steps
            row[f"{side}_top_ops"] = " ".join(f"{n}:{k / steps:g}" for n, k in c["top"][:8])

    @staticmethod
    def flops_of(cfg, w=None):
        if w is not None and w.steps_per_epoch and cfg.get("model", {}).get("plugin") == "gpt":
            return flops.for_gpt(cfg, w.steps_per_epoch)
        if cfg.get("dataset", {}).get("plugin") != "fra_eng":
            return None
        data = fra_eng.FraEng(cfg["dataset"], os.path.join(ROOT, cfg.get("data_dir", "datasets")))
        return flops.for_experiment(cfg, data)

    # ------------------------------------------------------------------------------------- ddp
    def run_ddp(self, w, overrides, tag, processes):
        """One run of the runner, as one process or under torchrun; the rank-0 results file's
        epochs and distributed_* attributes."""
        h5 = os.path.join(self.tmp, f"{tag}.h5")
        threads = max(1, self.a.threads // processes)
        cmd = [self.a.runner, w.experiment, *overrides, f"threads={threads}", "device=cpu", "-q", "--results", h5]
        if processes > 1:
            torchrun = os.path.join(os.path.dirname(self.a.python), "torchrun")
            cmd = [torchrun, "--standalone", "--nnodes=1", f"--nproc_per_node={processes}", "--no-python", *cmd]
        rc, wall, rss, cpu = run_child(cmd, h5 + ".log")
        if rc != 0:
            raise RuntimeError(f"{'torchrun' if processes > 1 else 'runner'} exit {rc}: {tail(h5 + '.log')}")
        with h5py.File(h5, "r") as f:
            train = f["metrics/train"]
            r = {"seconds": [float(x) for x in train["seconds"][()]], "loss": [float(x) for x in train["loss"][()]],
                 "tokens_per_s": [float(x) for x in train["tokens_per_s"][()]], "wall": wall, "threads": threads,
                 "attrs": {k: (v.item() if hasattr(v, "item") else v) for k, v in f.attrs.items()
                           if str(k).startswith("distributed_")}}
        return r

    def ddp(self):
        """The `ddp` row: the seed-000 Transformer as 1 process and as 2 (equal global batch, equal
        cores), the all-reduce inside the steps and alone, and a projection (bench/python/ddp.py)."""
        w = WORKLOADS[0]
        cfg = config.load_experiment(os.path.join(ROOT, w.experiment))
        epochs = max(3, round(self.a.ddp_epochs * self.a.epoch_scale))
        runs = {1: [], 2: []}
        for rep in range(self.a.reps):
            ov = [f"trainer.max_epochs={epochs}", f"seed={cfg.get('seed', 0) + rep}", "evaluate={}", *w.overrides]
            for n in ([1, 2] if rep % 2 == 0 else [2, 1]):
                r = self.run_ddp(w, ov, f"ddp-{n}-{rep}", n)
                runs[n].append(r)
                print(f"  ddp rep {rep} {n} process(es): epochs {[round(s, 3) for s in r['seconds']]} s, final loss "
                      f"{r['loss'][-1]:.4f}", flush=True)
        row = {"epochs": epochs, "reps": self.a.reps}
        for n, rs in runs.items():
            steady = [s for r in rs for s in r["seconds"][1:]]
            row[f"epoch_s_{n}"] = statistics.median(steady)
            row[f"tokens_per_s_{n}"] = statistics.median(t for r in rs for t in r["tokens_per_s"][1:])
            row[f"final_loss_{n}"] = statistics.median(r["loss"][-1] for r in rs)
            row[f"threads_{n}"] = rs[0]["threads"]
        row["speedup"] = row["epoch_s_1"] / row["epoch_s_2"]
        a = runs[2][0]["attrs"]
        for k in ("distributed_backward_seconds", "distributed_all_reduce_seconds", "distributed_overlap_seconds"):
            row[k] = statistics.median(r["attrs"][k] for r in runs[2])
        row["gradient_mib"] = a["distributed_gradient_bytes"] / (1 << 20)
        row["buckets"] = a["distributed_buckets"]
        row["rows_per_rank"] = a["distributed_rows_per_rank"]
        row["steps_per_epoch"] = (a["distributed_steps_timed"] + 1) // epochs
        row["step_s_1"] = row["epoch_s_1"] / row["steps_per_epoch"]
        row["step_s_2"] = row["epoch_s_2"] / row["steps_per_epoch"]
        torchrun = os.path.join(os.path.dirname(self.a.python), "torchrun")
        out = subprocess.run([torchrun, "--standalone", "--nnodes=1", "--nproc_per_node=2",
                              os.path.join(HERE, "ddp.py"), "allreduce"], capture_output=True, text=True, cwd=ROOT)
        if out.returncode != 0:
            raise RuntimeError(f"all-reduce benchmark failed: {out.stderr[-500:]}")
        row["allreduce"] = next(json.loads(x) for x in out.stdout.splitlines() if x.startswith("{"))["allreduce"]
        row["s_per_mib"], row["latency_s"] = ddp.seconds_per_mib(row["allreduce"])
        return row

    def say_ddp(self, d):
        exposed = d["distributed_all_reduce_seconds"] - d["distributed_overlap_seconds"]
        exposed_fraction = exposed / d["distributed_all_reduce_seconds"] if d["distributed_all_reduce_seconds"] else 1
        self.say(f"## ddp: data-parallel under torchrun (seed000 Transformer, equal global batch, equal cores)")
        self.say()
        self.say("| setting | epochs x reps | epoch s | step s | tok/s | speed-up | final loss |")
        self.say("|---|---|---|---|---|---|---|")
        for n in (1, 2):
            who = "1 process" if n == 1 else f"2 processes (torchrun, Gloo), {d['rows_per_rank']} rows each"
            self.say(f"| {who} x {d[f'threads_{n}']} thread(s) | {d['epochs']} x {d['reps']} | {d[f'epoch_s_{n}']:.4f} "
                     f"| {d[f'step_s_{n}']:.4f} | {d[f'tokens_per_s_{n}']:.0f} | "
                     f"{'1.00' if n == 1 else format(d['speedup'], '.2f')} | {d[f'final_loss_{n}']:.4f} |")
        self.say()
        ar, ov = d["distributed_all_reduce_seconds"], d["distributed_overlap_seconds"]
        self.say(f"- all-reduce inside the 2-process steps (rank 0, PyTorch's DDP logger, median over reps): "
                 f"{1e3 * ar:.1f} ms per step for {d['gradient_mib']:.2f} MiB of fp32 gradients in {d['buckets']} "
                 f"bucket(s); {1e3 * ov:.1f} ms of it ({100 * ov / ar if ar else 0:.0f}%) while backward still ran "
                 f"({1e3 * d['distributed_backward_seconds']:.1f} ms); exposed {1e3 * exposed:.1f} ms = "
                 f"**{100 * exposed / d['step_s_2']:.1f}% of the 2-process step**")
        pts = ", ".join(f"{p['mib']:g} MiB {1e3 * p['seconds']:.2f} ms" for p in d["allreduce"])
        self.say(f"- Gloo all_reduce alone, 2 processes, fp32 (median of 7): {pts}; "
                 f"**{1e3 * d['s_per_mib']:.2f} ms per MiB** (16 -> 64 MiB) + {1e3 * d['latency_s']:.2f} ms latency (64 KiB) "
                 f"({1 / d['s_per_mib'] / 1024:.2f} GiB/s of gradient)")
        lines = []
        for n in (2, 4, 8):
            step, eff = ddp.project(d["step_s_1"], exposed_fraction, d["gradient_mib"], d["s_per_mib"],
                                    d["latency_s"], n)
            lines.append(f"{n} ranks: step {1e3 * step:.1f} ms, speed-up {d['step_s_1'] / step:.2f}, "
                         f"efficiency {100 * eff:.0f}%")
        self.say(f"- projection from this machine's 1-process step ({1e3 * d['step_s_1']:.1f} ms) and all-reduce rate, "
                 f"the exposed share measured at 2 ranks ({100 * exposed_fraction:.0f}% of the all-reduce), a ring "
                 f"all-reduce (2(n-1)/n of the gradient per link): " + "; ".join(lines)
                 + f" (measured at 2 ranks: speed-up {d['speedup']:.2f}; this VM's 2 cores are shared by both ranks, "
                 "so the projection assumes a core per rank)")
        if self.a.ddp_project_step:
            lines = []
            for n in (2, 4, 8):
                step, eff = ddp.project(self.a.ddp_project_step, exposed_fraction, d["gradient_mib"],
                                        d["s_per_mib"], d["latency_s"], n)
                lines.append(f"{n}: {1e3 * step:.2f} ms, efficiency {100 * eff:.0f}%")
            self.say(f"- the same projection for a device whose 1-process step takes "
                     f"{1e3 * self.a.ddp_project_step:.2f} ms (--ddp-project-step), with this machine's Gloo rate "
                     f"standing for the links (NCCL over NVLink is far faster, so this bounds communication from "
                     f"above): " + "; ".join(lines))
        self.say()

    # ---------------------------------------------------------------------------------- extras
    def matmul(self):
        out = subprocess.run([self.a.python, PEER, "matmul", "--threads", str(self.a.threads), "--device", self.a.device],
                             capture_output=True, text=True, check=True, cwd=ROOT)
        rows = json.loads(out.stdout)["matmul"]
        if self.a.device == "cpu":  # the same GEMMs with MKL's vendor check answered as the runner does
            self.a.peer_mkl_override, was = True, self.a.peer_mkl_override
            out = subprocess.run([self.a.python, PEER, "matmul", "--threads", str(self.a.threads), "--device", "cpu"],
                                 capture_output=True, text=True, check=True, cwd=ROOT, env=self.peer_env())
            self.a.peer_mkl_override = was
            rows += [{**x, "name": "MKL AMD-fast " + x["name"]} for x in json.loads(out.stdout)["matmul"]
                     if not x["name"].startswith("oneDNN")]
        return rows

    def overhead(self):
        """Evaluation and attention recording: whole-run wall time of the seed-000 config with
        evaluate as in the file, with evaluate.attention=[] and with evaluate={}."""
        w = WORKLOADS[0]
        variants = [("full evaluate (samples + attention)", []), ("evaluate.attention=[]", ["evaluate.attention=[]"]),
                    ("evaluate={}", ["evaluate={}"])]
        walls = {name: [] for name, _ in variants}
        cpus = {name: [] for name, _ in variants}
        outside = []
        epoch_s = []
        for rep in range(self.a.reps):
            for i, (name, ov) in (list(enumerate(variants)) if rep % 2 == 0 else list(enumerate(variants))[::-1]):
                tag = f"overhead-{rep}-{i}"
                r = self.run_attnlab(w, [f"trainer.max_epochs={self.a.overhead_epochs}", *ov], tag)
                walls[name].append(r["wall"])
                cpus[name].append(r["cpu"])
                if ov == ["evaluate={}"]:
                    with h5py.File(os.path.join(self.tmp, f"{tag}.h5"), "r") as f:
                        e = list(f["metrics/epoch/seconds"][()])
                    outside.append(r["wall"] - sum(e))
                    epoch_s.extend(e[1:])
        med = {k: statistics.median(v) for k, v in walls.items()}
        cpu = {k: statistics.median(v) for k, v in cpus.items()}
        return med, cpu, statistics.median(outside), statistics.median(epoch_s)

    def plugins_time(self):
        times = []
        for _ in range(5):
            rc, wall, _, _ = run_child([self.a.runner, "plugins"], os.path.join(self.tmp, "plugins.log"))
            if rc != 0:
                raise RuntimeError(f"runner plugins exit {rc}: {tail(os.path.join(self.tmp, 'plugins.log'))}")
            times.append(wall)
        return statistics.median(times), min(times)

    def profile(self, w):
        """perf over a whole run of each side (same epochs, 1 epoch warm-up included), grouped by
        perf_summary.py; plus the torch profiler's top ops for the Python peer (seed000 only)."""
        cfg = config.load_experiment(os.path.join(ROOT, w.experiment))
        epochs = max(2, round(w.epochs * self.a.epoch_scale))
        out = []
        for side in ("attnlab", "python"):
            reports = []
            for n in (epochs, 1):  # the 1-epoch run is subtracted: startup and warm-up cancel
                data = os.path.join(self.tmp, f"perf-{w.peer}-{side}-{n}.data")
                run_ov = w.run_overrides(n, cfg.get('seed', 0))
                if side == "attnlab":
                    cmd = [self.a.runner, w.experiment, *run_ov, f"threads={self.a.threads}", "-q", "--results",
                           data + ".h5"]
                else:
                    cmd = [self.a.python, PEER, "run", w.peer, w.experiment, *run_ov, "--threads", str(self.a.threads),
                           "--runner", self.a.runner]
                rc, _, _, _ = run_child(["perf", "record", "-F", "999", "-o", data, "--", *cmd], data + ".log")
                if rc != 0:
                    return [f"perf failed ({tail(data + '.log')})"]
                with open(data + ".txt", "w") as f:
                    subprocess.run(["perf", "report", "-n", "-i", data, "--sort", "dso,sym", "--stdio"], stdout=f,
                                   stderr=subprocess.DEVNULL)
                reports.append(data + ".txt")
            summary = subprocess.run([self.a.python, os.path.join(HERE, "perf_summary.py"), *reports, "--title",
                                      f"{side}, {w.name}, epochs 2..{epochs}, {self.a.threads} threads"],
                                     capture_output=True, text=True).stdout
            out += [summary, ""]
        if w.peer == "transformer_d2l103":
            table = os.path.join(self.tmp, "torch-profile.txt")
            subprocess.run([self.a.python, PEER, "profile", w.peer, w.experiment, "--threads", str(self.a.threads),
                            "--steps", "8", "--out", table], capture_output=True, check=True, cwd=ROOT)
            with open(table) as f:
                out += ["```", *[line.rstrip()[:150] for line in f.readlines()[:24]], "```", ""]
        return out

    # ---------------------------------------------------------------------------------- report
    def machine(self):
        model = cores = "?"
        try:
            for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
                if line.startswith("Model name:"):
                    model = line.split(":", 1)[1].strip()
                if line.startswith("CPU(s):"):
                    cores = line.split(":", 1)[1].strip()
        except OSError:
            pass
        git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, cwd=ROOT).stdout.strip()
        torch_v = subprocess.run([self.a.python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                                 text=True).stdout.strip()
        gpu = ""
        if self.a.device != "cpu":
            gpu = subprocess.run([self.a.python, "-c", "import torch; print(torch.cuda.get_device_name())"],
                                 capture_output=True, text=True).stdout.strip()
        return {"gpu": gpu, "host": socket.gethostname(), "cpu": model, "cpus": cores, "kernel": platform.release(),
                "torch": torch_v, "attnlab_commit": git + ("+dirty" if dirty else ""), "python": platform.python_version()}

    def main(self):
        m = self.machine()
        load0 = os.getloadavg()
        started = datetime.datetime.now()
        rows = []
        for w in self.selected():
            print(f"== {w.name}", flush=True)
            rows.append(self.workload(w))
            if not self.a.skip_op_counts and rows[-1].get("status") == "ok":
                self.op_counts(w, rows[-1])
        ddp_row = None
        if self.a.device == "cpu" and (not self.a.only or "ddp" in self.a.only):
            print("== ddp", flush=True)
            ddp_row = self.ddp()
        mm = self.matmul()
        overhead = self.overhead() if not self.a.skip_overhead else None
        plugins = self.plugins_time()
        profiles = [(w, self.profile(w)) for w in self.selected()] if self.a.profile and self.a.device == "cpu" else []
        load1 = os.getloadavg()

        self.say(f"# attnlab vs eager PyTorch, {started:%Y-%m-%d %H:%M}")
        self.say()
        self.say(f"- machine: {m['host']}, {m['cpu']}, {m['cpus']} CPUs, Linux {m['kernel']}"
                 + (f"; device {self.a.device}: {m['gpu']}" if self.a.device != "cpu" else "; device cpu"))
        self.say(f"- versions: torch {m['torch']} (both sides), attnlab {m['attnlab_commit']}, Python {m['python']}")
        self.say(f"- MKL's CPU-vendor check: attnlab answers it for AVX2 CPUs (framework/src/cli/mkl_cpu.cpp); the "
                 f"peer {'gets the same answer (--peer-mkl-override)' if self.a.peer_mkl_override else 'runs MKL as shipped'}")
        self.say(f"- threads: {self.a.threads} both sides, OMP_WAIT_POLICY {os.environ.get('OMP_WAIT_POLICY', 'unset')} "
                 f"({self.a.omp_wait_policy}); {self.a.reps} repetitions A/B alternating; median epoch time over all "
                 f"epochs but each run's first (warm-up)")
        self.say(f"- load average (1/5/15 min) at start {load0[0]:.2f}/{load0[1]:.2f}/{load0[2]:.2f}, "
                 f"at end {load1[0]:.2f}/{load1[1]:.2f}/{load1[2]:.2f} (on {os.cpu_count()} CPUs)")
        self.say(f"- command: bench/run {' '.join(self.a.argv)}")
        self.say()
        compiled = [r for r in rows if "compile_epoch_s" in r or "compile_status" in r]
        if compiled:
            self.say("## Against torch.compile (the peer compiled with inductor, default mode)")
            self.say()
            self.say("Steady epochs only (each run's first, where compilation happens, left out); the compile time is "
                     "that first epoch's excess over a steady one, per run.")
            self.say()
            self.say("| workload | attnlab epoch s | python eager s | python compiled s | **compiled / attnlab** | "
                     "eager / attnlab | compile time s | final loss attnlab / eager / compiled |")
            self.say("|---|---|---|---|---|---|---|---|")
            for r in compiled:
                if "compile_epoch_s" not in r:
                    self.say(f"| {r['workload']} | {r['compile_status']} |" + "  |" * 6)
                    continue
                self.say(f"| {r['workload']} | {r['attnlab_epoch_s']:.4f} | {r['python_epoch_s']:.4f} | "
                         f"{r['compile_epoch_s']:.4f} | **{r['compile_ratio']:.2f}** | {r['ratio']:.2f} | "
                         f"{r['compile_seconds']:.1f} | {r['attnlab_final_loss']:.4f} / {r['python_final_loss']:.4f} / "
                         f"{r['compile_final_loss']:.4f} ({r['compile_loss_check']}) |")
            self.say()
        if rows:
            self.say("| workload | epochs x reps | attnlab epoch s | python epoch s | ratio py/attnlab | attnlab CPU "
                     "s/epoch | python CPU s/epoch | CPU ratio | attnlab tok/s | python tok/s | final loss attnlab "
                     "| final loss python | losses | peak RSS attnlab MiB | peak RSS python MiB |")
            self.say("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
            for r in rows:
                if r["status"] != "ok":
                    self.say(f"| {r['workload']} | {r['status']} |" + "  |" * 13)
                    continue
                self.say(f"| {r['workload']} | {r['epochs']} x {r['reps']} | {r['attnlab_epoch_s']:.4f} | "
                         f"{r['python_epoch_s']:.4f} | **{r['ratio']:.2f}** | {r['attnlab_cpu_epoch_s']:.4f} | "
                         f"{r['python_cpu_epoch_s']:.4f} | {r['cpu_ratio']:.2f} | {r['attnlab_tokens_per_s']:.0f} | "
                         f"{r['python_tokens_per_s']:.0f} | {r['attnlab_final_loss']:.4f} | {r['python_final_loss']:.4f} | "
                         f"{r['loss_check']} | {r['attnlab_peak_rss_mib']:.0f} | {r['python_peak_rss_mib']:.0f} |")
        self.say()
        counted = [r for r in rows if "attnlab_aten_ops_per_step" in r]
        if counted:
            self.say("## ATen ops per training step (2nd epoch of a 2-epoch run; all / top-level / autograd nodes)")
            self.say()
            self.say("| workload | attnlab | python | ratio (all ops) | attnlab's most frequent |")
            self.say("|---|---|---|---|---|")
            for r in counted:
                a = [r[f"attnlab_{k}_per_step"] for k in ("aten_ops", "top_level_aten_ops", "backward_nodes")]
                p = [r[f"python_{k}_per_step"] for k in ("aten_ops", "top_level_aten_ops", "backward_nodes")]
                self.say(f"| {r['workload']} | {a[0]:.0f} / {a[1]:.0f} / {a[2]:.0f} | {p[0]:.0f} / {p[1]:.0f} / "
                         f"{p[2]:.0f} | {p[0] / a[0]:.2f} | {r['attnlab_top_ops']} |")
            self.say()
        if ddp_row:
            self.say_ddp(ddp_row)
        peak = mm[0]["gflops"]
        self.say(f"## FLOP/s ({self.a.device}, {self.a.threads} threads, fp32)")
        self.say()
        peak_cpu = mm[0]["gflops_per_cpu_s"]
        self.say("| GEMM (torch.mm / bmm) | GFLOP/s (wall) | GFLOP per CPU-second |")
        self.say("|---|---|---|")
        for x in mm:
            self.say(f"| {x['name']} | {x['gflops']:.1f} | {x['gflops_per_cpu_s']:.1f} |")
        self.say()
        for r in rows:
            if r.get("train_flops_per_epoch"):
                fl = r["train_flops_per_epoch"]
                self.say(f"- {r['workload']}: {r['train_flops_per_step'] / 1e9:.3f} GFLOP per full-batch training "
                         f"step, {fl / 1e9:.2f} GFLOP per epoch (formula in bench/README.md)")
                for side in ("attnlab", "python"):
                    per_cpu = fl / r[f"{side}_cpu_epoch_s"] / 1e9
                    self.say(f"  - {side}: {r[f'{side}_gflops']:.1f} GFLOP/s wall ({100 * r[f'{side}_gflops'] / peak:.0f}% "
                             f"of the {mm[0]['name']} GEMM's wall rate); {per_cpu:.1f} GFLOP per CPU-second "
                             f"({100 * per_cpu / peak_cpu:.0f}% of the GEMM's)")
        self.say()
        if overhead:
            med, cpu, outside, epoch_s = overhead
            full, no_att, no_eval = (med[k] for k in med)
            c_full, c_no_att, c_no_eval = (cpu[k] for k in cpu)
            est = 30 * epoch_s + outside
            self.say(f"## Evaluation and recording (seed000, {self.a.overhead_epochs}-epoch runs, whole-run wall, "
                     f"median of {self.a.reps})")
            self.say()
            self.say(f"- wall: full evaluate {full:.2f} s; evaluate.attention=[] {no_att:.2f} s; evaluate={{}} "
                     f"{no_eval:.2f} s")
            self.say(f"- CPU (user+sys): full evaluate {c_full:.2f} s; evaluate.attention=[] {c_no_att:.2f} s; "
                     f"evaluate={{}} {c_no_eval:.2f} s; attention recording {c_full - c_no_att:+.2f} CPU-s, whole "
                     f"evaluate phase {c_full - c_no_eval:+.2f} CPU-s")
            self.say(f"- attention recording: {full - no_att:+.2f} s per run = {100 * (full - no_att) / est:+.1f}% of "
                     f"a 30-epoch run (est. {est:.0f} s: 30 x {epoch_s:.2f} s epochs incl. validation + "
                     f"{outside:.2f} s outside epochs)")
            self.say(f"- the whole evaluate phase (4 translations + BLEU + attention): {full - no_eval:+.2f} s = "
                     f"{100 * (full - no_eval) / est:+.1f}% of that run")
            self.say(f"- outside the epochs with evaluate={{}} (startup, data, per-epoch metric writes, teardown): "
                     f"{outside:.2f} s")
            self.say()
        self.say(f"`runner plugins`: median {plugins[0]:.3f} s, min {plugins[1]:.3f} s over 5 runs (target <= 0.5 s)")
        for w, lines in profiles:
            self.say()
            self.say(f"## Profile: {w.name} (perf samples of the steady epochs: E-epoch run minus 1-epoch run)")
            self.say()
            for line in lines:
                self.say(line)
        self.write(rows + ([{"workload": "ddp", **{k: v for k, v in ddp_row.items() if k != "allreduce"}}]
                           if ddp_row else []), m, started)

    def write(self, rows, m, started, suffix=None):
        os.makedirs(self.a.out_dir, exist_ok=True)
        if suffix is None:
            suffix = "" if self.a.device == "cpu" else f"-{self.a.device}"
        stem = os.path.join(self.a.out_dir, f"{started:%Y-%m-%d-%H%M}-{m['host']}{suffix}")
        with open(stem + ".md", "w") as f:
            f.write("\n".join(self.lines) + "\n")
        keys = sorted({k for r in rows for k in r})
        with open(stem + ".csv", "w", newline="") as f:
            wr = csv.DictWriter(f, fieldnames=["date", "host", "cpu", "torch", "attnlab_commit", "threads", *keys])
            wr.writeheader()
            for r in rows:
                wr.writerow({"date": f"{started:%Y-%m-%d %H:%M}", "host": m["host"], "cpu": m["cpu"],
                             "torch": m["torch"], "attnlab_commit": m["attnlab_commit"], "threads": self.a.threads, **r})
        print(f"wrote {stem}.md and {stem}.csv (scratch: {self.tmp})")


class _OneLineErrors(argparse.ArgumentParser):
    """An argument error is one line (not the usage block first), exit 2, as the runner's are."""

    def error(self, message):
        self.exit(2, f"bench/run: {message} (bench/run --help)\n")


def main():
    p = _OneLineErrors(prog="bench/run", description=__doc__)
    p.add_argument("--runner", required=True)
    p.add_argument("--python", default=sys.executable, help="the venv python that runs the peers")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where both sides train")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--epoch-scale", type=float, default=1.0, help="multiply every workload's epoch count")
    p.add_argument("--overhead-epochs", type=int, default=2)
    p.add_argument("--skip-overhead", action="store_true")
    p.add_argument("--profile", action="store_true", help="perf both sides of every workload run")
    p.add_argument("--omp-wait-policy", default="inherit", help="recorded in the report (bench/run sets it)")
    p.add_argument("--only", nargs="*", help="substrings of workload peers/experiments to run")
    p.add_argument("--peer-mkl-override", action="store_true",
                   help="give the peer's MKL the runner's CPU-vendor answer too (LD_PRELOAD): the same GEMMs both sides")
    p.add_argument("--skip-op-counts", action="store_true", help="no ATen op counts per step")
    p.add_argument("--ddp-epochs", type=int, default=6, help="epochs of each run of the ddp row")
    p.add_argument("--ddp-project-step", type=float, help="seconds per 1-process step of a device to project to 8 ranks")
    p.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    p.add_argument("--graphs", action="store_true",
                   help="(with --device cuda) issue 18's table: attnlab eager and CUDA-graphed, the peer eager and "
                        "torch.compile(mode='reduce-overhead'), at each --precisions")
    p.add_argument("--precisions", nargs="*", default=["fp32"], choices=["fp32", "tf32", "bf16"])
    p.add_argument("--skip-compile", action="store_true",
                   help="leave out the torch.compile peer (on the CPU: inductor, default mode; --graphs: reduce-overhead)")
    args = p.parse_args()
    args.argv = sys.argv[1:]
    for name in ("threads", "reps", "overhead_epochs", "ddp_epochs"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1, found {getattr(args, name)}")
    if not args.epoch_scale > 0:
        p.error(f"--epoch-scale must be above 0, found {args.epoch_scale}")
    unknown = [o for o in args.only or [] if o != "ddp" and not any(o in w.peer or o in w.experiment for w in WORKLOADS)]
    if unknown:
        p.error(f"--only {' '.join(unknown)}: no workload's peer or experiment contains it (workloads: "
                f"{', '.join(w.peer for w in WORKLOADS)}, and ddp)")
    if args.graphs:
        if args.device != "cuda":
            p.error("--graphs needs --device cuda")
        Bench(args).graphs_main()
    else:
        Bench(args).main()


if __name__ == "__main__":
    main()
