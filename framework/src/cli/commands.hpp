#pragma once
// The runner's subcommands that need LibTorch or plugins, run by its LibTorch part (main.cpp,
// libexec/attnlab/runner-torch; bin/runner hands them over). Each gets argv starting at its own
// name ("plugins", ...), parses its own options with CLI11, and returns the exit code. Every
// subcommand is listed once, in runner_commands.hpp.
#include "tools/command_line.hpp"

#include <string>
#include <vector>

namespace attnlab::cli {

using tools::add_plugin_path_option;
using tools::not_an_option;
using tools::parse_command_line;

/// runner-torch's main (main.cpp): an experiment run or a subcommand, errors printed, the exit code.
/// A local sweep's fork server (sweep_fork.hpp) calls it for each run.
int runner_main(int argc, char** argv);

/// `runner plugins [NAME] [--plugin-path DIR]`: list plugins, or one plugin's options.
int cmd_plugins(int argc, char** argv);

/// `runner eval RUN.h5 [--split test] [--beam N] [key=value ...]`: translate a split with the run's
/// best checkpoint, score it with sacreBLEU-exact BLEU, record /eval/<split> in the results file.
int cmd_eval(int argc, char** argv);

/// `runner ablate RUN.h5 [--split val] [--importance ablation|gradient|both]`: each head of the run's
/// model switched off alone (delta loss and BLEU) and Michel et al.'s gradient importance, recorded
/// under /ablation/<name>.
int cmd_ablate(int argc, char** argv);

/// `runner prune RUN.h5 [--order importance|random] [--step 10%]`: Michel et al.'s pruning curve,
/// heads switched off step by step, recorded under /pruning/<name>.
int cmd_prune(int argc, char** argv);

/// `runner generate RUN.h5 --prompt TEXT [--tokens N] ...`: text from a language model's checkpoint,
/// stored under /generations/<name> (generate_cmd.cpp).
int cmd_generate(int argc, char** argv);

/// `runner heads RUN.h5 [--length 50] [--sequences 16] ...`: a language model's heads scored on repeated
/// random tokens (TransformerLens's head_detector), stored under /head_scores/<name> (heads_cmd.cpp).
int cmd_heads(int argc, char** argv);

/// `runner average RUN.h5 --last K [--name NAME]`: the mean of the last K kept epoch checkpoints
/// (trainer option keep_checkpoints) as RUN.h5.ckpt/NAME.pt, for `runner eval --checkpoint NAME`.
int cmd_average(int argc, char** argv);
int cmd_import(int argc, char** argv);

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
