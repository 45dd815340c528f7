#pragma once
// Transformer encoder/decoder blocks and stacks (d2l 1.0.3, chapter 11.7), with norm-last (d2l)
// or norm-first placement and any scorer. Plugins map options onto these; models with other
// inputs (continuous features) reuse the blocks and the *_embedded entry points.
#include <attnlab/nn/attention.hpp>
#include <attnlab/nn/encoder_decoder.hpp>
#include <attnlab/nn/layers.hpp>

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>

#include <memory>
#include <optional>
#include <vector>

namespace attnlab::nn {

struct TransformerBlockOptions {
  TransformerBlockOptions(int64_t num_hiddens, int64_t ffn_num_hiddens, int64_t num_heads)
      : num_hiddens_(num_hiddens), ffn_num_hiddens_(ffn_num_hiddens), num_heads_(num_heads) {}
  TORCH_ARG(int64_t, num_hiddens);                                     // model width H
  TORCH_ARG(int64_t, ffn_num_hiddens);                                 // FFN inner width
  TORCH_ARG(int64_t, num_heads);                                       // must divide num_hiddens
  TORCH_ARG(int64_t, kv_heads) = 0;  // key/value heads of every attention (MultiHeadAttentionOptions); 0 = num_heads
  TORCH_ARG(double, dropout) = 0.0;                                    // attention weights and every residual branch
  TORCH_ARG(std::optional<double>, attention_dropout) = std::nullopt;  // attention weights' own; unset: dropout
  TORCH_ARG(bool, bias) = false;  // bias in the attention projections, and in SwiGLU's FFN layers (others have one)
  TORCH_ARG(NormPlacement, norm) = NormPlacement::Last;                // Last = d2l AddNorm
  TORCH_ARG(double, ffn_dropout) = 0.0;           // after the FFN's ReLU (Step-by-Step's layers); 0 = d2l
  TORCH_ARG(double, layer_norm_eps) = 1e-5;       // every LayerNorm's epsilon (Keras: 1e-3, TF lab: 1e-6)
  TORCH_ARG(bool, ffn_conv1d) = false;            // FFN as two kernel-size-1 Conv1d (TF lab)
  TORCH_ARG(bool, per_head_projections) = false;  // W_q/W_k/W_v as [heads, H, H / heads] (TF lab)
  TORCH_ARG(bool, fused) = true;                  // fused CPU kernels: add & norm (nn/fused.hpp), attention, linears
  TORCH_ARG(Activation, activation) = Activation::ReLU;  // the FFN's nonlinearity (SwiGLU: a gate layer too)
  TORCH_ARG(NormType, norm_type) = NormType::Layer;      // every norm: LayerNorm, or RMSNorm (Llama)
  TORCH_ARG(bool, cross_attention) = true;  // decoder block: attention on the encoder's states (false: decoder-only)
  TORCH_ARG(bool, ffn) = true;              // false: attention-only blocks, no FFN (Elhage et al. 2021)
};

/// Self-attention + add&norm, FFN + add&norm. Its scorer is asked for with role Self, not causal,
/// per-head sizes and num_heads. Its self-attention records as kEncoderSelf layer `index`.
class TransformerEncoderBlockImpl : public torch::nn::Module {
 public:
  TransformerEncoderBlockImpl(const TransformerBlockOptions& options, const ScorerFactory& make_scorer,
                              int64_t index = 0);
  /// x [B, S, H], valid_lens [B] or undefined -> [B, S, H]
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& valid_lens);

  TransformerBlockOptions options;
  MultiHeadAttention attention{nullptr};
  AddNorm addnorm1{nullptr}, addnorm2{nullptr};
  PositionWiseFFN ffn{nullptr};
};
TORCH_MODULE(TransformerEncoderBlock);

