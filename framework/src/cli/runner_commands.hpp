#pragma once
// Every subcommand of `runner`, listed once for both of its halves: bin/runner (front.cpp) runs
// the ones that only read results files itself, without loading LibTorch, and hands the rest (and
// experiment runs) to its LibTorch part, libexec/attnlab/runner-torch (main.cpp), by exec: the same
// process, arguments and environment.
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

namespace attnlab::cli {

struct CommandInfo {
  const char* name;
  const char* help;     // one line for `runner --help`
  bool needs_libtorch;  // run by runner-torch (models, plugins, checkpoints); else by bin/runner
};

inline constexpr CommandInfo kCommands[] = {
    {"plugins", "list plugins, or show one plugin's options", true},
    {"compare", "compare runs from their results files (table, markdown, csv, --plot)", false},
    {"sweep", "run an experiment over a grid of overrides (axes), or resume a sweep folder", true},
    {"report", "write one self-contained HTML page of runs: curves, tables, attention explorer", false},
    {"plot", "draw a run's attention heatmaps, curves and declared figures", false},
    {"rollout", "attention rollout and flow of a recorded sentence (tables, csv, json, --write)", false},
    {"eval", "translate a split with a run's best checkpoint and score it (sacreBLEU)", true},
    {"ablate", "which heads matter: each head off alone (delta loss, BLEU) and gradient importance, on a split", true},
    {"prune", "pruning curve: heads off step by step, least important first or in random orders (loss, BLEU)", true},
    {"generate", "generate text with a decoder-only language model's checkpoint (greedy, temperature, top-k, top-p)",
     true},
    {"heads", "score a language model's heads on repeated random tokens (previous-token, induction, first-token mass)",
     true},
    {"average", "average the weights of a run's last K epochs (trainer.keep_checkpoints) into one checkpoint", true},
    {"import", "write an experiment file for a Hugging Face model folder (GPT-2, Llama: config.json, safetensors)", true},
    {"summary", "print an experiment's model: layers, parameter counts, output shape", true},
    {"batches", "write the training batches a run draws to HDF5 (for other programs)", true},
};

/// The subcommand named `name`, or nullptr (then argv[1] is an experiment file).
inline const CommandInfo* find_command(std::string_view name) {
  for (const auto& c : kCommands) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

/// The commit runner-torch was built from ("<short hash>", "<short hash>-dirty" or "unknown"): the
/// build writes its definition (cmake/build_commit.cmake) into runner-torch alone.
extern const char* const kBuildCommit;

/// Where bin/runner finds its LibTorch part: relative to its own folder, in a build tree
/// (build/bin/runner, build/libexec/attnlab/runner-torch) and an installed SDK alike.
inline constexpr const char* kLibtorchPart = "../libexec/attnlab/runner-torch";

/// The environment variable bin/runner sets to its own path before it hands over, so that what
/// runner-torch starts or writes down (a sweep's runs, their commands in the manifest and the
/// Slurm script) names bin/runner, not its LibTorch part.
inline constexpr const char* kFrontEnv = "ATTNLAB_RUNNER_FRONT";

/// The runner as a user calls it: bin/runner when it handed this process over, else this program.
inline std::string runner_path() {
  if (const char* front = std::getenv(kFrontEnv); front != nullptr && *front != '\0') return front;
  return std::filesystem::read_symlink("/proc/self/exe").string();
}

}  // namespace attnlab::cli
