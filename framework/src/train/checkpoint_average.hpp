#pragma once
// Averaging a run's kept epoch checkpoints (trainer option keep_checkpoints) into one set of
// weights, for `runner average`: the mean of the last K epochs' parameters, as Vaswani et al.
// (2017) average the last checkpoints of a run. Not in the public SDK: the runner's own tool (the
// epoch files' names, which trainers write, are: attnlab/train/checkpoint.hpp).
#include <attnlab/train/checkpoint.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace attnlab::train {

/// Writes `tensors` (flat dotted names, as checkpoint_tensors returns them) as the model part of a
/// checkpoint with `state` and no optimizer or RNG state, via "<path>.tmp" and a rename; what
/// load_model_weights and read_training_state read (defined in checkpoint.cpp, beside
/// save_checkpoint).
void save_model_tensors(const std::string& path, const std::map<std::string, torch::Tensor>& tensors,
                        const TrainingState& state);

/// Writes `out` (via "<out>.tmp" and a rename) as a checkpoint whose model part is the element-wise
/// mean of `inputs`' model parts: floating tensors averaged in double and stored in their own
/// dtype, integer and bool tensors (step counters, masks) taken from the last input. Its training
/// state is the last input's. `load_model_weights` and `runner eval --checkpoint` read it like
/// best.pt. DataError naming both files when two inputs differ in a tensor's name, shape or dtype.
void average_checkpoints(const std::vector<std::string>& inputs, const std::string& out);

}  // namespace attnlab::train
