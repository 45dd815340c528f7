// `runner eval RUN.h5 [--split test | --source F --reference F] [--beam N] ...`: rebuild a finished
// run's dataset and model from its stored /config, load its best checkpoint, translate a split (or
// the user's own parallel text), score it (sacreBLEU-exact) and record it under /eval/<name> of the
// same results file. On a decoder-only language model it measures the split's loss, perplexity and
// accuracy instead (cli/lm_eval.hpp).
#include "cli/commands.hpp"

#include <attnlab/config/load.hpp>
#include <attnlab/data/fetch.hpp>
#include <attnlab/data/text.hpp>
#include <attnlab/error.hpp>
#include <attnlab/files.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/train/checkpoint.hpp>
#include <attnlab/run/experiment.hpp>
#include <attnlab/train/translate.hpp>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <filesystem>
#include <regex>
#include <iostream>

#include "cli/lm_eval.hpp"
#include "cli/run_loading.hpp"
#include "run/interventions.hpp"
#include "run/setup.hpp"

namespace attnlab::cli {
namespace {

/// The lines of a (plain or gzipped) text file: one sentence each, a trailing '\r' dropped, no
/// line after the last newline. DataError naming the file when it is unreadable, not UTF-8 or empty.
std::vector<std::string> read_sentences(const std::string& path, const char* what) {
  const std::string text = data::read_text_file(path);
  data::require_utf8(text, path);
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    // A NUL is no sentence's character: the file is binary or damaged (and would be cut there).
    ATTNLAB_CHECK(line.find('\0') == std::string::npos, DataError,
                  "{} {}:{}: a NUL byte at column {}: expected one sentence of text per line", what, path,
                  lines.size() + 1, line.find('\0') + 1);
    lines.push_back(std::move(line));
    start = end + 1;
  }
  ATTNLAB_CHECK(!lines.empty(), DataError, "{} {} is empty: expected one sentence per line", what, path);
  return lines;
}

/// The default /eval name for a source file: its name without ".gz" and its last extension, in
/// letters, digits, '-', '_' and '.' ("newstest2014.de.gz" -> "newstest2014").
std::string name_for_file(const std::string& path) {
  std::string stem = std::filesystem::path(path).filename().string();
  if (stem.ends_with(".gz")) stem.resize(stem.size() - 3);
  if (const auto dot = stem.rfind('.'); dot != std::string::npos && dot > 0) stem.resize(dot);
  for (char& c : stem) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80 || !(std::isalnum(u) || c == '-' || c == '_' || c == '.')) c = '_';
  }
  return stem.empty() ? std::string("file") : stem;
}

/// `--ensemble` SPEC: "RUN.h5" (with the --checkpoint name) or "RUN.h5:CHECKPOINT" -> {run, checkpoint}.
std::pair<std::string, std::string> parse_member(const std::string& spec, const std::string& checkpoint) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(spec, ec)) return {spec, checkpoint};
  if (const auto colon = spec.rfind(':'); colon != std::string::npos && colon > 0 && colon + 1 < spec.size()) {
    const std::string run = spec.substr(0, colon);
    if (std::filesystem::is_regular_file(run, ec)) return {run, spec.substr(colon + 1)};
  }
  throw DataError(fmt::format(
      "--ensemble {}: no such results file (write RUN.h5 to use its '{}' checkpoint, or RUN.h5:CHECKPOINT, "
      "e.g. RUN.h5:average)",
      spec, checkpoint));
}

