"""The Python side of bench/run: train one workload in eager PyTorch, or time torch.mm, or profile.

  peer.py run <workload> <experiment.yaml> [key=value ...] --epochs N --threads T [--seed S]
  peer.py matmul --threads T
  peer.py profile <workload> <experiment.yaml> --threads T --steps N --out FILE

`run` prints one JSON object per epoch ({"epoch", "train_seconds", "train_loss", "tokens", ...})
and a final {"summary": ...} line with the peak RSS (getrusage, KiB). Workloads are registered in
WORKLOADS below: add a (data, build, fit) triple to benchmark another model."""
import argparse
import json
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import config  # noqa: E402
import corners  # noqa: E402
import d2l017  # noqa: E402
import d2l103  # noqa: E402
import gpt  # noqa: E402
import fra_eng  # noqa: E402
from exported import ExportedBatches  # noqa: E402


def fra_eng_data(cfg, args):
    return fra_eng.FraEng(cfg["dataset"], cfg.get("data_dir", "datasets"))


def corners_data(cfg, args):
    return corners.Corners(cfg["dataset"])


# name -> (make the data from the experiment, build the model, the training loop)
WORKLOADS = {
    "transformer_d2l103": (fra_eng_data, lambda cfg, data, a: d2l103.build(cfg, data, a.fused), d2l103.fit),
    "transformer_d2l017": (fra_eng_data, lambda cfg, data, a: d2l017.build_transformer(cfg, data, a.fused),
                           d2l017.fit),
    "bahdanau_d2l017": (fra_eng_data, lambda cfg, data, a: d2l017.build_bahdanau(cfg, data), d2l017.fit),
    "corners": (corners_data, lambda cfg, data, a: corners.build(cfg, data), corners.fit),
    # the seed-000 architecture at Multi30K's sizes (3 + 3 blocks, 8 heads, biases) on the runner's batches
    "transformer_multi30k": (ExportedBatches, lambda cfg, data, a: d2l103.build(cfg, data, a.fused), d2l103.fit),
    # nanoGPT's model at attnlab's gpt plugin settings, the lm trainer's steps, on the runner's batches
    "gpt_char": (gpt.data, lambda cfg, data, a: gpt.build(cfg, data), gpt.fit),
}


class OnDevice:
    """The data with its batches moved to a GPU the way a careful PyTorch user does it: pinned
    host memory, non-blocking copies (what attnlab's trainers do)."""

    def __init__(self, data, device):
        self.data, self.device = data, device

    def __getattr__(self, name):
        return getattr(self.data, name)

    def batches(self, *args, **kwargs):
        return [tuple(t.pin_memory().to(self.device, non_blocking=True) for t in b)
                for b in self.data.batches(*args, **kwargs)]


def peak_rss_kib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def setup(args):
    torch.set_num_threads(args.threads)
    cfg = config.load_experiment(args.experiment, args.overrides)
    seed = args.seed if args.seed is not None else cfg.get("seed", 0)
    torch.manual_seed(seed)
    make_data, build, fit = WORKLOADS[args.workload]
    data = make_data(cfg, args)
    model = build(cfg, data, args)
    if args.device != "cpu":
        model.to(args.device)
        data = OnDevice(data, torch.device(args.device))
    precision(args)
    if args.compile:  # what a Python user tries first: on a GPU, CUDA graphs of the compiled forward and
        # backward (reduce-overhead); on the CPU, inductor's generated C++ (reduce-overhead adds nothing there)
        model = torch.compile(model, mode="reduce-overhead" if args.device != "cpu" else "default")
    return cfg, seed, data, model, fit


def precision(args):
    """--precision as attnlab's `precision:` (attnlab/train/precision.hpp): fp32 = no TF32 anywhere
    (PyTorch's default lets cuDNN use it), tf32 = TF32 matmuls and cuDNN, bf16 = autocast to
    bfloat16, here switched on for the whole process (the fits' forward passes and losses; backward
    runs on autograd's threads, outside it), without autocast's cast cache, which would keep stale
    bf16 copies of the weights across optimizer steps."""
    tf32 = args.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    if args.precision == "bf16":
        dev = "cpu" if args.device == "cpu" else "cuda"
        torch.set_autocast_cache_enabled(False)
        torch.set_autocast_dtype(dev, torch.bfloat16)
        torch.set_autocast_enabled(dev, True)


