// libexec/attnlab/runner-torch: the runner's LibTorch part. bin/runner (front.cpp) hands it what
// needs models or plugins: running an experiment file and the subcommands runner_commands.hpp marks
// needs_libtorch.
//   runner EXPERIMENT.yaml [key.path=value ...] [--results PATH] [--resume RUN.h5] [--plugin-path DIR ...]
//   runner <subcommand> ...
#include <attnlab/error.hpp>
#include <attnlab/run/experiment.hpp>
#include <attnlab/version.hpp>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cstring>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/runner_commands.hpp"
#include "run/record.hpp"

namespace {

/// The subcommands this half runs (those runner_commands.hpp marks needs_libtorch).
int (*command_function(std::string_view name))(int, char**) {
  using namespace attnlab::cli;
  if (name == "plugins") return cmd_plugins;
  if (name == "sweep") return cmd_sweep;
  if (name == "eval") return cmd_eval;
  if (name == "average") return cmd_average;
  if (name == "import") return cmd_import;
  if (name == "generate") return cmd_generate;
  if (name == "heads") return cmd_heads;
  if (name == "ablate") return cmd_ablate;
  if (name == "prune") return cmd_prune;
  if (name == "summary") return cmd_summary;
  if (name == "batches") return cmd_batches;
  return nullptr;
}

std::string join_args(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    if (i) s += ' ';
    s += argv[i];
  }
  return s;
}

int run_experiment(int argc, char** argv) {
  using namespace attnlab;
  CLI::App app{"attnlab runner: attention experiments from YAML files"};
  run::RunOptions ro;
  std::vector<std::string> positional;
  app.add_option("experiment", positional, "experiment YAML file, then key.path=value overrides")->required();
  std::string results_path;
  app.add_option("--results", results_path, "results file (overrides results.path)")
      ->check(attnlab::cli::not_an_option());
  std::string resume_path;
  app.add_option("--resume", resume_path, "continue the run in this results file from its last checkpoint")
      ->check(attnlab::cli::not_an_option());
  app.add_flag("--overwrite", ro.overwrite,
               "replace an existing results file (and its checkpoint folder); without it such a run is refused")
      ->excludes("--resume");
  attnlab::cli::add_plugin_path_option(app, ro.plugin_dirs);
  app.add_flag("-q,--quiet", ro.quiet, "print only errors");
  std::string footer = "Subcommands (runner <name> --help):\n";
  for (const auto& c : attnlab::cli::kCommands) footer += fmt::format("  {:<10} {}\n", c.name, c.help);
  footer +=
      "Examples:\n  runner experiments/transformer_fra_eng.yaml trainer.max_epochs=5 model.encoder.norm=first\n"
      "  runner plugins transformer";
  app.footer(footer);
  if (auto code = attnlab::cli::parse_command_line(app, argc, argv, "runner")) return *code;
  ro.experiment_path = positional[0];
  ro.overrides.assign(positional.begin() + 1, positional.end());
  ro.command_line = join_args(argc, argv);
  if (!results_path.empty()) ro.results_path = results_path;
  if (!resume_path.empty()) ro.resume_path = resume_path;
  return run::run_experiment(ro);
}

int dispatch(int argc, char** argv) {
  if (argc == 2 && (std::strcmp(argv[1], "--version") == 0 || std::strcmp(argv[1], "-V") == 0)) {
    fmt::print("runner (attnlab {}), built from commit {}, LibTorch {}\n", attnlab::kVersion,
               attnlab::cli::kBuildCommit, attnlab::kTorchVersion);
    return 0;
  }
  if (const auto* c = argc > 1 ? attnlab::cli::find_command(argv[1]) : nullptr) {
    if (const auto run = command_function(c->name)) return run(argc - 1, argv + 1);
    std::cerr << "runner-torch: '" << c->name << "' is run by bin/runner itself (it needs no LibTorch): "
              << "call runner " << c->name << std::endl;
    return 1;
  }
  return run_experiment(argc, argv);
}

}  // namespace

namespace attnlab::cli {

int runner_main(int argc, char** argv) {
  spdlog::set_pattern("[%H:%M:%S] %^%l%$ %v");
  attnlab::run::set_build_commit(kBuildCommit);  // every run's git_commit
  try {
    return dispatch(argc, argv);
  } catch (const c10::Error& e) {
    std::cerr << "torch error: " << attnlab::message_without_backtrace(e) << std::endl;
  } catch (const std::exception& e) {
    return attnlab::tools::print_error(e);
  }
  return 1;
}

}  // namespace attnlab::cli

int main(int argc, char** argv) { return attnlab::cli::runner_main(argc, argv); }