/// Why `member` cannot decode with `main` (ids that mean other tokens, another device), or "".
std::string ensemble_mismatch(const run::Setup& main, const run::Setup& member) {
  const auto a = main.dataset->info(), b = member.dataset->info();
  if (a.src_vocab_size != b.src_vocab_size || a.tgt_vocab_size != b.tgt_vocab_size) {
    return fmt::format("its vocabularies have {} source and {} target tokens, the run's {} and {}", b.src_vocab_size,
                       b.tgt_vocab_size, a.src_vocab_size, a.tgt_vocab_size);
  }
  if (a.pad_id != b.pad_id || a.bos_id != b.bos_id || a.eos_id != b.eos_id) {
    return fmt::format("its <pad>, <bos>, <eos> ids are {}, {}, {}, the run's {}, {}, {}", b.pad_id, b.bos_id,
                       b.eos_id, a.pad_id, a.bos_id, a.eos_id);
  }
  const auto differs = [](const data::Vocab* x, const data::Vocab* y) {
    return x != nullptr && y != nullptr && x->tokens() != y->tokens();
  };
  if (differs(main.dataset->src_vocab(), member.dataset->src_vocab())) {
    return "its source vocabulary has the same size but other tokens";
  }
  if (differs(main.dataset->tgt_vocab(), member.dataset->tgt_vocab())) {
    return "its target vocabulary has the same size but other tokens";
  }
  if (main.ctx.device != member.ctx.device) {
    return fmt::format("it is on {}, the run on {} (add device={} to the command)", member.ctx.device.str(),
                       main.ctx.device.str(), main.ctx.device.str());
  }
  return {};
}

/// Decodes the val split with each of `alphas` and sets `to.length_penalty` to the first with the
/// best BLEU; returns "alpha: val BLEU" for each, comma-separated.
std::string pick_length_penalty(run::Setup& setup, const std::vector<double>& alphas, train::TranslateOptions& to,
                                bool quiet) {
  std::string tried;
  double best_bleu = -1.0;
  for (const double alpha : alphas) {
    auto trial = to;
    trial.length_penalty = alpha;
    const auto val =
        train::score_translation(train::translate_split(setup.model, *setup.dataset, data::Split::Val, trial));
    tried += fmt::format("{}{}: {:.2f}", tried.empty() ? "" : ", ", alpha, val.bleu.score);
    if (!quiet) spdlog::info("length penalty {}: val {}", alpha, val.bleu.format());
    if (val.bleu.score > best_bleu) {  // ties keep the earlier (list them smallest first)
      best_bleu = val.bleu.score;
      to.length_penalty = alpha;
    }
  }
  if (!quiet) spdlog::info("length penalty {} (val BLEU {:.2f}) of {}", to.length_penalty, best_bleu, tried);
  return tried;
}

}  // namespace

