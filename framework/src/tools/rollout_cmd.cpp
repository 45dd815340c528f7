// `runner rollout RUN.h5`: attention rollout, attention flow and the encoder-decoder path of one
// recorded sentence (tools/rollout.hpp; definitions in docs/COMMANDS.md), printed as tables, CSV
// or JSON, and with --write stored under /rollout/<sample>/ of the results file.
#include "tools/commands.hpp"
#include "tools/report/json.hpp"
#include "tools/rollout.hpp"

#include <attnlab/error.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/results/results.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iostream>
#include <map>
#include <numeric>

namespace attnlab::tools {
namespace {
using rollout::Matrix;

constexpr const char* kRolloutDefinition =
    "R = A_L ... A_1 with A_l = rownorm(0.5 * mean_heads(W_l) + 0.5 * I) over the real positions "
    "(Abnar & Zuidema 2020; docs/COMMANDS.md, runner rollout)";
constexpr const char* kFlowDefinition =
    "max flow from each output node of the last layer to each input token in the layered graph whose edge "
    "(l, i) -> (l-1, j) has capacity A_l(i, j) (A_l as for rollout), each row normalised to sum to 1 "
    "(Abnar & Zuidema 2020; docs/COMMANDS.md, runner rollout)";
constexpr const char* kPathDefinition =
    "T_0 = I, S_0 = 0; per decoder layer T' = D_l T, S' = D_l S with D_l = rownorm(0.5 * mean_heads(self_l) + "
    "0.5 * I), then T = 0.5 T', S = 0.5 S' + 0.5 rownorm(mean_heads(cross_l)); result rownorm(S_L R_enc), R_enc the "
    "encoder_self rollout (docs/COMMANDS.md, runner rollout)";

/// One recorded module of the sample, cut to its real positions.
struct Map {
  std::string module;
  results::Attention att;
  bool self = false;
  int64_t queries = 0, keys = 0;                     // positions kept
  std::vector<std::string> query_tokens, key_tokens;  // their labels ("#i" when none were recorded)
  std::vector<Matrix> layers;                         // head means [queries, keys], lowest layer first
  std::string note;                                   // what was cut, if anything
};

struct Result {
  std::string name, module, method, definition, note;
  int64_t layers = 0, heads = 0;
  Matrix values;
  std::vector<std::string> query_tokens, key_tokens;
};

/// The real positions of an axis: its labels, less trailing <pad> ones; all when unlabelled.
int64_t real_positions(const std::vector<std::string>& tokens, int64_t recorded) {
  if (tokens.empty()) return recorded;
  auto n = std::min<int64_t>(static_cast<int64_t>(tokens.size()), recorded);
  while (n > 0 && tokens[static_cast<size_t>(n - 1)] == "<pad>") --n;
  return n;
}

std::vector<std::string> labels(const std::vector<std::string>& tokens, int64_t n) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(i < static_cast<int64_t>(tokens.size()) ? tokens[static_cast<size_t>(i)] : fmt::format("#{}", i));
  }
  return out;
}

Map prepare(const std::string& file, const std::string& sample, const std::string& module, results::Attention att) {
  Map m;
  m.module = module;
  const auto& w = att.weights;
  ATTNLAB_CHECK(w.dim() == 4 && w.size(0) > 0 && w.size(1) > 0, ResultsError,
                "results file {}: /attention/{}/{} is not [layers, heads, queries, keys] weights (shape [{}]; a damaged "
                "file?)",
                file, sample, module, fmt::join(w.shape, ", "));
  ATTNLAB_CHECK(std::all_of(w.values.begin(), w.values.end(), [](float v) { return std::isfinite(v); }), ResultsError,
                "results file {}: /attention/{}/{} holds non-finite weights (a diverged run or a damaged file?)", file,
                sample, module);
  ATTNLAB_CHECK(att.layers.empty() || static_cast<int64_t>(att.layers.size()) == w.size(0), ResultsError,
                "results file {}: /attention/{}/{} names {} layers for {} rows of weights (a damaged file?)", file,
                sample, module, att.layers.size(), w.size(0));
  m.self = !att.query_side.empty() && !att.key_side.empty()
               ? att.query_side == att.key_side
               : module.size() >= 5 && module.compare(module.size() - 5, 5, "_self") == 0;
  const int64_t q_all = w.size(2), k_all = w.size(3);
  m.queries = real_positions(att.query_tokens, q_all);
  m.keys = real_positions(att.key_tokens, k_all);
  ATTNLAB_CHECK(m.queries > 0 && m.keys > 0, DataError,
                "results file {}: /attention/{}/{} has no real positions (its labels are all <pad>)", file, sample,
                module);
  if (m.queries < q_all || m.keys < k_all) {
    m.note = fmt::format("kept {} of {} queries and {} of {} keys: the rest are padding (<pad> labels or no label)",
                         m.queries, q_all, m.keys, k_all);
  }
  m.query_tokens = labels(att.query_tokens, m.queries);
  m.key_tokens = labels(att.key_tokens, m.keys);
  std::vector<int64_t> order(static_cast<size_t>(w.size(0)));
  std::iota(order.begin(), order.end(), 0);
  if (!att.layers.empty()) {
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return att.layers[static_cast<size_t>(a)] < att.layers[static_cast<size_t>(b)];
    });
  }
  for (auto row : order) m.layers.push_back(rollout::head_mean(w, row, m.queries, m.keys));
  m.att = std::move(att);
  return m;
}

