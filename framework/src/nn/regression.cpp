// SequenceRegressor's key function and the helpers regression models share.
#include <attnlab/nn/regression.hpp>

#include <attnlab/nn/layers.hpp>
#include <attnlab/nn/scorer.hpp>

#include <torch/utils.h>
#include <torch/nn/init.h>

#include <set>

namespace attnlab::nn {

SequenceRegressor::~SequenceRegressor() = default;

void xavier_uniform_init(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  // Tables that are not weight matrices keep their own start: a scorer's own parameters (T5's
  // bias buckets, Shaw's relative keys: zero, so that an untrained model scores as dot products)
  // and a learned positional table (normal(0, 0.02)). The book's model has neither.
  std::set<const void*> own;
  const auto keep_own = [&](const torch::nn::Module& m) {
    if (dynamic_cast<const Scorer*>(&m) || dynamic_cast<const PositionalEncodingImpl*>(&m)) {
      for (const auto& p : m.parameters(/*recurse=*/false)) own.insert(p.unsafeGetTensorImpl());
    }
  };
  keep_own(module);  // (modules() with the module itself needs it in a shared_ptr: not from a constructor)
  for (const auto& m : module.modules(/*include_self=*/false)) keep_own(*m);
  for (auto& p : module.parameters()) {
    if (p.dim() > 1 && !own.contains(p.unsafeGetTensorImpl())) torch::nn::init::xavier_uniform_(p);
  }
}

torch::Tensor shift_target(const torch::Tensor& src, const torch::Tensor& target) {
  TORCH_CHECK(src.dim() == 3 && target.dim() == 3 && src.size(0) == target.size(0) && src.size(2) == target.size(2),
              "shift_target: expected src [B, S, F] and target [B, T, F], found ", src.sizes(), " and ",
              target.sizes());
  const int64_t steps = target.size(1);
  return torch::cat({src.narrow(1, src.size(1) - 1, 1), target.narrow(1, 0, steps - 1)}, 1);  // [B, T, F]
}

}  // namespace attnlab::nn
