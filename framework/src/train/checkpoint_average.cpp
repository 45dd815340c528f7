// Checkpoint averaging for `runner average` (checkpoint_average.hpp).
#include "train/checkpoint_average.hpp"

#include <attnlab/error.hpp>
#include <attnlab/train/checkpoint.hpp>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

namespace attnlab::train {
namespace fs = std::filesystem;

void average_checkpoints(const std::vector<std::string>& inputs, const std::string& out) {
  ATTNLAB_CHECK(!inputs.empty(), DataError, "no checkpoints to average into {}", out);
  std::map<std::string, torch::Tensor> sum;  // double for floating tensors, the last value otherwise
  std::map<std::string, torch::Tensor> first = checkpoint_tensors(inputs.front());
  for (const auto& path : inputs) {
    const auto tensors = path == inputs.front() ? first : checkpoint_tensors(path);
    for (const auto& [name, t] : tensors) {
      auto it = first.find(name);
      ATTNLAB_CHECK(it != first.end(), DataError, "cannot average {} with {}: '{}' is in the second only",
                    inputs.front(), path, name);
      ATTNLAB_CHECK(it->second.sizes() == t.sizes() && it->second.scalar_type() == t.scalar_type(), DataError,
                    "cannot average {} with {}: '{}' is {} {} in the first and {} {} in the second", inputs.front(),
                    path, name, c10::toString(it->second.scalar_type()), c10::str(it->second.sizes()),
                    c10::toString(t.scalar_type()), c10::str(t.sizes()));
      if (t.is_floating_point()) {
        auto& s = sum[name];
        s = s.defined() ? s + t.to(torch::kDouble) : t.to(torch::kDouble);
      } else {
        sum[name] = t;
      }
    }
    ATTNLAB_CHECK(tensors.size() == first.size(), DataError, "cannot average {} with {}: {} tensors against {}",
                  inputs.front(), path, first.size(), tensors.size());
  }
  std::map<std::string, torch::Tensor> mean;
  const double n = static_cast<double>(inputs.size());
  for (const auto& [name, s] : sum) mean[name] = s.is_floating_point() ? (s / n).to(first.at(name).scalar_type()) : s;
  save_model_tensors(out, mean, read_training_state(inputs.back()));
}

}  // namespace attnlab::train
