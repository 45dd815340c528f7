#pragma once
// The closed formulas the golden-value scripts (tests/python/nn_golden.py, chapter_golden.py) use
// for inputs, token ids and weights, so a C++ test builds the very tensors the Python reference
// saw, and the comparison against the printed values.
#include <torch/utils.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "testing/testing.hpp"

namespace attnlab::testutil::golden {

/// cos(0.3 i + phase), reshaped.
inline torch::Tensor data(double phase, at::IntArrayRef shape) {
  const int64_t n = c10::multiply_integers(shape);
  return torch::cos(torch::arange(n, torch::kFloat32) * 0.3 + phase).reshape(shape);
}
/// (mult i + add) mod vocab, reshaped.
inline torch::Tensor ids(at::IntArrayRef shape, int64_t vocab, int64_t mult = 7, int64_t add = 3) {
  const int64_t n = c10::multiply_integers(shape);
  return torch::remainder(torch::arange(n, torch::kLong) * mult + add, vocab).reshape(shape);
}
/// 0.5 sin(0.7 i + k + 1), reshaped: the k-th parameter's values.
inline torch::Tensor weight(int64_t k, at::IntArrayRef shape) {
  const int64_t n = c10::multiply_integers(shape);
  return (torch::sin(torch::arange(n, torch::kFloat32) * 0.7 + static_cast<double>(k + 1)) * 0.5).reshape(shape);
}
/// Parameter k in sorted-name order gets weight(k): the same on both sides as the names sort alike.
inline void fill(torch::nn::Module& module) {
  std::vector<std::pair<std::string, torch::Tensor>> params;
  for (const auto& item : module.named_parameters()) params.emplace_back(item.key(), item.value());
  std::sort(params.begin(), params.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  torch::NoGradGuard no_grad;
  for (size_t k = 0; k < params.size(); ++k) {
    params[k].second.copy_(weight(static_cast<int64_t>(k), params[k].second.sizes()));
  }
}
/// Every step-th value of t against the generated ones (rtol 1e-4, atol 1e-5).
inline ::testing::AssertionResult matches(const torch::Tensor& t, const std::vector<float>& expected, int64_t step) {
  auto flat = t.detach().flatten();
  return AllClose(flat.slice(0, 0, flat.numel(), step), torch::tensor(expected), 1e-4, 1e-5);
}

}  // namespace attnlab::testutil::golden
