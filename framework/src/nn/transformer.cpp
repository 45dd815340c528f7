// Transformer encoder and decoder stacks (d2l 1.0.3, chapter 11.7).
#include <attnlab/nn/transformer.hpp>

#include "nn/fused_linear.hpp"
#include "nn/fused_norm.hpp"

#include <torch/nn/init.h>
#include <torch/nn/modules/conv.h>

#include <cmath>

namespace attnlab::nn {
namespace {

void check_options(const TransformerOptions& o, const char* who) {
  TORCH_CHECK(o.vocab_size() >= 1, who, ": vocab_size must be >= 1, found ", o.vocab_size());
  TORCH_CHECK(o.num_hiddens() >= 1 && o.ffn_num_hiddens() >= 1 && o.num_heads() >= 1 && o.num_blks() >= 1, who,
              ": num_hiddens, ffn_num_hiddens, num_heads and num_blks must be >= 1, found ", o.num_hiddens(), ", ",
              o.ffn_num_hiddens(), ", ", o.num_heads(), ", ", o.num_blks());
  TORCH_CHECK(o.num_hiddens() % o.num_heads() == 0, who, ": ", o.num_heads(), " heads do not divide num_hiddens ",
              o.num_hiddens());
  TORCH_CHECK(o.kv_heads() >= 0 && (o.kv_heads() == 0 || o.num_heads() % o.kv_heads() == 0), who,
              ": kv_heads must divide num_heads ", o.num_heads(), " (0: num_heads), found ", o.kv_heads());
}

/// A norm-first stack's final norm, on h [B, T, H]: the RMSNorm, or the LayerNorm as one fused node
/// unless `fused: false`; h itself for a norm-last stack (neither).
torch::Tensor final_norm(torch::nn::LayerNorm& ln, RMSNorm& rms, const torch::Tensor& h, bool fused) {
  if (rms) return rms->forward(h);
  if (!ln) return h;
  return fused ? fused::layer_norm(h, ln->weight, ln->bias, ln->options.eps()) : ln->forward(h);
}

/// Registers `owner`'s final norm (norm-first stacks) as "final_ln", of the options' norm type.
void make_final_norm(torch::nn::Module& owner, const TransformerOptions& o, torch::nn::LayerNorm& ln, RMSNorm& rms) {
  if (o.norm() != NormPlacement::First) return;
  if (o.norm_type() == NormType::RMS) {
    rms = owner.register_module("final_ln", RMSNorm(o.num_hiddens(), o.layer_norm_eps()));
  } else {
    ln = owner.register_module(
        "final_ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.num_hiddens()}).eps(o.layer_norm_eps())));
  }
}

}  // namespace

TransformerBlockOptions TransformerOptions::block() const {
  return TransformerBlockOptions(num_hiddens(), ffn_num_hiddens(), num_heads())
      .kv_heads(kv_heads())
      .dropout(dropout())
      .attention_dropout(attention_dropout())
      .bias(bias())
      .norm(norm())
      .ffn_dropout(ffn_dropout())
      .layer_norm_eps(layer_norm_eps())
      .ffn_conv1d(ffn_conv1d())
      .per_head_projections(per_head_projections())
      .fused(fused())
      .activation(activation())
      .norm_type(norm_type())
      .cross_attention(cross_attention())
      .ffn(ffn());
}

namespace {

/// GPT-2's initialisation (TransformerInit::Gpt2).
void initialize_gpt2(torch::nn::Module& module, int64_t num_blks) {
  constexpr double kStd = 0.02;
  for (const auto& m : module.modules(/*include_self=*/false)) {
    if (auto* linear = m->as<torch::nn::Linear>()) {
      linear->weight.normal_(0.0, kStd);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* conv = m->as<torch::nn::Conv1d>()) {
      conv->weight.normal_(0.0, kStd);
      if (conv->bias.defined()) conv->bias.zero_();
    } else if (auto* heads = m->as<PerHeadLinear>()) {
      heads->weight.normal_(0.0, kStd);
      if (heads->bias.defined()) heads->bias.zero_();
    } else if (auto* emb = m->as<torch::nn::Embedding>()) {
      emb->weight.normal_(0.0, kStd);
    }
  }
  // The layers that write into the residual stream: std scaled down by the number of residual
  // additions (two per block), so that the stream's variance does not grow with depth.
  const double residual = kStd / std::sqrt(2.0 * static_cast<double>(std::max<int64_t>(num_blks, 1)));
  for (const auto& m : module.modules(/*include_self=*/false)) {
    if (auto* mha = m->as<MultiHeadAttention>()) {
      mha->W_o->weight.normal_(0.0, residual);
    } else if (auto* ffn = m->as<PositionWiseFFN>()) {
      (ffn->dense2 ? ffn->dense2->weight : ffn->conv2->weight).normal_(0.0, residual);
    }
  }
}

}  // namespace

void initialize_transformer(torch::nn::Module& module, TransformerInit init, int64_t num_blks) {
  if (init == TransformerInit::Default) return;
  torch::NoGradGuard no_grad;
  if (init == TransformerInit::Gpt2) return initialize_gpt2(module, num_blks);
  // Children only: a module under construction is not yet owned by a shared_ptr.
  for (const auto& m : module.modules(/*include_self=*/false)) {
    if (auto* linear = m->as<torch::nn::Linear>()) {
      torch::nn::init::xavier_uniform_(linear->weight);  // [out, in]: fans in, out
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* conv = m->as<torch::nn::Conv1d>()) {
      torch::nn::init::xavier_uniform_(conv->weight);  // [out, in, 1]: fans in, out, as Keras's Conv1D
      if (conv->bias.defined()) conv->bias.zero_();
    } else if (auto* heads = m->as<PerHeadLinear>()) {
      const auto& w = heads->weight;  // [heads, in, d_k]: each head is one Dense(d_k) kernel
      const double bound = std::sqrt(6.0 / static_cast<double>(w.size(1) + w.size(2)));
      w.uniform_(-bound, bound);
      if (heads->bias.defined()) heads->bias.zero_();
    } else if (auto* emb = m->as<torch::nn::Embedding>()) {
      if (init == TransformerInit::Fairseq) {
        emb->weight.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(emb->weight.size(1))));  // [vocab, H]
      } else {
        emb->weight.uniform_(-0.05, 0.05);  // Keras's Embedding default
      }
    }
  }
}

