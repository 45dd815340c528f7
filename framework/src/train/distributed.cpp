// Data-parallel training under torchrun: c10d's TCPStore, ProcessGroupGloo and Reducer, all from
// the torch wheel (libtorch_cpu exports them). Gloo's own headers come from Debian's libgloo-dev:
// ProcessGroupGloo.hpp includes them, but attnlab only holds gloo objects through pointers the
// wheel's code makes, so none of their layouts is compiled here (docs/DISTRIBUTED.md, "Gloo's headers").
// TorchConfig.cmake defines USE_C10D_GLOO (the wheel is built with Gloo); ProcessGroupGloo.hpp
// declares nothing without it.
#ifndef USE_C10D_GLOO
#error "USE_C10D_GLOO is not defined: this torch was built without Gloo"
#endif

#include <attnlab/error.hpp>
#include <attnlab/train/distributed.hpp>

#include "train/distributed_nccl.hpp"

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/logger.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <thread>

namespace attnlab::train {
namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

int env_int(const char* name, int lo, int hi, const std::string& what) {
  const auto text = env(name);
  ATTNLAB_CHECK(text.has_value() && !text->empty(), ConfigError,
                "distributed run (WORLD_SIZE is set): {} is not set; expected {} (torchrun sets it)", name, what);
  size_t used = 0;
  long value = 0;
  try {
    value = std::stol(*text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  ATTNLAB_CHECK(used == text->size() && value >= lo && value <= hi, ConfigError,
                "distributed run: {}={} is not {}: expected a whole number from {} to {}", name, *text, what, lo, hi);
  return static_cast<int>(value);
}

constexpr int64_t kBucketBytes = 25 * 1024 * 1024;      // DDP's default bucket_cap_mb
constexpr int64_t kFirstBucketBytes = 1 * 1024 * 1024;  // DDP's first bucket: starts the overlap early
constexpr size_t kBroadcastBytes = 250 * 1024 * 1024;   // DDP's broadcast_bucket_size

/// c10d's own log lines (a warning per connection retry, an error with a C++ backtrace on timeout)
/// silenced for the scope: at the default level (warnings), raised to fatal-only; a level the
/// user lowered (TORCH_CPP_LOG_LEVEL=INFO) is kept.
class QuietC10d {
 public:
  QuietC10d() : saved_(FLAGS_caffe2_log_level) {
    if (saved_ >= 1) FLAGS_caffe2_log_level = 3;
  }
  ~QuietC10d() { FLAGS_caffe2_log_level = saved_; }
  QuietC10d(const QuietC10d&) = delete;
  QuietC10d& operator=(const QuietC10d&) = delete;

 private:
  int saved_;
};

/// One process group with a backend per device type, as `init_process_group("cpu:gloo,cuda:nccl")`:
/// Gloo for CPU tensors (metrics, stop votes, agreement checks, barriers; and everything of a CPU
/// run), NCCL for the CUDA tensors of a CUDA run (the weights' broadcast, the gradient buckets).
class C10dDistributed final : public Distributed {
 public:
  C10dDistributed(const DistributedEnv& e, torch::Device device, double timeout_seconds)
      : env_(e), cuda_(device.is_cuda()) {
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(e.master_port);
    so.isServer = e.rank == 0 && !e.agent_store;
    // Every client counts itself in, and the server waits until all have (torch's env:// does the
    // same; under torchrun's agent store nobody waits on the count).
    so.numWorkers = static_cast<size_t>(e.world_size);
    so.waitWorkers = true;
    so.timeout = timeout;
    // A host name that does not resolve is said at once, in one line (c10d would retry it until the
    // timeout and then some, with a warning per try).
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (const int rc = getaddrinfo(e.master_addr.c_str(), nullptr, &hints, &found); rc != 0) {
      throw Error(fmt::format("distributed run: rank {} of {} cannot join the process group: MASTER_ADDR '{}' does "
                              "not resolve ({}); set it to rank 0's host name or address",
                              e.rank, e.world_size, e.master_addr, gai_strerror(rc)));
    }
    // A client first waits (within the bound) for something to accept a connection there: c10d
    // retries a refused connect until its timeout, then sleeps a random backoff and tries again,
    // which overshoots the bound by seconds.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    if (!so.isServer && !e.agent_store) {
      bool reached = false;
      while (!reached) {
        for (const addrinfo* a = found; a != nullptr && !reached; a = a->ai_next) {
          const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
          if (fd < 0) continue;
          if (a->ai_family == AF_INET) reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_port = htons(so.port);
          if (a->ai_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_port = htons(so.port);
          reached = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
          close(fd);
        }
        if (reached || std::chrono::steady_clock::now() + std::chrono::milliseconds(100) >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (!reached) {
        freeaddrinfo(found);
        throw Error(fmt::format(
            "distributed run: rank {} of {} could not join the process group within {} s: nothing accepted a "
            "connection at {}:{} (is rank 0 running, with this MASTER_ADDR and MASTER_PORT?)",
            e.rank, e.world_size, timeout_seconds, e.master_addr, e.master_port));
      }
      so.timeout = std::max(std::chrono::milliseconds(1000), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                  deadline - std::chrono::steady_clock::now()));
    }
    freeaddrinfo(found);
    const QuietC10d quiet;  // our one line says what failed; c10d's per-retry warnings and backtraces do not
    try {
      auto store = c10::make_intrusive<c10d::TCPStore>(e.master_addr, so);
      store->setTimeout(timeout);  // the whole bound for what waits on the store later
      // Keys of this attempt only: torchrun's agent store outlives a restart.
      auto prefixed = c10::make_intrusive<c10d::PrefixStore>(fmt::format("attnlab/{}/", e.restart_count), store);
      store_ = prefixed;
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      options->devices = {c10d::ProcessGroupGloo::createDefaultDevice()};
      auto gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, e.rank, e.world_size, options);
      group_ = c10::make_intrusive<c10d::ProcessGroup>(prefixed, e.rank, e.world_size);
      group_->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::GLOO, gloo);
      if (cuda_) {
        // Its own keys: NCCL's rendezvous (the unique id rank 0 posts) beside Gloo's.
        auto nccl_store = c10::make_intrusive<c10d::PrefixStore>("nccl/", prefixed);
        group_->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::NCCL,
                           make_nccl_backend(nccl_store, e.rank, e.world_size, timeout));
      } else {
        group_->setBackend(c10::DeviceType::CUDA, c10d::ProcessGroup::BackendType::GLOO, gloo);
      }
      group_->setDefaultBackend(c10d::ProcessGroup::BackendType::GLOO);
    } catch (const c10::Error& err) {
      throw Error(fmt::format(
          "distributed run: rank {} of {} could not join the process group at {}:{} within {} s: {}", e.rank,
          e.world_size, e.master_addr, e.master_port, timeout_seconds, err.what_without_backtrace()));
    }
  }

  int rank() const override { return env_.rank; }
  int world_size() const override { return env_.world_size; }
  std::string backend() const override { return cuda_ ? "nccl" : "gloo"; }

  void attach(const std::vector<torch::Tensor>& parameters, const std::vector<torch::Tensor>& buffers) override {
    torch::NoGradGuard no_grad;
    std::vector<at::Tensor> state(parameters.begin(), parameters.end());
    state.insert(state.end(), buffers.begin(), buffers.end());
    if (!state.empty()) c10d::broadcast_coalesced(group_, state, kBroadcastBytes, 0);
    auto [buckets, order] = c10d::compute_bucket_assignment_by_size(
        parameters, {static_cast<size_t>(kFirstBucketBytes), static_cast<size_t>(kBucketBytes)});
    (void)order;
    reducer_ = std::make_shared<c10d::Reducer>(
        parameters, std::move(buckets), group_, std::vector<bool>(parameters.size(), false), kBucketBytes,
        /*find_unused_parameters=*/false, /*gradient_as_bucket_view=*/false, std::unordered_map<size_t, std::string>{},
        kFirstBucketBytes, /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
        std::vector<int64_t>{});
    // PyTorch's DDP logger reads the reducer's timestamps of every step (sample rate 1: a few
    // clock reads per step) into averages: backward compute, all-reduce and their overlap.
    reducer_->set_ddp_runtime_logging_sample_rate(1);
    logger_ = std::make_unique<c10d::Logger>(reducer_);
    logger_->set_construction_data_and_log("attnlab", {}, -1, /*broadcast_buffers=*/true, /*has_sync_bn=*/false,
                                           /*static_graph=*/false);
    gradient_bytes_ = 0;
    for (const auto& p : parameters) gradient_bytes_ += p.numel() * static_cast<int64_t>(p.element_size());
  }

  void prepare_for_backward() override {
    ATTNLAB_CHECK(reducer_ != nullptr, Error, "distributed run: prepare_for_backward() before attach()");
    // As DistributedDataParallel.forward does: fold the last step's timings into the averages,
    // then start this step's (the reducer counts steps in prepare_for_forward).
    logger_->set_runtime_stats_and_log();
    reducer_->prepare_for_forward();
    reducer_->prepare_for_backward({});
  }

  AllReduceStats all_reduce_stats() override {
    AllReduceStats s;
    if (logger_ == nullptr) return s;
    auto data = logger_->get_ddp_logging_data();
    auto ns = [&](const char* key) {
      const auto it = data.ints_map.find(key);
      return it == data.ints_map.end() ? 0.0 : static_cast<double>(it->second) * 1e-9;
    };
    const auto it = data.ints_map.find("iteration");
    s.steps = it == data.ints_map.end() ? 0 : std::max<int64_t>(it->second, 0);
    s.buckets = static_cast<int64_t>(logger_->get_bucket_sizes().size());
    s.gradient_bytes = gradient_bytes_;
    s.backward = ns("avg_backward_compute_time");
    s.all_reduce = ns("avg_backward_comm_time");
    s.overlap = ns("avg_backward_compute_comm_overlap_time");
    return s;
  }

  std::vector<double> sum(const std::vector<double>& values) override { return reduce(values, c10d::ReduceOp::SUM); }
  std::vector<double> max(const std::vector<double>& values) override { return reduce(values, c10d::ReduceOp::MAX); }

  std::string share(const std::string& value) override {
    const std::string key = fmt::format("share/{}", shares_++);
    if (env_.rank == 0) {
      store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
      return value;
    }
    const auto got = store_->get(key);  // waits for rank 0 (up to the store's timeout)
    return std::string(got.begin(), got.end());
  }

  bool should_stop(bool stop_here) override { return sum({stop_here ? 1.0 : 0.0})[0] > 0; }

  void barrier() override { group_->barrier()->wait(); }

 private:
  std::vector<double> reduce(const std::vector<double>& values, c10d::ReduceOp op) {
    if (values.empty()) return values;
    auto t = torch::tensor(values, torch::kDouble);
    std::vector<at::Tensor> ts{t};
    c10d::AllreduceOptions o;
    o.reduceOp = op;
    group_->allreduce(ts, o)->wait();
    return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
  }

  DistributedEnv env_;
  bool cuda_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  int64_t shares_ = 0;
  int64_t gradient_bytes_ = 0;
  std::shared_ptr<c10d::Reducer> reducer_;
  std::unique_ptr<c10d::Logger> logger_;  // declared after reducer_: destroyed first, as DDP does
};

}  // namespace

