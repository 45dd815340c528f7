#pragma once
// Results files read back as tensors, for tests that check them with torch's ops (the results
// library itself holds arrays: attnlab/results/array.hpp).
#include <attnlab/results/reader.hpp>
#include <attnlab/results/tensor.hpp>

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attnlab::testutil {

/// results::Attention with its weights as a float32 tensor [layers, heads, queries, keys].
struct AttentionTensor {
  torch::Tensor weights;
  std::vector<std::string> query_tokens, key_tokens;
  std::vector<int64_t> layers;
  std::string query_side, key_side;
};

inline AttentionTensor read_attention(const results::ResultsReader& in, const std::string& sample,
                                      const std::string& module) {
  auto a = in.attention(sample, module);
  return {results::to_tensor(a.weights), std::move(a.query_tokens), std::move(a.key_tokens),
          std::move(a.layers),           std::move(a.query_side),   std::move(a.key_side)};
}

}  // namespace attnlab::testutil
