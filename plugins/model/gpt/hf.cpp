// The gpt plugin's `pretrained:` folder: config.json read with nlohmann::json, the weights through
// safetensors::Weights (memory-mapped) copied tensor by tensor into the parameters.
#include "hf.hpp"

#include <attnlab/error.hpp>
#include <attnlab/files.hpp>
#include <attnlab/nn/safetensors.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace attnlab::models::gpt {
namespace {

using json = nlohmann::json;

bool is_dir(const std::string& path) { return files::problem(path, files::Want::Directory).empty(); }

/// config.json's field `key` as T; DataError naming the file and the field when it is absent (and
/// `fallback` is null) or of another JSON type.
template <class T>
T field(const json& j, const std::string& file, const char* key, const T* fallback = nullptr) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (fallback != nullptr) return *fallback;
    throw DataError(fmt::format("{}: has no \"{}\", which the gpt plugin needs", file, key));
  }
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw DataError(fmt::format("{}: \"{}\" is {}, expected {}", file, key, it->dump(),
                                std::is_same_v<T, std::string> ? "a string"
                                : std::is_same_v<T, bool>      ? "true or false"
                                                               : "a number"));
  }
}

int64_t positive(const json& j, const std::string& file, const char* key, const int64_t* fallback = nullptr) {
  const auto v = field<int64_t>(j, file, key, fallback);
  ATTNLAB_CHECK(v > 0, DataError, "{}: \"{}\" is {}, expected a positive integer", file, key, v);
  return v;
}

nn::Activation activation_of(const std::string& name, const std::string& file) {
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return nn::Activation::GELUTanh;
  if (name == "gelu") return nn::Activation::GELU;
  if (name == "relu") return nn::Activation::ReLU;
  throw DataError(fmt::format(
      "{}: activation_function \"{}\" is not one the gpt plugin has (gelu_new, gelu_pytorch_tanh, gelu, relu)", file,
      name));
}

/// `key` must have the value the architecture's computation here assumes, else the model computes
/// something else.
void require_flag(const json& j, const HfConfig& c, const char* key, bool expected) {
  const bool v = field<bool>(j, c.file, key, &expected);
  ATTNLAB_CHECK(v == expected, DataError, "{}: \"{}\" is {}: the gpt plugin runs {} with it {}", c.file, key, v,
                c.model_type, expected);
}

/// The fields the architectures share, under their names `c.keys`; `eps`: the norm's epsilon when
/// config.json gives none.
void read_shape(const json& j, HfConfig& c, double eps) {
  c.vocab_size = positive(j, c.file, "vocab_size");
  c.num_hiddens = positive(j, c.file, c.keys.num_hiddens);
  c.num_heads = positive(j, c.file, c.keys.num_heads);
  c.num_blks = positive(j, c.file, c.keys.num_blks);
  c.max_len = positive(j, c.file, c.keys.max_len);
  const int64_t four_h = 4 * c.num_hiddens;  // GPT-2's n_inner null
  c.ffn_num_hiddens = positive(j, c.file, c.keys.ffn_num_hiddens, c.model_type == "gpt2" ? &four_h : nullptr);
  c.layer_norm_eps = field<double>(j, c.file, c.keys.eps, &eps);
  ATTNLAB_CHECK(c.num_hiddens % c.num_heads == 0, DataError, "{}: {} {} does not divide {} {}", c.file,
                c.keys.num_heads, c.num_heads, c.keys.num_hiddens, c.num_hiddens);
}

/// GPT-2's config.json onto `c`.
void read_gpt2(const json& j, HfConfig& c) {
  read_shape(j, c, 1e-5);
  const std::string gelu_new = "gelu_new";
  c.activation = activation_of(field<std::string>(j, c.file, "activation_function", &gelu_new), c.file);
  const bool yes = true;
  c.tie_embeddings = field<bool>(j, c.file, "tie_word_embeddings", &yes);
  require_flag(j, c, "scale_attn_weights", true);
  require_flag(j, c, "scale_attn_by_inverse_layer_idx", false);
  require_flag(j, c, "add_cross_attention", false);
}

