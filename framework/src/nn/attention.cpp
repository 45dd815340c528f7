// Masked softmax, attention pooling and multi-head attention (d2l 1.0.3, chapter 11).
#include <attnlab/nn/attention.hpp>
#include <attnlab/nn/dot_product.hpp>
#include <attnlab/nn/head_mask.hpp>

#include "nn/fused_linear.hpp"
#include "nn/mask_memo.hpp"

#include <torch/nn/functional/activation.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/dropout.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace attnlab::nn {
namespace {

/// What each Attention module constructed so far is recorded as, and its heads: what
/// attention_sites() reads of the live ones it finds in a model (a module's address is only
/// looked up while it is alive, and a new module at a freed address replaces the entry).
struct SiteTable {
  std::mutex mutex;
  std::unordered_map<const AttentionImpl*, AttentionSite> sites;
};

SiteTable& site_table() {
  static SiteTable table;
  return table;
}

/// Projected keys or values [B, kv_heads, K, d] -> [B * heads, K, d], heads = kv_heads * groups:
/// query head n reads kv head n / groups, each kv head repeated for its group (one copy).
torch::Tensor per_query_head(const torch::Tensor& x, int64_t groups) {
  if (groups == 1) return x.reshape({-1, x.size(2), x.size(3)});
  return x.unsqueeze(2).expand({x.size(0), x.size(1), groups, x.size(2), x.size(3)}).reshape({-1, x.size(2), x.size(3)});
}

}  // namespace

torch::Tensor valid_mask(int64_t batch, int64_t queries, int64_t keys, const torch::Tensor& valid_lens) {
  torch::Tensor lens;  // [B, Q]
  if (valid_lens.dim() == 1) {
    TORCH_CHECK(valid_lens.size(0) == batch, "valid_lens: expected [", batch, "] (one per batch row), found ",
                valid_lens.sizes());
    lens = valid_lens.unsqueeze(1).expand({batch, queries});
  } else {
    TORCH_CHECK(valid_lens.dim() == 2 && valid_lens.numel() == batch * queries, "valid_lens: expected [", batch,
                "] or [", batch, ", ", queries, "], found ", valid_lens.sizes());
    lens = valid_lens.reshape({batch, queries});
  }
  // d2l compares arange(K) < valid_len, in the valid lengths' type (float lengths work too).
  auto positions = torch::arange(keys, lens.options()).view({1, 1, keys});  // [1, 1, K]
  return positions < lens.unsqueeze(-1);                                     // [B, Q, K]
}

torch::Tensor masked_softmax(const torch::Tensor& scores, const torch::Tensor& valid_lens) {
  if (!valid_lens.defined()) return torch::softmax(scores, -1);
  TORCH_CHECK(scores.dim() == 3, "masked_softmax: expected scores [B, Q, K], found ", scores.sizes());
  const int64_t B = scores.size(0), Q = scores.size(1), K = scores.size(2);
  const auto masked = memo::derived(valid_lens, {memo::kValidMask, B, Q, K}, [&] {
    return std::vector<torch::Tensor>{valid_mask(B, Q, K, valid_lens).logical_not()};
  })[0];  // [B, Q, K]: once per lengths tensor and shape in a step (nn/mask_memo.hpp)
  // d2l's -1e6; half cannot hold it, so its lowest finite value there.
  const double fill = scores.scalar_type() == torch::kHalf ? -65504.0 : -1e6;
  return torch::softmax(scores.masked_fill(masked, fill), -1);  // [B, Q, K]
}

AttentionImpl::AttentionImpl(std::shared_ptr<Scorer> scorer, double dropout, RecordAs record_as, int64_t heads)
    : scorer_(std::move(scorer)), record_as_(std::move(record_as)), heads_(heads) {
  TORCH_CHECK(scorer_ != nullptr, "Attention: no scorer given");
  TORCH_CHECK(heads_ >= 1, "Attention: heads must be >= 1, found ", heads_);
  register_module("scorer", scorer_);
  dropout_ = register_module("dropout", torch::nn::Dropout(dropout));
  auto& table = site_table();
  const std::lock_guard<std::mutex> lock(table.mutex);
  table.sites[this] = AttentionSite{record_as_.module, record_as_.layer, heads_};
}

