// Head masks as experiments and command lines write them, resolved against a model and recorded
// (run/interventions.hpp).
#include "run/interventions.hpp"

#include <attnlab/error.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/types.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace attnlab::run {
namespace {

/// A layer or head number from 1, or '*' (nullopt).
std::optional<int64_t> number_or_all(const std::string& text, const std::string& what, const std::string& where) {
  if (text == "*") return std::nullopt;
  int64_t n = 0;
  bool ok = !text.empty() && text.size() < 10;
  for (const char c : text) ok = ok && std::isdigit(static_cast<unsigned char>(c));
  if (ok) n = std::stoll(text);
  ATTNLAB_CHECK(ok && n >= 1, ConfigError, "{}: expected a {} number from 1 or '*', found '{}'", where, what, text);
  return n;
}

bool valid_module_name(const std::string& m) {
  return !m.empty() && std::all_of(m.begin(), m.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
         });
}

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return {};
  return s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

/// Heads as a YAML value: a number, '*' or a list of numbers (from 1). Empty = every head.
std::vector<int64_t> heads_of(const config::Node& v) {
  std::vector<int64_t> heads;
  if (v.is_scalar()) {
    if (auto n = number_or_all(v.str(), "head", v.where())) heads.push_back(*n);
    return heads;
  }
  ATTNLAB_CHECK(v.is_seq() && v.size() > 0, ConfigError,
                "{}: expected heads as a number from 1, a list of them ([1, 4]) or '*' (every head)", v.where());
  for (size_t i = 0; i < v.size(); ++i) {
    const auto n = number_or_all(v[i].str(), "head", v[i].where());
    ATTNLAB_CHECK(n.has_value(), ConfigError, "{}: '*' stands alone (every head), not in a list", v[i].where());
    heads.push_back(*n);
  }
  return heads;
}

std::string canonical(const HeadMaskSpec::Item& item) {
  const std::string layer = item.layer ? std::to_string(*item.layer) : "*";
  if (item.heads.empty()) return fmt::format("{}:{}:*", item.module, layer);
  if (item.heads.size() == 1) return fmt::format("{}:{}:{}", item.module, layer, item.heads[0]);
  return fmt::format("{}:{}:[{}]", item.module, layer, fmt::join(item.heads, ","));
}

}  // namespace

const config::Binding<InterventionsConfig>& interventions_binding() {
  static const auto b = config::Binding<InterventionsConfig>().node(
      "head_mask", &InterventionsConfig::head_mask, config::Type::Map, "{}",
      "heads switched off while training and evaluating (Michel et al. 2019): {module: {layer: heads}}, layers "
      "and heads from 1 as runner plot labels them, '*' for every layer or head, e.g. {encoder_self: {2: [1, 4]}, "
      "decoder_cross: {'*': 3}}; recorded under /interventions/head_mask");
  return b;
}

HeadMaskSpec head_mask_from_node(const config::Node& node) {
  HeadMaskSpec spec;
  if (node.is_null()) return spec;
  ATTNLAB_CHECK(node.is_map(), ConfigError, "{}: expected a map {{module: {{layer: heads}}}}, e.g. {{encoder_self: {{2: [1, 4]}}}}",
                node.where());
  for (const auto& module : node.keys()) {
    const config::Node& v = node.at(module);
    ATTNLAB_CHECK(valid_module_name(module), ConfigError, "{}: '{}' is no attention module's name", v.where(), module);
    if (v.is_scalar()) {
      ATTNLAB_CHECK(v.str() == "*", ConfigError,
                    "{}: expected {{layer: heads}} or '*' (every head of every layer), found '{}'", v.where(), v.str());
      spec.items.push_back({module, std::nullopt, {}, v.where()});
      continue;
    }
    ATTNLAB_CHECK(v.is_map() && v.size() > 0, ConfigError,
                  "{}: expected {{layer: heads}} (layers from 1 or '*'), e.g. {{2: [1, 4]}}, or '*'", v.where());
    for (const auto& layer : v.keys()) {
      const config::Node& heads = v.at(layer);
      spec.items.push_back({module, number_or_all(layer, "layer", heads.where()), heads_of(heads), heads.where()});
    }
  }
  return spec;
}