/// Decoding state of a transformer decoder: encoder outputs plus, in incremental mode, what each
/// block keeps of the steps decoded so far.
struct TransformerDecoderState : DecoderState {
  /// How incremental steps reuse the past. true (the default): a KV cache, each block's
  /// self-attention keeps its projected keys and values (self_kv) and its cross-attention projects
  /// the encoder's states once (cross_kv). false: d2l's cache of each block's inputs (caches),
  /// projected again at every step (the reference the KV cache is tested and benchmarked against).
  bool kv_cache = true;
  /// kv_cache false: per block, what its self-attention saw as keys/values so far, [B, steps, H].
  std::vector<torch::Tensor> caches;
  /// kv_cache true: per block, its self-attention's keys and values [B, kv_heads, steps, d] and its
  /// cross-attention's [B, kv_heads, S, d] (made at the first step). Blocks grow them as needed.
  /// A self-attention whose scorer is recurrent (linear) keeps that scorer's state instead
  /// (KeyValues::recurrent, its size independent of the steps), unless attention is recorded.
  std::vector<KeyValues> self_kv, cross_kv;
  /// Target positions decoded so far (incremental mode): the next step's positional offset.
  int64_t steps = 0;
  /// Rows `indices` [N] of every cache and of the encoder outputs (beam search).
  void reorder(const torch::Tensor& indices) override;
  /// Bytes the caches hold (self and cross, or the inputs' cache): what decoding keeps per sequence.
  int64_t cache_bytes() const;
};

/// Causal self-attention + add&norm, cross-attention on the encoder outputs + add&norm,
/// FFN + add&norm. Without cross_attention (a decoder-only language model) the middle part is
/// absent (no attention2, addnorm2) and the state's encoder is not read; without ffn the last part
/// is absent (no ffn, addnorm3). Block `index` owns the state's caches at `index` and records as layer `index` of
/// kDecoderSelf (attention1) and kDecoderCross (attention2). Its scorers are asked for with role
/// Self and causal (attention1), role Cross (attention2).
class TransformerDecoderBlockImpl : public torch::nn::Module {
 public:
  TransformerDecoderBlockImpl(const TransformerBlockOptions& options, const ScorerFactory& make_scorer, int64_t index);
  /// x [B, T, H] -> [B, T, H]. Full-sequence mode (state.incremental false): keys/values = x with
  /// causal valid lengths 1..T, positions from 0. Incremental: keys/values = the cached past and x
  /// (state.kv_cache: projected ones; otherwise the inputs, projected again), x appended to the
  /// cache; x's rows stand at positions state.steps.. (the scorers' query offset; keys from 0),
  /// and x's row t sees keys up to state.steps + t.
  torch::Tensor forward(const torch::Tensor& x, TransformerDecoderState& state);

  TransformerBlockOptions options;
  int64_t index;
  MultiHeadAttention attention1{nullptr}, attention2{nullptr};  // attention2 null without cross_attention
  AddNorm addnorm1{nullptr}, addnorm2{nullptr}, addnorm3{nullptr};
  PositionWiseFFN ffn{nullptr};  // null (and addnorm3) without ffn

 private:
  torch::Tensor feed_forward(const torch::Tensor& z);  // addnorm3 + ffn, or z without ffn
};
TORCH_MODULE(TransformerDecoderBlock);

/// Initialisation of a transformer stack. Default: LibTorch's module defaults. GlorotUniform: Keras's
/// defaults, as the TF lab's model has them: Linear / Conv1d kernels and each head's projection
/// Glorot (Xavier) uniform, biases zero, embeddings uniform(-0.05, 0.05), LayerNorms (1, 0).
/// Fairseq: fairseq's transformer (Vaswani et al.'s convention): the same Glorot-uniform kernels
/// (fairseq gives W_q/W_k/W_v gain 1/sqrt(2); here gain 1) and zero biases, embeddings
/// normal(0, num_hiddens^-1/2) (fairseq also zeroes the padding row), so that the forward's scaling by
/// sqrt(num_hiddens) gives token vectors of unit scale, the positional encoding's. Default
/// embeddings are normal(0, 1): scaled, they are ~sqrt(num_hiddens) times the positional signal.
/// Gpt2: GPT-2's (Radford et al. 2019, as nanoGPT and Hugging Face write it): Linear, Conv1d and
/// per-head weights and embeddings normal(0, 0.02), biases zero, and the projections that write into
/// the residual stream (each attention's W_o, each FFN's second layer) normal(0, 0.02 / sqrt(2 N))
/// for N blocks.
enum class TransformerInit { Default, GlorotUniform, Fairseq, Gpt2 };