std::vector<AttentionSite> attention_sites(const torch::nn::Module& model) {
  std::vector<const AttentionImpl*> found;
  if (const auto* self = dynamic_cast<const AttentionImpl*>(&model)) found.push_back(self);
  for (const auto& child : model.modules(/*include_self=*/false)) {
    if (const auto* a = dynamic_cast<const AttentionImpl*>(child.get())) found.push_back(a);
  }
  std::vector<AttentionSite> sites;
  std::vector<std::string> order;  // modules in the order first met
  {
    auto& table = site_table();
    const std::lock_guard<std::mutex> lock(table.mutex);
    for (const auto* a : found) {
      const auto it = table.sites.find(a);
      if (it == table.sites.end()) continue;
      const AttentionSite& s = it->second;
      const bool seen = std::any_of(sites.begin(), sites.end(),
                                    [&](const AttentionSite& o) { return o.module == s.module && o.layer == s.layer; });
      if (seen) continue;
      if (std::find(order.begin(), order.end(), s.module) == order.end()) order.push_back(s.module);
      sites.push_back(s);
    }
  }
  std::stable_sort(sites.begin(), sites.end(), [&](const AttentionSite& a, const AttentionSite& b) {
    const auto ra = std::find(order.begin(), order.end(), a.module) - order.begin();
    const auto rb = std::find(order.begin(), order.end(), b.module) - order.begin();
    return ra != rb ? ra < rb : a.layer < b.layer;
  });
  return sites;
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& queries, const torch::Tensor& keys,
                                     const torch::Tensor& values, const torch::Tensor& valid_lens,
                                     const Positions& positions) {
  TORCH_CHECK(queries.dim() == 3 && keys.dim() == 3 && values.dim() == 3,
              "Attention: expected queries [B, Q, Dq], keys [B, K, Dk], values [B, K, Dv], found ", queries.sizes(),
              ", ", keys.sizes(), ", ", values.sizes());
  TORCH_CHECK(keys.size(1) == values.size(1), "Attention: keys have ", keys.size(1), " positions, values ",
              values.size(1));
  auto* recorder = active_recorder();
  if (recorder == nullptr) {
    std::optional<torch::Tensor> fused;  // [B, Q, Dv] when the scorer has a fused path
    try {
      fused = scorer_->attend(queries, keys, values, valid_lens, positions, dropout_->options.p(), is_training());
    } catch (...) {
      plugin::rethrow_naming(*scorer_, "attend()");
    }
    if (fused) return apply_head_mask(*fused, record_as_, heads_);
  }
  torch::Tensor scores;  // [B, Q, K]
  try {
    scores = scorer_->score(queries, keys, positions);
  } catch (...) {
    plugin::rethrow_naming(*scorer_, "score()");
  }
  auto weights = masked_softmax(scores, valid_lens);  // [B, Q, K]
  if (recorder != nullptr) {
    // Before dropout, as d2l keeps them.
    recorder->record(record_as_, weights.reshape({-1, heads_, weights.size(1), weights.size(2)}),
                     positions.query_offset);  // [B / heads, heads, Q, K]
  }
  // A head mask scales each head's output before MultiHeadAttention joins the heads (Michel et al.).
  return apply_head_mask(torch::bmm(dropout_->forward(weights), values), record_as_, heads_);  // [B, Q, Dv]
}

bool AttentionImpl::can_recur() const {
  return active_recorder() == nullptr && scorer_->recurrent() && (!is_training() || dropout_->options.p() == 0);
}

