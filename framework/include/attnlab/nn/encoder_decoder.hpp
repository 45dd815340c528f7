#pragma once
// Plugin kinds "encoder" and "decoder", and the framework's composition of the two. Their
// attention modules record into the active AttentionRecorder (nn/recorder.hpp) as kEncoderSelf,
// kDecoderSelf and kDecoderCross.
#include <attnlab/nn/recorder.hpp>
#include <attnlab/plugin/plugin.hpp>

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <memory>

namespace attnlab::nn {

struct EncoderOutput {
  torch::Tensor states;      // [B, S, H]
  torch::Tensor valid_lens;  // [B] source valid lengths (may be undefined = no padding)
  torch::Tensor hidden = {};  // [layers, B, H] final recurrent state (RNN encoders); undefined otherwise

  /// The rows `indices` [N] (long, on the states' device) of every defined tensor: states
  /// [N, S, H], valid_lens [N], hidden [layers, N, H]. Beam search uses it to expand a batch to
  /// batch * beam rows and to follow the surviving hypotheses.
  EncoderOutput index_select(const torch::Tensor& indices) const;
};

class Encoder : public torch::nn::Module, public plugin::Made {
 public:
  ~Encoder() override = default;
  /// src [B, S] token ids (or [B, S, F] features), valid_lens [B] -> states
  virtual EncoderOutput forward(const torch::Tensor& src, const torch::Tensor& valid_lens) = 0;
  /// Output width H.
  virtual int64_t output_size() const = 0;
  /// The table that embeds the source token ids, for `model.share_embeddings` (one table for
  /// source and target, the decoder adopting it); an empty holder, the default, when it has none
  /// to share (feature inputs, or a plugin that does not offer it).
  virtual torch::nn::Embedding token_embedding() const { return nullptr; }
};

/// Per-sequence decoding state (encoder outputs, caches). Decoders subclass it.
struct DecoderState {
  virtual ~DecoderState() = default;
  EncoderOutput encoder;
  /// true: each forward gets the next step(s) and appends to caches (prediction);
  /// false: forward gets the whole teacher-forced target with causal masking (training/validation).
  bool incremental = false;
  /// Keep only / repeat the batch rows `indices` [N] (long, on the model's device) of every cache
  /// and of `encoder` (index_select on the batch dimension), e.g. after a beam search step. A
  /// decoder whose state holds caches must override this and also reorder `encoder` (see
  /// EncoderOutput::index_select). The default throws PluginError "this decoder cannot beam search".
  virtual void reorder(const torch::Tensor& indices);
};

class Decoder : public torch::nn::Module, public plugin::Made {
 public:
  ~Decoder() override = default;
  virtual std::unique_ptr<DecoderState> init_state(const EncoderOutput& enc, bool incremental) = 0;
  /// tgt [B, T] ids (or [B, T, F]) -> logits [B, T, V] (or features [B, T, F])
  virtual torch::Tensor forward(const torch::Tensor& tgt, DecoderState& state) = 0;
  /// true when forward() returns probabilities (softmax applied, e.g. the TF-lab transformer's
  /// `output: softmax`) instead of logits; losses and beam search then take their log.
  virtual bool outputs_probabilities() const { return false; }
  /// The table that embeds the target token ids (see Encoder::token_embedding); empty by default.
  virtual torch::nn::Embedding token_embedding() const { return nullptr; }
  /// `model.share_embeddings`: embed target ids with `shared`, the encoder's table, from now on
  /// (EncoderDecoderImpl::share_token_embeddings has checked that it has token_embedding()'s
  /// shape). The override must also drop its own table from its registered modules
  /// (unregister_module) so that the shared weight is one parameter of the model, and use
  /// `shared` wherever it used its own (an output projection tied to it included). The default
  /// throws PluginError: "this decoder cannot share its embedding".
  virtual void use_token_embedding(const torch::nn::Embedding& shared);
};

/// The model the seq2seq trainer trains: any encoder plugin + any decoder plugin. Its calls into
/// them (forward, encode, init_state, decode) let an exception from a plugin's method leave naming
/// the plugin (plugin::rethrow_naming); call them rather than encoder()/decoder() directly.
class EncoderDecoderImpl : public torch::nn::Module {
 public:
  /// ConfigError when the two register one parameter tensor twice (an optimizer would step it twice).
  EncoderDecoderImpl(std::shared_ptr<Encoder> encoder, std::shared_ptr<Decoder> decoder);
  /// `model.share_embeddings`: the decoder adopts the encoder's token embedding (Press & Wolf
  /// 2017; fairseq's --share-all-embeddings), so one [V, H] table embeds both sides, and also
  /// the decoder's output when it ties that to its embedding. The dataset's source and target ids
  /// must index one vocabulary (DataInfo::shared_vocab; the caller checks). ConfigError naming
  /// the plugin when either side has no table or the shapes differ; the decoder's own errors
  /// name it (plugin::rethrow_naming).
  void share_token_embeddings();
  /// Teacher-forced: src [B, S], src_valid_lens [B], tgt_in [B, T] -> logits [B, T, V]
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& src_valid_lens, const torch::Tensor& tgt_in);
  /// encoder().forward: src [B, S], src_valid_lens [B] -> states [B, S, H]
  EncoderOutput encode(const torch::Tensor& src, const torch::Tensor& src_valid_lens);
  /// decoder().init_state
  std::unique_ptr<DecoderState> init_state(const EncoderOutput& enc, bool incremental);
  /// decoder().forward: tgt [B, T] -> logits [B, T, V] (one step of incremental decoding: T = 1)
  torch::Tensor decode(const torch::Tensor& tgt, DecoderState& state);
  Encoder& encoder() { return *encoder_; }
  Decoder& decoder() { return *decoder_; }
  int64_t num_parameters() const;

 private:
  std::shared_ptr<Encoder> encoder_;
  std::shared_ptr<Decoder> decoder_;
};
TORCH_MODULE(EncoderDecoder);

}  // namespace attnlab::nn

template <>
struct attnlab::plugin::KindOf<attnlab::nn::Encoder> {
  static constexpr const char* value = "encoder";
};
template <>
struct attnlab::plugin::KindOf<attnlab::nn::Decoder> {
  static constexpr const char* value = "decoder";
};
