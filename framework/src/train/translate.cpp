// Whole-split translation (greedy or beam), scoring and recording under /eval/<name>.
#include <attnlab/train/translate.hpp>

#include <attnlab/error.hpp>
#include <attnlab/metrics/bleu.hpp>
#include <attnlab/train/beam.hpp>
#include <attnlab/train/decode.hpp>

#include <torch/types.h>

#include <algorithm>
#include <chrono>

namespace attnlab::train {

namespace {

/// One batch on the model's device, decoded as `options` say; the detokenized outputs.
std::vector<std::string> decode_batch(nn::EncoderDecoder& model, const data::Dataset& dataset,
                                      const data::Batch& cpu_batch, const plugin::DataInfo& info,
                                      const torch::Device& device, const TranslateOptions& options) {
  auto b = cpu_batch.to(device);
  const int64_t steps = options.max_steps > 0 ? options.max_steps
                        : info.num_steps > 0  ? info.num_steps
                                              : 2 * b.src.size(1) + 10;
  std::vector<nn::EncoderDecoder> models{model};
  models.insert(models.end(), options.ensemble.begin(), options.ensemble.end());
  torch::Tensor ids;  // [B, steps]
  if (options.beam_size <= 1) {
    ids = greedy_decode(models, b.src, b.src_valid_lens, info.bos_id, steps, info.eos_id);
  } else {
    BeamOptions bo{.beam_size = options.beam_size, .length_penalty = options.length_penalty, .max_steps = steps};
    ids = beam_search(models, b.src, b.src_valid_lens, info.bos_id, info.eos_id, bo).ids;
  }
  std::vector<std::string> out;
  for (int64_t i = 0; i < ids.size(0); ++i) out.push_back(dataset.decode_target(until_eos(ids[i], info.eos_id)));
  return out;
}

torch::Device device_of(nn::EncoderDecoder& model) {
  const auto params = model->parameters();
  return params.empty() ? torch::Device(torch::kCPU) : params.front().device();
}

}  // namespace

Translation translate_sentences(nn::EncoderDecoder& model, const data::Dataset& dataset,
                                std::vector<std::string> sources, std::vector<std::string> references,
                                const TranslateOptions& options, int64_t batch_size) {
  ATTNLAB_CHECK(sources.size() == references.size(), DataError,
                "{} source sentences but {} references: they must pair up one to one", sources.size(),
                references.size());
  ATTNLAB_CHECK(batch_size >= 1, ConfigError, "batch size must be at least 1, found {}", batch_size);
  Translation t;
  t.sources = std::move(sources);
  t.references = std::move(references);
  const auto info = dataset.info();
  const auto device = device_of(model);
  const auto start = std::chrono::steady_clock::now();
  for (size_t begin = 0; begin < t.sources.size(); begin += static_cast<size_t>(batch_size)) {
    if (options.stop != nullptr && options.stop->load()) {
      throw Interrupted(fmt::format("interrupted while translating ({} of {} sentences done)", t.hypotheses.size(),
                                    t.sources.size()));
    }
    const size_t end = std::min(t.sources.size(), begin + static_cast<size_t>(batch_size));
    const std::vector<std::string> chunk(t.sources.begin() + static_cast<std::ptrdiff_t>(begin),
                                         t.sources.begin() + static_cast<std::ptrdiff_t>(end));
    for (auto& h : decode_batch(model, dataset, dataset.encode_sources(chunk), info, device, options)) {
      t.hypotheses.push_back(std::move(h));
    }
  }
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return t;
}

Translation translate_split(nn::EncoderDecoder& model, const data::Dataset& dataset, data::Split split,
                            const TranslateOptions& options) {
  ATTNLAB_CHECK(dataset.has_split(split), DataError, "the dataset has no '{}' split to translate",
                data::split_name(split));
  Translation t;
  t.sources = dataset.raw_sources(split);
  t.references = dataset.raw_targets(split);
  const auto info = dataset.info();
  const auto device = device_of(model);
  const auto start = std::chrono::steady_clock::now();
  for (const auto& cpu_batch : dataset.batches(split, false, 0)) {
    if (options.stop != nullptr && options.stop->load()) {
      throw Interrupted(fmt::format("interrupted while translating the '{}' split ({} of {} sentences done)",
                                    data::split_name(split), t.hypotheses.size(), t.references.size()));
    }
    for (auto& h : decode_batch(model, dataset, cpu_batch, info, device, options)) t.hypotheses.push_back(std::move(h));
  }
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ATTNLAB_CHECK(t.hypotheses.size() == t.references.size(), DataError,
                "the '{}' split has {} reference sentences but its batches hold {} rows", data::split_name(split),
                t.references.size(), t.hypotheses.size());
  return t;
}

EvalScores score_translation(const Translation& t) {
  EvalScores s;
  s.bleu = metrics::corpus_bleu(t.hypotheses, t.references);
  s.bleu_lowercase = metrics::corpus_bleu(t.hypotheses, t.references, {.lowercase = true});
  double total = 0.0;
  for (size_t i = 0; i < t.hypotheses.size(); ++i) total += metrics::d2l_bleu(t.hypotheses[i], t.references[i], 4);
  s.d2l_mean_bleu = t.hypotheses.empty() ? 0.0 : total / static_cast<double>(t.hypotheses.size());
  return s;
}

void write_eval(results::Results& results, const std::string& name, const Translation& t, const EvalScores& s,
                const std::string& split, const TranslateOptions& options, const std::string& checkpoint) {
  const std::string at = "eval/" + name;
  results.write_strings(at + "/sources", t.sources);
  results.write_strings(at + "/references", t.references);
  results.write_strings(at + "/hypotheses", t.hypotheses);
  results.set_attr_at(at, "bleu", s.bleu.score);
  results.set_attr_at(at, "bleu_signature", s.bleu.signature);
  results.set_attr_at(at, "bleu_text", s.bleu.format());
  results.set_attr_at(at, "bleu_lowercase", s.bleu_lowercase.score);
  results.set_attr_at(at, "d2l_mean_bleu", s.d2l_mean_bleu);
  results.set_attr_at(at, "seconds", t.seconds);
  results.set_attr_at(at, "sentences", static_cast<int64_t>(t.hypotheses.size()));
  results.set_attr_at(at, "split", split);
  results.set_attr_at(at, "decoding", std::string(options.beam_size <= 1 ? "greedy" : "beam"));
  results.set_attr_at(at, "beam_size", std::max<int64_t>(options.beam_size, 1));
  results.set_attr_at(at, "length_penalty", options.length_penalty);
  results.set_attr_at(at, "max_steps", options.max_steps);
  results.set_attr_at(at, "checkpoint", checkpoint);
  results.set_attr_at(at, "ensemble_size", static_cast<int64_t>(1 + options.ensemble.size()));
  results.flush();
}

std::vector<std::string> set_aside_evals(results::Results& results) {
  const auto names = results.children("eval");
  const std::string since = results::utc_now();
  for (const auto& name : names) {
    const std::string stale = "eval_stale/" + name;
    results.move("eval/" + name, stale);
    results.set_attr_at(stale, "stale_since", since);
    results.set_attr_at(stale, "stale_reason",
                        std::string("the run was resumed after this evaluation: training replaced the checkpoints "
                                    "it scored; run `runner eval` again"));
  }
  results.flush();
  return names;
}

}  // namespace attnlab::train
