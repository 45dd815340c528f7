// `runner eval RUN.h5 [--split test] [--beam N] ...`: rebuild a finished run's dataset and model from
// its stored /config, load its best checkpoint, translate a split, score it (sacreBLEU-exact) and
// record it under /eval/<name> of the same results file.
#include "cli/commands.hpp"

#include <attnlab/config/load.hpp>
#include <attnlab/error.hpp>
#include <attnlab/files.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/train/checkpoint.hpp>
#include <attnlab/train/experiment.hpp>
#include <attnlab/train/translate.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>

#include "train/setup.hpp"

namespace attnlab::cli {
namespace {

data::Split parse_split(const std::string& name) {
  if (name == "train") return data::Split::Train;
  if (name == "val") return data::Split::Val;
  if (name == "test") return data::Split::Test;
  throw ConfigError(fmt::format("--split must be train, val or test, found '{}'", name));
}

}  // namespace

int cmd_eval(int argc, char** argv) {
  CLI::App app{"translate a split with a run's best checkpoint and score it (sacreBLEU-exact corpus BLEU)"};
  std::string run, split_name = "test", which = "best", name;
  std::vector<std::string> overrides, plugin_dirs;
  train::TranslateOptions to;
  bool quiet = false;
  app.add_option("run", run, "results file of the run (its checkpoints are in RUN.h5.ckpt/)")->required();
  app.add_option("overrides", overrides, "key.path=value changes to the stored config (e.g. device=cpu data_dir=...)");
  app.add_option("--split", split_name, "train, val or test")->capture_default_str();
  app.add_option("--beam", to.beam_size, "beam size (1 = greedy decoding)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--length-penalty", to.length_penalty, "GNMT length penalty alpha for beam search")->capture_default_str();
  app.add_option("--max-steps", to.max_steps, "tokens per output (0 = the dataset's num_steps)")->capture_default_str();
  app.add_option("--checkpoint", which, "best or last")->capture_default_str()->check(CLI::IsMember({"best", "last"}));
  app.add_option("--name", name, "group under /eval (default <split>, or <split>_beam<N> for beam search)");
  add_plugin_path_option(app, plugin_dirs);
  app.add_flag("-q,--quiet", quiet, "print only the score line");
  app.footer("Example:\n  runner eval results/transformer_multi30k_de_en-20261122-120000.h5 --split test --beam 5");
  if (auto code = parse_command_line(app, argc, argv, "runner eval")) return *code;
  const auto split = parse_split(split_name);
  if (name.empty()) name = to.beam_size > 1 ? fmt::format("{}_beam{}", split_name, to.beam_size) : split_name;

  const std::string stored =
      results::read_isolated(run, [&] { return results::ResultsReader(run, results::ReadCheck::none).config(); });
  ATTNLAB_CHECK(!stored.empty(), ResultsError, "results file {} holds no /config to rebuild the run from", run);
  config::Node root = config::parse_yaml(stored, run + ":/config");
  for (const auto& o : overrides) config::apply_override(root, o);
  config::Options top(root, train::experiment_schema(), "the stored experiment", {});
  const auto ckpt = train::checkpoint_dir(run) + "/" + which + ".pt";
  const auto why = files::problem(ckpt, files::Want::File);
  ATTNLAB_CHECK(why != "no such file", DataError,
                "no checkpoint {} for run {} (trainers that checkpoint write last.pt and best.pt every epoch)", ckpt,
                run);
  ATTNLAB_CHECK(why.empty(), DataError, "checkpoint {} of run {}: {}", ckpt, run, why);
  train::Setup setup = train::build_setup(top, plugin_dirs);
  ATTNLAB_CHECK(setup.model, ConfigError, "run {} has no encoder + decoder model to translate with", run);
  train::load_model_weights(ckpt, *setup.model);
  if (!quiet) {
    spdlog::info("translating the {} split of {} with {} ({}) on {}", split_name, setup.dataset_name, ckpt,
                 to.beam_size > 1 ? fmt::format("beam {}, length penalty {}", to.beam_size, to.length_penalty)
                                  : std::string("greedy"),
                 setup.ctx.device.str());
  }
  auto translation = train::translate_split(setup.model, *setup.dataset, split, to);
  auto scores = train::score_translation(translation);
  {
    results::Results out(run, results::Results::Open::Existing);
    train::write_eval(out, name, translation, scores, split_name, to, which);
  }
  if (!quiet) {
    for (size_t i = 0; i < std::min<size_t>(3, translation.hypotheses.size()); ++i) {
      std::cout << fmt::format("{} => {}\n  ref: {}\n", translation.sources[i], translation.hypotheses[i],
                               translation.references[i]);
    }
  }
  std::cout << fmt::format("{} {}: {} ({}), d2l mean BLEU {:.3f}, {} sentences in {:.1f}s -> /eval/{}\n", split_name,
                           to.beam_size > 1 ? fmt::format("beam {}", to.beam_size) : std::string("greedy"),
                           scores.bleu.format(), scores.bleu.signature, scores.d2l_mean_bleu,
                           translation.hypotheses.size(), translation.seconds, name);
  return 0;
}

}  // namespace attnlab::cli