int cmd_eval(int argc, char** argv) {
  CLI::App app{"translate a split with a run's best checkpoint and score it (sacreBLEU-exact corpus BLEU)"};
  std::string run, split_name = "test", which = "best", name, source_file, reference_file;
  int64_t batch_size = 128;
  std::vector<std::string> overrides, plugin_dirs;
  train::TranslateOptions to;
  bool quiet = false;
  app.add_option("run", run, "results file of the run (its checkpoints are in RUN.h5.ckpt/)")->required();
  app.add_option("overrides", overrides, "key.path=value changes to the stored config (e.g. device=cpu data_dir=...)");
  auto* split_opt = app.add_option("--split", split_name, "train, val or test")->capture_default_str();
  auto* source_opt = app.add_option("--source", source_file,
                                    "score your own test set: source sentences, one per line (plain or .gz), "
                                    "instead of a split");
  auto* reference_opt =
      app.add_option("--reference", reference_file, "the reference translations of --source, line by line");
  source_opt->needs(reference_opt)->excludes(split_opt);
  reference_opt->needs(source_opt);
  auto* batch_size_opt = app.add_option("--batch-size", batch_size, "sentences per batch with --source")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  auto* beam_opt = app.add_option("--beam", to.beam_size, "beam size (1 = greedy decoding)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  auto* length_penalty_opt = app.add_option("--length-penalty", to.length_penalty, "GNMT length penalty alpha for beam search")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            double v = 0;  // CLI::Range lets NaN through (every comparison with it is false)
            if (CLI::detail::lexical_cast(text, v) && std::isfinite(v) && v >= 0 && v <= 100) return {};
            return "expected a number from 0 to 100, found " + text;
          },
          "NUMBER in [0 - 100]"));
  std::vector<double> tune_lp;
  auto* tune_opt = app.add_option("--tune-length-penalty", tune_lp,
                 "length penalties to try on the val split (e.g. 0.6,1,1.5,2,3); the one with the best val BLEU "
                 "decodes --split / --source")
      ->delimiter(',')
      ->allow_extra_args(false);  // "0.6,1,2" is one argument: overrides after it stay overrides
  auto* max_steps_opt = app.add_option("--max-steps", to.max_steps, "tokens per output (0 = the dataset's num_steps)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  app.add_option("--checkpoint", which,
                 "best, last, epoch-N (trainer.keep_checkpoints) or a runner average's name (average)")
      ->capture_default_str();
  std::vector<std::string> ensemble_specs;
  auto* ensemble_opt = app.add_option("--ensemble", ensemble_specs,
                 "decode together with another run of the same dataset and vocabulary, RUN.h5 (its --checkpoint) or "
                 "RUN.h5:CHECKPOINT; repeat for more: each step takes the mean of the models' next-token "
                 "probabilities")
      ->allow_extra_args(false);
  std::string head_mask_text;
  auto* head_mask_opt = app.add_option("--head-mask", head_mask_text,
                 "switch heads off while decoding: module:layer:heads items, comma-separated, layers and heads from 1 "
                 "('*' = all), e.g. 'decoder_cross:1:[1,3],encoder_self:*:5'; recorded as the eval's head_mask")
      ->allow_extra_args(false);
  app.add_option("--name", name,
                 "group under /eval (default <split>, <split>_beam<N> for beam search, ..._masked with --head-mask)");
  add_plugin_path_option(app, plugin_dirs);
  std::string text_file;
  auto* text_opt = app.add_option("--text", text_file,
                                  "a language model: its perplexity on this UTF-8 text file (in blocks of the dataset's "
                                  "block_size, tokenized as the run's dataset tokenizes)");
  int64_t context = 0, window = 0, sinks = 0;
  auto* context_opt = app.add_option("--context", context,
                                     "a language model with --text: tokens per row of the text (default the dataset's "
                                     "block_size; longer rows measure a relative-position model beyond its training length)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  context_opt->needs(text_opt);
  auto* window_opt = app.add_option("--window", window,
                                    "a language model: each query sees only the W latest tokens, itself included (and "
                                    "the first --sinks), through a KV cache that evicts the rest, at the cache's "
                                    "positions (StreamingLLM's window attention)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  app.add_option("--sinks", sinks,
                 "with --window: the first K tokens of every row stay in the cache as well (StreamingLLM's attention "
                 "sinks)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->needs(window_opt);
  bool recompute = false;
  app.add_flag("--recompute", recompute,
               "with --window: run each query's window afresh from position 0 instead of evicting a KV cache "
               "(StreamingLLM's 'sliding window with re-computation': about W forwards per token; any language model)")
      ->needs(window_opt)
      ->excludes("--sinks");
  app.add_flag("-q,--quiet", quiet, "print only the score line");
  app.footer(
      "Examples:\n  runner eval results/transformer_multi30k_de_en-20261122-120000.h5 --split test --beam 5\n"
      "  runner eval RUN.h5 --checkpoint average --beam 5 --tune-length-penalty 0.6,1,1.5,2,3\n"
      "  runner eval RUN.h5 --source test_2017_flickr.de.gz --reference test_2017_flickr.en.gz\n"
      "  runner eval RUN.h5 --checkpoint average --ensemble SEED1.h5:average --beam 5\n"
      "  runner eval RUN.h5 --split val --head-mask 'decoder_cross:1:[1,3],encoder_self:*:5'\n"
      "  runner eval LM_RUN.h5 --text some.txt        (a language model's perplexity on a text)\n"
      "  runner eval LM_RUN.h5 --text long.txt --context 1024 --window 64 --sinks 4   (StreamingLLM)\n"
      "  runner eval LM_RUN.h5 --text long.txt --context 1024 --window 64 --recompute (its re-computation baseline)");
  if (auto code = parse_command_line(app, argc, argv, "runner eval")) return *code;
  const bool files = !source_file.empty();
  const auto split = files ? data::Split::Test : parse_split(split_name);
  ATTNLAB_CHECK(tune_lp.empty() || to.beam_size > 1, ConfigError,
                "--tune-length-penalty needs beam search (--beam N, N > 1): greedy decoding has no length penalty");
  if (!tune_lp.empty() && !files && split == data::Split::Val && !quiet) {
    spdlog::warn("--split val with --tune-length-penalty: the score is of the split the penalty was picked on");
  }
  // Both files are read (and paired up) before anything is built.
  std::vector<std::string> sources, references;
  if (files) {
    sources = read_sentences(source_file, "--source");
    references = read_sentences(reference_file, "--reference");
    ATTNLAB_CHECK(sources.size() == references.size(), DataError,
                  "--source {} has {} lines but --reference {} has {}: a parallel pair needs one sentence per line "
                  "in each, in the same order",
                  source_file, sources.size(), reference_file, references.size());
  }
  const std::string what = files ? name_for_file(source_file) : split_name;
  const bool name_given = !name.empty();
  // One HDF5 link name under /eval: "a/b" would write a nested group that compare and report miss.
  ATTNLAB_CHECK(!name_given || std::regex_match(name, std::regex("[A-Za-z0-9_-][A-Za-z0-9_.-]*")), ConfigError,
                "--name '{}': expected letters, digits, '_', '-' and '.', not first (one name under /eval, no '/')", name);
  if (name.empty()) name = to.beam_size > 1 ? fmt::format("{}_beam{}", what, to.beam_size) : what;
  if (!ensemble_specs.empty() && !name_given) name += fmt::format("_ensemble{}", 1 + ensemble_specs.size());
  const bool masked = head_mask_opt->count() > 0;
  // Checked as written before anything is built; against the model's attention once it is.
  const auto head_mask_spec = masked ? run::head_mask_from_text(head_mask_text, "--head-mask") : run::HeadMaskSpec{};
  ATTNLAB_CHECK(!masked || ensemble_specs.empty(), ConfigError,
                "--head-mask with --ensemble: a mask names one model's heads; decode the ensemble without it");
  if (masked && !name_given) name += "_masked";

  // Every member's file and checkpoint is checked before any dataset or model is built.
  std::vector<std::pair<std::string, std::string>> member_specs;
  for (const auto& spec : ensemble_specs) {
    const auto& [member_run, member_ckpt] = member_specs.emplace_back(parse_member(spec, which));
    results::read_isolated(member_run,
                           [&] { return results::ResultsReader(member_run, results::ReadCheck::none).config(); });
    checkpoint_file(member_run, member_ckpt);
  }
  run::HeadMaskSpec trained_mask;  // the heads the run trained without stay off
  run::Setup setup = load_run(run, which, overrides, plugin_dirs, trained_mask);
  if (auto lm = std::dynamic_pointer_cast<nn::LanguageModel>(setup.custom)) {
    // A language model: its loss on a split (val unless told), nothing to decode.
    for (const auto* opt : {source_opt, batch_size_opt, beam_opt, length_penalty_opt, tune_opt, max_steps_opt,
                            ensemble_opt}) {
      ATTNLAB_CHECK(opt->count() == 0, ConfigError,
                    "{}: run {} is a decoder-only language model, which runner eval scores by its loss, perplexity "
                    "and accuracy on a split (--split, --head-mask, --checkpoint); `runner generate` decodes from it",
                    opt->get_name(), run);
    }
    ATTNLAB_CHECK(text_opt->count() == 0 || split_opt->count() == 0, ConfigError,
                  "--text and --split: measure the run on a text file or on a split of its dataset, not both");
    LmEvalOptions lo{.run = run,
                     .checkpoint = setup.weights,
                     .split_name = split_opt->count() > 0 ? split_name : std::string("val"),
                     .name = name,
                     .text = text_file,
                     .context = context,
                     .window = window,
                     .sinks = sinks,
                     .recompute = recompute,
                     .trained = trained_mask,
                     .asked = head_mask_spec,
                     .quiet = quiet};
    if (!name_given) {
      lo.name = (text_file.empty() ? lo.split_name : name_for_file(text_file)) +
                (context > 0 ? fmt::format("_context{}", context) : "") +
                (window > 0 ? fmt::format("_window{}", window) : "") + (sinks > 0 ? fmt::format("_sinks{}", sinks) : "") +
                (recompute ? "_recompute" : "") + (masked ? "_masked" : "");
    }
    return eval_language_model(setup, *lm, lo);
  }
  ATTNLAB_CHECK(text_opt->count() == 0, ConfigError,
                "--text: run {} is a translation model; --source and --reference translate and score a file", run);
  ATTNLAB_CHECK(window_opt->count() == 0, ConfigError,
                "--window: run {} is a translation model; a window of the KV cache is a language model's evaluation",
                run);
  require_translation_model(setup, run, "eval");
  // A beam holds beam_size copies of every sentence's state: one wider than the vocabulary gains
  // nothing at its first step and ran out of memory (or was killed) at 100,000.
  ATTNLAB_CHECK(setup.ctx.data.tgt_vocab_size <= 0 || to.beam_size <= setup.ctx.data.tgt_vocab_size, ConfigError,
                "--beam {} is more than the target vocabulary's {} tokens: at most {}", to.beam_size,
                setup.ctx.data.tgt_vocab_size, setup.ctx.data.tgt_vocab_size);
  const auto ckpt = checkpoint_path(run, which);  // load_run checked it
  ATTNLAB_CHECK(trained_mask.empty() || ensemble_specs.empty(), ConfigError,
                "run {} trained with a head mask (interventions.head_mask): a mask names one model's heads, so it "
                "cannot decode in an ensemble", run);
  run::ResolvedHeadMask head_mask;
  run::HeadMaskSpec all_off = trained_mask;
  all_off.items.insert(all_off.items.end(), head_mask_spec.items.begin(), head_mask_spec.items.end());
  if (!all_off.empty()) {
    head_mask = run::resolve_head_mask(all_off, nn::attention_sites(*setup.model), setup.ctx.device);
    if (!quiet) {
      spdlog::info("head mask {}: {} of {} heads off", head_mask.text, head_mask.heads_off, head_mask.heads_total);
      for (const auto& layer : head_mask.whole_layers) {
        spdlog::info("every head of {} is off: its attention adds only W_o's bias (allowed, as in Michel et al. 2019)",
                     layer);
      }
    }
  }
  const nn::HeadMaskScope mask_scope(all_off.empty() ? nullptr : &head_mask.mask);
  std::vector<run::Setup> members;  // kept alive: their registries own the plugin code
  int64_t parameters = setup.model->num_parameters();
  std::string ensemble_text;  // "RUN:CHECKPOINT, ..." recorded with the evaluation
  for (const auto& [member_run, member_ckpt] : member_specs) {
    run::HeadMaskSpec member_mask;
    members.push_back(load_run(member_run, member_ckpt, overrides, plugin_dirs, member_mask));
    require_translation_model(members.back(), member_run, "eval --ensemble");
    ATTNLAB_CHECK(member_mask.empty(), ConfigError,
                  "--ensemble {}: it trained with a head mask (interventions.head_mask): a mask names one model's "
                  "heads, so it cannot decode in an ensemble", member_run);
    const auto why_not = ensemble_mismatch(setup, members.back());
    ATTNLAB_CHECK(why_not.empty(), ConfigError,
                  "--ensemble {}:{} cannot decode with {}: {}; an ensemble's members must be trained on one dataset "
                  "and vocabulary",
                  member_run, member_ckpt, run, why_not);
    parameters += members.back().model->num_parameters();
    ensemble_text += fmt::format("{}{}:{}", ensemble_text.empty() ? "" : ", ", member_run, member_ckpt);
  }
  // The options with the members' models: declared after `members`, so these holders are released
  // before the members' registries unload the plugins that made them.
  auto decode = to;
  for (auto& member : members) decode.ensemble.push_back(member.model);
  // "alpha: val BLEU" for each candidate, recorded with the evaluation; sets decode.length_penalty.
  const std::string tuned = tune_lp.empty() ? std::string() : pick_length_penalty(setup, tune_lp, decode, quiet);
  if (!quiet) {
    spdlog::info("translating {} with {} ({}) on {}",
                 files ? fmt::format("{} ({} sentences)", source_file, sources.size())
                       : fmt::format("the {} split of {}", split_name, setup.dataset_name),
                 members.empty() ? ckpt
                                 : fmt::format("an ensemble of {} models, {} parameters in all: {} and {}",
                                               1 + members.size(), parameters, ckpt, ensemble_text),
                 decode.beam_size > 1 ? fmt::format("beam {}, length penalty {}", decode.beam_size, decode.length_penalty)
                                  : std::string("greedy"),
                 setup.ctx.device.str());
  }
  auto translation = [&] {
    try {
      return files ? train::translate_sentences(setup.model, *setup.dataset, std::move(sources), std::move(references),
                                                decode, batch_size)
                   : train::translate_split(setup.model, *setup.dataset, split, decode);
    } catch (const c10::Error& e) {
      // A beam keeps beam_size hypotheses of every sentence of a batch: that is what ran out.
      const auto what = message_without_backtrace(e);
      ATTNLAB_CHECK(decode.beam_size <= 1 || what.rfind("out of memory", 0) != 0, DataError,
                    "--beam {}: translating with {} hypotheses per sentence ran {}; lower --beam", decode.beam_size,
                    decode.beam_size, what);
      throw;
    }
  }();
  auto scores = train::score_translation(translation);
  {
    results::Results out(run, results::Results::Open::Existing);
    train::write_eval(out, name, translation, scores, files ? std::string("file") : split_name, decode, which);
    if (!tuned.empty()) out.set_attr_at("eval/" + name, "length_penalty_tuned_on_val", tuned);
    if (!all_off.empty()) {
      out.set_attr_at("eval/" + name, "head_mask", head_mask.text);
      out.set_attr_at("eval/" + name, "heads_off", head_mask.heads_off);
      out.set_attr_at("eval/" + name, "heads_total", head_mask.heads_total);
      out.flush();
    }
    if (!members.empty()) {
      out.set_attr_at("eval/" + name, "ensemble", ensemble_text);
      out.set_attr_at("eval/" + name, "ensemble_parameters", parameters);
      out.flush();
    }
    if (files) {
      out.set_attr_at("eval/" + name, "source_file", std::filesystem::absolute(source_file).string());
      out.set_attr_at("eval/" + name, "reference_file", std::filesystem::absolute(reference_file).string());
      out.flush();
    }
  }
  if (!quiet) {
    for (size_t i = 0; i < std::min<size_t>(3, translation.hypotheses.size()); ++i) {
      std::cout << fmt::format("{} => {}\n  ref: {}\n", translation.sources[i], translation.hypotheses[i],
                               translation.references[i]);
    }
  }
  std::cout << fmt::format(
      "{}{} {}{}: {} ({}), lowercased {:.2f}, d2l mean BLEU {:.3f}, {} sentences in {:.1f}s -> "
      "/eval/{}\n",
      what, all_off.empty() ? std::string() : fmt::format(" (head mask {})", head_mask.text),
      members.empty() ? std::string() : fmt::format("ensemble of {}, ", 1 + members.size()),
      decode.beam_size <= 1 ? std::string("greedy")
      : tuned.empty()   ? fmt::format("beam {}", decode.beam_size)
                        : fmt::format("beam {} (length penalty {}, picked on val)", decode.beam_size, decode.length_penalty),
      scores.bleu.format(), scores.bleu.signature, scores.bleu_lowercase.score, scores.d2l_mean_bleu,
      translation.hypotheses.size(), translation.seconds, name);
  return 0;
}

}  // namespace attnlab::cli
