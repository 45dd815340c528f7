#pragma once
// A Hugging Face model folder (config.json + safetensors) as the gpt plugin's `pretrained:` option
// reads it: the architecture's shape, and its weights copied into an nn::TransformerLM built to
// that shape. GPT-2 (model_type "gpt2"): Conv1D weights ([in, out], transposed here), the fused
// q/k/v projection split into W_q, W_k, W_v, learned positions, the output layer tied to the token
// embedding, names with or without the "transformer." prefix; the causal-mask buffers of older
// files ("attn.bias", "attn.masked_bias") are skipped. Llama (model_type "llama", and "mistral"
// without a sliding window): RMSNorm, SwiGLU MLP, RoPE (the rope scorer, base rope_theta), grouped
// key/value heads, no biases, an output layer of its own unless tied, names with or without the
// "model." prefix.
#include <attnlab/nn/layers.hpp>
#include <attnlab/nn/transformer_lm.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace attnlab::models::gpt {

/// config.json's names of the fields the architectures share (GPT-2's n_embd is Llama's
/// hidden_size), as they are read and as messages quote them.
struct HfKeys {
  const char* num_hiddens = "n_embd";
  const char* ffn_num_hiddens = "n_inner";
  const char* num_heads = "n_head";
  const char* num_blks = "n_layer";
  const char* max_len = "n_positions";
  const char* eps = "layer_norm_epsilon";
};

/// What config.json says, in the gpt plugin's terms.
struct HfConfig {
  std::string dir;         // the model folder
  std::string file;        // its config.json
  std::string model_type;  // "gpt2", "llama" or "mistral"
  HfKeys keys;             // its names of the fields below
  int64_t vocab_size = 0;
  int64_t num_hiddens = 0;
  int64_t ffn_num_hiddens = 0;
  int64_t num_heads = 0;
  int64_t num_blks = 0;
  int64_t max_len = 0;  // n_positions
  double layer_norm_eps = 1e-5;  // GPT-2's layer_norm_epsilon, Llama's rms_norm_eps
  nn::Activation activation = nn::Activation::GELUTanh;
  bool tie_embeddings = true;
  // Llama's differences from GPT-2:
  nn::NormType norm_type = nn::NormType::Layer;  // rms
  std::optional<int64_t> kv_heads;               // num_key_value_heads when fewer than the heads
  std::optional<double> rope_theta;  // set: positions by RoPE of this base, none added; unset: GPT-2's learned ones
  bool bias = true;                  // Llama: none (attention_bias and mlp_bias false)
};

/// `path`: a model folder, or its config.json. DataError naming config.json when it is missing,
/// does not parse (the parser's message and byte position), lacks a field or gives it the wrong
/// type, names a model_type or an option the plugin cannot run (each one line naming the value).
HfConfig read_hf_config(const std::string& path);

/// Copies the folder's safetensors weights into `model` (built from `config`, every parameter
/// covered once: one copy of the weights in memory, the file's pages read once). DataError naming
/// the file and the tensor for a tensor missing, of the wrong shape, of a non-floating dtype, or one
/// the model has no place for.
void load_hf_weights(const HfConfig& config, nn::TransformerLMImpl& model);

}  // namespace attnlab::models::gpt