// ---------------------------------------------------------------------------------------- encoder

TransformerEncoderImpl::TransformerEncoderImpl(const TransformerOptions& options_, const ScorerFactory& make_scorer)
    : options(options_) {
  check_options(options, "TransformerEncoder");
  embedding = register_module("embedding", torch::nn::Embedding(options.vocab_size(), options.num_hiddens()));
  pos_encoding = register_module("pos_encoding", PositionalEncoding(options.num_hiddens(), options.dropout(),
                                                                    options.max_len(), options.positional_encoding()));
  auto blks = register_module("blks", torch::nn::ModuleList());
  for (int64_t i = 0; i < options.num_blks(); ++i) {
    blocks.emplace_back(options.block(), make_scorer, i);
    blks->push_back(blocks.back());
  }
  if (options.positional_encoding() == AbsolutePositions::Auto &&
      blocks.front()->attention->scorer().encodes_positions()) {
    pos_encoding->switch_off();  // the scorer says where tokens stand
  }
  make_final_norm(*this, options, final_ln, final_rms);
  TORCH_CHECK(!options.tie_embeddings() && !options.output_softmax(),
              "TransformerEncoder: tie_embeddings and output_softmax are decoder options");
  initialize_transformer(*this, options.init(), options.num_blks());
}

EncoderOutput TransformerEncoderImpl::forward(const torch::Tensor& src, const torch::Tensor& valid_lens) {
  TORCH_CHECK(src.dim() == 2, "TransformerEncoder: expected src [B, S] token ids, found ", src.sizes());
  auto x = embedding->forward(src);  // [B, S, H]
  if (options.scale_embeddings()) x = x * std::sqrt(static_cast<double>(options.num_hiddens()));
  x = pos_encoding->forward(x);  // [B, S, H]
  return {forward_embedded(x, valid_lens), valid_lens, {}};
}

torch::Tensor TransformerEncoderImpl::forward_embedded(const torch::Tensor& x, const torch::Tensor& valid_lens) {
  auto h = x;  // [B, S, H]
  for (auto& blk : blocks) h = blk->forward(h, valid_lens);
  return final_norm(final_ln, final_rms, h, options.fused());  // [B, S, H]
}

// ---------------------------------------------------------------------------------------- decoder

