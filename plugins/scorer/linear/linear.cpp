// Scorer plugin "linear": linear attention (Katharopoulos, Vyas, Pappas and Fleuret, "Transformers
// are RNNs", ICML 2020) with their feature map phi(x) = elu(x) + 1 > 0. Query i's weight on key j
// is
//
//   a_ij = phi(q_i) . phi(k_j) / sum_j' phi(q_i) . phi(k_j')        (over the valid keys j')
//
// so that the output sum_j a_ij v_j = phi(q_i)^T (sum_j phi(k_j) v_j^T) / phi(q_i)^T (sum_j phi(k_j))
// needs the sums over the keys once, not a [Q, K] matrix: linear in the sequence's length.
//
// Inside the framework: score() returns log(phi(q_i) . phi(k_j)), and the framework's masked
// softmax turns that into exactly a_ij (softmax(log a) = a / sum a), so the recorded weights are
// the materialised linear-attention weights and masking works as for every scorer. attend() is the
// linear-time form: for keys valid up to a length per sequence, the two sums once per sequence;
// for lengths per query (a causal decoder in training), the recurrent form, prefix sums
// S_j = S_{j-1} + phi(k_j) v_j^T and z_j = z_{j-1} + phi(k_j), read at each query's last key.
// There is no dropout on linear-attention weights (they are never built): with attention dropout
// in training, the materialised path runs instead.
//
// Decoding: recurrent (Scorer::recurrent): the decoder keeps (S, z) per sequence and head instead
// of the keys and values, so a step costs O(D Dv) whatever the steps decoded, and the state's size
// is fixed. While attention is recorded, decoding keeps the KV cache and materialises the weights.
#include <attnlab/error.hpp>
#include <attnlab/nn/scorer.hpp>
#include <attnlab/plugin/plugin.hpp>

#include <fmt/format.h>
#include <torch/types.h>

#include <limits>
#include <optional>
#include <string>

namespace {

using namespace attnlab;

/// phi(x) = elu(x) + 1, elementwise, > 0
torch::Tensor feature(const torch::Tensor& x) { return torch::elu(x) + 1; }

class Linear final : public nn::Scorer {
 public:
  /// queries [B, Q, D], keys [B, K, D] -> log(phi(q) . phi(k)) [B, Q, K]
  torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& keys, const nn::Positions&) override {
    check(queries, keys);
    auto a = torch::bmm(feature(queries), feature(keys).transpose(1, 2));  // [B, Q, K], > 0
    return a.clamp_min(std::numeric_limits<float>::min()).log();
  }

  /// The linear-time form (see above). -> [B, Q, Dv]
  std::optional<torch::Tensor> attend(const torch::Tensor& queries, const torch::Tensor& keys,
                                      const torch::Tensor& values, const torch::Tensor& valid_lens,
                                      const nn::Positions&, double dropout, bool training) override {
    check(queries, keys);
    if (training && dropout > 0) return std::nullopt;  // dropout needs the weights: the materialised path
    const int64_t B = queries.size(0), Q = queries.size(1), K = keys.size(1);
    auto fq = feature(queries), fk = feature(keys);  // [B, Q, D], [B, K, D]
    torch::Tensor out;                               // [B, Q, Dv]
    torch::Tensor empty;                             // [B, Q, 1] rows with no valid key, or undefined
    if (!valid_lens.defined() || valid_lens.dim() == 1) {
      if (valid_lens.defined()) {  // keys past each sequence's length count for nothing
        auto keep = torch::arange(K, valid_lens.options()).unsqueeze(0) < valid_lens.unsqueeze(1);  // [B, K]
        fk = fk * keep.unsqueeze(-1).to(fk.scalar_type());
        empty = (valid_lens <= 0).view({B, 1, 1}).expand({B, Q, 1});
      }
      auto kv = torch::bmm(fk.transpose(1, 2), values);  // [B, D, Dv]: sum_j phi(k_j) v_j^T
      auto z = fk.sum(1);                                 // [B, D]: sum_j phi(k_j)
      out = torch::bmm(fq, kv) / torch::bmm(fq, z.unsqueeze(-1)).clamp_min(std::numeric_limits<float>::min());
    } else {
      TORCH_CHECK(valid_lens.dim() == 2 && valid_lens.size(0) == B && valid_lens.size(1) == Q,
                  "linear: expected valid_lens [B] or [B, Q], found ", valid_lens.sizes());
      // The recurrent form: prefix sums over the keys, read at each query's last valid key.
      auto s = (fk.unsqueeze(-1) * values.unsqueeze(2)).cumsum(1);  // [B, K, D, Dv]: S_j
      auto z = fk.cumsum(1);                                          // [B, K, D]: z_j
      auto last = (valid_lens.clamp(1, K) - 1).to(torch::kLong);      // [B, Q]
      auto s_at = s.gather(1, last.view({B, Q, 1, 1}).expand({B, Q, s.size(2), s.size(3)}));  // [B, Q, D, Dv]
      auto z_at = z.gather(1, last.view({B, Q, 1}).expand({B, Q, z.size(2)}));                // [B, Q, D]
      auto num = torch::matmul(fq.unsqueeze(2), s_at).squeeze(2);                             // [B, Q, Dv]
      auto den = (fq * z_at).sum(-1, /*keepdim=*/true);                                       // [B, Q, 1]
      out = num / den.clamp_min(std::numeric_limits<float>::min());
      empty = (valid_lens <= 0).unsqueeze(-1);
    }
    // A row with no valid key: the framework's masked softmax gives it uniform weights over all keys.
    if (empty.defined()) out = torch::where(empty, values.mean(1, /*keepdim=*/true).expand_as(out), out);
    return out;
  }

