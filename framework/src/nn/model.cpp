#include <attnlab/nn/model.hpp>

namespace attnlab::nn {

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) {
    if (p.requires_grad()) n += p.numel();
  }
  return n;
}

}  // namespace attnlab::nn