class OpCounts:
    """--op-counts FILE: the ATen operators and autograd nodes of every epoch, counted from the
    profiler's RecordFunction events by the rules of attnlab's ATTNLAB_OP_COUNTS
    (framework/src/train/op_counts.cpp): `aten::` names, those with no aten op around them, and
    events of the backward-function scope. One JSON line per epoch, as attnlab writes."""

    def __init__(self, path):
        self.path = path
        open(path, "w").close()
        self.prof = None
        self.start()

    def start(self):
        self.prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        self.prof.start()

    def epoch(self, epoch):
        self.prof.stop()
        by_name, aten, top_level, backward = {}, 0, 0, 0
        for e in self.prof.events():
            if e.scope == 1:  # at::RecordScope::BACKWARD_FUNCTION
                backward += 1
                by_name[e.name] = by_name.get(e.name, 0) + 1
            elif e.name.startswith("aten::"):
                aten += 1
                by_name[e.name] = by_name.get(e.name, 0) + 1
                parent = e.cpu_parent
                while parent is not None and not parent.name.startswith("aten::"):
                    parent = parent.cpu_parent
                top_level += parent is None
        top = sorted(by_name.items(), key=lambda kv: -kv[1])[:25]
        with open(self.path, "a") as f:
            f.write(json.dumps({"epoch": epoch, "aten_ops": aten, "top_level_aten_ops": top_level,
                                "backward_nodes": backward, "top": top}) + "\n")
        self.start()

    def close(self):
        self.prof.stop()  # a profiler left running crashes the interpreter's exit


def cmd_run(args):
    start = time.perf_counter()
    cfg, seed, data, model, fit = setup(args)
    epochs = args.epochs or cfg["trainer"].get("max_epochs", 1)
    n_params = sum(p.numel() for p in model.parameters())
    counter = OpCounts(args.op_counts) if args.op_counts else None

    def on_epoch(r):
        if counter:
            counter.epoch(r["epoch"])
        print(json.dumps(r), flush=True)

    fit(model, data, cfg, epochs, seed, on_epoch)
    if counter:
        counter.close()
    print(json.dumps({"summary": {"peak_rss_kib": peak_rss_kib(), "parameters": n_params,
                                  "threads": torch.get_num_threads(), "torch": torch.__version__,
                                  "wall_seconds": time.perf_counter() - start}}), flush=True)


def cmd_matmul(args):
    """GFLOP/s of fp32 torch.mm (and one bmm) at the seed-000 step's GEMM sizes and a large square."""
    torch.set_num_threads(args.threads)
    shapes = [("square 2048", 2048, 2048, 2048, 1),
              ("proj 1152x256x256", 1152, 256, 256, 1),     # B*T tokens x H -> H
              ("ffn 1152x256x64", 1152, 256, 64, 1),        # H -> ffn_num_hiddens
              ("ffn 1152x64x256", 1152, 64, 256, 1),
              ("vocab 1152x256x214", 1152, 256, 214, 1),    # the decoder's dense layer (tgt vocab 214)
              ("attn bmm 512x(9x64x9)", 9, 64, 9, 512)]     # per head: queries x head dim x keys
    # The same fp32 GEMMs through oneDNN (torch's bundled mkldnn), layout conversions included:
    # on AMD CPUs MKL's sgemm takes its generic code path, oneDNN does not.
    dnnl = [("oneDNN " + name, m, k, n, 1) for name, m, k, n, batch in shapes[:2]]
    cuda = args.device != "cpu"
    if cuda:  # fp32 on the GPU (TF32 off, as both sides train), synchronised around each timing
        shapes, dnnl = [("square 8192", 8192, 8192, 8192, 1)] + shapes, []
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    results = []
    for name, m, k, n, batch in shapes + dnnl:
        a = torch.randn(batch, m, k, device=args.device) if batch > 1 else torch.randn(m, k, device=args.device)
        b = torch.randn(batch, k, n, device=args.device) if batch > 1 else torch.randn(k, n, device=args.device)
        op = torch.bmm if batch > 1 else torch.mm
        if name.startswith("oneDNN"):
            w = b.t().contiguous().to_mkldnn()  # [n, k]: mkldnn_linear computes a @ w^T
            op = lambda a, _: torch._C._nn.mkldnn_linear(a.to_mkldnn(), w).to_dense()  # noqa: E731
        for _ in range(3):
            op(a, b)
        sync()
        reps, t0, c0 = 0, time.perf_counter(), time.process_time()
        while time.perf_counter() - t0 < args.seconds:
            op(a, b)
            reps += 1
            if reps % 16 == 0:
                sync()
        sync()
        dt, cpu = (time.perf_counter() - t0) / reps, (time.process_time() - c0) / reps
        flop = 2.0 * m * k * n * batch
        results.append({"name": name, "m": m, "k": k, "n": n, "batch": batch, "seconds": dt, "cpu_seconds": cpu,
                        "gflops": flop / dt / 1e9, "gflops_per_cpu_s": flop / cpu / 1e9})
    print(json.dumps({"threads": torch.get_num_threads(), "matmul": results}))