std::optional<DistributedEnv> DistributedEnv::from_environment() {
  if (!env("WORLD_SIZE")) return std::nullopt;
  DistributedEnv e;
  e.world_size = env_int("WORLD_SIZE", 1, 1 << 20, "the number of processes");
  e.rank = env_int("RANK", 0, e.world_size - 1, "this process's rank");
  e.local_rank = env("LOCAL_RANK") ? env_int("LOCAL_RANK", 0, 1 << 20, "this process's rank on its node") : e.rank;
  e.master_addr = env("MASTER_ADDR").value_or("");
  ATTNLAB_CHECK(!e.master_addr.empty(), ConfigError,
                "distributed run (WORLD_SIZE={}): MASTER_ADDR is not set; expected the host of rank 0's store "
                "(torchrun sets it)",
                e.world_size);
  e.master_port = env_int("MASTER_PORT", 1, 65535, "a TCP port");
  e.agent_store = env("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
  e.restart_count = env("TORCHELASTIC_RESTART_COUNT")
                        ? env_int("TORCHELASTIC_RESTART_COUNT", 0, std::numeric_limits<int>::max(), "a count")
                        : 0;
  return e;
}

std::pair<int64_t, int64_t> Distributed::rows(int64_t n) const {
  const int64_t w = world_size(), r = rank();
  const int64_t base = n / w, extra = n % w;
  const int64_t begin = r * base + std::min(r, extra);
  return {begin, begin + base + (r < extra ? 1 : 0)};
}

data::Batch Distributed::shard(const data::Batch& global) const {
  auto [begin, end] = rows(global.size());
  if (begin == end) {  // nothing of this batch is ours: a stand-in row whose loss counts 0
    begin = 0;
    end = std::min<int64_t>(1, global.size());
  }
  max_shard_rows_ = std::max(max_shard_rows_, end - begin);
  auto cut = [&](const torch::Tensor& t) { return t.defined() ? t.slice(0, begin, end) : t; };
  data::Batch b;
  b.src = cut(global.src);
  b.src_valid_lens = cut(global.src_valid_lens);
  b.tgt_in = cut(global.tgt_in);
  b.tgt_out = cut(global.tgt_out);
  b.tgt_valid_lens = cut(global.tgt_valid_lens);
  return b;
}

double Distributed::loss_scale(const data::Batch& global) const {
  const auto [begin, end] = rows(global.size());
  if (begin == end) return 0.0;
  const int64_t tokens = global.tgt_valid_lens.sum().item<int64_t>();
  return static_cast<double>(world_size()) / static_cast<double>(std::max<int64_t>(tokens, 1));
}

bool Distributed::agree(const std::vector<torch::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  std::vector<double> mine;
  for (const auto& t : tensors) {
    const auto d = t.detach().to(torch::kCPU, torch::kDouble);
    mine.push_back(d.sum().item<double>());
    mine.push_back(d.pow(2).sum().item<double>());
  }
  std::vector<double> negated(mine.size());
  for (size_t i = 0; i < mine.size(); ++i) negated[i] = -mine[i];
  const auto hi = max(mine), lo = max(negated);
  for (size_t i = 0; i < mine.size(); ++i) {
    if (hi[i] != -lo[i]) return false;
  }
  return true;
}

std::unique_ptr<Distributed> join_process_group(const DistributedEnv& env, torch::Device device,
                                                double timeout_seconds) {
  return std::make_unique<C10dDistributed>(env, device, timeout_seconds);
}

}  // namespace attnlab::train