torch::Tensor AttentionImpl::forward_recurrent(const torch::Tensor& queries, const torch::Tensor& keys,
                                               const torch::Tensor& values, const Positions& positions,
                                               RecurrentState& state) {
  TORCH_CHECK(active_recorder() == nullptr,
              "Attention: attention is being recorded, but this decoding keeps a recurrent state (no keys to weigh); "
              "start recording before decoding starts");
  torch::Tensor out;  // [B, T, Dv]
  try {
    out = scorer_->attend_recurrent(queries, keys, values, positions, state);
  } catch (...) {
    plugin::rethrow_naming(*scorer_, "attend_recurrent()");
  }
  return apply_head_mask(out, record_as_, heads_);
}

torch::Tensor transpose_qkv(const torch::Tensor& x, int64_t num_heads) {
  auto y = x.reshape({x.size(0), x.size(1), num_heads, -1});  // [B, T, heads, H / heads]
  y = y.permute({0, 2, 1, 3});                                // [B, heads, T, H / heads]
  return y.reshape({-1, y.size(2), y.size(3)});               // [B * heads, T, H / heads]
}

torch::Tensor transpose_output(const torch::Tensor& x, int64_t num_heads) {
  auto y = x.reshape({-1, num_heads, x.size(1), x.size(2)});  // [B, heads, T, H / heads]
  y = y.permute({0, 2, 1, 3});                                // [B, T, heads, H / heads]
  return y.reshape({y.size(0), y.size(1), -1});               // [B, T, H]
}

PerHeadLinearImpl::PerHeadLinearImpl(int64_t heads, int64_t in_size, int64_t head_size, bool with_bias) {
  TORCH_CHECK(heads >= 1 && in_size >= 1 && head_size >= 1, "PerHeadLinear: heads, in_size and head_size must be >= 1, found ",
              heads, ", ", in_size, ", ", head_size);
  // Each head initialised like a Linear(in_size, head_size): uniform(+-1/sqrt(in_size)).
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_size));
  weight = register_parameter("weight", torch::empty({heads, in_size, head_size}).uniform_(-bound, bound));
  if (with_bias) bias = register_parameter("bias", torch::empty({heads, head_size}).uniform_(-bound, bound));
}

torch::Tensor PerHeadLinearImpl::forward(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() == 3 && x.size(2) == weight.size(1), "PerHeadLinear: expected x [B, T, ", weight.size(1),
              "], found ", x.sizes());
  auto y = torch::einsum("bti,hid->bhtd", {x, weight});     // [B, heads, T, d_k]
  if (bias.defined()) y = y + bias.unsqueeze(1);             // + [heads, 1, d_k]
  return y.reshape({-1, y.size(2), y.size(3)});             // [B * heads, T, d_k]
}

void PerHeadLinearImpl::copy_from_fused(const torch::Tensor& fused_weight, const torch::Tensor& fused_bias) {
  const int64_t heads = weight.size(0), in = weight.size(1), d = weight.size(2);
  TORCH_CHECK(fused_weight.sizes() == torch::IntArrayRef({heads * d, in}), "PerHeadLinear: fused weight should be [",
              heads * d, ", ", in, "], found ", fused_weight.sizes());
  torch::NoGradGuard no_grad;
  weight.copy_(fused_weight.view({heads, d, in}).transpose(1, 2));  // [heads, in, d_k]
  if (bias.defined() && fused_bias.defined()) bias.copy_(fused_bias.view({heads, d}));
}

KeyValues KeyValues::append(const KeyValues& next) const {
  if (!defined()) return next;
  TORCH_CHECK(next.defined(), "KeyValues::append: nothing to append");
  TORCH_CHECK(keys.defined() && next.keys.defined(), "KeyValues::append: a recurrent state takes no keys");
  return {torch::cat({keys, next.keys}, 2), torch::cat({values, next.values}, 2)};  // [B, kv_heads, K + K', d]
}

