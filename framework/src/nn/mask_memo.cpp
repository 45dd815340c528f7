// The per-thread memo of masks derived from valid lengths (mask_memo.hpp).
#include "nn/mask_memo.hpp"

#include <c10/core/TensorImpl.h>

#include <utility>

namespace attnlab::nn::memo {
namespace {

// Enough for a step's distinct lengths tensors (source, causal, their per-head repeats, cross
// attention's), each with a few derived values; evicted oldest first.
constexpr size_t kEntries = 16;

struct Entry {
  torch::Tensor lens;  // held, so no other tensor can take its TensorImpl's address while remembered
  uint32_t version = 0;
  What what{};
  std::vector<torch::Tensor> value;
};

struct Memo {
  std::array<Entry, kEntries> entries;
  size_t next = 0;
  Stats stats;
};

Memo& memo() {
  thread_local Memo m;
  return m;
}

}  // namespace

std::vector<torch::Tensor> derived(const torch::Tensor& valid_lens, const What& what,
                                   const std::function<std::vector<torch::Tensor>()>& make) {
  if (!valid_lens.defined() || valid_lens.is_inference() || valid_lens.requires_grad()) return make();
  auto& m = memo();
  const auto* impl = valid_lens.unsafeGetTensorImpl();
  const uint32_t version = valid_lens._version();
  for (const auto& e : m.entries) {
    if (e.lens.defined() && e.lens.unsafeGetTensorImpl() == impl && e.version == version && e.what == what) {
      ++m.stats.hits;
      return e.value;
    }
  }
  ++m.stats.misses;
  auto value = make();
  m.entries[m.next] = Entry{valid_lens, version, what, value};
  m.next = (m.next + 1) % kEntries;
  return value;
}

Stats stats() { return memo().stats; }

void reset() {
  auto& m = memo();
  m.entries = {};
  m.next = 0;
  m.stats = {};
}

}  // namespace attnlab::nn::memo
