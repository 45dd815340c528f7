#pragma once
// Plugin kind "scorer": raw attention scores. The framework masks, softmaxes, applies dropout
// and pools the values (nn/attention.hpp), so every scorer shares one masked softmax.
//
// Shapes. A scorer sees queries [B, Q, Dq] and keys [B, K, Dk] and returns scores [B, Q, K].
// Inside multi-head attention the heads are folded into the batch (d2l's transpose_qkv): with
// num_heads h, the scorer's batch is B = batch * h and row r is sequence r / h, head r % h
// (queries [batch * h, Q, d] with d = model width / h). Positions: query row q of a call stands at
// absolute position positions.query_offset + q, key column k at positions.key_offset + k (when a
// decoder decodes step by step, query_offset is the number of target tokens already decoded).
#include <attnlab/plugin/plugin.hpp>

#include <torch/nn/module.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace attnlab::nn {

/// What a scorer is told when it is made, besides its options: what it will be called with.
struct ScorerContext {
  /// Which attention a scorer serves: keys from the queries' own sequence (Self), or from another
  /// one (Cross: a decoder attending to the encoder's states; Nadaraya-Watson's training points).
  enum class Role { Self, Cross };

  int64_t query_size = 0;  // Dq: features of each query row it gets (per head inside multi-head attention)
  int64_t key_size = 0;    // Dk: features of each key row
  int64_t num_heads = 1;   // h: heads folded into the batch, row r of [B * h, ...] is head r % h
  Role role = Role::Cross;
  bool causal = false;  // self-attention where query i sees keys 0..i only (a decoder's)
  std::string owner;    // who uses it, for messages: "decoder 'transformer' at 'model.decoder'"
};

/// What a recurrent scorer carries between the steps of incremental causal decoding instead of
/// the keys and values (linear attention's sums S and z): tensors of its own, each with its batch
/// (batch * heads inside multi-head attention) as the first dimension; empty before the first step.
struct RecurrentState {
  std::vector<torch::Tensor> tensors;
};

/// Absolute position of query row 0 and key column 0 of one score()/attend() call.
struct Positions {
  int64_t query_offset = 0;
  int64_t key_offset = 0;
};

class Scorer : public torch::nn::Module, public plugin::Made {
 public:
  ~Scorer() override = default;
  /// queries [B, Q, Dq], keys [B, K, Dk] -> scores [B, Q, K], before masking and softmax. A scorer
  /// may add a bias of its own (e.g. a position-dependent one, from `positions`).
  virtual torch::Tensor score(const torch::Tensor& queries, const torch::Tensor& keys, const Positions& positions) = 0;
  /// Optional fused path used when weights are not being recorded (e.g. SDPA).
  /// queries [B, Q, D], keys [B, K, D], values [B, K, Dv], valid_lens [B] / [B, Q] / undefined
  /// -> [B, Q, Dv]. It must compute what score() + masked softmax + dropout + pooling would, bias
  /// included (scaled_dot_product_attend in nn/dot_product.hpp takes an additive bias).
  /// nullopt = not supported, the framework uses score() + masked softmax.
  virtual std::optional<torch::Tensor> attend(const torch::Tensor& queries, const torch::Tensor& keys,
                                              const torch::Tensor& values, const torch::Tensor& valid_lens,
                                              const Positions& positions, double dropout, bool training) {
    return std::nullopt;
  }
  /// true: its scores depend on where the query and the key stand (from `positions`: RoPE, ALiBi,
  /// T5's bias, Shaw's relative positions), so a transformer whose positional_encoding is `auto`
  /// adds no absolute encoding to the embeddings of a module whose self-attention it scores.
  /// false (the default): the scores see only the vectors, as dot products do.
  virtual bool encodes_positions() const { return false; }
  /// true: it decodes causal self-attention step by step from a state of its own
  /// (attend_recurrent), a cost per step that does not grow with the steps decoded; the decoder
  /// then keeps that state instead of the keys and values. false (the default): the KV cache.
  virtual bool recurrent() const { return false; }
  /// Recurrent decoding (only called when recurrent() is true, never while attention is recorded
  /// or with attention dropout in training): queries [B, T, D], keys [B, T, D], values [B, T, Dv]
  /// of the T new steps, which stand at positions.query_offset.. (= positions.key_offset..),
  /// `state` summarising the earlier ones (empty at the first step). New query t sees the earlier
  /// steps and new keys 0..t. -> [B, T, Dv], and `state` updated to include the new steps: what
  /// score() + masked softmax + pooling over all the steps would give.
  virtual torch::Tensor attend_recurrent(const torch::Tensor& queries, const torch::Tensor& keys,
                                         const torch::Tensor& values, const Positions& positions,
                                         RecurrentState& state) {
    TORCH_CHECK(false, "this scorer does not decode recurrently (recurrent() is false)");
  }
};

/// Builds the scorer of one attention module, told what it will see (the transformer blocks and
/// the Bahdanau decoder call it; registry_scorer_factory asks the registry).
using ScorerFactory = std::function<std::shared_ptr<Scorer>(const ScorerContext&)>;

}  // namespace attnlab::nn

template <>
struct attnlab::plugin::KindOf<attnlab::nn::Scorer> {
  static constexpr const char* value = "scorer";
};

/// A scorer's factory also gets its ScorerContext.
template <>
struct attnlab::plugin::FactorySignature<attnlab::nn::Scorer> {
  using type = std::shared_ptr<attnlab::nn::Scorer>(const attnlab::config::Options&,
                                                    const attnlab::plugin::BuildContext&,
                                                    const attnlab::nn::ScorerContext&);
};
