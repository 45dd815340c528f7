// `runner generate RUN.h5 --prompt TEXT [--tokens N] [--temperature T] [--top-k K] [--top-p P]
// [--seed S] [--no-cache] [--attention] [--name NAME]`: text from a decoder-only language model's
// checkpoint, printed and stored under /generations/<name> of the results file (with the attention
// of every layer and head over prompt and continuation under /attention/<name> with --attention).
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
#include <attnlab/train/generate.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <iostream>

#include "run/interventions.hpp"
#include "run/setup.hpp"

namespace attnlab::cli {
namespace {

/// A CLI11 check: a finite number in [low, high] (CLI::Range lets NaN through).
CLI::Validator finite_in(double low, double high) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double v = 0;
        if (CLI::detail::lexical_cast(text, v) && std::isfinite(v) && v >= low && v <= high) return {};
        return fmt::format("expected a number from {} to {}, found {}", low, high, text);
      },
      fmt::format("NUMBER in [{} - {}]", low, high));
}

/// The next free name generation-<n> under /generations.
std::string next_name(const std::string& run) {
  const auto taken = results::read_isolated(run, [&] {
    results::ResultsReader r(run, results::ReadCheck::none);
    return r.children("generations");
  });
  for (int n = 1;; ++n) {
    const auto name = fmt::format("generation-{}", n);
    if (std::find(taken.begin(), taken.end(), name) == taken.end()) return name;
  }
}

}  // namespace

int cmd_generate(int argc, char** argv) {
  CLI::App app{"generate text with a decoder-only language model's checkpoint (model gpt, trainer lm)"};
  std::string run, prompt, name, which = "best";
  std::vector<std::string> overrides, plugin_dirs;
  train::GenerateOptions o;
  o.tokens = 200;
  bool no_cache = false, attention = false, quiet = false;
  int64_t seed = 0;
  app.add_option("run", run, "results file of the run (its checkpoints are in RUN.h5.ckpt/)")->required();
  app.add_option("overrides", overrides, "key.path=value changes to the stored config (e.g. device=cpu)");
  app.add_option("--prompt", prompt, "the text to continue (characters of the run's vocabulary)")->required();
  app.add_option("--tokens", o.tokens, "tokens to generate after the prompt")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  app.add_option("--temperature", o.temperature, "divides the logits before sampling; 0 = greedy (the argmax)")
      ->capture_default_str()
      ->check(finite_in(0, 100));
  app.add_option("--top-k", o.top_k, "sample among the k most likely tokens only (0 = all)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{100000000}));
  app.add_option("--top-p", o.top_p,
                 "nucleus sampling: among the fewest most likely tokens whose probabilities reach p (1 = all)")
      ->capture_default_str()
      ->check(finite_in(1e-9, 1));
  app.add_option("--seed", seed, "the sampler's seed (the same tokens on CPU and GPU for the same logits)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()));
  app.add_flag("--no-cache", no_cache,
               "run the model on the whole sequence at every step instead of keeping its KV cache (the reference; "
               "slower)");
  app.add_flag("--attention", attention,
               "also store every layer's and head's attention over prompt and continuation under /attention/<name> "
               "(for runner plot, report and rollout)");
  app.add_option("--checkpoint", which, "best, last, epoch-N or a runner average's name")->capture_default_str();
  app.add_option("--name", name, "group under /generations (default generation-<n>, the next free one)");
  add_plugin_path_option(app, plugin_dirs);
  app.add_flag("-q,--quiet", quiet, "no summary line on stderr (stdout holds the prompt and the text alone)");
  app.footer(
      "Examples:\n  runner generate results/gpt_char-20261129-120000.h5 --prompt \"I'm \" --tokens 200\n"
      "  runner generate RUN.h5 --prompt 'the cat' --temperature 0.8 --top-k 40 --seed 1 --attention");
  if (auto code = parse_command_line(app, argc, argv, "runner generate")) return *code;
  o.seed = static_cast<uint64_t>(seed);
  o.cache = !no_cache;
  ATTNLAB_CHECK(!prompt.empty(), ConfigError, "--prompt is empty: give at least one character to continue");
  if (!name.empty()) check_group_name(name, "--name", "generations");

  if (name.empty()) name = next_name(run);
  auto [setup, lm, trained] = open_language_model(run, which, overrides, plugin_dirs, "generate", "samples text from one");
  const auto* text = dynamic_cast<const data::LanguageModelData*>(setup.dataset.get());
  ATTNLAB_CHECK(text != nullptr, ConfigError,
                "run {}: its dataset '{}' cannot turn a prompt into tokens (it does not implement "
                "data::LanguageModelData, attnlab/data/language_model.hpp)",
                run, setup.dataset_name);
  const auto prompt_ids = text->encode_prompt(prompt);  // DataError naming a character outside the vocabulary
  const int64_t total = static_cast<int64_t>(prompt_ids.size()) + o.tokens;
  ATTNLAB_CHECK(lm->max_positions() == 0 || total <= lm->max_positions(), ConfigError,
                "--tokens {}: the prompt's {} tokens and {} more make {} positions, beyond the {} of the model's "
                "absolute positional encoding (its max_len); ask for at most {} tokens",
                o.tokens, prompt_ids.size(), o.tokens, total, lm->max_positions(),
                std::max<int64_t>(lm->max_positions() - static_cast<int64_t>(prompt_ids.size()), 0));
  const auto device = setup.ctx.device;
  const nn::HeadMaskScope mask_scope(trained.mask.empty() ? nullptr : &trained.mask);  // the heads it trained without

  const auto g = train::generate(*lm, prompt_ids, o, device);
  const std::vector<int64_t> continuation(g.ids.begin() + g.prompt_tokens, g.ids.end());
  const auto continuation_text = text->decode(continuation);
  const auto whole_text = text->decode(g.ids);  // as the dataset writes text (token names spaced, characters not)

  nn::AttentionRecorder recorder;
  if (attention) {  // one pass over the whole sequence, recorded
    const bool training = lm->is_training();
    lm->eval();
    torch::NoGradGuard no_grad;
    nn::RecordingScope scope(&recorder);
    lm->forward(torch::tensor(g.ids, torch::kLong).reshape({1, -1}).to(device));
    lm->train(training);
  }
  {
    results::Results out(run, results::Results::Open::Existing);
    const std::string at = "generations/" + name;
    // A generation asked for again by its name replaces it.
    train::write_generation(out, name, g, o, {prompt, continuation_text, whole_text}, setup.weights, device);
    if (attention) {
      out.remove("attention/" + name);
      train::write_attention(out, name, recorder, 0, {{nn::Side::Target, text->token_labels(g.ids)}});
      out.set_attr_at(at, "attention", "attention/" + name);
    }
    out.flush();
  }
  std::cout << whole_text << std::endl;  // flushed before the summary on stderr
  if (!quiet) {  // on stderr: stdout is the text alone, for a pipe
    std::cerr << fmt::format("{} tokens in {:.2f} s ({:.0f} tokens/s, cache: {}); stored as /generations/{}{} in {}\n",
                             o.tokens, g.seconds, static_cast<double>(o.tokens) / std::max(g.seconds, 1e-9), g.cache,
                             name, attention ? fmt::format(", attention as /attention/{}", name) : std::string(), run);
  }
  return 0;
}

}  // namespace attnlab::cli
