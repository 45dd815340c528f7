#pragma once
// Shared attention machinery (d2l 1.0.3 semantics): masked softmax, attention pooling over any
// scorer, multi-head attention.
#include <attnlab/nn/recorder.hpp>
#include <attnlab/nn/scorer.hpp>

#include <torch/nn/cloneable.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <memory>
#include <vector>

namespace attnlab::nn {

/// scores [B, Q, K]; valid_lens undefined, [B] (same for every query) or [B, Q].
/// Positions at or past the valid length get -1e6 before the softmax, as d2l does.
/// -> weights [B, Q, K]
torch::Tensor masked_softmax(const torch::Tensor& scores, const torch::Tensor& valid_lens);

/// Attention pooling: weights = dropout(masked_softmax(scorer(q, k))), output = weights @ v.
/// While a recorder is active (RecordingScope), the weights before dropout go to it as `record_as`
/// ([B / heads, heads, Q, K], query rows at positions.query_offset); otherwise a scorer's fused
/// attend() is used when it has one. An exception from a plugin scorer's score() or attend()
/// leaves naming the plugin (plugin::rethrow_naming).
class AttentionImpl : public torch::nn::Module {
 public:
  /// heads: the batch rows are (sequence, head) pairs, head fastest (MultiHeadAttention's
  /// [B * heads] layout); 1 for plain attention.
  AttentionImpl(std::shared_ptr<Scorer> scorer, double dropout, RecordAs record_as = {}, int64_t heads = 1);
  /// queries [B, Q, Dq], keys [B, K, Dk], values [B, K, Dv], valid_lens [B] / [B, Q] / undefined,
  /// positions of query row 0 and key column 0 (for the scorer) -> [B, Q, Dv]
  torch::Tensor forward(const torch::Tensor& queries, const torch::Tensor& keys, const torch::Tensor& values,
                        const torch::Tensor& valid_lens = {}, const Positions& positions = {});
  Scorer& scorer() { return *scorer_; }
  /// Whether forward_recurrent may be used now: the scorer is recurrent, no recorder is active and
  /// no attention dropout applies.
  bool can_recur() const;
  /// The scorer's attend_recurrent (queries, keys [B, T, D], values [B, T, Dv], state) -> [B, T, Dv],
  /// with the head mask applied, an exception naming the scorer.
  torch::Tensor forward_recurrent(const torch::Tensor& queries, const torch::Tensor& keys, const torch::Tensor& values,
                                  const Positions& positions, RecurrentState& state);

 private:
  std::shared_ptr<Scorer> scorer_;
  torch::nn::Dropout dropout_{nullptr};
  RecordAs record_as_;
  int64_t heads_;
};
TORCH_MODULE(Attention);

struct MultiHeadAttentionOptions {
  MultiHeadAttentionOptions(int64_t num_hiddens, int64_t num_heads) : num_hiddens_(num_hiddens), num_heads_(num_heads) {}
  TORCH_ARG(int64_t, num_hiddens);  // model width; W_q/W_k/W_v/W_o map to it
  TORCH_ARG(int64_t, num_heads);    // must divide num_hiddens
  /// Key/value heads: 0 = num_heads (multi-head attention). A divisor of num_heads makes W_k/W_v
  /// project to kv_heads heads, each shared by num_heads / kv_heads query heads (grouped-query
  /// attention, Ainslie et al. 2023; 1 = multi-query, Shazeer 2019): query head n reads key/value
  /// head n / (num_heads / kv_heads).
  TORCH_ARG(int64_t, kv_heads) = 0;
  TORCH_ARG(double, dropout) = 0.0;  // on attention weights
  TORCH_ARG(bool, bias) = false;     // bias in W_q/W_k/W_v/W_o
  TORCH_ARG(int64_t, query_size) = 0;  // input sizes; 0 = num_hiddens (d2l's LazyLinear)
  TORCH_ARG(int64_t, key_size) = 0;
  TORCH_ARG(int64_t, value_size) = 0;
  /// W_q/W_k/W_v as PerHeadLinear (weights [heads, in, H / heads], TF lab's layout) instead of one
  /// fused Linear [H, in]; the same function when head n's weight is rows n*d_k.. of the fused one.
  TORCH_ARG(bool, per_head_projections) = false;
  TORCH_ARG(RecordAs, record_as) = {};  // what its weights are recorded as (module, layer, sides)
};

/// One projection per head: x [B, T, in] -> [B * heads, T, d_k] (transpose_qkv's layout) with
/// weight [heads, in, d_k] and optional bias [heads, d_k].
class PerHeadLinearImpl : public torch::nn::Module {
 public:
  PerHeadLinearImpl(int64_t heads, int64_t in_size, int64_t head_size, bool bias);
  torch::Tensor forward(const torch::Tensor& x);
  /// The fused-layout weight [heads * d_k, in] (and bias [heads * d_k]) copied in per head.
  void copy_from_fused(const torch::Tensor& weight, const torch::Tensor& bias = {});
  torch::Tensor weight;  // [heads, in, d_k]
  torch::Tensor bias;    // [heads, d_k] or undefined
};
TORCH_MODULE(PerHeadLinear);

/// Projected keys and values of one multi-head attention, per key/value head: what a decoder's
/// KV cache keeps between steps instead of the raw keys and values.
struct KeyValues {
  torch::Tensor keys;    // [B, kv_heads, K, d]
  torch::Tensor values;  // [B, kv_heads, K, d]
  /// Instead of keys and values, a recurrent scorer's state (Scorer::recurrent), each tensor
  /// [B, heads, ...], summarising `summarised` positions (MultiHeadAttention::forward_recurrent).
  std::vector<torch::Tensor> recurrent = {};
  int64_t summarised = 0;

