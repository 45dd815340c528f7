// `runner ablate RUN.h5 --tokens`: blank-out importance of each source token (Abnar & Zuidema
// 2020, section 4): the token replaced by <unk> (or <pad> where the vocabulary has none), the
// change in the reference translation's teacher-forced loss, for the first sentences of a split,
// with the full model's attention on that same forward recorded as /attention/<split> <i> (what
// `runner rollout` reads), so that rollout and raw attention can be set against it.
#include <attnlab/error.hpp>
#include <attnlab/nn/recorder.hpp>
#include <attnlab/results/results.hpp>
#include <attnlab/train/attention_results.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/nn/functional.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <iostream>

#include "cli/head_study.hpp"

namespace attnlab::cli {

int ablate_tokens(HeadStudy& study, const std::string& name, int64_t max_sentences, bool quiet) {
  ATTNLAB_CHECK(study.translates(), ConfigError,
                "run {} is a language model: ablate --tokens blanks a translation's source tokens, and it has no "
                "source; ablate its heads (without --tokens)",
                study.run);
  const data::Dataset& dataset = *study.setup.dataset;
  nn::EncoderDecoder& model = study.setup.model;
  const auto* vocab = dataset.src_vocab();
  const int64_t blank = vocab != nullptr ? vocab->unk() : dataset.info().pad_id;
  const std::string blank_name = vocab != nullptr ? "<unk>" : "<pad>";
  const auto raw = dataset.raw_sources(study.split);
  const auto started = std::chrono::steady_clock::now();
  const nn::HeadMaskScope base_scope(study.base());
  torch::NoGradGuard no_grad;

  struct Sentence {
    std::string sample;                 // "/attention/<sample>"
    nn::AttentionRecorder recorder;     // the full model's attention on the teacher-forced reference
    std::vector<std::string> source, target;  // labels: source tokens, decoder inputs
  };
  std::vector<Sentence> recorded;
  std::vector<int64_t> sentence_of, position, target_tokens;
  std::vector<std::string> token;
  std::vector<float> delta, loss_full;
  int64_t g = 0;  // the sentence's row in the split
  for (const auto& b : study.data.batches) {
    for (int64_t r = 0; r < b.size() && g < max_sentences; ++r, ++g) {
      const int64_t S = b.src_valid_lens[r].item<int64_t>(), T = b.tgt_valid_lens[r].item<int64_t>();
      if (S == 0 || T == 0) continue;
      const auto src = b.src[r].unsqueeze(0), lens = b.src_valid_lens[r].unsqueeze(0);  // [1, S_max], [1]
      const auto tgt_in = b.tgt_in[r].unsqueeze(0), tgt_out = b.tgt_out[r].unsqueeze(0);
      Sentence s;
      s.sample = fmt::format("{} {}", study.split_name, g);
      torch::Tensor full;
      {
        nn::RecordingScope scope(&s.recorder);
        full = train::token_loss(model->forward(src, lens, tgt_in), tgt_out, study.how);  // summed over T tokens
      }
      // Every position blanked in turn: S rows of one batch, row i with token i replaced.
      auto blanked = src.repeat({S, 1});  // [S, S_max]
      const auto rows = torch::arange(S, torch::dtype(torch::kLong).device(src.device()));
      blanked.index_put_({rows, rows}, blank);
      auto out = model->forward(blanked, lens.repeat({S}), tgt_in.repeat({S, 1}));  // [S, T_max, V]
      // -log p(label) per target token (of log-probabilities when the decoder returns probabilities,
      // as token_loss takes them), <pad> labels counting nothing.
      const auto log_p = study.how.probabilities ? torch::log(out.clamp_min(1e-12)) : torch::log_softmax(out, -1);
      const auto per = torch::nn::functional::nll_loss(
          log_p.reshape({-1, out.size(-1)}), tgt_out.repeat({S, 1}).reshape({-1}),
          torch::nn::functional::NLLLossFuncOptions().ignore_index(study.how.pad).reduction(torch::kNone));
      const auto blanked_loss = per.view({S, -1}).sum(1).to(torch::kCPU, torch::kDouble);  // [S]
      const double full_loss = full.item<double>();
      s.source = dataset.source_tokens(raw.at(static_cast<size_t>(g)));
      s.source.resize(static_cast<size_t>(S), "");  // the model's positions: padding labelled by nothing
      for (int64_t i = 0; i < S; ++i) {
        if (s.source[static_cast<size_t>(i)].empty()) s.source[static_cast<size_t>(i)] = fmt::format("#{}", i);
      }
      s.target.push_back("<bos>");
      for (int64_t t = 0; t + 1 < T; ++t) s.target.push_back(dataset.decode_target({b.tgt_out[r][t].item<int64_t>()}));
      for (int64_t i = 0; i < S; ++i) {
        sentence_of.push_back(g);
        target_tokens.push_back(T);
        position.push_back(i);
        token.push_back(s.source[static_cast<size_t>(i)]);
        delta.push_back(static_cast<float>((blanked_loss[i].item<double>() - full_loss) / static_cast<double>(T)));
        loss_full.push_back(static_cast<float>(full_loss / static_cast<double>(T)));
      }
      recorded.push_back(std::move(s));
    }
  }
  ATTNLAB_CHECK(!recorded.empty(), ConfigError, "the {} split of run {} has no sentence with source and target tokens",
                study.split_name, study.run);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  {
    results::Results out(study.run, results::Results::Open::Existing);
    const std::string at = "ablation/" + name;
    const auto existing = out.children("ablation");
    if (std::find(existing.begin(), existing.end(), name) != existing.end()) out.remove(at);
    const auto n = static_cast<int64_t>(delta.size());
    out.write_array(at + "/sentence", results::IntArray{{n}, sentence_of});
    out.write_array(at + "/position", results::IntArray{{n}, position});
    out.write_array(at + "/target_tokens", results::IntArray{{n}, target_tokens});
    out.write_strings(at + "/token", token);
    out.write_array(at + "/delta_loss", results::FloatArray{{n}, delta});
    out.write_array(at + "/loss", results::FloatArray{{n}, loss_full});
    std::vector<std::string> samples;
    for (const auto& s : recorded) {
      train::write_attention(out, s.sample, s.recorder, 0, {{nn::Side::Source, s.source}, {nn::Side::Target, s.target}});
      samples.push_back(s.sample);
    }
    out.set_attr_at(at, "method", std::string("blank-out"));
    out.set_attr_at(at, "blank", blank_name);
    out.set_attr_at(at, "split", study.split_name);
    out.set_attr_at(at, "sentences", static_cast<int64_t>(recorded.size()));
    out.set_attr_at(at, "samples", samples);
    out.set_attr_at(at, "seconds", seconds);
    if (study.base() != nullptr) out.set_attr_at(at, "trained_head_mask", study.trained.text);
    out.flush();
  }
  if (!quiet) {
    const auto& first = recorded.front();
    std::cout << fmt::format("{}: blank-out Δloss per source token\n", first.sample);
    for (size_t i = 0; i < first.source.size(); ++i) std::cout << fmt::format("  {:<16} {:+.4f}\n", first.source[i], delta[i]);
  }
  std::cout << fmt::format(
      "{} sentences of the {} split, {} source tokens each blanked ({}) -> /ablation/{}, their attention -> "
      "/attention/{} 0.. ({:.1f}s)\n",
      recorded.size(), study.split_name, delta.size(), blank_name, name, study.split_name, seconds);
  return 0;
}

}  // namespace attnlab::cli