/// Llama's rope_theta: the top-level field (transformers 4) or rope_parameters' (transformers 5),
/// 10000 when neither says. Scaled RoPE (rope_scaling, or a rope_type other than "default") is
/// another computation: refused.
double rope_theta_of(const json& j, const std::string& file) {
  if (const auto s = j.find("rope_scaling"); s != j.end() && !s->is_null()) {
    throw DataError(fmt::format("{}: \"rope_scaling\" is {}: the gpt plugin runs RoPE unscaled (rope_scaling null)",
                                file, s->dump()));
  }
  const double ten_thousand = 10000.0;
  double theta = field<double>(j, file, "rope_theta", &ten_thousand);
  if (const auto p = j.find("rope_parameters"); p != j.end() && !p->is_null()) {
    ATTNLAB_CHECK(p->is_object(), DataError, "{}: \"rope_parameters\" is {}, expected an object", file, p->dump());
    const std::string standard = "default";
    const auto type = field<std::string>(*p, file, "rope_type", &standard);
    ATTNLAB_CHECK(type == standard, DataError,
                  "{}: \"rope_parameters\" is {}: the gpt plugin runs RoPE unscaled (rope_type \"default\")", file,
                  p->dump());
    theta = field<double>(*p, file, "rope_theta", &theta);
  }
  ATTNLAB_CHECK(theta > 1.0, DataError, "{}: rope_theta is {}, expected a number above 1", file, theta);
  return theta;
}

/// Llama's (or Mistral's) config.json onto `c`.
void read_llama(const json& j, HfConfig& c) {
  c.keys = {"hidden_size",       "intermediate_size",       "num_attention_heads",
            "num_hidden_layers", "max_position_embeddings", "rms_norm_eps"};
  read_shape(j, c, 1e-6);  // LlamaConfig's default epsilon
  const int64_t kv = positive(j, c.file, "num_key_value_heads", &c.num_heads);
  ATTNLAB_CHECK(c.num_heads % kv == 0, DataError, "{}: num_key_value_heads {} does not divide num_attention_heads {}",
                c.file, kv, c.num_heads);
  if (kv != c.num_heads) c.kv_heads = kv;
  const int64_t head_dim = c.num_hiddens / c.num_heads;
  const auto given_head_dim = positive(j, c.file, "head_dim", &head_dim);
  ATTNLAB_CHECK(given_head_dim == head_dim, DataError,
                "{}: \"head_dim\" is {}, but hidden_size / num_attention_heads is {}: the gpt plugin's heads are "
                "hidden_size / num_attention_heads wide",
                c.file, given_head_dim, head_dim);
  const std::string silu = "silu";
  const auto act = field<std::string>(j, c.file, "hidden_act", &silu);
  ATTNLAB_CHECK(act == silu, DataError,
                "{}: \"hidden_act\" is \"{}\": the gpt plugin runs Llama's MLP with silu (activation: swiglu)", c.file,
                act);
  const bool no = false;
  c.tie_embeddings = field<bool>(j, c.file, "tie_word_embeddings", &no);
  require_flag(j, c, "attention_bias", false);
  require_flag(j, c, "mlp_bias", false);
  if (c.model_type == "mistral") {
    const auto w = j.find("sliding_window");
    ATTNLAB_CHECK(w == j.end() || w->is_null(), DataError,
                  "{}: \"sliding_window\" is {}: the gpt plugin runs Mistral only without a sliding window (null)",
                  c.file, w->dump());
  }
  c.rope_theta = rope_theta_of(j, c.file);
  c.norm_type = nn::NormType::RMS;
  c.activation = nn::Activation::SwiGLU;
  c.bias = false;
}

}  // namespace

HfConfig read_hf_config(const std::string& path) {
  HfConfig c;
  c.dir = is_dir(path) ? path : path.substr(0, path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/'));
  if (c.dir.empty()) c.dir = ".";
  c.file = is_dir(path) ? path + "/config.json" : path;
  std::string text;
  if (auto why = files::read_whole(c.file, 1u << 20, "a model's config.json", text); !why.empty()) {
    throw DataError(fmt::format("{}: {} (pretrained: a Hugging Face model folder with config.json and "
                                "model.safetensors)",
                                c.file, why));
  }
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw DataError(fmt::format("{}: not JSON: {}", c.file, e.what()));
  }
  ATTNLAB_CHECK(j.is_object(), DataError, "{}: expected a JSON object, found {}", c.file, j.type_name());
  c.model_type = field<std::string>(j, c.file, "model_type");
  if (c.model_type == "gpt2") {
    read_gpt2(j, c);
  } else if (c.model_type == "llama" || c.model_type == "mistral") {
    read_llama(j, c);
  } else {
    throw DataError(fmt::format("{}: model_type \"{}\" is not an architecture attnlab runs (it runs gpt2, llama, "
                                "mistral)",
                                c.file, c.model_type));
  }
  return c;
}

