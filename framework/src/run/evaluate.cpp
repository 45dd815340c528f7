#include "run/evaluate.hpp"

#include <attnlab/config/schema.hpp>
#include <attnlab/files.hpp>
#include <attnlab/metrics/bleu.hpp>
#include <attnlab/train/attention_results.hpp>
#include <attnlab/train/checkpoint.hpp>
#include <attnlab/train/decode.hpp>
#include <attnlab/train/translate.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

namespace attnlab::run {

EvalSpec parse_evaluate(const config::Node& node) {
  using namespace config;
  Options opts(node,
               {opt_node("samples", Type::List, "[]", "sentence pairs to translate: [{src: ..., ref: ...}]"),
                opt_node("attention", Type::List, "[]", "sources (from samples) whose attention is recorded"),
                opt_int("bleu_k", 2, "BLEU n-gram order (d2l's k)", 1, 4),
                opt_int("num_steps", 0, "decoding steps (0 = the dataset's num_steps)", 0),
                opt_enum("split", "none", {"none", "train", "val", "test"},
                         "translate this whole split with the best checkpoint and store /eval/<split> (sacreBLEU)"),
                opt_int("beam_size", 1, "split translation: beam size (1 = greedy)", 1),
                opt_float("length_penalty", 0.6, "split translation: GNMT length penalty alpha", 0.0)},
               "the evaluate section", {});
  EvalSpec spec;
  spec.bleu_k = opts.get_int("bleu_k");
  spec.num_steps = opts.get_int("num_steps");
  if (opts.get_string("split") != "none") spec.split = opts.get_string("split");
  spec.beam_size = opts.get_int("beam_size");
  spec.length_penalty = opts.get_float("length_penalty");
  const auto& samples = opts.node("samples");
  for (size_t i = 0; i < samples.size(); ++i) {
    Options pair(samples[i], {opt_string("src", std::nullopt, "source sentence"),
                              opt_string("ref", std::nullopt, "reference translation")},
                 "an evaluate sample", {});
    spec.samples.push_back({pair.get_string("src"), pair.get_string("ref")});
  }
  const auto& att = opts.node("attention");
  for (size_t i = 0; i < att.size(); ++i) {
    const auto& src = att[i].str();
    bool known = std::any_of(spec.samples.begin(), spec.samples.end(), [&](const auto& p) { return p.src == src; });
    ATTNLAB_CHECK(known, ConfigError, "{}: '{}' is not one of the evaluate samples' sources (at '{}')",
                  att[i].location().str(), src, att[i].path());
    spec.attention.push_back(src);
  }
  return spec;
}

void evaluate(const EvalSpec& spec, nn::EncoderDecoder& model, const data::Dataset& dataset,
              results::Results& results, bool quiet) {
  if (spec.samples.empty()) return;
  const auto info = dataset.info();
  const int64_t steps = spec.num_steps > 0 ? spec.num_steps : info.num_steps;
  std::vector<std::string> sources;
  for (const auto& p : spec.samples) sources.push_back(p.src);
  auto device = model->parameters().empty() ? torch::Device(torch::kCPU) : model->parameters()[0].device();
  auto batch = dataset.encode_sources(sources).to(device);
  const bool record = !spec.attention.empty();
  nn::AttentionRecorder recorder;
  torch::Tensor predicted;  // [B, steps]
  {
    nn::RecordingScope scope(record ? &recorder : nullptr);
    predicted = train::greedy_decode(model, batch.src, batch.src_valid_lens, info.bos_id, steps);
  }

  std::vector<results::Sample> rows;
  double total = 0.0;
  for (size_t i = 0; i < spec.samples.size(); ++i) {
    auto ids = train::until_eos(predicted[static_cast<int64_t>(i)], info.eos_id);
    results::Sample s{spec.samples[i].src, spec.samples[i].ref, dataset.decode_target(ids), 0.0};
    s.bleu = metrics::d2l_bleu(s.hypothesis, s.reference, static_cast<int>(spec.bleu_k));
    total += s.bleu;
    if (!quiet) std::cout << fmt::format("{} => {}, bleu,{:.3f}", s.source, s.hypothesis, s.bleu) << std::endl;
    rows.push_back(std::move(s));

    if (!record || std::find(spec.attention.begin(), spec.attention.end(), sources[i]) == spec.attention.end()) {
      continue;
    }
    // Decoder queries: the token fed at each step (<bos>, then each prediction), up to <eos>.
    const int64_t used = std::min<int64_t>(steps, static_cast<int64_t>(ids.size()) + 1);
    std::vector<std::string> dec_inputs{"<bos>"};
    for (int64_t t = 0; t + 1 < used; ++t) dec_inputs.push_back(dataset.decode_target({ids[t]}));
    train::write_attention(results, sources[i], recorder, static_cast<int64_t>(i),
                    {{nn::Side::Source, dataset.source_tokens(sources[i])}, {nn::Side::Target, dec_inputs}});
  }
  results.write_samples(rows);
  const double mean = total / static_cast<double>(rows.size());
  results.set_attr("mean_bleu", mean);
  results.flush();
  if (!quiet) std::cout << fmt::format("mean BLEU over {} samples: {:.3f}", rows.size(), mean) << std::endl;
}

void evaluate_split(const EvalSpec& spec, nn::EncoderDecoder& model, const data::Dataset& dataset,
                    results::Results& results, const std::string& checkpoint, bool quiet,
                    const std::atomic<bool>* stop) {
  if (spec.split.empty()) return;
  std::string which = "final";
  // best.pt when training wrote one; a symlink loop or a FIFO there is an error, not "no best.pt".
  const auto why = files::problem(checkpoint, files::Want::File);
  ATTNLAB_CHECK(why.empty() || why == "no such file", DataError, "checkpoint {}: {}", checkpoint, why);
  if (why.empty()) {
    train::load_model_weights(checkpoint, *model);
    which = std::filesystem::path(checkpoint).stem().string();
  }
  const auto split = spec.split == "train" ? data::Split::Train : spec.split == "val" ? data::Split::Val : data::Split::Test;
  train::TranslateOptions to{
      .beam_size = spec.beam_size, .length_penalty = spec.length_penalty, .max_steps = spec.num_steps, .stop = stop};
  auto t = train::translate_split(model, dataset, split, to);
  auto s = train::score_translation(t);
  const auto name = spec.beam_size > 1 ? fmt::format("{}_beam{}", spec.split, spec.beam_size) : spec.split;
  train::write_eval(results, name, t, s, spec.split, to, which);
  if (!quiet) {
    std::cout << fmt::format("{} ({} checkpoint, {}): {} ({})", spec.split, which,
                             spec.beam_size > 1 ? fmt::format("beam {}", spec.beam_size) : std::string("greedy"),
                             s.bleu.format(), s.bleu.signature)
              << std::endl;
  }
}

}  // namespace attnlab::run