struct TransformerOptions {
  TransformerOptions(int64_t vocab_size, int64_t num_hiddens, int64_t ffn_num_hiddens, int64_t num_heads,
                     int64_t num_blks)
      : vocab_size_(vocab_size),
        num_hiddens_(num_hiddens),
        ffn_num_hiddens_(ffn_num_hiddens),
        num_heads_(num_heads),
        num_blks_(num_blks) {}
  TORCH_ARG(int64_t, vocab_size);       // embedding rows (and decoder output size)
  TORCH_ARG(int64_t, num_hiddens);      // H
  TORCH_ARG(int64_t, ffn_num_hiddens);  // FFN inner width
  TORCH_ARG(int64_t, num_heads);        // must divide num_hiddens
  TORCH_ARG(int64_t, num_blks);         // number of blocks
  TORCH_ARG(int64_t, kv_heads) = 0;     // key/value heads (grouped-query; 1 = multi-query); 0 = num_heads
  TORCH_ARG(bool, kv_cache) = true;     // decoder: incremental decoding keeps projected keys/values
  TORCH_ARG(double, dropout) = 0.0;     // positional encoding, attention, residual branches
  TORCH_ARG(std::optional<double>, attention_dropout) = std::nullopt;  // attention weights' own; unset: dropout
  TORCH_ARG(bool, bias) = false;  // bias in the attention projections, and in SwiGLU's FFN layers (others have one)
  TORCH_ARG(NormPlacement, norm) = NormPlacement::Last;                // First adds a final LayerNorm
  TORCH_ARG(int64_t, max_len) = 1000;                                  // positional encoding length
  // added to the embeddings; Auto: none when the module's self-attention scorer encodes positions
  TORCH_ARG(AbsolutePositions, positional_encoding) = AbsolutePositions::Sinusoidal;
  TORCH_ARG(double, ffn_dropout) = 0.0;         // after the FFN's ReLU (Step-by-Step's layers); 0 = d2l
  // TF-lab variants (seed 004); the defaults are d2l's model.
  TORCH_ARG(TransformerInit, init) = TransformerInit::Default;
  TORCH_ARG(double, layer_norm_eps) = 1e-5;       // every LayerNorm's epsilon
  TORCH_ARG(bool, ffn_conv1d) = false;            // FFN as kernel-size-1 Conv1d layers (same function as linear)
  TORCH_ARG(bool, per_head_projections) = false;  // W_q/W_k/W_v weights [heads, H, H / heads]
  TORCH_ARG(bool, tie_embeddings) = false;        // decoder: logits = h @ embedding.weight^T (no output bias)
  TORCH_ARG(bool, output_softmax) = false;        // decoder: forward returns softmax probabilities
  TORCH_ARG(bool, fused) = true;                  // add & norm, attention, linears fused on CPU; false: torch ops
  // Decoder-only language models (nn/transformer_lm.hpp); the defaults are d2l's model.
  TORCH_ARG(Activation, activation) = Activation::ReLU;  // the FFN's nonlinearity (SwiGLU: a gate layer too)
  TORCH_ARG(NormType, norm_type) = NormType::Layer;      // every norm, the final one too: LayerNorm or RMSNorm
  TORCH_ARG(bool, cross_attention) = true;   // decoder: attention on the encoder's states
  TORCH_ARG(bool, ffn) = true;               // false: attention-only blocks
  TORCH_ARG(bool, scale_embeddings) = true;  // embeddings * sqrt(H) before the positions (d2l); GPT-2: false
  TORCH_ARG(bool, output_bias) = true;       // decoder: the untied output layer's bias