std::vector<Matrix> with_residual(const Map& m) {
  ATTNLAB_CHECK(m.queries == m.keys, DataError,
                "{} has {} real query positions but {} keys: rollout and flow need self-attention over the same "
                "positions on both axes",
                m.module, m.queries, m.keys);
  std::vector<Matrix> out;
  for (const auto& a : m.layers) out.push_back(rollout::with_residual(a));
  return out;
}

Result result_of(const Map& m, const std::string& method) {
  Result r;
  r.module = m.module;
  r.method = method;
  r.name = m.module + "_" + method;
  r.definition = method == "rollout" ? kRolloutDefinition : kFlowDefinition;
  r.note = m.note;
  r.layers = static_cast<int64_t>(m.layers.size());
  r.heads = m.att.weights.size(1);
  r.values = method == "rollout" ? rollout::rollout(with_residual(m)) : rollout::flow(with_residual(m));
  r.query_tokens = m.query_tokens;
  r.key_tokens = m.key_tokens;
  return r;
}

Result encoder_decoder_path(const std::string& file, const Map& enc, const Map& self, const Map& cross) {
  ATTNLAB_CHECK(self.layers.size() == cross.layers.size(), DataError,
                "rollout: {} records {} decoder_self layers but {} decoder_cross layers; the encoder-decoder path "
                "needs both of every decoder layer",
                file, self.layers.size(), cross.layers.size());
  ATTNLAB_CHECK(cross.queries == self.queries && cross.keys == enc.keys, DataError,
                "rollout: {}: decoder_cross is [{} targets, {} sources] but decoder_self has {} targets and "
                "encoder_self {} sources; they must be the same sentence's positions",
                file, cross.queries, cross.keys, self.queries, enc.keys);
  Result r;
  r.name = "encoder_decoder_rollout";
  r.module = "decoder_cross";
  r.method = "encoder_decoder";
  r.definition = kPathDefinition;
  for (const auto* m : {&enc, &self, &cross}) {
    if (!m->note.empty()) r.note += (r.note.empty() ? "" : "; ") + m->module + ": " + m->note;
  }
  r.layers = static_cast<int64_t>(cross.layers.size());
  r.heads = cross.att.weights.size(1);
  r.values = rollout::encoder_decoder(with_residual(self), cross.layers, rollout::rollout(with_residual(enc)));
  r.query_tokens = self.query_tokens;
  r.key_tokens = enc.key_tokens;
  return r;
}

