// Head masks (nn/head_mask.hpp): the active mask and its application to a module's head outputs.
#include <attnlab/nn/head_mask.hpp>

#include <torch/types.h>

#include <atomic>

namespace attnlab::nn {
namespace {

std::atomic<const HeadMask*>& active() {
  static std::atomic<const HeadMask*> mask{nullptr};
  return mask;
}

}  // namespace

void HeadMask::set(const std::string& module, int64_t layer, torch::Tensor xi) {
  TORCH_CHECK(xi.defined() && xi.dim() == 1 && xi.is_floating_point(), "HeadMask: ", module, " layer ", layer + 1,
              ": expected xi [heads] of a floating point type");
  xi_[{module, layer}] = std::move(xi);
}

torch::Tensor HeadMask::get(const std::string& module, int64_t layer) const {
  const auto it = xi_.find({module, layer});
  return it == xi_.end() ? torch::Tensor() : it->second;
}

const HeadMask* active_head_mask() { return active().load(std::memory_order_acquire); }

HeadMaskScope::HeadMaskScope(const HeadMask* mask) : previous_(active().exchange(mask, std::memory_order_acq_rel)) {}

HeadMaskScope::~HeadMaskScope() { active().store(previous_, std::memory_order_release); }

torch::Tensor apply_head_mask(const torch::Tensor& out, const RecordAs& site, int64_t heads) {
  const HeadMask* mask = active_head_mask();
  if (mask == nullptr) return out;
  const torch::Tensor xi = mask->get(site.module, site.layer);
  if (!xi.defined()) return out;
  TORCH_CHECK(xi.size(0) == heads, "head mask of ", site.module, " layer ", site.layer + 1, " has ", xi.size(0),
              " values, the module ", heads, " heads");
  TORCH_CHECK(out.dim() == 3 && out.size(0) % heads == 0, "head mask of ", site.module, " layer ", site.layer + 1,
              ": expected the attention output [B * ", heads, ", Q, D], found ", out.sizes());
  const auto scale = xi.to(out.scalar_type()).view({1, heads, 1, 1});  // [1, heads, 1, 1]
  return (out.view({-1, heads, out.size(1), out.size(2)}) * scale).view(out.sizes());  // [B * heads, Q, D]
}

}  // namespace attnlab::nn