void TransformerDecoderState::reorder(const torch::Tensor& indices) {
  encoder = encoder.index_select(indices);
  for (auto& cache : caches) {
    if (cache.defined()) cache = cache.index_select(0, indices);  // [N, steps, H]
  }
  for (auto& kv : self_kv) kv = kv.index_select(indices);   // [N, kv_heads, steps, d]
  for (auto& kv : cross_kv) kv = kv.index_select(indices);  // [N, kv_heads, S, d]
}

int64_t TransformerDecoderState::cache_bytes() const {
  int64_t bytes = 0;
  for (const auto& cache : caches) {
    if (cache.defined()) bytes += static_cast<int64_t>(cache.numel() * cache.element_size());
  }
  for (const auto& kv : self_kv) bytes += kv.bytes();
  for (const auto& kv : cross_kv) bytes += kv.bytes();
  return bytes;
}

TransformerDecoderImpl::TransformerDecoderImpl(const TransformerOptions& options_, const ScorerFactory& make_scorer)
    : options(options_) {
  check_options(options, "TransformerDecoder");
  embedding = register_module("embedding", torch::nn::Embedding(options.vocab_size(), options.num_hiddens()));
  pos_encoding = register_module("pos_encoding", PositionalEncoding(options.num_hiddens(), options.dropout(),
                                                                    options.max_len(), options.positional_encoding()));
  auto blks = register_module("blks", torch::nn::ModuleList());
  for (int64_t i = 0; i < options.num_blks(); ++i) {
    blocks.emplace_back(options.block(), make_scorer, i);
    blks->push_back(blocks.back());
  }
  if (options.positional_encoding() == AbsolutePositions::Auto &&
      blocks.front()->attention1->scorer().encodes_positions()) {
    pos_encoding->switch_off();  // the causal self-attention's scorer says where tokens stand
  }
  make_final_norm(*this, options, final_ln, final_rms);
  if (!options.tie_embeddings()) {
    dense = register_module(
        "dense",
        torch::nn::Linear(torch::nn::LinearOptions(options.num_hiddens(), options.vocab_size()).bias(options.output_bias())));
  }
  initialize_transformer(*this, options.init(), options.num_blks());
}

void TransformerDecoderImpl::use_token_embedding(const torch::nn::Embedding& shared) {
  unregister_module("embedding");
  embedding = shared;
}

torch::Tensor TransformerDecoderImpl::output_weight() const {
  return dense ? dense->weight : embedding->weight;  // [vocab, H]
}

std::unique_ptr<DecoderState> TransformerDecoderImpl::init_state(const EncoderOutput& enc, bool incremental) {
  auto state = std::make_unique<TransformerDecoderState>();
  state->encoder = enc;
  state->incremental = incremental;
  state->kv_cache = options.kv_cache();
  state->caches.resize(blocks.size());
  if (state->kv_cache) {
    state->self_kv.resize(blocks.size());
    state->cross_kv.resize(blocks.size());
  }
  return state;
}

torch::Tensor TransformerDecoderImpl::forward(const torch::Tensor& tgt, DecoderState& state) {
  TORCH_CHECK(tgt.dim() == 2, "TransformerDecoder: expected tgt [B, T] token ids, found ", tgt.sizes());
  auto* st = dynamic_cast<TransformerDecoderState*>(&state);
  TORCH_CHECK(st != nullptr, "TransformerDecoder: the state was not made by TransformerDecoder::init_state");
  const int64_t offset = st->incremental ? st->steps : 0;
  auto x = embedding->forward(tgt);  // [B, T, H]
  if (options.scale_embeddings()) x = x * std::sqrt(static_cast<double>(options.num_hiddens()));
  x = pos_encoding->forward(x, offset);  // [B, T, H]
  auto h = forward_embedded(x, *st);                                        // [B, T, H]
  if (st->incremental) st->steps += tgt.size(1);
  auto logits =
      dense ? fused::linear(h, dense->weight, dense->bias) : torch::matmul(h, embedding->weight.t());  // [B, T, V]
  return options.output_softmax() ? torch::softmax(logits, -1) : logits;              // [B, T, V]
}

torch::Tensor TransformerDecoderImpl::forward_embedded(const torch::Tensor& x, TransformerDecoderState& state) {
  auto h = x;  // [B, T, H]
  for (auto& blk : blocks) h = blk->forward(h, state);
  return final_norm(final_ln, final_rms, h, options.fused());  // [B, T, H]
}

}  // namespace attnlab::nn
