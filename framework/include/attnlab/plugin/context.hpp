#pragma once
// What every factory gets besides its options: where it runs and what the data looks like. What
// only one kind needs comes as that kind's own factory argument (plugin::FactorySignature), e.g. a
// scorer's nn::ScorerContext.
#include <attnlab/error.hpp>

#include <torch/types.h>

#include <cmath>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace attnlab::plugin {

class Registry;

/// One named value a dataset reports beside DataInfo's fixed fields.
using MetaValue = std::variant<int64_t, double, std::string, std::vector<double>, std::vector<std::string>>;

/// Named, typed facts about a dataset that the fixed fields of DataInfo do not hold, for whichever
/// plugin knows the name (docs/PLUGINS.md, "Dataset metadata"): a dataset that has one more thing
/// to say sets a key here, and neither the SDK nor any other plugin changes. Keys are dotted names
/// ("points.outline"); the keys in use are listed in docs/PLUGINS.md.
class Metadata {
 public:
  /// Sets `key` (replacing its value). std::logic_error for an empty key.
  void set(const std::string& key, MetaValue value) {
    if (key.empty()) throw std::logic_error("plugin::Metadata::set: empty key");
    values_[key] = std::move(value);
  }
  bool has(const std::string& key) const { return values_.count(key) > 0; }
  /// The value of `key` as T (int64_t, double, std::string, std::vector<double> or
  /// std::vector<std::string>; an integer reads as a double too); nullopt when the dataset did not
  /// set it. PluginError naming the key, the type asked for and the type found otherwise.
  template <class T>
  std::optional<T> get(const std::string& key) const {
    const auto it = values_.find(key);
    if (it == values_.end()) return std::nullopt;
    if (const T* v = std::get_if<T>(&it->second)) return *v;
    if constexpr (std::is_same_v<T, double>) {
      if (const auto* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
    }
    throw PluginError(fmt::format("dataset metadata '{}' is {}, expected {}", key, type_name(it->second.index()),
                                  type_name(MetaValue(T{}).index())));
  }
  /// A range [low, high] stored as a list of two numbers (the "x.range" of a figure's axis);
  /// nullopt when absent. PluginError unless it is two finite numbers with low < high.
  std::optional<std::pair<double, double>> range(const std::string& key) const {
    const auto v = get<std::vector<double>>(key);
    if (!v) return std::nullopt;
    if (v->size() != 2 || !std::isfinite((*v)[0]) || !std::isfinite((*v)[1]) || !((*v)[0] < (*v)[1])) {
      throw PluginError(
          fmt::format("dataset metadata '{}' should be a range [low, high] of two finite numbers with "
                      "low < high, found {} numbers",
                      key, v->size()));
    }
    return std::pair{(*v)[0], (*v)[1]};
  }
  const std::map<std::string, MetaValue>& values() const { return values_; }

 private:
  static const char* type_name(size_t index) {
    static const char* const kNames[] = {"an integer", "a number", "a string", "a list of numbers",
                                         "a list of strings"};
    return index < std::size(kNames) ? kNames[index] : "a value of unknown type";
  }
  std::map<std::string, MetaValue> values_;
};

/// Sizes the dataset reports to model plugins.
struct DataInfo {
  int64_t src_vocab_size = 0;  // 0 when inputs are features, not tokens
  int64_t tgt_vocab_size = 0;
  int64_t num_features = 0;  // > 0 for continuous inputs
  int64_t num_steps = 0;     // padded sequence length (0 = variable)
  int64_t pad_id = -1, bos_id = -1, eos_id = -1;
  bool shared_vocab = false;  // source and target ids index one vocabulary (model.share_embeddings)
  Metadata meta;              // anything else the dataset has to say, by name (Metadata)
};

struct BuildContext {
  Registry* registry = nullptr;  // to create nested plugins (a transformer asks for its scorer)
  torch::Device device = torch::kCPU;
  int64_t seed = 0;
  std::string data_dir;  // where datasets live (datasets/ by default)
  DataInfo data;
};

}  // namespace attnlab::plugin
