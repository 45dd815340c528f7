// `runner batches EXPERIMENT.yaml [key=value ...] --epochs N -o FILE`: the training batches a run of
// the experiment draws, written to HDF5, so another program (bench/'s PyTorch peers, a notebook)
// can train on exactly the same rows in the same order, and a user can look at what the model is
// fed. Epoch e's batches are the dataset plugin's batches(train, shuffle, seed + e), which is what
// the seq2seq and regression trainers draw.
#include "cli/commands.hpp"

#include <attnlab/error.hpp>
#include <attnlab/results/tensor.hpp>
#include <attnlab/config/load.hpp>
#include <attnlab/results/results.hpp>
#include <attnlab/run/experiment.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <torch/types.h>

#include <filesystem>
#include <iostream>

#include "run/setup.hpp"

namespace attnlab::cli {

int cmd_batches(int argc, char** argv) {
  CLI::App app{"write the training batches a run of an experiment draws (ids, lengths) to an HDF5 file"};
  std::vector<std::string> positional, plugin_dirs;
  std::string out;
  int64_t epochs = 1;
  app.add_option("experiment", positional, "experiment YAML file, then key.path=value overrides")->required();
  app.add_option("-o,--out", out, "HDF5 file to write")->required()->check(not_an_option());
  bool overwrite = false;
  app.add_flag("--overwrite", overwrite, "replace the -o file when it exists (without it the command refuses)");
  app.add_option("--epochs", epochs, "epochs of batches (epoch e is shuffled with seed + e)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  add_plugin_path_option(app, plugin_dirs);
  app.footer(
      "Layout: /epoch_<e>/<i>/{src, src_valid_lens, tgt_in, tgt_out, tgt_valid_lens} (int64; absent parts\n"
      "left out), root attributes experiment, seed, epochs, batches_per_epoch, pad_id, bos_id, eos_id,\n"
      "src_vocab_size, tgt_vocab_size, num_steps.\n"
      "Example:\n  runner batches experiments/transformer_multi30k_de_en.yaml --epochs 2 -o m30k_batches.h5");
  if (auto code = parse_command_line(app, argc, argv, "runner batches")) return *code;
  std::error_code ec;
  ATTNLAB_CHECK(overwrite || !std::filesystem::exists(out, ec), Error,
                "batches: -o {} already exists; replace it with --overwrite, or name another file", out);
  std::string experiment;
  run::Setup setup = run::setup_experiment(positional, plugin_dirs, experiment);
  const auto& info = setup.ctx.data;
  const auto seed = static_cast<uint64_t>(setup.ctx.seed);

  results::Results file(out, experiment);
  file.set_attr("seed", static_cast<int64_t>(seed));
  file.set_attr("epochs", epochs);
  file.set_attr("dataset", setup.dataset_name);
  for (const auto& [name, value] : {std::pair{"pad_id", info.pad_id}, {"bos_id", info.bos_id}, {"eos_id", info.eos_id},
                                    {"src_vocab_size", info.src_vocab_size}, {"tgt_vocab_size", info.tgt_vocab_size},
                                    {"num_steps", info.num_steps}}) {
    file.set_attr(name, value);
  }
  int64_t per_epoch = 0, rows = 0;
  for (int64_t e = 1; e <= epochs; ++e) {
    const auto batches = setup.dataset->batches(data::Split::Train, true, seed + static_cast<uint64_t>(e));
    per_epoch = static_cast<int64_t>(batches.size());
    for (size_t i = 0; i < batches.size(); ++i) {
      const auto& b = batches[i];
      const auto at = fmt::format("epoch_{}/{}", e, i);
      for (const auto& [name, t] : {std::pair{"src", b.src}, {"src_valid_lens", b.src_valid_lens}, {"tgt_in", b.tgt_in},
                                    {"tgt_out", b.tgt_out}, {"tgt_valid_lens", b.tgt_valid_lens}}) {
        if (t.defined()) results::write_tensor(file, at + "/" + name, t);
      }
      if (e == 1) rows += b.size();
    }
  }
  file.set_attr("batches_per_epoch", per_epoch);
  file.set_status(results::Status::Completed);
  file.flush();
  std::cout << fmt::format("{}: {} training rows, {} batches per epoch, {} epoch(s) (seed {} + epoch) -> {}\n",
                           setup.dataset_name, rows, per_epoch, epochs, seed, out);
  return 0;
}

}  // namespace attnlab::cli