HeadMaskSpec head_mask_from_text(const std::string& text, const std::string& option) {
  const std::string t = trim(text);
  ATTNLAB_CHECK(!t.empty(), ConfigError,
                "{} is empty: expected module:layer:heads items separated by commas, e.g. 'decoder_cross:1:[1,3]'",
                option);
  if (t.front() == '{') {
    config::Node node = config::parse_yaml(t, option);
    node.repath(option);
    return head_mask_from_node(node);
  }
  // Items separated by the commas outside brackets.
  std::vector<std::string> items;
  std::string current;
  int depth = 0;
  for (const char c : t) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    ATTNLAB_CHECK(depth >= 0 && depth <= 1, ConfigError, "{} '{}': unbalanced or nested brackets", option, text);
    if (c == ',' && depth == 0) {
      items.push_back(trim(current));
      current.clear();
    } else {
      current += c;
    }
  }
  ATTNLAB_CHECK(depth == 0, ConfigError, "{} '{}': a '[' is not closed", option, text);
  items.push_back(trim(current));
  HeadMaskSpec spec;
  for (const auto& item : items) {
    const std::string where = fmt::format("{} '{}'", option, item);
    ATTNLAB_CHECK(!item.empty(), ConfigError, "{} '{}': an empty item (two commas, or one at an end)", option, text);
    std::vector<std::string> parts;
    size_t start = 0;
    while (true) {
      const auto colon = item.find(':', start);
      parts.push_back(trim(item.substr(start, colon == std::string::npos ? std::string::npos : colon - start)));
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
    ATTNLAB_CHECK(parts.size() <= 3, ConfigError, "{}: expected module:layer:heads, found {} ':'-separated parts",
                  where, parts.size());
    ATTNLAB_CHECK(valid_module_name(parts[0]), ConfigError,
                  "{}: expected an attention module's name first (e.g. encoder_self), found '{}'", where, parts[0]);
    HeadMaskSpec::Item it{parts[0], std::nullopt, {}, where};
    if (parts.size() >= 2) it.layer = number_or_all(parts[1], "layer", where);
    if (parts.size() == 3) {
      std::string h = parts[2];
      if (h.size() >= 2 && h.front() == '[' && h.back() == ']') {
        h = h.substr(1, h.size() - 2);
        ATTNLAB_CHECK(!trim(h).empty(), ConfigError, "{}: an empty list of heads", where);
        size_t s = 0;
        while (true) {
          const auto comma = h.find(',', s);
          const auto n = number_or_all(trim(h.substr(s, comma == std::string::npos ? std::string::npos : comma - s)),
                                       "head", where);
          ATTNLAB_CHECK(n.has_value(), ConfigError, "{}: '*' stands alone (every head), not in a list", where);
          it.heads.push_back(*n);
          if (comma == std::string::npos) break;
          s = comma + 1;
        }
      } else if (auto n = number_or_all(h, "head", where)) {
        it.heads.push_back(*n);
      }
    }
    spec.items.push_back(std::move(it));
  }
  return spec;
}

