#pragma once
// Training checkpoints for exact resume. A checkpoint is one torch archive (torch::serialize) with
//   model        the module's parameters and buffers (Module::save layout)
//   optimizer    the optimizer's state (Adam moments and step counts), when one is given
//   state        epoch, step, best metric + epoch, metric rows (see TrainingState)
//   rng          the CPU default generator's state, and each CUDA device's when CUDA is available
// Trainers write `<results>.ckpt/last.pt` after every epoch and copy it to `best.pt` when the
// validation loss improved. Files are written under a temporary name and renamed, so a kill
// leaves the previous checkpoint intact.
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace attnlab::train {

struct TrainingState {
  int64_t epoch = 0;  // epochs completed; a resumed run starts at epoch + 1
  int64_t step = 0;   // optimizer steps taken (the learning-rate schedule's position)
  double best_metric = std::numeric_limits<double>::infinity();  // lowest validation loss so far
  int64_t best_epoch = 0;                                         // its epoch (0 = none yet)
  /// Rows of each results series ("<group>/<name>") when the checkpoint was written: a resumed
  /// run cuts the series back to these (Results::truncate_metrics), dropping rows of the epoch
  /// that was cut short.
  std::map<std::string, int64_t> metric_rows;
};

/// "<results path>.ckpt": the folder holding last.pt and best.pt.
std::string checkpoint_dir(const std::string& results_path);

/// An epoch's kept weights: "<checkpoint dir>/epoch-<N>.pt", written by a trainer with the option
/// keep_checkpoints (save_checkpoint without an optimizer) and read by `runner average`.
struct KeptCheckpoint {
  int64_t epoch = 0;
  std::string path;
};

/// "<dir>/epoch-<epoch>.pt".
std::string epoch_checkpoint_path(const std::string& dir, int64_t epoch);

/// The epoch-<N>.pt files in `dir`, oldest first; other files are left out. Empty when `dir`
/// holds none (or does not exist).
std::vector<KeptCheckpoint> kept_checkpoints(const std::string& dir);

/// Writes `path` (via "<path>.tmp" and a rename; parent folders are made). `optimizer` may be null.
/// DataError naming the file when it cannot be written.
void save_checkpoint(const std::string& path, const torch::nn::Module& model, const torch::optim::Optimizer* optimizer,
                     const TrainingState& state);

/// Copies a finished checkpoint (e.g. last.pt to best.pt), again via a temporary name.
void copy_checkpoint(const std::string& from, const std::string& to);

/// Loads `path` into `model` (on the model's device) and `optimizer` (if given), restores the RNG
/// states (CPU, and CUDA devices present in both the file and this process) and returns the
/// training state. DataError naming the file when it is missing, unreadable, or does not fit the
/// model (a parameter missing or of another shape).
TrainingState load_checkpoint(const std::string& path, torch::nn::Module& model, torch::optim::Optimizer* optimizer);

/// The training state stored in `path`, touching neither a model nor the RNGs.
TrainingState read_training_state(const std::string& path);

/// Only the model's parameters and buffers (`runner eval`); RNG and optimizer are left alone.
void load_model_weights(const std::string& path, torch::nn::Module& model);

/// DataError (as load_checkpoint's) unless `path`'s model part has exactly `model`'s parameter and
/// buffer names and shapes; reads the file only (a resume checks this before touching anything).
void check_model_fits(const std::string& path, const torch::nn::Module& model);

/// The model part as flat "encoder.blks.0.attention.W_q.weight" -> tensor (CPU), for tests and
/// tools that compare checkpoints.
std::map<std::string, torch::Tensor> checkpoint_tensors(const std::string& path);

}  // namespace attnlab::train
