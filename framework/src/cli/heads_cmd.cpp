// `runner heads RUN.h5 [--length 50] [--sequences 16] [--seed 0] [--name repeated_random]
// [--checkpoint best] [--attention]`: every head of a decoder-only language model scored on
// repeated random tokens as TransformerLens's head_detector scores them (previous-token,
// duplicate-token, induction) and by its attention on the first token, printed as a table and
// stored under /head_scores/<name> (sequence 0's maps under /attention/<name> with --attention).
#include "cli/commands.hpp"
#include "cli/head_study.hpp"
#include "cli/run_loading.hpp"

#include <attnlab/data/language_model.hpp>
#include <attnlab/error.hpp>
#include <attnlab/nn/head_mask.hpp>
#include <attnlab/nn/language_model.hpp>
#include <attnlab/nn/recorder.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/results/results.hpp>
#include <attnlab/results/tensor.hpp>
#include <attnlab/train/attention_results.hpp>
#include <attnlab/train/head_scores.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <iostream>
#include <limits>

#include "run/interventions.hpp"
#include "run/setup.hpp"

namespace attnlab::cli {
namespace {

/// "layer 1 head 2 (0.931)": the head with the highest score (NaN heads left out).
std::string top_head(const train::HeadScores& s, const torch::Tensor& scores) {
  const auto flat = scores.nan_to_num(-1.0).flatten();
  const int64_t i = flat.argmax().item<int64_t>(), heads = scores.size(1);
  return fmt::format("layer {} head {} ({:.3f})", s.layers[static_cast<size_t>(i / heads)] + 1, i % heads + 1,
                     flat[i].item<double>());
}

void print_table(const train::HeadScores& s, const std::string& run, const std::string& name, int64_t sequences,
                 int64_t length, const train::TokenRange& ids) {
  std::cout << fmt::format("{} heads of {}: {} sequences of {} random tokens repeated once, {}\n",
                           s.previous_token.numel(), run, sequences, length, ids.text);
  std::cout << fmt::format("{:>5} {:>4} {:>14} {:>15} {:>9} {:>16}\n", "layer", "head", "previous_token",
                           "duplicate_token", "induction", "first_token_mass");
  const auto cell = [](const torch::Tensor& t, int64_t l, int64_t h, int width) {
    const double v = t[l][h].item<double>();
    return std::isnan(v) ? fmt::format("{:>{}}", "off", width) : fmt::format("{:>{}.3f}", v, width);
  };
  for (int64_t l = 0; l < s.previous_token.size(0); ++l) {
    for (int64_t h = 0; h < s.previous_token.size(1); ++h) {
      std::cout << fmt::format("{:>5} {:>4} {} {} {} {}\n", s.layers[static_cast<size_t>(l)] + 1, h + 1,
                               cell(s.previous_token, l, h, 14), cell(s.duplicate_token, l, h, 15),
                               cell(s.induction, l, h, 9), cell(s.first_token_mass, l, h, 16));
    }
  }
  std::cout << fmt::format("top induction head: {}; top previous-token head: {}; stored as /head_scores/{}\n",
                           top_head(s, s.induction), top_head(s, s.previous_token), name);
}

}  // namespace

int cmd_heads(int argc, char** argv) {
  CLI::App app{
      "score a decoder-only language model's heads on repeated random tokens (previous-token, "
      "duplicate-token, induction: TransformerLens's head_detector; first-token mass)"};
  std::string run, name = "repeated_random", which = "best";
  std::vector<std::string> overrides, plugin_dirs;
  int64_t length = 50, sequences = 16, seed = 0;
  bool attention = false, quiet = false;
  app.add_option("run", run, "results file of the run (its checkpoints are in RUN.h5.ckpt/)")->required();
  app.add_option("overrides", overrides, "key.path=value changes to the stored config (e.g. device=cpu)");
  app.add_option("--length", length, "random tokens before the repeat: each sequence is r r, 2 x length tokens")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  app.add_option("--sequences", sequences, "random sequences the scores are averaged over")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  app.add_option("--seed", seed, "the seed of the tokens' CPU generator (the same tokens on every machine)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()));
  app.add_option("--name", name, "group under /head_scores (asked again, it is replaced)")->capture_default_str();
  app.add_option("--checkpoint", which, "best, last, epoch-N or a runner average's name")->capture_default_str();
  app.add_flag("--attention", attention,
               "also store sequence 0's attention, every layer and head, under /attention/<name> (for runner plot, "
               "report and rollout)");
  add_plugin_path_option(app, plugin_dirs);
  app.add_flag("-q,--quiet", quiet, "print nothing but errors (the scores are in the results file)");
  app.footer(
      "Examples:\n  runner heads results/gpt_char-20261129-120000.h5\n"
      "  runner heads RUN.h5 --length 100 --sequences 32 --seed 1 --name long --attention");
  if (auto code = parse_command_line(app, argc, argv, "runner heads")) return *code;
  check_group_name(name, "--name", "head_scores");
  ATTNLAB_CHECK(name != "training", ConfigError,
                "--name training: /head_scores/training holds the scores the lm trainer measured during training "
                "(trainer.head_scores_every); choose another name");

  auto [setup, lm, trained] =
      open_language_model(run, which, overrides, plugin_dirs, "heads", "scores a language model's heads");
  ATTNLAB_CHECK(lm->max_positions() == 0 || 2 * length <= lm->max_positions(), ConfigError,
                "--length {}: sequences of 2 x {} = {} tokens are beyond the {} positions of the model's absolute "
                "positional encoding (its max_len); ask for --length {} at most",
                length, length, 2 * length, lm->max_positions(), lm->max_positions() / 2);
  const auto ids = train::ordinary_tokens(*setup.dataset, lm->vocab_size());
  ATTNLAB_CHECK(ids.high - ids.low >= 2, ConfigError,
                "run {}: its vocabulary has {} ordinary tokens ({}): too few to draw random sequences from", run,
                std::max<int64_t>(ids.high - ids.low, 0), ids.text);
  const auto device = setup.ctx.device;
  const nn::HeadMaskScope mask_scope(trained.mask.empty() ? nullptr : &trained.mask);  // the heads it trained without

  const auto tokens = train::repeated_random_tokens(sequences, length, ids.low, ids.high, static_cast<uint64_t>(seed));
  nn::AttentionRecorder recorder;
  auto scores = train::measure_heads(*lm, tokens, device, &recorder);
  train::blank_heads_off(scores, trained.mask);

  // Everything computed: now the file, in one go.
  {
    results::Results out(run, results::Results::Open::Existing);
    const std::string at = "head_scores/" + name;
    train::write_head_scores(out, at, scores,
                             {.sequences = sequences,
                              .length = length,
                              .seed = static_cast<uint64_t>(seed),
                              .ids = ids,
                              .checkpoint = setup.weights,
                              .device = device.str(),
                              .trained_head_mask = trained.mask.empty() ? std::string() : trained.text});  // replaces
    if (attention) {
      const auto* text = dynamic_cast<const data::LanguageModelData*>(setup.dataset.get());
      train::SideLabels labels;
      if (text != nullptr) {
        const auto row = tokens[0].contiguous();
        labels[nn::Side::Target] =
            text->token_labels(std::vector<int64_t>(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel()));
      }
      out.remove("attention/" + name);
      train::write_attention(out, name, recorder, 0, labels);
      out.set_attr_at(at, "attention", "attention/" + name);
    }
    out.flush();
  }
  if (!quiet) print_table(scores, run, name, sequences, length, ids);
  return 0;
}

}  // namespace attnlab::cli