 public:
  /// The per-block options these imply.
  TransformerBlockOptions block() const;
};

/// d2l TransformerEncoder: X = pos_encoding(embedding(src) * sqrt(H)), blocks, final LN (norm-first).
/// positional_encoding Auto is resolved once the blocks are made: None when their self-attention
/// scorer encodes positions (pos_encoding->kind() says which).
class TransformerEncoderImpl : public Encoder {
 public:
  TransformerEncoderImpl(const TransformerOptions& options, const ScorerFactory& make_scorer);
  /// src [B, S] ids, valid_lens [B] or undefined -> states [B, S, H]
  EncoderOutput forward(const torch::Tensor& src, const torch::Tensor& valid_lens) override;
  /// x [B, S, H] already embedded and position-encoded -> [B, S, H] (blocks + final LN)
  torch::Tensor forward_embedded(const torch::Tensor& x, const torch::Tensor& valid_lens);
  int64_t output_size() const override { return options.num_hiddens(); }
  torch::nn::Embedding token_embedding() const override { return embedding; }

  TransformerOptions options;
  torch::nn::Embedding embedding{nullptr};
  PositionalEncoding pos_encoding{nullptr};
  std::vector<TransformerEncoderBlock> blocks;  // registered under "blks"
  torch::nn::LayerNorm final_ln{nullptr};       // norm-first only (norm_type layer)
  RMSNorm final_rms{nullptr};                   // norm-first with norm_type rms, registered as "final_ln"
};
TORCH_MODULE(TransformerEncoder);

/// d2l TransformerDecoder: embedding * sqrt(H), positional encoding (offset by the steps already
/// decoded in incremental mode), blocks, final LN (norm-first), dense -> vocab. positional_encoding
/// Auto: None when the blocks' causal self-attention scorer encodes positions (as the encoder's).
class TransformerDecoderImpl : public Decoder {
 public:
  TransformerDecoderImpl(const TransformerOptions& options, const ScorerFactory& make_scorer);
  /// -> TransformerDecoderState with empty caches
  std::unique_ptr<DecoderState> init_state(const EncoderOutput& enc, bool incremental) override;
  /// tgt [B, T] ids -> logits [B, T, V]; state must come from init_state
  torch::Tensor forward(const torch::Tensor& tgt, DecoderState& state) override;
  /// x [B, T, H] already embedded and position-encoded -> [B, T, H] (blocks + final LN)
  torch::Tensor forward_embedded(const torch::Tensor& x, TransformerDecoderState& state);

  bool outputs_probabilities() const override { return options.output_softmax(); }
  /// The output projection's weight [vocab, H]: dense's, or the embedding's when tied.
  torch::Tensor output_weight() const;
  torch::nn::Embedding token_embedding() const override { return embedding; }
  /// Embeds (and, with tie_embeddings, projects) with `shared`; its own table is unregistered.
  void use_token_embedding(const torch::nn::Embedding& shared) override;

  TransformerOptions options;
  torch::nn::Embedding embedding{nullptr};
  PositionalEncoding pos_encoding{nullptr};
  std::vector<TransformerDecoderBlock> blocks;  // registered under "blks"
  torch::nn::LayerNorm final_ln{nullptr};       // norm-first only (norm_type layer)
  RMSNorm final_rms{nullptr};                   // norm-first with norm_type rms, registered as "final_ln"
  torch::nn::Linear dense{nullptr};             // H -> vocab; null when tie_embeddings
};
TORCH_MODULE(TransformerDecoder);

/// Applies `init` to every Linear, Conv1d, PerHeadLinear and Embedding below `module`
/// (TransformerInit::Default leaves it as it is). Gpt2 scales the residual projections by
/// 1/sqrt(2 num_blks).
void initialize_transformer(torch::nn::Module& module, TransformerInit init, int64_t num_blks = 1);

}  // namespace attnlab::nn
