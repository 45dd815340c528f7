// Checkpoint averaging for `runner average` (checkpoint_average.hpp).
#include "train/checkpoint_average.hpp"

#include <attnlab/error.hpp>
#include <attnlab/train/checkpoint.hpp>

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/serialize.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>

namespace attnlab::train {
namespace {
namespace fs = std::filesystem;

/// A nested archive tree built from dotted names ("encoder.blks.0.ln.weight"), the layout of
/// Module::save that `checkpoint_tensors` flattens.
struct Tree {
  std::map<std::string, torch::Tensor> tensors;
  std::map<std::string, Tree> children;

  void add(const std::string& name, const torch::Tensor& t) {
    const auto dot = name.find('.');
    if (dot == std::string::npos) {
      tensors[name] = t;
    } else {
      children[name.substr(0, dot)].add(name.substr(dot + 1), t);
    }
  }

  void write_to(torch::serialize::OutputArchive& archive) const {
    for (const auto& [name, t] : tensors) archive.write(name, t);
    for (const auto& [name, child] : children) {
      torch::serialize::OutputArchive part;
      child.write_to(part);
      archive.write(name, part);
    }
  }
};

torch::Tensor scalar_long(int64_t v) { return torch::tensor(v, torch::kLong); }

}  // namespace

std::vector<KeptCheckpoint> kept_checkpoints(const std::string& dir) {
  std::vector<KeptCheckpoint> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const auto name = entry.path().filename().string();
    if (!name.starts_with("epoch-") || !name.ends_with(".pt") || name.size() <= 9) continue;
    const char* first = name.data() + 6;
    const char* last = name.data() + name.size() - 3;
    int64_t epoch = 0;
    const auto [end, err] = std::from_chars(first, last, epoch);
    if (err == std::errc() && end == last) out.push_back({epoch, entry.path().string()});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.epoch < b.epoch; });
  return out;
}

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
  Tree tree;
  const double n = static_cast<double>(inputs.size());
  for (const auto& [name, s] : sum) {
    const auto dtype = first.at(name).scalar_type();
    tree.add(name, s.is_floating_point() ? (s / n).to(dtype) : s);
  }
  const TrainingState st = read_training_state(inputs.back());
  torch::serialize::OutputArchive archive, model_part;
  tree.write_to(model_part);
  archive.write("model", model_part);
  archive.write("epoch", scalar_long(st.epoch));
  archive.write("step", scalar_long(st.step));
  archive.write("best_metric", torch::tensor(st.best_metric, torch::kDouble));
  archive.write("best_epoch", scalar_long(st.best_epoch));
  std::string rows;  // checkpoint.cpp's "group/name=rows" lines, so read_training_state reads it too
  for (const auto& [k, v] : st.metric_rows) rows += fmt::format("{}={}\n", k, v);
  archive.write("metric_rows", c10::IValue(rows));
  archive.write("averaged_checkpoints", scalar_long(static_cast<int64_t>(inputs.size())));
  const std::string tmp = out + ".tmp";
  try {
    archive.save_to(tmp);
  } catch (const c10::Error& e) {
    throw DataError(fmt::format("cannot write checkpoint {}: {}", tmp, e.what_without_backtrace()));
  }
  std::error_code ec;
  fs::rename(tmp, out, ec);
  ATTNLAB_CHECK(!ec, DataError, "cannot rename checkpoint {} to {}: {}", tmp, out, ec.message());
}

}  // namespace attnlab::train