  bool defined() const { return keys.defined() || !recurrent.empty(); }
  /// K, the positions held or summarised (0 when undefined).
  int64_t length() const { return keys.defined() ? keys.size(2) : summarised; }
  /// These positions followed by `next`'s (cat on K); `next` alone when these are undefined.
  KeyValues append(const KeyValues& next) const;
  /// The batch rows `indices` [N] (beam search's reordering).
  KeyValues index_select(const torch::Tensor& indices) const;
  /// Bytes held by keys and values.
  int64_t bytes() const;
};

/// d2l MultiHeadAttention: W_q/W_k/W_v, transpose_qkv, per-head attention with the given scorer
/// (built for per-head sizes num_hiddens / num_heads, with ScorerContext::num_heads = num_heads:
/// it sees [B * heads, T, num_hiddens / heads], row r = sequence r / heads, head r % heads),
/// transpose_output, W_o. Recorded weights: [B, heads, Q, K] as options.record_as. With
/// options.kv_heads < num_heads, W_k/W_v project to kv_heads heads and each is repeated for its
/// group of query heads before the scorer sees them (the scorer's view is unchanged).
class MultiHeadAttentionImpl : public torch::nn::Module {
 public:
  MultiHeadAttentionImpl(const MultiHeadAttentionOptions& options, std::shared_ptr<Scorer> scorer);
  /// queries [B, Q, Dq], keys [B, K, Dk], values [B, K, Dv], valid_lens [B] / [B, Q] / undefined,
  /// positions of query row 0 and key column 0 (passed to the scorer) -> [B, Q, num_hiddens].
  /// The same as forward_projected(queries, project(keys, values), valid_lens, positions).
  torch::Tensor forward(const torch::Tensor& queries, const torch::Tensor& keys, const torch::Tensor& values,
                        const torch::Tensor& valid_lens = {}, const Positions& positions = {});
  /// W_k(keys), W_v(values) per key/value head: keys [B, K, Dk], values [B, K, Dv] -> [B, kv_heads, K, d]
  KeyValues project(const torch::Tensor& keys, const torch::Tensor& values);
  /// Attention over keys and values already projected (a KV cache): queries [B, Q, Dq],
  /// kv [B, kv_heads, K, d] -> [B, Q, num_hiddens]
  torch::Tensor forward_projected(const torch::Tensor& queries, const KeyValues& kv, const torch::Tensor& valid_lens = {},
                                  const Positions& positions = {});
  /// options.kv_heads, 0 resolved to num_heads.
  int64_t kv_heads() const;
  /// The scorer its heads share.
  Scorer& scorer();
  /// Whether causal self-attention can be decoded recurrently now (Attention::can_recur).
  bool can_recur() const;
  /// Causal self-attention of x's T new steps [B, T, Dq] on a recurrent scorer's state instead of
  /// a KV cache: `state` (undefined at the first step) holds state.recurrent [B, heads, ...] and
  /// gains the new steps. -> [B, T, num_hiddens], what forward_projected over every step would give.
  torch::Tensor forward_recurrent(const torch::Tensor& x, KeyValues& state);

  MultiHeadAttentionOptions options;
  torch::nn::Linear W_q{nullptr}, W_k{nullptr}, W_v{nullptr}, W_o{nullptr};  // W_q/k/v null when per head
  PerHeadLinear W_q_heads{nullptr}, W_k_heads{nullptr}, W_v_heads{nullptr};   // registered as W_q, W_k, W_v

 private:
  Attention attention_{nullptr};
};
TORCH_MODULE(MultiHeadAttention);

/// [B, T, H] -> [B * heads, T, H / heads]
torch::Tensor transpose_qkv(const torch::Tensor& x, int64_t num_heads);
/// [B * heads, T, H / heads] -> [B, T, H]
torch::Tensor transpose_output(const torch::Tensor& x, int64_t num_heads);

}  // namespace attnlab::nn
