"""Groups a flat `perf report` into where the time goes.

  perf record -F 999 -o long.data -- <command with E epochs>
  perf record -F 999 -o short.data -- <the same command with 1 epoch>
  perf report -n -i long.data --sort dso,sym --stdio > long.txt    (same for short)
  python perf_summary.py long.txt [short.txt] [--title T]

With one report: % of the process's samples per category. With two: the categories of the long
run minus the short run's, i.e. where the steady epochs' time goes (startup, loading and the
warm-up epoch cancel). The first matching rule wins."""
import argparse
import re
import sys

RULES = [
    ("GEMM (MKL sgemm, incl. packing)", r"mkl_blas|sgemm|gemm"),
    ("dropout masks (bernoulli_, serial mt19937)", r"bernoulli|random64|CPUGeneratorImpl|mt19937"),
    ("OpenMP wait/spin (libgomp)", r"libgomp"),
    ("copies (contiguous, transposes, casts)", r"direct_copy_kernel|copy_impl|copy_kernel|\bcopy_\b"),
    ("softmax / fused attention kernels", r"softmax|flash|_sdp|scaled_dot"),
    ("layer norm", r"LayerNorm|RowwiseMoments"),
    ("element-wise ops and reductions", r"VectorizedLoop2d|cpu_kernel|reduce|Sleef|mkl_vml|threshold|addc|"
                                        r"masked_fill|outer_sum|where_kernel|index|_foreach"),
    ("Python interpreter and bindings", r"python3|libpython|_PyEval|PyObject|libtorch_python|pybind"),
    ("malloc / free", r"malloc|\bfree\b|cfree|_int_free|unlink_chunk|mkl_serv_allocate|memset|memmove|memcpy"),
    ("dispatcher, autograd engine, tensor bookkeeping",
     r"c10::|torch::autograd|at::TensorIterator|at::_ops|RecordFunction|intrusive_ptr|at::native::|"
     r"ThreadLocalState|DispatchStub|_Sp_counted|at::detail|at::internal|at::globalContext|libc10|"
     r"at::DimCounter|at::Tensor"),
    ("startup (loading, data preparation, config, HDF5)",
     r"ld-linux|libz\.|libzip|hdf5|yaml|jit::|attnlab::data|basic_string|libcrypto|\[unknown\]|libcu|libnv"),
    ("kernel (page faults, scheduling, syscalls)", r"\[k\]"),
]


def summarize(lines):
    """Samples per category from `perf report -n` lines ("pct%  samples  dso  [.] symbol")."""
    totals = {name: 0.0 for name, _ in RULES}
    totals["other"] = 0.0
    for line in lines:
        m = re.match(r"\s*([\d.]+)%\s+(\d+)\s+(.*)", line)
        if not m or line.lstrip().startswith("#"):
            continue
        pct, rest = float(m.group(2)), m.group(3)
        for name, pattern in RULES:
            if re.search(pattern, rest):
                totals[name] += pct
                break
        else:
            totals["other"] += pct
    return totals


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("long", help="perf report -n --sort dso,sym --stdio output")
    p.add_argument("short", nargs="?", help="the same for a 1-epoch run, subtracted")
    p.add_argument("--title", default="samples")
    args = p.parse_args()
    with open(args.long) as f:
        totals = summarize(f)
    if args.short:
        with open(args.short) as f:
            for name, n in summarize(f).items():
                totals[name] -= n
    total = sum(totals.values()) or 1.0
    print(f"| where ({args.title}) | % |")
    print("|---|---|")
    for name, n in sorted(totals.items(), key=lambda kv: -kv[1]):
        if abs(100 * n / total) >= 0.1:
            print(f"| {name} | {100 * n / total:.1f} |")
    print(f"| (samples: {total:.0f}) | |")


if __name__ == "__main__":
    main()
