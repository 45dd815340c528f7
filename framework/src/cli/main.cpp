// runner: run an experiment file, list plugins, compare and plot results files.
//   runner EXPERIMENT.yaml [key.path=value ...] [--results PATH] [--plugin-path DIR ...]
//   runner plugins [NAME]
#include "cli/commands.hpp"

#include <attnlab/error.hpp>
#include <attnlab/train/experiment.hpp>

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

namespace {

std::string join_args(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    if (i) s += ' ';
    s += argv[i];
  }
  return s;
}

int run(int argc, char** argv) {
  using namespace attnlab;
  CLI::App app{"attnlab runner: attention experiments from YAML files"};
  app.require_subcommand(0, 1);
  cli::Common common;
  app.add_option("--plugin-path", common.plugin_dirs, "extra plugin folder (repeatable)");

  auto* plugins = app.add_subcommand("plugins", "list plugins, or show one plugin's options");
  std::string plugin_name;
  plugins->add_option("name", plugin_name, "plugin name (or kind/name, or 'experiment')");

  train::RunOptions ro;
  std::vector<std::string> positional;
  app.add_option("experiment", positional, "experiment YAML file, then key.path=value overrides");
  std::string results_path;
  app.add_option("--results", results_path, "results file (overrides results.path)");
  app.add_flag("-q,--quiet", ro.quiet, "print only errors");
  app.footer("Subcommands: plugins. Examples:\n  runner experiments/transformer_fra_eng.yaml trainer.max_epochs=5\n"
             "  runner plugins transformer");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (plugins->parsed()) return cli::cmd_plugins(common, plugin_name);
  if (positional.empty()) {
    std::cerr << app.help() << std::endl;
    return 2;
  }
  ro.experiment_path = positional[0];
  ro.overrides.assign(positional.begin() + 1, positional.end());
  ro.plugin_dirs = common.plugin_dirs;
  ro.command_line = join_args(argc, argv);
  if (!results_path.empty()) ro.results_path = results_path;
  return train::run_experiment(ro);
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_pattern("[%H:%M:%S] %^%l%$ %v");
  try {
    return run(argc, argv);
  } catch (const attnlab::ConfigError& e) {
    std::cerr << "config error: " << e.what() << std::endl;
  } catch (const attnlab::PluginError& e) {
    std::cerr << "plugin error: " << e.what() << std::endl;
  } catch (const attnlab::DataError& e) {
    std::cerr << "data error: " << e.what() << std::endl;
  } catch (const attnlab::Error& e) {
    std::cerr << "error: " << e.what() << std::endl;
  } catch (const c10::Error& e) {
    std::cerr << "torch error: " << e.what_without_backtrace() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << std::endl;
  }
  return 1;
}