KeyValues KeyValues::index_select(const torch::Tensor& indices) const {
  if (!defined()) return {};
  KeyValues out;
  if (keys.defined()) {
    out.keys = keys.index_select(0, indices);  // [N, kv_heads, K, d]
    out.values = values.index_select(0, indices);
  }
  for (const auto& t : recurrent) out.recurrent.push_back(t.index_select(0, indices));  // [N, heads, ...]
  out.summarised = summarised;
  return out;
}

int64_t KeyValues::bytes() const {
  int64_t n = 0;
  for (const auto* t : {&keys, &values}) {
    if (t->defined()) n += static_cast<int64_t>(t->numel() * t->element_size());
  }
  for (const auto& t : recurrent) n += static_cast<int64_t>(t.numel() * t.element_size());
  return n;
}

MultiHeadAttentionImpl::MultiHeadAttentionImpl(const MultiHeadAttentionOptions& opts, std::shared_ptr<Scorer> scorer)
    : options(opts) {
  const int64_t hiddens = options.num_hiddens(), heads = options.num_heads();
  TORCH_CHECK(hiddens >= 1 && heads >= 1, "MultiHeadAttention: num_hiddens and num_heads must be >= 1, found ",
              hiddens, " and ", heads);
  TORCH_CHECK(hiddens % heads == 0, "MultiHeadAttention: ", heads, " heads do not divide num_hiddens ", hiddens);
  TORCH_CHECK(options.kv_heads() >= 0 && (options.kv_heads() == 0 || heads % options.kv_heads() == 0),
              "MultiHeadAttention: kv_heads must divide num_heads ", heads, " (0: num_heads), found ",
              options.kv_heads());
  const int64_t kv = kv_heads(), head_size = hiddens / heads;
  auto in = [&](int64_t size) { return size > 0 ? size : hiddens; };
  auto linear = [&](int64_t from, int64_t to) {
    return torch::nn::Linear(torch::nn::LinearOptions(from, to).bias(options.bias()));
  };
  if (options.per_head_projections()) {
    auto per_head = [&](int64_t n, int64_t from) { return PerHeadLinear(n, from, head_size, options.bias()); };
    W_q_heads = register_module("W_q", per_head(heads, in(options.query_size())));
    W_k_heads = register_module("W_k", per_head(kv, in(options.key_size())));
    W_v_heads = register_module("W_v", per_head(kv, in(options.value_size())));
  } else {
    W_q = register_module("W_q", linear(in(options.query_size()), hiddens));
    W_k = register_module("W_k", linear(in(options.key_size()), kv * head_size));
    W_v = register_module("W_v", linear(in(options.value_size()), kv * head_size));
  }
  W_o = register_module("W_o", linear(hiddens, hiddens));
  attention_ =
      register_module("attention", Attention(std::move(scorer), options.dropout(), options.record_as(), heads));
}

int64_t MultiHeadAttentionImpl::kv_heads() const {
  return options.kv_heads() > 0 ? options.kv_heads() : options.num_heads();
}

Scorer& MultiHeadAttentionImpl::scorer() { return attention_->scorer(); }

bool MultiHeadAttentionImpl::can_recur() const { return attention_->can_recur(); }

