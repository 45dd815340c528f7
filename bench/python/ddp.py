"""bench/run's `ddp` row: data-parallel training under torchrun against one process.

Three measurements on this machine, then a projection:
1. throughput: the same experiment file, the same global batch, as 1 process with T threads and
   as 2 processes (torchrun, Gloo) with T/2 threads each, so both use the same cores;
2. the all-reduce inside those steps, as PyTorch's DDP logger measures it on rank 0 (the runner
   records it in the results file: distributed_* attributes, docs/DISTRIBUTED.md);
3. the all-reduce alone: torch.distributed's Gloo all_reduce of 1 to 64 MiB between 2 processes
   (the Gloo compiled into the same libtorch the runner links), seconds per MiB;
4. a projection to 8 ranks from 1-3 (stated with its assumptions in the report).

`python ddp.py allreduce` is the worker of measurement 3 (run by torchrun)."""
import json
import os
import statistics
import sys
import time


def allreduce_worker():
    """Under torchrun: times all_reduce of several sizes; rank 0 prints one JSON line."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    out = []
    for mib in (1 / 16, 1, 4, 16, 64):
        t = torch.ones(int(mib * (1 << 20)) // 4)
        for _ in range(2):  # warm-up: connections, buffers
            dist.all_reduce(t)
        times = []
        for _ in range(7):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(t)
            times.append(time.perf_counter() - t0)
        out.append({"mib": mib, "seconds": statistics.median(times)})
    if dist.get_rank() == 0:
        print(json.dumps({"allreduce": out}), flush=True)
    dist.destroy_process_group()


def seconds_per_mib(points):
    """(seconds per MiB, latency): the slope between the two largest sizes (where bandwidth rules),
    and the time of the smallest (64 KiB, where latency rules)."""
    p = sorted(points, key=lambda q: q["mib"])
    slope = (p[-1]["seconds"] - p[-2]["seconds"]) / (p[-1]["mib"] - p[-2]["mib"])
    return slope, p[0]["seconds"]


def project(step_1, exposed_fraction, gradient_mib, per_mib_2, latency, n):
    """Step time and efficiency with n ranks at equal global batch.

    compute: one process's step divided by n (every rank does 1/n of the rows; the model is the
    same). all-reduce: a ring all-reduce moves 2(n-1)/n of the gradient through each rank's link,
    against 2(2-1)/2 = 1 at 2 ranks, so its time scales from the measured 2-rank rate by 2(n-1)/n,
    plus the measured latency per bucket round. Only the exposed part (not hidden by backward, as
    measured at 2 ranks) adds to the step."""
    compute = step_1 / n
    all_reduce = latency + per_mib_2 * gradient_mib * 2 * (n - 1) / n
    step = compute + exposed_fraction * all_reduce
    return step, step_1 / (n * step)


if __name__ == "__main__":
    if sys.argv[1:] == ["allreduce"]:
        allreduce_worker()
    else:
        sys.exit("usage: ddp.py allreduce (under torchrun)")
