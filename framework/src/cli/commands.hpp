#pragma once
// The runner's subcommands. Each gets argv starting at its own name ("plugins", ...), parses its
// own options with CLI11, and returns the exit code. Register new ones in kCommands (main.cpp).
#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

namespace attnlab::cli {

/// `--plugin-path DIR`, repeatable, one folder per occurrence: options and positionals may then
/// come in any order (a greedy vector option swallowed the experiment file after it).
inline CLI::Option* add_plugin_path_option(CLI::App& app, std::vector<std::string>& dirs) {
  return app.add_option("--plugin-path", dirs, "extra plugin folder (repeatable)")->allow_extra_args(false);
}

/// Parses argv into `app`: nullopt when the command goes on, else its exit code. `--help` prints
/// the help and gives 0; a parse error is one line on stderr, "<command>: <what> (see <command>
/// --help)", and gives 1 (not CLI11's own codes, 105-114).
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv, const std::string& command);

/// Refuses an option-looking value ("-q"), so `--resume -q` is not read as a file named "-q".
CLI::Validator not_an_option();

struct Command {
  const char* name;
  const char* help;  // one line for `runner --help`
  int (*run)(int argc, char** argv);
};

/// `runner plugins [NAME] [--plugin-path DIR]`: list plugins, or one plugin's options.
int cmd_plugins(int argc, char** argv);

/// `runner compare A.h5 B.h5 [...] [--metric M] [--format table|markdown|csv] [--plot out.png]`:
/// runs side by side (differing config keys, final/best metrics, attention statistics).
int cmd_compare(int argc, char** argv);

/// `runner plot RUN.h5 [--attention MODULE] [--sample S] [--losses] [--predictions] [-o OUT]`:
/// attention heatmaps, loss curves, corner / kernel regression pictures as PNG or SVG.
int cmd_plot(int argc, char** argv);

/// `runner report A.h5 [B.h5 ... | DIR] -o PAGE.html [--group-by KEYS]`: one self-contained HTML
/// page: curves, compare's tables, an attention explorer, translations and predictions.
int cmd_report(int argc, char** argv);

/// `runner eval RUN.h5 [--split test] [--beam N] [key=value ...]`: translate a split with the run's
/// best checkpoint, score it with sacreBLEU-exact BLEU, record /eval/<split> in the results file.
int cmd_eval(int argc, char** argv);

/// `runner average RUN.h5 --last K [--name NAME]`: the mean of the last K kept epoch checkpoints
/// (trainer option keep_checkpoints) as RUN.h5.ckpt/NAME.pt, for `runner eval --checkpoint NAME`.
int cmd_average(int argc, char** argv);

/// `runner summary EXPERIMENT.yaml [key=value ...]`: the model's layers and parameter counts
/// (Keras-summary style) and its output shape for one batch, without training.
int cmd_summary(int argc, char** argv);

/// `runner batches EXPERIMENT.yaml [key=value ...] --epochs N -o FILE`: the training batches a run
/// draws (epoch e shuffled with seed + e), written to HDF5 as int64 ids and lengths.
int cmd_batches(int argc, char** argv);

/// `runner sweep EXPERIMENT|SWEEP.yaml [key=a,b ...] [-o DIR] [--jobs N] [--fail-fast] [--dry-run]`,
/// `runner sweep DIR --resume`: a grid of runs as local processes, with a manifest (sweep_cmd.cpp).
int cmd_sweep(int argc, char** argv);

}  // namespace attnlab::cli
