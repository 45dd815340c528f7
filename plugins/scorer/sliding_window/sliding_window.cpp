// Scorer plugin "sliding_window": local attention. Scaled dot products, with every key farther than
// `window` positions from the query masked out: query position i attends to key positions j with
// |i - j| <= window (Longformer's sliding window, Beltagy et al. 2020; in a causal decoder, where
// the framework already masks j > i, that leaves keys i - window .. i, as Mistral's sliding
// window of window + 1 tokens). Self-attention only: in cross-attention a target position and a
// source position do not measure one distance.
//
// Masking: score() adds -1e6 (half: -65504) outside the band, so the recorded weights are exactly
// 0 there and the softmax runs over the window. When a sequence is long against the window
// (auto: at least 128 keys and 4 windows), the unrecorded path does not build the [Q, K] score
// matrix: queries go in blocks of `block`, each scoring only the keys its window can reach
// ([block, block + 2 window] per block instead of [Q, K]). A window that covers the whole
// sequence is plain scaled dot-product attention.
#include <attnlab/config/binding.hpp>
#include <attnlab/error.hpp>
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/scorer.hpp>
#include <attnlab/plugin/plugin.hpp>

#include "../common/self_attention_checks.hpp"

#include <fmt/format.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace attnlab;

class SlidingWindow final : public nn::Scorer {
 public:
  SlidingWindow(int64_t window, int64_t block) : window_(window), block_(block) {}

  /// queries [B, Q, D], keys [B, K, D] -> q k^T / sqrt(D), -1e6 added where |i - j| > window [B, Q, K]
  torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& keys,
                      const nn::Positions& positions) override {
    check(queries, keys);
    auto scores = torch::bmm(queries, keys.transpose(1, 2)) / std::sqrt(static_cast<double>(queries.size(-1)));
    return scores + band(queries.size(1), keys.size(1), positions.query_offset, positions.key_offset, scores);
  }

  /// Blocks of queries, each with the keys its window reaches, when that pays; otherwise nullopt
  /// (score() + masked softmax). -> [B, Q, Dv]
  std::optional<torch::Tensor> attend(const torch::Tensor& queries, const torch::Tensor& keys,
                                      const torch::Tensor& values, const torch::Tensor& valid_lens,
                                      const nn::Positions& positions, double dropout, bool training) override {
    check(queries, keys);
    const int64_t Q = queries.size(1), K = keys.size(1), span = 2 * window_ + 1;
    const int64_t block = block_ > 0 ? block_ : (K >= 128 && K >= 4 * span ? std::max<int64_t>(span, 32) : 0);
    if (block <= 0 || block >= Q) return std::nullopt;
    const double p = training ? dropout : 0.0;
    std::vector<torch::Tensor> out;
    for (int64_t s = 0; s < Q; s += block) {
      const int64_t e = std::min(Q, s + block);
      // Key columns the window of queries s..e-1 reaches: |(qo + i) - (ko + j)| <= window.
      const int64_t first = std::clamp<int64_t>(positions.query_offset + s - window_ - positions.key_offset, 0, K);
      const int64_t last = std::clamp<int64_t>(positions.query_offset + e - 1 + window_ - positions.key_offset + 1, 0, K);
      auto q = queries.narrow(1, s, e - s);
      if (last <= first) {  // no key within reach: what the full path gives such rows (all -1e6, uniform)
        out.push_back(values.mean(1, /*keepdim=*/true).expand({values.size(0), e - s, values.size(2)}));
        continue;
      }
      auto k = keys.narrow(1, first, last - first), v = values.narrow(1, first, last - first);
      auto scores = score(q, k, {positions.query_offset + s, positions.key_offset + first});  // [B, e - s, last - first]
      if (valid_lens.defined()) {
        auto lens = valid_lens.dim() == 1 ? valid_lens : valid_lens.narrow(1, s, e - s);  // [B] / [B, e - s]
        auto keep = nn::valid_mask(q.size(0), e - s, last - first, (lens - first).clamp(0, last - first));
        scores = scores.masked_fill(keep.logical_not(), fill(scores));
      }
      auto weights = torch::softmax(scores, -1);
      if (p > 0) weights = torch::dropout(weights, p, true);
      out.push_back(torch::bmm(weights, v));  // [B, e - s, Dv]
    }
    return torch::cat(out, 1);
  }

 private:
  static double fill(const torch::Tensor& like) { return like.scalar_type() == torch::kHalf ? -65504.0 : -1e6; }

  void check(const torch::Tensor& queries, const torch::Tensor& keys) const {
    TORCH_CHECK(
        queries.dim() == 3 && keys.dim() == 3 && queries.size(0) == keys.size(0) && queries.size(2) == keys.size(2),
        "sliding_window: expected queries [B, Q, D] and keys [B, K, D], found ", queries.sizes(), " and ",
        keys.sizes());
  }

  /// 0 inside the band |i - j| <= window, the fill value outside, for query rows at query_offset..
  /// and key columns at key_offset.. -> [Q, K] (broadcast over the batch)
  torch::Tensor band(int64_t queries, int64_t keys, int64_t query_offset, int64_t key_offset,
                     const torch::Tensor& like) const {
    const auto opts = torch::TensorOptions(torch::kLong).device(like.device());
    auto i = torch::arange(query_offset, query_offset + queries, opts).unsqueeze(1);  // [Q, 1]
    auto j = torch::arange(key_offset, key_offset + keys, opts).unsqueeze(0);         // [1, K]
    return torch::zeros({queries, keys}, like.options()).masked_fill((i - j).abs() > window_, fill(like));
  }

  int64_t window_, block_;
};

struct Config {
  int64_t window = 8;
  int64_t block = 0;
};

const config::Binding<Config>& binding() {
  static const auto b =
      config::Binding<Config>()
          .option("window", &Config::window,
                  "the farthest key a query attends to: |i - j| <= window (2 window + 1 keys; window + 1 in a causal "
                  "decoder)",
                  {.min = 0, .max = 1 << 24})
          .option("block", &Config::block,
                  "queries per block on the unrecorded path, each scoring only the keys its window reaches; 0 = "
                  "automatic (blocks once there are at least 128 keys and 4 windows), N = always blocks of N",
                  {.min = 0, .max = 1 << 24});
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<nn::Scorer> make(const config::Options& options, const plugin::BuildContext&,
                                 const nn::ScorerContext& sc) {
  scorer_checks::require_self_attention(options, sc, "a window of positions around the query in one sequence");
  scorer_checks::require_equal_sizes(options, sc);
  const Config c = binding().read(options);
  return std::make_shared<SlidingWindow>(c.window, c.block);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Scorer, "sliding_window",
               "Local attention (Longformer's sliding window): scaled dot product over the keys within `window` "
               "positions of the query, blocked so that long sequences never build the full score matrix",
               schema, make)
