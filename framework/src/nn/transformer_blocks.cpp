// Transformer encoder and decoder blocks (d2l 1.0.3, chapter 11.7), norm-last or norm-first.
#include <attnlab/nn/transformer.hpp>

#include "nn/fused_attention.hpp"

namespace attnlab::nn {
namespace {

/// Multi-head attention whose scorer is asked for with per-head sizes, num_heads, and `role`;
/// its weights are recorded as `record_as`.
MultiHeadAttention make_mha(const TransformerBlockOptions& o, const ScorerFactory& make_scorer,
                            ScorerContext::Role role, bool causal, RecordAs record_as) {
  TORCH_CHECK(o.num_heads() >= 1 && o.num_hiddens() % o.num_heads() == 0, "Transformer block: ", o.num_heads(),
              " heads do not divide num_hiddens ", o.num_hiddens());
  ScorerContext context;
  context.query_size = context.key_size = o.num_hiddens() / o.num_heads();
  context.num_heads = o.num_heads();
  context.role = role;
  context.causal = causal;
  auto scorer = make_scorer(context);
  TORCH_CHECK(scorer != nullptr, "Transformer block: the scorer factory returned no scorer");
  return MultiHeadAttention(MultiHeadAttentionOptions(o.num_hiddens(), o.num_heads())
                                .kv_heads(o.kv_heads())
                                .dropout(o.attention_dropout().value_or(o.dropout()))
                                .bias(o.bias())
                                .per_head_projections(o.per_head_projections())
                                .record_as(std::move(record_as)),
                            scorer);
}

AddNorm make_addnorm(const TransformerBlockOptions& o) {
  return AddNorm(o.num_hiddens(), o.dropout(), o.norm(), o.layer_norm_eps(), o.fused(), o.norm_type());
}

/// The FFN; SwiGLU's layers have biases as the attention projections do (Llama: none), the
/// others always (d2l's, GPT-2's), so that existing models keep their parameters.
PositionWiseFFN make_ffn(const TransformerBlockOptions& o) {
  const bool swiglu = o.activation() == Activation::SwiGLU;
  return PositionWiseFFN(o.num_hiddens(), o.ffn_num_hiddens(), o.num_hiddens(), o.ffn_dropout(), o.ffn_conv1d(),
                         o.activation(), !swiglu || o.bias());
}

/// The causal lengths [B, T] (query t sees keys 0..offset + t). On the CPU every block of a step
/// gets the very same tensor while batch, offset and steps match and nobody wrote to it, so that
/// the masks derived from it (nn/mask_memo.hpp) are made once a step, not once a block. Not on a
/// GPU (a tensor kept across steps must not outlive a captured CUDA graph's pool), nor in
/// inference mode (no version to check).
torch::Tensor causal_lengths(int64_t batch, int64_t offset, int64_t steps, const torch::Device& device) {
  struct Last {
    torch::Tensor lens;
    int64_t batch = 0, offset = 0, steps = 0, version = 0;
  };
  thread_local Last last;
  const bool keep = device.is_cpu() && !c10::InferenceMode::is_enabled();
  if (keep && last.lens.defined() && last.batch == batch && last.offset == offset && last.steps == steps &&
      last.lens._version() == last.version) {
    return last.lens;
  }
  auto lens = torch::arange(offset + 1, offset + steps + 1, torch::TensorOptions(torch::kLong).device(device))
                  .repeat({batch, 1});  // [B, T]
  if (keep) last = Last{lens, batch, offset, steps, lens._version()};
  return lens;
}

}  // namespace

TransformerEncoderBlockImpl::TransformerEncoderBlockImpl(const TransformerBlockOptions& options_,
                                                         const ScorerFactory& make_scorer, int64_t index)
    : options(options_) {
  attention = register_module("attention", make_mha(options, make_scorer, ScorerContext::Role::Self, false,
                                                    {kEncoderSelf, index, Side::Source, Side::Source}));
  addnorm1 = register_module("addnorm1", make_addnorm(options));
  if (options.ffn()) {
    ffn = register_module("ffn", make_ffn(options));
    addnorm2 = register_module("addnorm2", make_addnorm(options));
  }
}

torch::Tensor TransformerEncoderBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& valid_lens) {
  const fused::ComposedOnly composed(!options.fused());  // fused: false reaches the attention core too
  auto h = addnorm1->pre(x);                                            // [B, S, H]
  auto y = addnorm1->post(x, attention->forward(h, h, h, valid_lens));  // [B, S, H]
  if (!ffn) return y;                                                   // attention-only
  return addnorm2->post(y, ffn->forward(addnorm2->pre(y)));             // [B, S, H]
}

