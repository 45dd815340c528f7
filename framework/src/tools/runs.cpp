#include "tools/runs.hpp"

#include "results/hdf5.hpp"

#include <attnlab/error.hpp>
#include <attnlab/results/reader.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>
#include <set>

namespace attnlab::tools {
namespace {

std::optional<std::time_t> parse_utc(const std::string& iso) {
  std::tm tm{};
  if (iso.empty() || !strptime(iso.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm)) return std::nullopt;
  return timegm(&tm);
}

void flatten_into(const config::Node& node, const std::string& prefix, std::map<std::string, std::string>& out) {
  switch (node.kind()) {
    case config::Node::Kind::Null:
      out[prefix] = "null";
      break;
    case config::Node::Kind::Scalar:
      out[prefix] = node.str();
      break;
    case config::Node::Kind::Map:
      if (node.size() == 0 && !prefix.empty()) out[prefix] = "{}";
      for (const auto& key : node.keys()) flatten_into(node.at(key), prefix.empty() ? key : prefix + "." + key, out);
      break;
    case config::Node::Kind::Seq:
      if (node.size() == 0) out[prefix] = "[]";
      for (size_t i = 0; i < node.size(); ++i) flatten_into(node[i], fmt::format("{}[{}]", prefix, i), out);
      break;
  }
}

/// Rows of query positions read at once: memory per read is kRowsPerRead x keys floats, whatever the
/// size of a stored map (a 512 MB map is read a few MB at a time, never whole).
constexpr int64_t kRowsPerRead = 256;

void add_attention(const results::ResultsReader& in, AttentionStats& stats) {
  namespace h5 = results::h5;
  const auto samples = in.attention_samples();
  if (samples.empty()) return;
  // A second read-only handle, for hyperslabs of the maps.
  h5::Handle file = h5::check(h5::open_read_only(in.path(), false), in.path(), "cannot open the file for reading");
  for (const auto& sample : samples) {
    for (const auto& module : in.attention_modules(sample)) {
      const std::string at = "/attention/" + h5::link_name(sample) + "/" + h5::link_name(module);
      const auto dims = h5::dataset_dims(file.get(), at, in.path());  // [layers, heads, Q, K]
      // A map without its four axes is damaged, and said so: its heads are not silently left out
      // of the table while the other samples' are shown.
      ATTNLAB_CHECK(dims.size() == 4, ResultsError,
                    "results file {} is damaged: {} has {} dimension{}, but an attention map has 4 (layers, heads, "
                    "queries, keys)",
                    in.path(), at, dims.size(), dims.size() == 1 ? "" : "s");
      if (dims[0] * dims[1] * dims[2] * dims[3] == 0) continue;  // an empty map: nothing to measure
      const int64_t layers = dims[0], heads = dims[1], queries = dims[2], keys = dims[3];
      const auto tokens = in.has_attr_at(at, "query_tokens") ? in.attr_strings_at(at, "query_tokens")
                                                             : std::vector<std::string>{};
      std::vector<int64_t> layer_ids;
      if (in.has_attr_at(at, "layers")) {
        for (double l : in.attr_doubles_at(at, "layers")) layer_ids.push_back(static_cast<int64_t>(l));
      }
      if (static_cast<int64_t>(layer_ids.size()) != layers) {
        layer_ids.clear();
        for (int64_t l = 0; l < layers; ++l) layer_ids.push_back(l);
      }
      // A padded query row is not a token of the sentence: its weights (uniform over the valid
      // keys, or whatever the mask left) would pull the mean entropy towards log(K).
      std::vector<bool> real(static_cast<size_t>(queries), true);
      int64_t n_real = queries;
      if (tokens.size() == static_cast<size_t>(queries)) {
        for (int64_t q = 0; q < queries; ++q) real[static_cast<size_t>(q)] = tokens[static_cast<size_t>(q)] != "<pad>";
        n_real = std::count(real.begin(), real.end(), true);
        if (n_real == 0) {  // every query is padding: keep them all, as nothing else is left
          real.assign(real.size(), true);
          n_real = queries;
        }
      }
      // A map of up to 4 MB is read in one go; a larger one kRowsPerRead query rows at a time.
      const bool whole = layers * heads * queries * keys <= (int64_t{1} << 20);
      results::FloatArray all, block;
      if (whole) all = h5::read_float_block(file.get(), at, {0, 0, 0, 0}, {layers, heads, queries, keys}, in.path());
      for (int64_t l = 0; l < layers; ++l) {
        for (int64_t h = 0; h < heads; ++h) {
          double entropy = 0, peak = -std::numeric_limits<double>::infinity();
          for (int64_t q0 = 0; q0 < queries; q0 += kRowsPerRead) {
            const int64_t rows = std::min(kRowsPerRead, queries - q0);
            const float* first = nullptr;
            if (whole) {
              first = &all.values[static_cast<size_t>(((l * heads + h) * queries + q0) * keys)];
            } else {
              block = h5::read_float_block(file.get(), at, {l, h, q0, 0}, {1, 1, rows, keys}, in.path());
              first = block.values.data();
            }
            for (int64_t r = 0; r < rows; ++r) {
              if (!real[static_cast<size_t>(q0 + r)]) continue;
              const float* row = first + r * keys;
              double e = 0;
              for (int64_t k = 0; k < keys; ++k) {
                const double p = row[k];
                e -= p * std::log(std::max(p, 1e-30));
                peak = std::isnan(p) || std::isnan(peak) ? std::nan("") : std::max(peak, p);
              }
              entropy += e;
            }
          }
          auto& s = stats[module][layer_ids[static_cast<size_t>(l)]][h];
          s.entropy += entropy / static_cast<double>(n_real);
          s.max_weight = std::max(s.max_weight, peak);
          ++s.samples;
        }
      }
    }
  }
  for (auto& [m, layers] : stats) {
    for (auto& [l, heads] : layers) {
      for (auto& [h, s] : heads) s.entropy /= static_cast<double>(std::max<int64_t>(s.samples, 1));
    }
  }
}

bool bookkeeping(const std::string& metric) { return metric.rfind("epoch/", 0) == 0 || metric.ends_with("/seconds"); }

}  // namespace

std::map<std::string, std::string> flatten(const config::Node& node) {
  std::map<std::string, std::string> out;
  flatten_into(node, "", out);
  return out;
}

namespace {

Run read_run(const std::string& path) {
  results::ResultsReader in(path, results::ReadCheck::none);  // the rehearsal in load_run checks it
  Run r;
  r.path = path;
  r.experiment = in.attr_string("experiment");
  r.status = in.attr_string("status");
  r.started = in.has_attr("started") ? in.attr_string("started") : "";
  r.finished = in.has_attr("finished") ? in.attr_string("finished") : "";
  if (in.has_attr("num_parameters")) r.num_parameters = in.attr_int("num_parameters");
  if (const auto yaml = in.config(); !yaml.empty()) {
    try {
      r.config = flatten(config::parse_yaml(yaml, path + ":/config"));
    } catch (const ConfigError& e) {
      r.config["<config>"] = "unreadable";
    }
  }
  for (const auto& group : in.metric_groups()) {
    for (const auto& name : in.metric_names(group)) r.metrics[group + "/" + name] = in.metric(group, name);
  }
  if (auto it = r.metrics.find("epoch/index"); it != r.metrics.end()) r.epochs = it->second;
  auto start = parse_utc(r.started), end = parse_utc(r.finished);
  if (in.has_attr("wall_seconds")) {  // written with the final status, to the millisecond
    r.wall_seconds = in.attr_double("wall_seconds");
  } else if (start && end) {  // older files: whole seconds
    r.wall_seconds = std::difftime(*end, *start);
  } else if (auto it = r.metrics.find("epoch/seconds"); it != r.metrics.end()) {
    double sum = 0;
    for (double s : it->second) sum += std::isfinite(s) ? s : 0;
    r.wall_seconds = sum;
    r.wall_partial = true;
  }
  add_attention(in, r.attention);
  if (const auto samples = in.samples(); !samples.empty()) {
    double sum = 0;
    for (const auto& s : samples) sum += s.bleu;
    r.samples = static_cast<int64_t>(samples.size());
    r.samples_mean_bleu = sum / static_cast<double>(samples.size());
  }
  for (const auto& name : in.children("eval")) {
    const std::string at = "eval/" + name;
    if (!in.has(at + "/hypotheses")) continue;  // not a finished evaluation
    EvalScore e;
    e.bleu = in.attr_double_at(at, "bleu");
    if (in.has_attr_at(at, "bleu_lowercase")) e.bleu_lowercase = in.attr_double_at(at, "bleu_lowercase");
    e.d2l_mean_bleu = in.attr_double_at(at, "d2l_mean_bleu");
    e.split = in.attr_string_at(at, "split");
    e.decoding = in.attr_string_at(at, "decoding");
    e.checkpoint = in.attr_string_at(at, "checkpoint");
    e.beam_size = static_cast<int64_t>(in.attr_double_at(at, "beam_size"));
    if (in.has_attr_at(at, "length_penalty")) e.length_penalty = in.attr_double_at(at, "length_penalty");
    e.length_penalty_tuned = in.has_attr_at(at, "length_penalty_tuned_on_val");
    e.sentences = static_cast<int64_t>(in.attr_double_at(at, "sentences"));
    r.evals[name] = e;
  }
  r.ablations = read_ablations(in);
  r.pruning = read_pruning(in);
  r.head_scores = read_head_scores(in);
  return r;
}

}  // namespace

Run load_run(const std::string& path) {
  // ResultsError for anything that is not a results file, or that HDF5 cannot read without crashing.
  return results::read_isolated(path, [&] { return read_run(path); });
}

std::vector<std::string> differing_keys(const std::vector<Run>& runs) {
  // Where files live is not part of the experiment: data_dir and results.path differ between
  // machines and runs of the same experiment.
  static const std::set<std::string> ignored = {"experiment", "description", "results.path", "data_dir"};
  std::set<std::string> keys;
  for (const auto& r : runs) {
    for (const auto& [k, v] : r.config) keys.insert(k);
  }
  std::vector<std::string> out;
  for (const auto& k : keys) {
    if (ignored.count(k)) continue;
    std::optional<std::string> first;
    bool differs = false;
    for (size_t i = 0; i < runs.size(); ++i) {
      auto it = runs[i].config.find(k);
      std::string v = it == runs[i].config.end() ? std::string("\x01") + "absent" : it->second;
      if (i == 0) {
        first = v;
      } else if (v != *first) {
        differs = true;
      }
    }
    if (differs) out.push_back(k);
  }
  return out;
}

std::string differs_text(const Run& run, const std::vector<std::string>& keys, size_t max_keys, size_t max_value) {
  std::string s;
  for (size_t i = 0; i < keys.size() && i < max_keys; ++i) {
    auto it = run.config.find(keys[i]);
    std::string value = it == run.config.end() ? "(unset)" : it->second;
    if (value.size() > max_value) value = value.substr(0, max_value) + "...";
    s += fmt::format("{}{}={}", s.empty() ? "" : ", ", keys[i], value);
  }
  if (keys.size() > max_keys) s += fmt::format(", +{} more", keys.size() - max_keys);
  return s;
}

bool per_step(const std::string& metric) { return metric.starts_with("step/"); }

std::string run_label(const Run& run, const std::vector<std::string>& keys) {
  auto s = differs_text(run, keys, 3, 40);
  return s.empty() ? run.experiment : s;
}

std::vector<std::string> shared_metrics(const std::vector<Run>& runs) {
  std::vector<std::string> out;
  if (runs.empty()) return out;
  for (const auto& [m, series] : runs.front().metrics) {
    if (bookkeeping(m)) continue;
    if (std::all_of(runs.begin(), runs.end(), [&](const Run& r) { return r.metrics.count(m) > 0; })) out.push_back(m);
  }
  return out;
}

std::vector<std::string> all_metrics(const std::vector<Run>& runs) {
  std::set<std::string> names;
  for (const auto& r : runs) {
    for (const auto& [m, series] : r.metrics) {
      if (!bookkeeping(m)) names.insert(m);
    }
  }
  return {names.begin(), names.end()};
}

std::vector<std::string> select_metrics(const std::vector<std::string>& available,
                                        const std::vector<std::string>& wanted) {
  if (wanted.empty()) return available;
  std::vector<std::string> out;
  for (const auto& w : wanted) {
    size_t before = out.size();
    for (const auto& m : available) {
      const bool match = m == w || (w.find('/') == std::string::npos && m.substr(m.find('/') + 1) == w);
      if (match && std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
    }
    ATTNLAB_CHECK(out.size() > before, Error, "--metric '{}' matches none of the shared metrics: {}", w,
                  available.empty() ? std::string("(none)") : fmt::format("{}", fmt::join(available, ", ")));
  }
  return out;
}

bool higher_is_better(const std::string& metric) {
  for (const char* word : {"bleu", "acc", "per_s", "f1", "precision", "recall"}) {
    if (metric.find(word) != std::string::npos) return true;
  }
  return false;
}

int64_t row_epoch(const Run& run, size_t rows, size_t row) {
  // epoch/index[i]; an entry that is no epoch number (NaN, from a damaged file) counts as row i + 1
  // (casting NaN to int64 printed "@-9223372036854775808").
  auto epoch_at = [&](size_t i) {
    const double e = run.epochs[i];
    return std::isfinite(e) && std::abs(e) < 1e15 ? static_cast<int64_t>(e) : static_cast<int64_t>(i + 1);
  };
  if (rows == run.epochs.size()) return epoch_at(row);
  // One value recorded after training (a test loss): it belongs to the last epoch.
  if (rows == 1 && !run.epochs.empty()) return epoch_at(run.epochs.size() - 1);
  return static_cast<int64_t>(row + 1);
}

const std::vector<double>* report_steps(const Run& run, size_t rows) {
  const auto it = run.metrics.find("train/step");
  if (it == run.metrics.end() || it->second.size() != rows || rows == 0) return nullptr;
  for (double s : it->second) {
    if (!std::isfinite(s)) return nullptr;
  }
  return &it->second;
}

MetricSummary summarize(const Run& run, const std::string& metric) {
  MetricSummary s;
  auto it = run.metrics.find(metric);
  if (it == run.metrics.end()) return s;
  const auto& v = it->second;
  const bool higher = higher_is_better(metric);
  auto epoch_of = [&](size_t row) { return row_epoch(run, v.size(), row); };
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) continue;
    if (!s.valid || (higher ? v[i] > s.best : v[i] < s.best)) {
      s.best = v[i];
      s.best_epoch = epoch_of(i);
    }
    s.final_value = v[i];
    s.final_epoch = epoch_of(i);
    s.valid = true;
  }
  return s;
}

AttentionStats union_of_heads(const std::vector<Run>& runs) {
  AttentionStats all;
  for (const auto& r : runs) {
    for (const auto& [m, layers] : r.attention) {
      for (const auto& [l, heads] : layers) {
        for (const auto& [h, s] : heads) all[m][l][h] = s;
      }
    }
  }
  return all;
}

const HeadStats* find_head(const Run& run, const std::string& module, int64_t layer, int64_t head) {
  const auto mi = run.attention.find(module);
  if (mi == run.attention.end()) return nullptr;
  const auto li = mi->second.find(layer);
  if (li == mi->second.end()) return nullptr;
  const auto hi = li->second.find(head);
  return hi == li->second.end() ? nullptr : &hi->second;
}

bool any_samples(const std::vector<Run>& runs) {
  return std::any_of(runs.begin(), runs.end(), [](const Run& r) { return r.samples_mean_bleu.has_value(); });
}

std::vector<std::string> eval_names(const std::vector<Run>& runs) {
  std::set<std::string> names;
  for (const auto& r : runs) {
    for (const auto& [name, unused] : r.evals) names.insert(name);
  }
  return {names.begin(), names.end()};
}

}  // namespace attnlab::tools
