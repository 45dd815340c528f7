// `runner average RUN.h5 --last K [--name NAME]`: average the model weights of a run's last K
// epochs (kept by trainer option keep_checkpoints) into RUN.h5.ckpt/<NAME>.pt, which
// `runner eval RUN.h5 --checkpoint NAME` translates with; the averaged epochs are recorded under
// /checkpoints/<NAME> of the results file.
#include "cli/commands.hpp"

#include <attnlab/error.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/results/results.hpp>
#include <attnlab/train/checkpoint.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <regex>

#include "train/checkpoint_average.hpp"

namespace attnlab::cli {
namespace {
namespace fs = std::filesystem;

/// "epochs 6-10" for a consecutive run of epochs, else "epochs 2, 5, 9".
std::string describe(const std::vector<train::KeptCheckpoint>& kept) {
  std::vector<int64_t> epochs;
  for (const auto& k : kept) epochs.push_back(k.epoch);
  if (epochs.size() == 1) return fmt::format("epoch {}", epochs.front());
  const bool consecutive = epochs.back() - epochs.front() + 1 == static_cast<int64_t>(epochs.size());
  return consecutive ? fmt::format("epochs {}-{}", epochs.front(), epochs.back())
                     : fmt::format("epochs {}", fmt::join(epochs, ", "));
}

}  // namespace

int cmd_average(int argc, char** argv) {
  CLI::App app{"average the weights of a run's last K epochs into one checkpoint (trainer.keep_checkpoints)"};
  std::string run, name = "average";
  int64_t last = 0;
  bool quiet = false;
  app.add_option("run", run, "results file of the run (its checkpoints are in RUN.h5.ckpt/)")->required();
  app.add_option("--last", last, "how many of the last kept epochs to average")
      ->required()
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  app.add_option("--name", name, "write RUN.h5.ckpt/<name>.pt (letters, digits, - and _; not best, last or epoch-N)")
      ->capture_default_str();
  app.add_flag("-q,--quiet", quiet, "print nothing but errors");
  app.footer(
      "Examples:\n  runner average results/transformer_multi30k_de_en-20261124-120000.h5 --last 5\n"
      "  runner eval results/transformer_multi30k_de_en-20261124-120000.h5 --checkpoint average --beam 5");
  if (auto code = parse_command_line(app, argc, argv, "runner average")) return *code;
  ATTNLAB_CHECK(std::regex_match(name, std::regex("[A-Za-z0-9_-]+")), ConfigError,
                "--name '{}': use letters, digits, '-' and '_' (it becomes the file <name>.pt)", name);
  ATTNLAB_CHECK(name != "best" && name != "last" && !std::regex_match(name, std::regex("epoch-[0-9]+")), ConfigError,
                "--name {}: that is the trainer's own checkpoint; choose another name", name);

  // A results file of ours, or one clear error (not "no checkpoints" for a typo in the path).
  results::read_isolated(run, [&] { return results::ResultsReader(run, results::ReadCheck::none).config(); });
  const auto dir = train::checkpoint_dir(run);
  ATTNLAB_CHECK(fs::is_directory(dir), DataError,
                "run {} has no checkpoint folder {} (its trainer wrote no checkpoints: the seq2seq trainer writes "
                "them unless checkpoints: false)",
                run, dir);
  const auto kept = train::kept_checkpoints(dir);
  ATTNLAB_CHECK(!kept.empty(), DataError,
                "run {} kept no epoch checkpoints in {} (only best.pt and last.pt): train it with "
                "trainer.keep_checkpoints: {} (or more) to keep the last epochs' weights for averaging",
                run, dir, last);
  ATTNLAB_CHECK(static_cast<int64_t>(kept.size()) >= last, DataError,
                "--last {} asks for {} epoch checkpoints, but run {} kept {} ({}): average those with --last {}, or "
                "train with trainer.keep_checkpoints: {}",
                last, last, run, kept.size(), describe(kept), kept.size(), last);
  const std::vector<train::KeptCheckpoint> chosen(kept.end() - last, kept.end());
  std::vector<std::string> inputs;
  for (const auto& k : chosen) inputs.push_back(k.path);
  const auto out = (fs::path(dir) / (name + ".pt")).string();
  train::average_checkpoints(inputs, out);

  std::string epochs;
  for (const auto& k : chosen) epochs += (epochs.empty() ? "" : " ") + std::to_string(k.epoch);
  {
    results::Results file(run, results::Results::Open::Existing);
    file.set_attr_at("checkpoints/" + name, "epochs", epochs);
    file.set_attr_at("checkpoints/" + name, "count", static_cast<int64_t>(chosen.size()));
    file.set_attr_at("checkpoints/" + name, "file", fs::absolute(out).string());
    file.flush();
  }
  const auto last_pt = (fs::path(dir) / "last.pt").string();
  if (fs::exists(last_pt)) {
    const auto trained = train::read_training_state(last_pt).epoch;
    if (trained != chosen.back().epoch) {
      std::cerr << fmt::format(
          "runner average: warning: the run trained {} epochs but its newest kept checkpoint is epoch {}\n", trained,
          chosen.back().epoch);
    }
  }
  if (!quiet) {
    std::cout << fmt::format("averaged {} of {} into {}\nscore it: runner eval {} --checkpoint {}\n", describe(chosen),
                             run, out, run, name);
  }
  return 0;
}

}  // namespace attnlab::cli