  bool recurrent() const override { return true; }

  /// Katharopoulos et al.'s RNN form: S += phi(k_t) v_t^T, z += phi(k_t), then
  /// out_t = phi(q_t)^T S / phi(q_t)^T z, for the T new steps in order. state: {S [B, D, Dv], z [B, D]}.
  torch::Tensor attend_recurrent(const torch::Tensor& queries, const torch::Tensor& keys, const torch::Tensor& values,
                                 const nn::Positions&, nn::RecurrentState& state) override {
    check(queries, keys);
    TORCH_CHECK(keys.size(1) == queries.size(1) && values.size(1) == keys.size(1) && values.size(0) == keys.size(0),
                "linear: recurrent decoding takes as many keys and values as queries (the new steps), found ",
                queries.sizes(), ", ", keys.sizes(), ", ", values.sizes());
    const int64_t B = queries.size(0), T = queries.size(1), D = queries.size(2), Dv = values.size(2);
    if (state.tensors.empty()) {
      state.tensors = {torch::zeros({B, D, Dv}, values.options()), torch::zeros({B, D}, values.options())};
    }
    TORCH_CHECK(state.tensors.size() == 2 && state.tensors[0].sizes() == torch::IntArrayRef({B, D, Dv}),
                "linear: a recurrent state must be {S [", B, ", ", D, ", ", Dv, "], z [", B, ", ", D, "]}");
    auto fq = feature(queries), fk = feature(keys);                                               // [B, T, D]
    auto s = state.tensors[0].unsqueeze(1) + (fk.unsqueeze(-1) * values.unsqueeze(2)).cumsum(1);  // [B, T, D, Dv]
    auto z = state.tensors[1].unsqueeze(1) + fk.cumsum(1);                                        // [B, T, D]
    auto num = torch::matmul(fq.unsqueeze(2), s).squeeze(2);                                      // [B, T, Dv]
    auto den = (fq * z).sum(-1, /*keepdim=*/true);                                                // [B, T, 1]
    state.tensors = {s.select(1, T - 1).contiguous(), z.select(1, T - 1).contiguous()};
    return num / den.clamp_min(std::numeric_limits<float>::min());
  }

 private:
  static void check(const torch::Tensor& queries, const torch::Tensor& keys) {
    TORCH_CHECK(
        queries.dim() == 3 && keys.dim() == 3 && queries.size(0) == keys.size(0) && queries.size(2) == keys.size(2),
        "linear: expected queries [B, Q, D] and keys [B, K, D], found ", queries.sizes(), " and ", keys.sizes());
  }
};

config::Schema schema() { return {}; }  // no options

std::shared_ptr<nn::Scorer> make(const config::Options& options, const plugin::BuildContext&,
                                 const nn::ScorerContext& sc) {
  ATTNLAB_CHECK(sc.query_size <= 0 || sc.key_size <= 0 || sc.query_size == sc.key_size, ConfigError,
                "{}: {} takes dot products of feature maps, so queries and keys need one size, found query size {} "
                "and key size {}",
                options.resolved().where(), options.owner(), sc.query_size, sc.key_size);
  return std::make_shared<Linear>();
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::nn::Scorer, "linear",
               "Linear attention (Katharopoulos et al. 2020): weights phi(q).phi(k) normalised, phi = elu + 1; "
               "computed in linear time (prefix sums in a causal decoder), materialised when recorded",
               schema, make)
