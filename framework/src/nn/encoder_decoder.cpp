// The encoder-decoder composition the seq2seq trainer trains.
#include <attnlab/error.hpp>
#include <attnlab/nn/encoder_decoder.hpp>

#include <c10/util/Type.h>

#include <typeinfo>

namespace attnlab::nn {

EncoderOutput EncoderOutput::index_select(const torch::Tensor& indices) const {
  EncoderOutput out;
  if (states.defined()) out.states = states.index_select(0, indices);            // [N, S, H]
  if (valid_lens.defined()) out.valid_lens = valid_lens.index_select(0, indices);  // [N]
  if (hidden.defined()) out.hidden = hidden.index_select(1, indices);            // [layers, N, H]
  return out;
}

void DecoderState::reorder(const torch::Tensor&) {
  throw PluginError(fmt::format(
      "this decoder cannot beam search: its decoding state ({}) does not implement DecoderState::reorder()",
      c10::demangle(typeid(*this).name())));
}

EncoderDecoderImpl::EncoderDecoderImpl(std::shared_ptr<Encoder> encoder, std::shared_ptr<Decoder> decoder)
    : encoder_(std::move(encoder)), decoder_(std::move(decoder)) {
  TORCH_CHECK(encoder_ != nullptr && decoder_ != nullptr, "EncoderDecoder: both an encoder and a decoder are needed");
  register_module("encoder", encoder_);
  register_module("decoder", decoder_);
}

torch::Tensor EncoderDecoderImpl::forward(const torch::Tensor& src, const torch::Tensor& src_valid_lens,
                                          const torch::Tensor& tgt_in) {
  auto enc = encode(src, src_valid_lens);  // states [B, S, H]
  auto state = init_state(enc, /*incremental=*/false);
  return decode(tgt_in, *state);  // [B, T, V]
}

EncoderOutput EncoderDecoderImpl::encode(const torch::Tensor& src, const torch::Tensor& src_valid_lens) {
  try {
    return encoder_->forward(src, src_valid_lens);  // states [B, S, H]
  } catch (...) {
    plugin::rethrow_naming(*encoder_, "forward()");
  }
}

std::unique_ptr<DecoderState> EncoderDecoderImpl::init_state(const EncoderOutput& enc, bool incremental) {
  try {
    return decoder_->init_state(enc, incremental);
  } catch (...) {
    plugin::rethrow_naming(*decoder_, "init_state()");
  }
}

torch::Tensor EncoderDecoderImpl::decode(const torch::Tensor& tgt, DecoderState& state) {
  try {
    return decoder_->forward(tgt, state);  // [B, T, V]
  } catch (...) {
    plugin::rethrow_naming(*decoder_, "forward()");
  }
}

int64_t EncoderDecoderImpl::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

}  // namespace attnlab::nn