namespace {

/// Where a model parameter's value comes from: a tensor of the file, transposed or not, and which
/// third of its last dimension (the fused c_attn: 0 q, 1 k, 2 v; -1 all of it).
struct Source {
  std::string name;
  bool transpose = false;
  int third = -1;
};

/// Our parameter name -> its GPT-2 tensor (names without the "transformer." prefix).
std::map<std::string, Source> gpt2_sources(const HfConfig& c) {
  std::map<std::string, Source> m;
  m["decoder.embedding.weight"] = {"wte.weight"};
  m["decoder.pos_encoding.table"] = {"wpe.weight"};
  m["decoder.final_ln.weight"] = {"ln_f.weight"};
  m["decoder.final_ln.bias"] = {"ln_f.bias"};
  for (int64_t i = 0; i < c.num_blks; ++i) {
    const std::string ours = fmt::format("decoder.blks.{}.", i), theirs = fmt::format("h.{}.", i);
    for (const char* wb : {"weight", "bias"}) {
      const std::string w = wb;
      const bool t = w == "weight";  // Conv1D stores [in, out]
      m[ours + "addnorm1.ln." + w] = {theirs + "ln_1." + w};
      m[ours + "addnorm3.ln." + w] = {theirs + "ln_2." + w};
      m[ours + "attention1.W_q." + w] = {theirs + "attn.c_attn." + w, t, 0};
      m[ours + "attention1.W_k." + w] = {theirs + "attn.c_attn." + w, t, 1};
      m[ours + "attention1.W_v." + w] = {theirs + "attn.c_attn." + w, t, 2};
      m[ours + "attention1.W_o." + w] = {theirs + "attn.c_proj." + w, t};
      m[ours + "ffn.dense1." + w] = {theirs + "mlp.c_fc." + w, t};
      m[ours + "ffn.dense2." + w] = {theirs + "mlp.c_proj." + w, t};
    }
  }
  if (!c.tie_embeddings) m["decoder.dense.weight"] = {"lm_head.weight"};
  return m;
}

/// Our parameter name -> its Llama tensor (names without the "model." prefix): Linear weights
/// [out, in] as ours, no biases.
std::map<std::string, Source> llama_sources(const HfConfig& c) {
  std::map<std::string, Source> m;
  m["decoder.embedding.weight"] = {"embed_tokens.weight"};
  m["decoder.final_ln.weight"] = {"norm.weight"};
  for (int64_t i = 0; i < c.num_blks; ++i) {
    const std::string ours = fmt::format("decoder.blks.{}.", i), theirs = fmt::format("layers.{}.", i);
    m[ours + "addnorm1.ln.weight"] = {theirs + "input_layernorm.weight"};
    m[ours + "addnorm3.ln.weight"] = {theirs + "post_attention_layernorm.weight"};
    m[ours + "attention1.W_q.weight"] = {theirs + "self_attn.q_proj.weight"};
    m[ours + "attention1.W_k.weight"] = {theirs + "self_attn.k_proj.weight"};
    m[ours + "attention1.W_v.weight"] = {theirs + "self_attn.v_proj.weight"};
    m[ours + "attention1.W_o.weight"] = {theirs + "self_attn.o_proj.weight"};
    m[ours + "ffn.gate.weight"] = {theirs + "mlp.gate_proj.weight"};
    m[ours + "ffn.dense1.weight"] = {theirs + "mlp.up_proj.weight"};
    m[ours + "ffn.dense2.weight"] = {theirs + "mlp.down_proj.weight"};
  }
  if (!c.tie_embeddings) m["decoder.dense.weight"] = {"lm_head.weight"};
  return m;
}

/// Copies the file's tensor `t` (as the file shapes it) into `param` through `s`, a block of at most
/// 16 MB of its rows at a time, and releases each block's mapped pages once copied: loading holds
/// the weights once (the parameters) plus one block, not a second copy of the largest tensor (GPT-2's
/// embedding, 154 MB). copy_ converts the dtype; the file's bytes are read once, here (c_attn's
/// thirds map their rows again).
void copy_in_blocks(const safetensors::Weights& weights, const std::string& name, const torch::Tensor& t,
                    const Source& s, torch::Tensor& param) {
  constexpr int64_t kBlockBytes = 16 << 20;
  const bool rows_of_matrix = t.dim() == 2 && t.numel() > 0;  // a vector (a bias, c_attn's too) goes whole
  const int64_t rows = rows_of_matrix ? t.size(0) : 1;
  const int64_t row_bytes = rows_of_matrix ? t.size(1) * t.element_size() : 1;
  const int64_t step = rows_of_matrix ? std::max<int64_t>(1, kBlockBytes / row_bytes) : 1;
  for (int64_t r = 0; r < rows; r += step) {
    const int64_t n = std::min(step, rows - r);
    torch::Tensor src = rows_of_matrix ? t.narrow(0, r, n) : t;
    if (s.third >= 0) src = src.chunk(3, -1)[s.third];
    if (!rows_of_matrix) {
      param.copy_(s.transpose ? src.t() : src);
    } else if (s.transpose) {
      param.narrow(1, r, n).copy_(src.t());  // the file's rows are our columns
    } else {
      param.narrow(0, r, n).copy_(src);
    }
    weights.release(name, rows_of_matrix ? r : 0, rows_of_matrix ? n : -1);
  }
}

std::string shape_of(at::IntArrayRef s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

}  // namespace

void load_hf_weights(const HfConfig& c, nn::TransformerLMImpl& model) {
  const safetensors::Weights weights(c.dir);
  const bool gpt2 = c.model_type == "gpt2";
  const std::string arch = gpt2 ? "GPT-2" : "Llama";
  // The file's names, with the base model's prefix dropped ("transformer." in save_pretrained of a
  // GPT2LMHeadModel, "model." of a LlamaForCausalLM) or without one (a GPT2Model, a LlamaModel).
  const std::string prefix = gpt2 ? "transformer." : "model.";
  std::map<std::string, std::string> named;  // short name -> file's name
  for (const auto& n : weights.names()) {
    const std::string shortened = n.rfind(prefix, 0) == 0 ? n.substr(prefix.size()) : n;
    ATTNLAB_CHECK(named.emplace(shortened, n).second, DataError,
                  "{}: holds both '{}' and '{}' (the same weight with and without the {} prefix)", weights.file_of(n),
                  named[shortened], n, prefix);
  }
  const auto sources = gpt2 ? gpt2_sources(c) : llama_sources(c);
  std::set<std::string> used;
  torch::NoGradGuard no_grad;
  for (auto& p : model.named_parameters()) {
    const auto it = sources.find(p.key());
    ATTNLAB_CHECK(it != sources.end(), PluginError,
                  "gpt: parameter '{}' has no {} weight to load (a model option {} does not have?)", p.key(), arch,
                  arch);
    const Source& s = it->second;
    const auto f = named.find(s.name);
    ATTNLAB_CHECK(f != named.end(), DataError, "{}: has no tensor '{}' ({}'s {}), which {} needs", c.dir, s.name, arch,
                  s.name, p.key());
    const std::string file = weights.file_of(f->second);
    const auto* info = weights.find(f->second);
    ATTNLAB_CHECK(torch::isFloatingType(info->dtype), DataError,
                  "{}: tensor '{}' is {}, expected a floating dtype (F32, F16, BF16)", file, f->second,
                  info->dtype_name);
    torch::Tensor t = weights.view(f->second);
    // The expected file shape: ours, transposed back for Conv1D, times 3 for the fused q/k/v.
    std::vector<int64_t> want = p.value().sizes().vec();
    if (s.transpose) std::swap(want.front(), want.back());
    if (s.third >= 0) want.back() *= 3;
    ATTNLAB_CHECK(t.sizes().vec() == want, DataError, "{}: tensor '{}' has shape {}, expected {} (config.json: {})",
                  file, f->second, shape_of(t.sizes()), shape_of(want), c.file);
    copy_in_blocks(weights, f->second, t, s, p.value());
    used.insert(s.name);
  }
  for (const auto& [shortened, n] : named) {
    if (used.count(shortened) != 0) continue;
    // Buffers older files saved: GPT-2's causal masks, Llama's RoPE frequencies (ours: the scorer's).
    const bool buffer = shortened.ends_with(".attn.bias") || shortened.ends_with(".attn.masked_bias") ||
                        shortened.ends_with(".rotary_emb.inv_freq");
    if (buffer) continue;
    if (shortened == "lm_head.weight" && c.tie_embeddings) continue;  // the tied output layer = the embedding
    throw DataError(fmt::format("{}: tensor '{}' has no place in a {} of {} blocks (config.json: {})",
                                weights.file_of(n), n, arch, c.num_blks, c.file));
  }
}

}  // namespace attnlab::models::gpt