std::string describe_sites(const std::vector<nn::AttentionSite>& sites) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < sites.size();) {
    size_t j = i;
    while (j < sites.size() && sites[j].module == sites[i].module) ++j;
    const int64_t heads = sites[i].heads;
    parts.push_back(j - i == 1 && sites[i].layer == 0
                        ? fmt::format("{} (1 layer, {} head{})", sites[i].module, heads, heads == 1 ? "" : "s")
                        : fmt::format("{} (layers 1-{}, {} head{} each)", sites[i].module, sites[j - 1].layer + 1,
                                      heads, heads == 1 ? "" : "s"));
    i = j;
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

ResolvedHeadMask resolve_head_mask(const HeadMaskSpec& spec, const std::vector<nn::AttentionSite>& sites,
                                   const torch::Device& device) {
  ResolvedHeadMask r;
  if (spec.empty()) return r;
  ATTNLAB_CHECK(!sites.empty(), ConfigError,
                "{}: the model has no attention module a head mask reaches (masks reach the framework's attention "
                "modules: the transformer encoder and decoder, the GRU-Bahdanau decoder, torch_transformer, and "
                "every scorer plugin inside them; a model plugin whose attention the framework did not build is "
                "reached only if it pools through nn::Attention, see docs/PLUGINS.md)",
                spec.items.front().where);
  std::vector<std::string> modules;
  for (const auto& s : sites) {
    if (std::find(modules.begin(), modules.end(), s.module) == modules.end()) modules.push_back(s.module);
  }
  std::map<std::pair<std::string, int64_t>, std::set<int64_t>> off;  // (module, layer from 0) -> heads from 0
  std::vector<std::string> texts;
  for (const auto& item : spec.items) {
    std::vector<const nn::AttentionSite*> of_module;
    for (const auto& s : sites) {
      if (s.module == item.module) of_module.push_back(&s);
    }
    if (of_module.empty()) {
      const auto near = config::did_you_mean(item.module, modules);
      throw ConfigError(fmt::format("{}: the model has no attention module '{}'{}; it has {}", item.where, item.module,
                                    near ? fmt::format(" (did you mean '{}'?)", *near) : std::string(),
                                    describe_sites(sites)));
    }
    std::vector<const nn::AttentionSite*> chosen;
    for (const auto* s : of_module) {
      if (!item.layer || s->layer + 1 == *item.layer) chosen.push_back(s);
    }
    ATTNLAB_CHECK(!chosen.empty(), ConfigError, "{}: {} has no layer {}; it has layers 1-{} (numbered from 1)",
                  item.where, item.module, *item.layer, of_module.back()->layer + 1);
    for (const auto* s : chosen) {
      for (const int64_t h : item.heads) {
        ATTNLAB_CHECK(h <= s->heads, ConfigError, "{}: {} layer {} has no head {}; it has heads 1-{} (numbered from 1)",
                      item.where, item.module, s->layer + 1, h, s->heads);
      }
      auto& heads = off[{s->module, s->layer}];
      if (item.heads.empty()) {
        for (int64_t h = 0; h < s->heads; ++h) heads.insert(h);
      } else {
        for (const int64_t h : item.heads) heads.insert(h - 1);
      }
    }
    texts.push_back(canonical(item));
  }
  r.text = fmt::format("{}", fmt::join(texts, ","));
  for (const auto& s : sites) {
    r.heads_total += s.heads;
    const auto it = off.find({s.module, s.layer});
    if (it == off.end()) continue;
    auto xi = torch::ones({s.heads}, torch::kFloat);
    for (const int64_t h : it->second) xi[h] = 0.0f;
    r.heads_off += static_cast<int64_t>(it->second.size());
    if (static_cast<int64_t>(it->second.size()) == s.heads) {
      r.whole_layers.push_back(fmt::format("{} layer {}", s.module, s.layer + 1));
    }
    r.mask.set(s.module, s.layer, xi.to(device));
  }
  return r;
}

void write_head_mask(results::Results& results, const std::string& at, const ResolvedHeadMask& mask,
                     const std::vector<nn::AttentionSite>& sites) {
  std::vector<std::string> modules;
  for (const auto& s : sites) {
    if (std::find(modules.begin(), modules.end(), s.module) == modules.end()) modules.push_back(s.module);
  }
  for (const auto& m : modules) {
    int64_t layers = 0, heads = 0;
    for (const auto& s : sites) {
      if (s.module != m) continue;
      layers = std::max(layers, s.layer + 1);
      heads = std::max(heads, s.heads);
    }
    results::FloatArray xi{{layers, heads}, std::vector<float>(static_cast<size_t>(layers * heads), 1.0f)};
    for (const auto& s : sites) {
      if (s.module != m) continue;
      const auto t = mask.mask.get(s.module, s.layer);
      if (!t.defined()) continue;
      const auto cpu = t.to(torch::kCPU, torch::kFloat).contiguous();
      for (int64_t h = 0; h < s.heads; ++h) xi.at({s.layer, h}) = cpu[h].item<float>();
    }
    results.write_array(at + "/" + m, xi);
  }
  results.set_attr_at(at, "text", mask.text);
  results.set_attr_at(at, "heads_off", mask.heads_off);
  results.set_attr_at(at, "heads_total", mask.heads_total);
  results.set_attr_at(at, "numbering", std::string("layers and heads from 1 in text; datasets [layer, head] from 0"));
  results.flush();
}

}  // namespace attnlab::run
