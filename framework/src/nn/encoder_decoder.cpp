// The encoder-decoder composition the seq2seq trainer trains.
#include <attnlab/error.hpp>
#include <attnlab/nn/encoder_decoder.hpp>

#include <c10/util/Type.h>
#include <fmt/ranges.h>

#include <typeinfo>
#include <unordered_map>

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

void Decoder::use_token_embedding(const torch::nn::Embedding&) {
  throw PluginError(
      fmt::format("this decoder cannot share its embedding: {} does not implement "
                  "Decoder::use_token_embedding() (model.share_embeddings)",
                  c10::demangle(typeid(*this).name())));
}

namespace {

/// Who made `object`, for messages: its registry description, else its C++ type.
template <typename T>
std::string who(const T& object) {
  return object.made_by().empty() ? c10::demangle(typeid(object).name()) : object.made_by();
}

/// PluginError when one tensor is registered under two names: Module::parameters() lists it twice,
/// so Adam would step it twice per step and clipping would count it twice.
void check_unique_parameters(const torch::nn::Module& model) {
  std::unordered_map<const c10::TensorImpl*, std::string> seen;
  for (const auto& p : model.named_parameters()) {
    auto [it, fresh] = seen.emplace(p.value().unsafeGetTensorImpl(), p.key());
    ATTNLAB_CHECK(fresh, PluginError,
                  "the model registers one parameter tensor twice, as '{}' and '{}': an optimizer would step "
                  "it twice. A module that uses another's weights must not register them again (a decoder "
                  "sharing the encoder's embedding unregisters its own: Decoder::use_token_embedding)",
                  it->second, p.key());
  }
}

}  // namespace

EncoderDecoderImpl::EncoderDecoderImpl(std::shared_ptr<Encoder> encoder, std::shared_ptr<Decoder> decoder)
    : encoder_(std::move(encoder)), decoder_(std::move(decoder)) {
  TORCH_CHECK(encoder_ != nullptr && decoder_ != nullptr, "EncoderDecoder: both an encoder and a decoder are needed");
  register_module("encoder", encoder_);
  register_module("decoder", decoder_);
  check_unique_parameters(*this);
}

void EncoderDecoderImpl::share_token_embeddings() {
  const torch::nn::Embedding src = encoder_->token_embedding();
  const torch::nn::Embedding tgt = decoder_->token_embedding();
  ATTNLAB_CHECK(!src.is_empty(), ConfigError,
                "one token embedding for source and target: the encoder, {}, has none to share "
                "(Encoder::token_embedding() is empty)",
                who(*encoder_));
  ATTNLAB_CHECK(!tgt.is_empty(), ConfigError,
                "one token embedding for source and target: the decoder, {}, has none to share "
                "(Decoder::token_embedding() is empty)",
                who(*decoder_));
  if (src.get() == tgt.get()) return;  // already shared
  const auto a = src->weight.sizes(), b = tgt->weight.sizes();
  ATTNLAB_CHECK(a == b, ConfigError,
                "one token embedding for source and target: the encoder's is [{}] but the decoder's is [{}], and "
                "one table needs the same vocabulary and width on both sides ({}; {})",
                fmt::join(a, ", "), fmt::join(b, ", "), who(*encoder_), who(*decoder_));
  try {
    decoder_->use_token_embedding(src);
  } catch (...) {
    plugin::rethrow_naming(*decoder_, "use_token_embedding()");
  }
  ATTNLAB_CHECK(decoder_->token_embedding().get() == src.get(), PluginError,
                "one token embedding for source and target: the decoder, {}, still reports its own table after "
                "use_token_embedding() "
                "(its token_embedding() must return the shared one)",
                who(*decoder_));
  check_unique_parameters(*this);
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
