#include <attnlab/train/attention_results.hpp>

#include <attnlab/results/tensor.hpp>

#include <torch/types.h>

#include <algorithm>

namespace attnlab::train {

void write_attention(results::Results& results, const std::string& sample, const nn::AttentionRecorder& recorder,
                     int64_t row, const SideLabels& labels) {
  for (const auto& m : recorder.modules()) {
    auto w = m.weights.select(1, row);  // [layers, heads, Q, K]
    results::Attention out;
    auto cut = [&](nn::Side side, int64_t dim, std::vector<std::string>& tokens) {
      const auto it = labels.find(side);
      if (it == labels.end()) return;
      tokens = it->second;
      w = w.narrow(dim, 0, std::min<int64_t>(static_cast<int64_t>(tokens.size()), w.size(dim)));
    };
    cut(m.queries, 2, out.query_tokens);
    cut(m.keys, 3, out.key_tokens);
    out.weights = results::to_float_array(w);
    out.layers = m.layers;
    out.query_side = nn::side_name(m.queries);
    out.key_side = nn::side_name(m.keys);
    results.write_attention(sample, m.module, out);
  }
}

}  // namespace attnlab::train
