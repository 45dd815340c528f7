// runner: run an experiment file, list plugins, and the other subcommands in kCommands.
//   runner EXPERIMENT.yaml [key.path=value ...] [--results PATH] [--resume RUN.h5] [--plugin-path DIR ...]
//   runner <subcommand> ...
#include <attnlab/error.hpp>
#include <attnlab/run/experiment.hpp>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cstring>
#include <iostream>

#include "cli/commands.hpp"

namespace {
using attnlab::cli::Command;

const Command kCommands[] = {
    {"plugins", "list plugins, or show one plugin's options", attnlab::cli::cmd_plugins},
    {"compare", "compare runs from their results files (table, markdown, csv, --plot)", attnlab::cli::cmd_compare},
    {"sweep", "run an experiment over a grid of overrides (axes), or resume a sweep folder", attnlab::cli::cmd_sweep},
    {"report", "write one self-contained HTML page of runs: curves, tables, attention explorer",
     attnlab::cli::cmd_report},
    {"plot", "draw a run's attention heatmaps, loss curves and predictions", attnlab::cli::cmd_plot},
    {"eval", "translate a split with a run's best checkpoint and score it (sacreBLEU)", attnlab::cli::cmd_eval},
    {"average", "average the weights of a run's last K epochs (trainer.keep_checkpoints) into one checkpoint",
     attnlab::cli::cmd_average},
    {"summary", "print an experiment's model: layers, parameter counts, output shape", attnlab::cli::cmd_summary},
    {"batches", "write the training batches a run draws to HDF5 (for other programs)", attnlab::cli::cmd_batches},
};

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
  attnlab::cli::add_plugin_path_option(app, ro.plugin_dirs);
  app.add_flag("-q,--quiet", ro.quiet, "print only errors");
  std::string footer = "Subcommands (runner <name> --help):\n";
  for (const auto& c : kCommands) footer += fmt::format("  {:<10} {}\n", c.name, c.help);
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
  if (argc > 1) {
    for (const auto& c : kCommands) {
      if (std::strcmp(argv[1], c.name) == 0) return c.run(argc - 1, argv + 1);
    }
  }
  return run_experiment(argc, argv);
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_pattern("[%H:%M:%S] %^%l%$ %v");
  try {
    return dispatch(argc, argv);
  } catch (const attnlab::ConfigError& e) {
    std::cerr << "config error: " << e.what() << std::endl;
  } catch (const attnlab::PluginError& e) {
    std::cerr << "plugin error: " << e.what() << std::endl;
  } catch (const attnlab::DataError& e) {
    std::cerr << "data error: " << e.what() << std::endl;
  } catch (const attnlab::ResultsError& e) {
    std::cerr << "results error: " << e.what() << std::endl;
  } catch (const attnlab::Error& e) {
    std::cerr << "error: " << e.what() << std::endl;
  } catch (const c10::Error& e) {
    std::cerr << "torch error: " << e.what_without_backtrace() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
  }
  return 1;
}
