#pragma once
// Data-parallel training across processes, launched by torchrun (c10d: a TCPStore rendezvous, a
// Gloo process group with NCCL for CUDA tensors, PyTorch's own DDP Reducer for bucketed gradient all-reduce overlapping
// backward). docs/DISTRIBUTED.md.
//
// A trainer that supports it (TrainContext::distributed set) trains on its rank's shard of every
// global batch (the batch a one-process run with the same seed would take), scales its loss so
// that the averaged gradients are the global batch's (loss_scale() for a mean token loss), calls
// prepare_for_backward() before backward(), reduces its metrics with sum(), agrees on stopping
// with should_stop(), and writes files only when writes_files(). The epoch loop
// (train/epoch_loop.hpp) does all of it for the trainers written on it.
#include <attnlab/data/dataset.hpp>
#include <attnlab/error.hpp>

#include <torch/types.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attnlab::train {

/// What torchrun (or a user) put in the environment: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
/// MASTER_PORT, and torchrun's TORCHELASTIC_USE_AGENT_STORE / TORCHELASTIC_RESTART_COUNT.
struct ATTNLAB_API DistributedEnv {
  int rank = 0, world_size = 1, local_rank = 0;
  std::string master_addr;
  int master_port = 0;
  bool agent_store = false;  // torchrun's agent runs the store: every worker is a client
  int restart_count = 0;
  /// Read and checked (a ConfigError naming the variable and what it holds when wrong); nullopt
  /// when WORLD_SIZE is not set: one process, as without torchrun.
  static std::optional<DistributedEnv> from_environment();
};

/// How the gradient all-reduce overlapped backward, as PyTorch's own DDP logger
/// (c10d::Logger) measures it on this rank: averages per measured step, in seconds.
struct AllReduceStats {
  int64_t steps = 0;           // steps measured (every step after the first)
  int64_t buckets = 0;         // gradient buckets (the first ~1 MiB, the rest ~25 MiB each)
  int64_t gradient_bytes = 0;  // bytes all-reduced per step
  double backward = 0;         // backward compute: first gradient hook -> last gradient ready
  double all_reduce = 0;       // first bucket's all-reduce launched -> every bucket reduced
  double overlap = 0;          // all-reduce time while backward was still computing
  /// The all-reduce time backward did not hide: all_reduce - overlap.
  double exposed() const { return all_reduce - overlap; }
};

class ATTNLAB_API Distributed {
 public:
  virtual ~Distributed() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  /// "gloo" (a CPU run), or "nccl" (a CUDA run: NCCL for the CUDA tensors, Gloo for the CPU ones).
  virtual std::string backend() const = 0;
  bool writes_files() const { return rank() == 0; }

  /// This rank's rows of a global batch: the rows are split into world_size contiguous parts as
  /// evenly as possible (the first parts one row longer). A rank whose part is empty (a batch with
  /// fewer rows than ranks) gets the batch's first row and a loss_scale of 0, so that it still
  /// takes part in the step's all-reduce.
  data::Batch shard(const data::Batch& global) const;
  /// What to multiply the sum of this rank's per-token losses by so that the all-reduced
  /// (averaged) gradients are those of the global batch's mean: world_size / global_tokens, 0 for
  /// an empty part.
  double loss_scale(const data::Batch& global) const;
  /// Rows [begin, end) of a batch of `rows` rows that are this rank's.
  std::pair<int64_t, int64_t> rows(int64_t rows) const;
  /// The most rows shard() has given this rank in one batch (its per-rank batch size).
  int64_t max_shard_rows() const { return max_shard_rows_; }

  /// Makes every rank's parameters and buffers rank 0's, then builds the reducer for
  /// `parameters` (all must take part in every step's backward). Call once before training.
  virtual void attach(const std::vector<torch::Tensor>& parameters, const std::vector<torch::Tensor>& buffers) = 0;
  /// Before backward(): the reducer's autograd hooks then all-reduce the gradients bucket by
  /// bucket while backward runs; after backward() every rank holds the averaged gradients.
  virtual void prepare_for_backward() = 0;
  /// Element-wise sums and maxima over the ranks (metrics, agreement checks).
  virtual std::vector<double> sum(const std::vector<double>& values) = 0;
  virtual std::vector<double> max(const std::vector<double>& values) = 0;
  /// Rank 0's `value` on every rank (e.g. the results path rank 0 chose).
  virtual std::string share(const std::string& value) = 0;
  /// Whether every rank holds the same `tensors`, bit for bit in their sums and sums of squares.
  bool agree(const std::vector<torch::Tensor>& tensors);
  /// Whether any rank was asked to stop (its `stop` flag): every rank stops at the same step.
  virtual bool should_stop(bool stop_here) = 0;
  virtual void barrier() = 0;
  /// The all-reduce's timings so far (zeros before two steps have run).
  virtual AllReduceStats all_reduce_stats() = 0;

 private:
  mutable int64_t max_shard_rows_ = 0;
};

/// Joins the process group the environment describes (nullptr for one process): a TCPStore at
/// MASTER_ADDR:MASTER_PORT (rank 0 serves it unless torchrun's agent does), then Gloo, and NCCL
/// for the CUDA tensors when `device` is a GPU (the process's cuda:LOCAL_RANK). Waits at
/// most `timeout_seconds` for the others, and a collective that a dead rank never joins fails
/// after as long.
ATTNLAB_API std::unique_ptr<Distributed> join_process_group(const DistributedEnv& env, torch::Device device,
                                                            double timeout_seconds);

}  // namespace attnlab::train