TransformerDecoderBlockImpl::TransformerDecoderBlockImpl(const TransformerBlockOptions& options_,
                                                         const ScorerFactory& make_scorer, int64_t index_)
    : options(options_), index(index_) {
  attention1 = register_module("attention1", make_mha(options, make_scorer, ScorerContext::Role::Self, true,
                                                      {kDecoderSelf, index, Side::Target, Side::Target}));
  addnorm1 = register_module("addnorm1", make_addnorm(options));
  if (options.cross_attention()) {
    attention2 = register_module("attention2", make_mha(options, make_scorer, ScorerContext::Role::Cross, false,
                                                        {kDecoderCross, index, Side::Target, Side::Source}));
    addnorm2 = register_module("addnorm2", make_addnorm(options));
  }
  if (options.ffn()) {
    ffn = register_module("ffn", make_ffn(options));
    addnorm3 = register_module("addnorm3", make_addnorm(options));
  }
}

torch::Tensor TransformerDecoderBlockImpl::feed_forward(const torch::Tensor& z) {
  if (!ffn) return z;                                        // attention-only
  return addnorm3->post(z, ffn->forward(addnorm3->pre(z)));  // [B, T, H]
}

torch::Tensor TransformerDecoderBlockImpl::forward(const torch::Tensor& x, TransformerDecoderState& state) {
  TORCH_CHECK(x.dim() == 3, "TransformerDecoderBlock: expected x [B, T, H], found ", x.sizes());
  const fused::ComposedOnly composed(!options.fused());
  const bool kv_cache = state.incremental && state.kv_cache;
  const auto blocks_known = static_cast<int64_t>(kv_cache ? state.self_kv.size() : state.caches.size());
  if (kv_cache && blocks_known <= index) {  // a state made by hand: its blocks' slots, empty
    state.self_kv.resize(index + 1);
    state.cross_kv.resize(index + 1);
  } else {
    TORCH_CHECK(index >= 0 && index < blocks_known, "TransformerDecoderBlock ", index, ": the state has ",
                blocks_known, " caches; make it with the decoder's init_state");
  }
  auto h = addnorm1->pre(x);  // [B, T, H] what self-attention sees
  const int64_t batch = x.size(0), steps = x.size(1);
  // x's rows stand at positions offset..offset + T - 1; the keys (cache + x) from 0.
  const int64_t offset = state.incremental ? state.steps : 0;
  torch::Tensor dec_valid_lens;  // [B, T]: query t sees keys 0..offset + t; undefined for one step
  if (!state.incremental || steps > 1) {
    dec_valid_lens = causal_lengths(batch, offset, steps, x.device());  // [B, T]
  }
  const Positions positions{offset, 0};
  const auto& enc = state.encoder.states;  // [B, S, H]
  if (kv_cache) {
    auto& self = state.self_kv[index];  // [B, kv_heads, offset, d] -> [B, kv_heads, offset + T, d]
    torch::Tensor attended;             // [B, T, H]
    if (!self.recurrent.empty() || (!self.defined() && attention1->can_recur())) {
      // A recurrent scorer (linear attention): its state instead of the keys and values, decided at
      // the first step. Causal by construction: new query t sees the state and new keys 0..t.
      attended = attention1->forward_recurrent(h, self);
    } else {
      self = self.append(attention1->project(h, h));
      attended = attention1->forward_projected(h, self, dec_valid_lens, positions);
    }
    auto y = addnorm1->post(x, attended);  // [B, T, H]
    if (!attention2) return feed_forward(y);  // decoder-only
    auto& cross = state.cross_kv[index];      // [B, kv_heads, S, d], projected once
    if (!cross.defined()) cross = attention2->project(enc, enc);
    auto z = addnorm2->post(
        y, attention2->forward_projected(addnorm2->pre(y), cross, state.encoder.valid_lens, positions));  // [B, T, H]
    return feed_forward(z);                                                                             // [B, T, H]
  }
  torch::Tensor key_values;  // [B, K, H], K = offset + T
  if (state.incremental) {
    auto& cache = state.caches[index];  // [B, steps, H]
    key_values = cache.defined() ? torch::cat({cache, h}, 1) : h;
    cache = key_values;
  } else {
    key_values = h;
  }
  auto y = addnorm1->post(x, attention1->forward(h, key_values, key_values, dec_valid_lens, positions));  // [B, T, H]
  if (!attention2) return feed_forward(y);  // decoder-only
  auto z = addnorm2->post(
      y, attention2->forward(addnorm2->pre(y), enc, enc, state.encoder.valid_lens, positions));  // [B, T, H]
  return feed_forward(z);                                                                        // [B, T, H]
}

}  // namespace attnlab::nn