/// Columns a label takes on a terminal: UTF-8 code points.
size_t width(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string pad(const std::string& s, size_t w, bool right) {
  const auto n = width(s);
  const std::string fill(n < w ? w - n : 0, ' ');
  return right ? fill + s : s + fill;
}

void print_text(const std::string& file, const std::string& sample, const Result& r) {
  const char* rows = r.method == "encoder_decoder" ? "target positions after the last decoder layer"
                                                   : "positions after the last layer";
  const char* cols = r.method == "encoder_decoder" ? "source input tokens" : "input tokens";
  std::cout << fmt::format("{} ({}, {} layers, {} heads averaged) of sample '{}' in {}\nrows: {}; columns: {}; each row "
                           "sums to 1\n",
                           r.name, r.method == "encoder_decoder" ? "encoder-decoder path" : r.method, r.layers,
                           r.heads, sample, file, rows, cols);
  if (!r.note.empty()) std::cout << "note: " << r.note << "\n";
  size_t first = 0, col = 5;
  for (const auto& t : r.query_tokens) first = std::max(first, width(t));
  for (const auto& t : r.key_tokens) col = std::max(col, width(t));
  std::cout << pad("", first, false);
  for (const auto& t : r.key_tokens) std::cout << " " << pad(t, col, true);
  std::cout << "\n";
  for (int64_t i = 0; i < r.values.rows; ++i) {
    std::cout << pad(r.query_tokens[static_cast<size_t>(i)], first, false);
    for (int64_t j = 0; j < r.values.cols; ++j) std::cout << " " << pad(fmt::format("{:.3f}", r.values(i, j)), col, true);
    std::cout << "\n";
  }
  std::cout << "\n";
}

std::string csv(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

void print_csv(const std::string& sample, const std::vector<Result>& results) {
  std::cout << "sample,result,module,method,query,query_token,key,key_token,value\n";
  for (const auto& r : results) {
    for (int64_t i = 0; i < r.values.rows; ++i) {
      for (int64_t j = 0; j < r.values.cols; ++j) {
        std::cout << fmt::format("{},{},{},{},{},{},{},{},{:.7g}\n", csv(sample), r.name, csv(r.module), r.method, i,
                                 csv(r.query_tokens[static_cast<size_t>(i)]), j,
                                 csv(r.key_tokens[static_cast<size_t>(j)]), r.values(i, j));
      }
    }
  }
}

void print_json(const std::string& file, const std::string& sample, const std::vector<Result>& results) {
  report::JsonWriter j;
  j.begin_object().key("file").value(file).key("sample").value(sample).key("results").begin_array();
  for (const auto& r : results) {
    j.begin_object().key("name").value(r.name).key("module").value(r.module).key("method").value(r.method);
    j.key("layers").value(r.layers).key("heads").value(r.heads).key("definition").value(r.definition);
    j.key("note").value(r.note).key("query_tokens").array(r.query_tokens).key("key_tokens").array(r.key_tokens);
    j.key("values").begin_array();
    for (int64_t i = 0; i < r.values.rows; ++i) {
      const auto* row = r.values.values.data() + i * r.values.cols;
      j.array(std::vector<double>(row, row + r.values.cols), 7);
    }
    j.end_array().end_object();
  }
  j.end_array().end_object();
  std::cout << j.str() << "\n";
}

/// The link name the results file gives a free-text name (as results::Results does).
std::string link_name(std::string text) {
  if (text.empty()) return "_";
  if (text == ".") return "_.";
  std::replace(text.begin(), text.end(), '/', '_');
  return text;
}

void write(const std::string& file, const std::string& sample, const std::vector<Result>& results) {
  // Everything is computed before the file is opened; the writer lock refuses a live run.
  results::Results out(file, results::Results::Open::Existing);
  const auto group = "rollout/" + link_name(sample);
  out.set_attr_at(group, "text", sample);
  for (const auto& r : results) {
    const auto path = group + "/" + r.name;
    results::FloatArray a;
    a.shape = {r.values.rows, r.values.cols};
    for (double v : r.values.values) a.values.push_back(static_cast<float>(v));
    out.write_array(path, a);
    out.set_attr_at(path, "method", r.method);
    out.set_attr_at(path, "module", r.module);
    out.set_attr_at(path, "definition", r.definition);
    out.set_attr_at(path, "positions", r.note.empty() ? std::string("all recorded positions") : r.note);
    out.set_attr_at(path, "query_tokens", r.query_tokens);
    out.set_attr_at(path, "key_tokens", r.key_tokens);
    out.set_attr_at(path, "layers", r.layers);
    out.set_attr_at(path, "heads", r.heads);
    out.set_attr_at(path, "dims", std::string("queries,keys"));
  }
  out.flush();
  for (const auto& r : results) std::cerr << "rollout: wrote /" << group << "/" << r.name << "\n";
}

}  // namespace

int cmd_rollout(int argc, char** argv) {
  CLI::App app{"Attention rollout and attention flow (Abnar & Zuidema 2020) of a sentence whose attention a run "
               "recorded"};
  std::string file, sample, method = "rollout", format = "text";
  std::vector<std::string> modules;
  bool write_back = false;
  app.add_option("run", file, "results file (.h5)")->required()->check(not_an_option());
  app.add_option("--sample", sample, "recorded sentence: its text or its index (default: the first)");
  app.add_option("--module", modules,
                 "module(s): encoder_self, decoder_self (rollout, flow), decoder_cross (the encoder-decoder path); "
                 "default: every one recorded")
      ->delimiter(',');
  app.add_option("--method", method, "rollout, flow or both")->check(CLI::IsMember({"rollout", "flow", "both"}));
  app.add_option("--format", format, "text tables, csv or json")->check(CLI::IsMember({"text", "csv", "json"}));
  app.add_flag("--write", write_back, "also store the results under /rollout/<sample>/ in the results file");
  app.footer(
      "Examples:\n  runner rollout RUN.h5                                  # every module, rollout\n"
      "  runner rollout RUN.h5 --sample 0 --module encoder_self --method both\n"
      "  runner rollout RUN.h5 --format csv --write");
  if (auto code = parse_command_line(app, argc, argv, "runner rollout")) return *code;

  struct Loaded {
    std::string sample;
    std::map<std::string, results::Attention> maps;
    std::vector<std::string> recorded;
  };
  const auto loaded = results::read_isolated(file, [&] {
    results::ResultsReader in(file, results::ReadCheck::none);  // checked by the rehearsal
    Loaded l;
    const auto samples = in.attention_samples();
    ATTNLAB_CHECK(!samples.empty(), DataError,
                  "No attention recorded in {}: list the sentences to record in the experiment's evaluate.attention "
                  "(e.g. evaluate: {{attention: [\"i'm home .\"]}}) and run it again",
                  file);
    l.sample = samples.front();
    if (!sample.empty()) {
      const bool index = sample.size() < 7 && std::all_of(sample.begin(), sample.end(),
                                                          [](unsigned char c) { return std::isdigit(c) != 0; });
      if (std::find(samples.begin(), samples.end(), sample) != samples.end()) {
        l.sample = sample;
      } else if (index && std::stoul(sample) < samples.size()) {
        l.sample = samples[std::stoul(sample)];
      } else {
        throw DataError(fmt::format("--sample '{}' is not a recorded sample of {}; recorded (text or index): {}",
                                    sample, file, fmt::join(samples, " | ")));
      }
    }
    l.recorded = in.attention_modules(l.sample);
    for (const auto& m : l.recorded) l.maps.emplace(m, in.attention(l.sample, m));
    return l;
  });

  std::map<std::string, Map> maps;
  for (const auto& [name, att] : loaded.maps) maps.emplace(name, prepare(file, loaded.sample, name, att));
  const bool have_path = maps.count("encoder_self") && maps.count("decoder_self") && maps.count("decoder_cross");
  for (const auto& m : modules) {
    ATTNLAB_CHECK(maps.count(m) > 0, DataError, "--module '{}' was not recorded for sample '{}' in {}; recorded: {}", m,
                  loaded.sample, file, fmt::join(loaded.recorded, ", "));
    if (maps.at(m).self) continue;
    ATTNLAB_CHECK(m == "decoder_cross", DataError,
                  "--module '{}' is not self-attention (queries: {}, keys: {}): rollout and flow need a module whose "
                  "queries and keys are the same positions; the encoder-decoder path is --module decoder_cross",
                  m, maps.at(m).att.query_side, maps.at(m).att.key_side);
    ATTNLAB_CHECK(have_path, DataError,
                  "--module decoder_cross: the encoder-decoder path needs encoder_self, decoder_self and "
                  "decoder_cross recorded; sample '{}' in {} has: {}",
                  loaded.sample, file, fmt::join(loaded.recorded, ", "));
    ATTNLAB_CHECK(method != "flow", DataError,
                  "--module decoder_cross --method flow: the encoder-decoder path is a rollout; use --method "
                  "rollout or both");
  }
  if (modules.empty()) {
    for (const auto& [name, m] : maps) {
      if (m.self) modules.push_back(name);
    }
    if (have_path && method != "flow") modules.emplace_back("decoder_cross");
    ATTNLAB_CHECK(!modules.empty(), DataError,
                  "sample '{}' in {} records no self-attention (recorded: {}): rollout and flow need one",
                  loaded.sample, file, fmt::join(loaded.recorded, ", "));
  }

  std::vector<Result> results;
  for (const auto& name : modules) {
    const auto& m = maps.at(name);
    if (!m.self) {
      results.push_back(encoder_decoder_path(file, maps.at("encoder_self"), maps.at("decoder_self"), m));
      continue;
    }
    if (method != "flow") results.push_back(result_of(m, "rollout"));
    if (method != "rollout") results.push_back(result_of(m, "flow"));
  }

  if (format == "text") {
    for (const auto& r : results) print_text(file, loaded.sample, r);
  } else if (format == "csv") {
    print_csv(loaded.sample, results);
  } else {
    print_json(file, loaded.sample, results);
  }
  std::cout.flush();
  if (write_back) write(file, loaded.sample, results);
  return 0;
}

}  // namespace attnlab::tools
