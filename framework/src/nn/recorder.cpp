// The attention recorder and the thread's active one.
#include <attnlab/nn/recorder.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/types.h>

#include <algorithm>

namespace attnlab::nn {
namespace {

thread_local AttentionRecorder* active = nullptr;

/// w [..., k] zero-filled on the right to [..., keys]
torch::Tensor pad_keys(const torch::Tensor& w, int64_t keys) {
  return w.size(-1) == keys ? w : torch::constant_pad_nd(w, {0, keys - w.size(-1)});
}

}  // namespace

const char* side_name(Side side) {
  switch (side) {
    case Side::Source:
      return "source";
    case Side::Target:
      return "target";
    case Side::Queries:
      return "queries";
    case Side::Keys:
      return "keys";
  }
  return "unknown";
}

void AttentionRecorder::record(const RecordAs& as, const torch::Tensor& weights, int64_t query_offset) {
  TORCH_CHECK(weights.dim() == 4, "AttentionRecorder: ", as.module, " layer ", as.layer,
              ": expected weights [B, heads, Q, K], found ", weights.sizes());
  auto same_module = [&](const Layer& l) { return l.as.module == as.module; };
  for (const auto& l : layers_) {
    TORCH_CHECK(!same_module(l) || (l.as.queries == as.queries && l.as.keys == as.keys),
                "AttentionRecorder: ", as.module, " layer ", as.layer, " records ", side_name(as.queries), " x ",
                side_name(as.keys), " but its layer ", l.as.layer, " ", side_name(l.as.queries), " x ",
                side_name(l.as.keys));
  }
  auto it = std::find_if(layers_.begin(), layers_.end(),
                         [&](const Layer& l) { return same_module(l) && l.as.layer == as.layer; });
  if (it == layers_.end()) it = layers_.insert(layers_.end(), Layer{as, {}, 0});
  Layer& layer = *it;
  if (query_offset <= 0 || query_offset > layer.rows) {
    layer.steps.clear();
    layer.rows = 0;
  } else if (query_offset < layer.rows) {
    auto kept = weights_of(layer).narrow(2, 0, query_offset);  // [B, heads, query_offset, K]
    layer.steps = {kept};
    layer.rows = query_offset;
  }
  if (!layer.steps.empty()) {
    const auto& first = layer.steps.front();  // [B, heads, q, k]
    TORCH_CHECK(first.size(0) == weights.size(0) && first.size(1) == weights.size(1), "AttentionRecorder: ", as.module,
                " layer ", as.layer, ": a step of ", weights.size(0), " sequences and ", weights.size(1),
                " heads follows steps of ", first.size(0), " and ", first.size(1));
  }
  layer.steps.push_back(weights.detach());  // [B, heads, Q, K]
  layer.rows += weights.size(2);
}

torch::Tensor AttentionRecorder::weights_of(const Layer& layer) {
  if (layer.steps.size() == 1) return layer.steps.front();
  int64_t keys = 0;
  for (const auto& s : layer.steps) keys = std::max(keys, s.size(-1));
  std::vector<torch::Tensor> padded;
  padded.reserve(layer.steps.size());
  for (const auto& s : layer.steps) padded.push_back(pad_keys(s, keys));
  return torch::cat(padded, 2);  // [B, heads, rows, keys]
}

RecordedModule AttentionRecorder::collect(const std::string& name) const {
  std::vector<const Layer*> mine;
  for (const auto& l : layers_) {
    if (l.as.module == name) mine.push_back(&l);
  }
  std::sort(mine.begin(), mine.end(), [](const Layer* a, const Layer* b) { return a->as.layer < b->as.layer; });
  RecordedModule out{name, mine.front()->as.queries, mine.front()->as.keys, {}, {}};
  std::vector<torch::Tensor> per_layer;  // each [B, heads, Q, K]
  int64_t keys = 0;
  for (const auto* l : mine) {
    out.layers.push_back(l->as.layer);
    per_layer.push_back(weights_of(*l));
    keys = std::max(keys, per_layer.back().size(-1));
    TORCH_CHECK(per_layer.back().sizes().slice(0, 3) == per_layer.front().sizes().slice(0, 3),
                "AttentionRecorder: ", name, " layer ", l->as.layer, " recorded [B, heads, Q] ",
                per_layer.back().sizes().slice(0, 3), " but layer ", out.layers.front(), " ",
                per_layer.front().sizes().slice(0, 3));
  }
  for (auto& w : per_layer) w = pad_keys(w, keys);
  out.weights = torch::stack(per_layer);  // [layers, B, heads, Q, K]
  return out;
}

std::vector<std::string> AttentionRecorder::names() const {
  std::vector<std::string> out;
  for (const auto& l : layers_) {
    if (std::find(out.begin(), out.end(), l.as.module) == out.end()) out.push_back(l.as.module);
  }
  return out;
}

std::vector<RecordedModule> AttentionRecorder::modules() const {
  std::vector<RecordedModule> out;
  for (const auto& name : names()) out.push_back(collect(name));
  return out;
}

RecordedModule AttentionRecorder::module(const std::string& name) const {
  const auto recorded = names();
  TORCH_CHECK(std::find(recorded.begin(), recorded.end(), name) != recorded.end(),
              "AttentionRecorder: no attention recorded for module '", name,
              "' (recorded: ", recorded.empty() ? std::string("none") : fmt::format("{}", fmt::join(recorded, ", ")),
              ")");
  return collect(name);
}

AttentionRecorder* active_recorder() { return active; }

RecordingScope::RecordingScope(AttentionRecorder* recorder) : previous_(active) { active = recorder; }

RecordingScope::~RecordingScope() { active = previous_; }

}  // namespace attnlab::nn