torch::Tensor MultiHeadAttentionImpl::forward_recurrent(const torch::Tensor& x, KeyValues& state) {
  TORCH_CHECK(x.dim() == 3, "MultiHeadAttention: expected x [B, T, H], found ", x.sizes());
  TORCH_CHECK(!state.keys.defined(), "MultiHeadAttention: a KV cache cannot continue as a recurrent state");
  const int64_t heads = options.num_heads(), groups = heads / kv_heads(), batch = x.size(0);
  auto q = options.per_head_projections() ? W_q_heads->forward(x)
                                          : fused::linear_split_heads(x, W_q->weight, W_q->bias, heads, true);
  const auto kv = project(x, x);  // [B, kv_heads, T, d]
  RecurrentState folded;  // the scorer's view: [B * heads, ...]
  for (const auto& t : state.recurrent) {
    auto shape = t.sizes().vec();
    shape.erase(shape.begin());
    shape[0] = batch * heads;
    folded.tensors.push_back(t.reshape(shape));
  }
  const Positions at{state.summarised, state.summarised};  // the new steps follow those summarised
  auto out = attention_->forward_recurrent(q, per_query_head(kv.keys, groups), per_query_head(kv.values, groups), at,
                                           folded);
  state.recurrent.clear();
  for (const auto& t : folded.tensors) {
    TORCH_CHECK(t.dim() >= 1 && t.size(0) == batch * heads, "MultiHeadAttention: a recurrent state's tensors must ",
                "have the scorer's batch ", batch * heads, " first, found ", t.sizes());
    auto shape = t.sizes().vec();
    shape[0] = heads;
    shape.insert(shape.begin(), batch);
    state.recurrent.push_back(t.reshape(shape));  // [B, heads, ...]
  }
  state.summarised += x.size(1);
  return fused::linear_merge_heads(out, W_o->weight, W_o->bias, heads);  // [B, T, H]
}

KeyValues MultiHeadAttentionImpl::project(const torch::Tensor& keys, const torch::Tensor& values) {
  const int64_t kv = kv_heads();
  if (options.per_head_projections()) {
    auto per_head = [&](PerHeadLinear& w, const torch::Tensor& x) {  // [B * kv, T, d] -> [B, kv, T, d]
      auto y = w->forward(x);
      return y.reshape({-1, kv, y.size(1), y.size(2)});
    };
    return {per_head(W_k_heads, keys), per_head(W_v_heads, values)};
  }
  return {fused::linear_split_heads(keys, W_k->weight, W_k->bias, kv, false),  // [B, kv, T, d]
          fused::linear_split_heads(values, W_v->weight, W_v->bias, kv, false)};
}

torch::Tensor MultiHeadAttentionImpl::forward(const torch::Tensor& queries, const torch::Tensor& keys,
                                              const torch::Tensor& values, const torch::Tensor& valid_lens,
                                              const Positions& positions) {
  return forward_projected(queries, project(keys, values), valid_lens, positions);
}

torch::Tensor MultiHeadAttentionImpl::forward_projected(const torch::Tensor& queries, const KeyValues& kv,
                                                        const torch::Tensor& valid_lens, const Positions& positions) {
  const int64_t heads = options.num_heads(), groups = heads / kv_heads();
  TORCH_CHECK(kv.defined() && kv.keys.dim() == 4 && kv.keys.size(1) == kv_heads(),
              "MultiHeadAttention: expected projected keys [B, ", kv_heads(), ", K, d], found ",
              kv.defined() ? kv.keys.sizes() : torch::IntArrayRef{});
  auto q = options.per_head_projections()
               ? W_q_heads->forward(queries)
               : fused::linear_split_heads(queries, W_q->weight, W_q->bias, heads, true);  // [B * heads, Q, H / heads]
  auto k = per_query_head(kv.keys, groups);    // [B * heads, K, H / heads]
  auto v = per_query_head(kv.values, groups);  // [B * heads, K, H / heads]
  torch::Tensor lens;                  // [B * heads] or [B * heads, Q]
  if (valid_lens.defined()) {  // the same per-head lengths for every layer (nn/mask_memo.hpp)
    lens = memo::derived(valid_lens, {memo::kRepeatHeads, heads, 0, 0},
                         [&] { return std::vector<torch::Tensor>{valid_lens.repeat_interleave(heads, 0)}; })[0];
  }
  auto out = attention_->forward(q, k, v, lens, positions);  // [B * heads, Q, H / heads]
  return fused::linear_merge_heads(out, W_o->weight, W_o->bias, heads);  // [B, Q, H]
}

}  // namespace attnlab::nn