def cmd_profile(args):
    """torch.profiler over the first --steps training steps (after one warm-up step)."""
    from torch.profiler import ProfilerActivity, profile
    cfg, seed, data, model, fit = setup(args)
    batches = data.batches("train", seed + 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.functional.cross_entropy

    def step(batch):
        src, src_len, tgt_in, tgt_out, _ = batch
        y = model(src, tgt_in, src_len)
        loss = loss_fn(y.reshape(-1, y.shape[-1]), tgt_out.reshape(-1), ignore_index=data.pad_id)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    model.train()
    step(batches[0])
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        for i in range(args.steps):
            step(batches[i % len(batches)])
        wall = time.perf_counter() - t0
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30)
    with open(args.out, "w") as f:
        f.write(f"# {args.workload}: {args.steps} steps, {wall:.3f} s under the profiler, "
                f"{torch.get_num_threads()} threads\n{table}\n")
    print(json.dumps({"profile": args.out, "steps": args.steps, "wall_seconds": wall}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("run", "profile"):
        s = sub.add_parser(name)
        s.add_argument("workload", choices=sorted(WORKLOADS))
        s.add_argument("experiment")
        s.add_argument("overrides", nargs="*", help="key.path=value, as the runner takes them")
        s.add_argument("--threads", type=int, default=torch.get_num_threads())
        s.add_argument("--seed", type=int, default=None, help="default: the experiment's seed")
        s.add_argument("--device", default="cpu", help="cpu or cuda (the model and batches go there)")
        s.add_argument("--runner", default=os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))), "build", "bin", "runner"), help="runner binary (for `runner batches`)")
        s.add_argument("--fused", action="store_true", help="F.scaled_dot_product_attention in dot-product attention")
        s.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16"], help="as attnlab's precision:")
        s.add_argument("--compile", action="store_true", help='torch.compile(model): mode "reduce-overhead" on a GPU, "default" on the CPU')
        s.add_argument("--epochs", type=int, default=0, help="(run) default: trainer.max_epochs")
        s.add_argument("--op-counts", help="(run) count each epoch's ATen ops into this JSON-lines file")
        s.add_argument("--steps", type=int, default=8, help="(profile) steps under the profiler")
        s.add_argument("--out", default="profile.txt", help="(profile) output table")
    m = sub.add_parser("matmul")
    m.add_argument("--threads", type=int, default=torch.get_num_threads())
    m.add_argument("--seconds", type=float, default=0.5, help="time per shape")
    m.add_argument("--device", default="cpu", help="cpu or cuda")
    args = p.parse_args()
    {"run": cmd_run, "matmul": cmd_matmul, "profile": cmd_profile}[args.cmd](args)


if __name__ == "__main__":
    main()
