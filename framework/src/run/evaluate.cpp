#include "run/evaluate.hpp"

#include <attnlab/config/binding.hpp>
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

namespace {

/// The `evaluate:` section: EvalSpec's options, with samples and attention as given (YAML).
struct EvaluateSection : EvalSpec {
  config::Node samples_yaml, attention_yaml;
};

const config::Binding<EvaluateSection>& evaluate_binding() {
  using E = EvaluateSection;
  static const auto b =
      config::Binding<E>()
          .node("samples", &E::samples_yaml, config::Type::List, "[]",
                "sentence pairs to translate: [{src: ..., ref: ...}]")
          .node("attention", &E::attention_yaml, config::Type::List, "[]",
                "sources (from samples) whose attention is recorded")
          .option("bleu_k", &E::bleu_k, "BLEU n-gram order (d2l's k)", {.min = 1, .max = 4})
          .option("num_steps", &E::num_steps, "decoding steps (0 = the dataset's num_steps)", {.min = 0})
          .choice("split", &E::split,
                  {{"none", std::nullopt},
                   {"train", data::Split::Train},
                   {"val", data::Split::Val},
                   {"test", data::Split::Test}},
                  "translate this whole split with the best checkpoint and store /eval/<split> (sacreBLEU)")
          .option("beam_size", &E::beam_size, "split translation: beam size (1 = greedy)", {.min = 1})
          .option("length_penalty", &E::length_penalty, "split translation: GNMT length penalty alpha", {.min = 0.0});
  return b;
}

/// One of `samples:`.
const config::Binding<EvalSpec::Pair>& pair_binding() {
  using P = EvalSpec::Pair;
  static const auto b = config::Binding<P>()
                            .required("src", &P::src, "source sentence")
                            .required("ref", &P::ref, "reference translation");
  return b;
}

}  // namespace

EvalSpec parse_evaluate(const config::Node& node) {
  const config::Options opts(node, evaluate_binding().schema(), "the evaluate section", {});
  const EvaluateSection section = evaluate_binding().read(opts);
  EvalSpec spec = section;
  const auto& samples = section.samples_yaml;
  for (size_t i = 0; i < samples.size(); ++i) {
    const config::Options pair(samples[i], pair_binding().schema(), "an evaluate sample", {});
    spec.samples.push_back(pair_binding().read(pair));
  }
  const auto& att = section.attention_yaml;
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
  if (!spec.split) return;
  std::string which = "final";
  // best.pt when training wrote one; a symlink loop or a FIFO there is an error, not "no best.pt".
  const auto why = files::problem(checkpoint, files::Want::File);
  ATTNLAB_CHECK(why.empty() || why == "no such file", DataError, "checkpoint {}: {}", checkpoint, why);
  if (why.empty()) {
    train::load_model_weights(checkpoint, *model);
    which = std::filesystem::path(checkpoint).stem().string();
  }
  const data::Split split = *spec.split;
  const std::string split_name = data::split_name(split);
  train::TranslateOptions to{
      .beam_size = spec.beam_size, .length_penalty = spec.length_penalty, .max_steps = spec.num_steps, .stop = stop};
  auto t = train::translate_split(model, dataset, split, to);
  auto s = train::score_translation(t);
  const auto name = spec.beam_size > 1 ? fmt::format("{}_beam{}", split_name, spec.beam_size) : split_name;
  train::write_eval(results, name, t, s, split_name, to, which);
  if (!quiet) {
    std::cout << fmt::format("{} ({} checkpoint, {}): {} ({})", split_name, which,
                             spec.beam_size > 1 ? fmt::format("beam {}", spec.beam_size) : std::string("greedy"),
                             s.bleu.format(), s.bleu.signature)
              << std::endl;
  }
}

}  // namespace attnlab::run
