// Checkpoints: torch archives with model, optimizer, training state and RNG states.
#include <attnlab/train/checkpoint.hpp>

#include <attnlab/error.hpp>
#include <attnlab/files.hpp>

#include "data/zip_check.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/serialize.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <mutex>
#include <sstream>

namespace attnlab::train {
namespace fs = std::filesystem;

namespace {

torch::Tensor scalar_long(int64_t v) { return torch::tensor(v, torch::kLong); }
torch::Tensor scalar_double(double v) { return torch::tensor(v, torch::kDouble); }

/// A nested archive tree built from dotted names ("encoder.blks.0.ln.weight"): the layout of
/// Module::save that `flatten` reads back.
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

void save_archive(torch::serialize::OutputArchive& archive, const std::string& path);

/// "group/name=rows" lines.
std::string encode_rows(const std::map<std::string, int64_t>& rows) {
  std::string out;
  for (const auto& [k, v] : rows) out += fmt::format("{}={}\n", k, v);
  return out;
}

std::map<std::string, int64_t> decode_rows(const std::string& text, const std::string& file) {
  std::map<std::string, int64_t> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto eq = line.rfind('=');
    ATTNLAB_CHECK(eq != std::string::npos, DataError, "checkpoint {}: malformed metric row entry '{}'", file, line);
    rows[line.substr(0, eq)] = std::stoll(line.substr(eq + 1));
  }
  return rows;
}

/// The training state's entries: epoch, step, best metric and epoch, metric rows (read_state).
void write_state(torch::serialize::OutputArchive& archive, const TrainingState& state) {
  archive.write("epoch", scalar_long(state.epoch));
  archive.write("step", scalar_long(state.step));
  archive.write("best_metric", scalar_double(state.best_metric));
  archive.write("best_epoch", scalar_long(state.best_epoch));
  archive.write("metric_rows", c10::IValue(encode_rows(state.metric_rows)));
}

torch::Device device_of(const torch::nn::Module& model) {
  auto params = model.parameters();
  if (!params.empty()) return params.front().device();
  auto buffers = model.buffers();
  return buffers.empty() ? torch::Device(torch::kCPU) : buffers.front().device();
}

at::Tensor generator_state(const at::Generator& gen) {
  auto& g = const_cast<at::Generator&>(gen);
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.get_state();  // uint8 [n] on the CPU
}

void set_generator_state(const at::Generator& gen, const at::Tensor& state) {
  auto& g = const_cast<at::Generator&>(gen);
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_state(state.to(torch::kCPU));
}

/// What LibTorch's reader says, as a user needs it: miniz's and the stream reader's own words
/// ("PytorchStreamReader failed reading zip archive: failed finding central directory. This is an
/// internal miniz error. If you are seeing ...") become "it is empty" or "it is damaged or not a
/// checkpoint (<the reader's reason>)"; `what` comes from message_without_backtrace, without
/// "[enforce fail at file.cc:747]" prefixes.
std::string torch_reason(std::string what, const std::string& path) {
  if (const auto cut = what.find(". This is an internal miniz error"); cut != std::string::npos) what.resize(cut);
  while (!what.empty() && (what.back() == '\n' || what.back() == ' ' || what.back() == '.')) what.pop_back();
  std::error_code ec;
  if (std::filesystem::file_size(path, ec) == 0 && !ec) return "it is empty (written by a run that was killed?)";
  const std::string zip = "PytorchStreamReader failed reading zip archive: ";
  if (what.rfind(zip, 0) == 0) {
    return fmt::format("it is damaged or not a checkpoint (not a whole zip archive: {})", what.substr(zip.size()));
  }
  return what;
}

torch::serialize::InputArchive open(const std::string& path, torch::Device device) {
  const auto why = files::problem(path, files::Want::File);
  ATTNLAB_CHECK(why.empty(), DataError, "checkpoint {}: {}", path, why == "no such file" ? "does not exist" : why);
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path, device);
  } catch (const c10::Error& e) {
    throw DataError(fmt::format("checkpoint {} cannot be read: {}", path, torch_reason(message_without_backtrace(e), path)));
  }
  // LibTorch's reader does not check the archive's CRCs: changed bytes would load as changed weights.
  const auto damage = data::zip_damage(path);
  ATTNLAB_CHECK(damage.empty(), DataError, "checkpoint {} is damaged: {}", path, damage);
  return archive;
}

void flatten(torch::serialize::InputArchive& archive, const std::string& prefix,
             std::map<std::string, torch::Tensor>& out) {
  for (const auto& key : archive.keys()) {
    torch::Tensor t;
    if (archive.try_read(key, t) || archive.try_read(key, t, /*is_buffer=*/true)) {
      out[prefix + key] = t;
      continue;
    }
    torch::serialize::InputArchive child;
    if (archive.try_read(key, child)) flatten(child, prefix + key + ".", out);
  }
}

/// One stored tensor (a fresh one: reading into a defined tensor would keep its dtype).
torch::Tensor read_tensor(torch::serialize::InputArchive& archive, const std::string& key, bool is_buffer = false) {
  torch::Tensor t;
  archive.read(key, t, is_buffer);
  return t;
}

TrainingState read_state(torch::serialize::InputArchive& archive, const std::string& path) {
  TrainingState state;
  state.epoch = read_tensor(archive, "epoch").item<int64_t>();
  state.step = read_tensor(archive, "step").item<int64_t>();
  state.best_metric = read_tensor(archive, "best_metric").item<double>();
  state.best_epoch = read_tensor(archive, "best_epoch").item<int64_t>();
  c10::IValue rows;
  archive.read("metric_rows", rows);
  state.metric_rows = decode_rows(rows.toStringRef(), path);
  return state;
}

/// The model's parameters and buffers by name, after checking that `stored` (a checkpoint's model
/// part) has exactly these names with the same shapes: DataError naming the first difference.
std::map<std::string, torch::Tensor> check_fits(const std::map<std::string, torch::Tensor>& stored,
                                                const torch::nn::Module& model, const std::string& path) {
  std::map<std::string, torch::Tensor> wanted;
  for (const auto& p : model.named_parameters(/*recurse=*/true)) wanted[p.key()] = p.value();
  for (const auto& b : model.named_buffers(/*recurse=*/true)) wanted[b.key()] = b.value();
  for (const auto& [name, t] : wanted) {
    auto it = stored.find(name);
    ATTNLAB_CHECK(it != stored.end(), DataError, "checkpoint {} does not fit this model: it has no '{}'", path, name);
    ATTNLAB_CHECK(it->second.sizes() == t.sizes(), DataError,
                  "checkpoint {} does not fit this model: '{}' is {} there, {} here", path, name,
                  c10::str(it->second.sizes()), c10::str(t.sizes()));
  }
  for (const auto& [name, t] : stored) {
    ATTNLAB_CHECK(wanted.count(name), DataError, "checkpoint {} does not fit this model: this model has no '{}'", path,
                  name);
  }
  return wanted;
}

/// Copies the archive's "model" tensors into the model's parameters and buffers (in place, so tied
/// weights stay tied and the optimizer keeps its tensors), after checking names and shapes.
void load_model_part(torch::serialize::InputArchive& archive, torch::nn::Module& model, const std::string& path) {
  std::map<std::string, torch::Tensor> stored;
  try {
    torch::serialize::InputArchive part;
    archive.read("model", part);
    flatten(part, "", stored);
  } catch (const c10::Error& e) {
    throw DataError(fmt::format("checkpoint {} holds no model: {}", path, e.what_without_backtrace()));
  }
  auto wanted = check_fits(stored, model, path);
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : wanted) t.copy_(stored.at(name));
}

}  // namespace

std::string checkpoint_dir(const std::string& results_path) { return results_path + ".ckpt"; }

void save_checkpoint(const std::string& path, const torch::nn::Module& model, const torch::optim::Optimizer* optimizer,
                     const TrainingState& state) {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive model_part;
  model.save(model_part);
  archive.write("model", model_part);
  if (optimizer != nullptr) {
    torch::serialize::OutputArchive opt_part;
    optimizer->save(opt_part);
    archive.write("optimizer", opt_part);
  }
  write_state(archive, state);
  archive.write("rng_cpu", generator_state(at::detail::getDefaultCPUGenerator()), /*is_buffer=*/true);
  const int64_t gpus = torch::cuda::is_available() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
  archive.write("rng_cuda_count", scalar_long(gpus));
  for (int64_t i = 0; i < gpus; ++i) {
    const auto& gen = at::globalContext().defaultGenerator(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(i)));
    archive.write(fmt::format("rng_cuda_{}", i), generator_state(gen), /*is_buffer=*/true);
  }
  save_archive(archive, path);
}

void save_model_tensors(const std::string& path, const std::map<std::string, torch::Tensor>& tensors,
                        const TrainingState& state) {
  Tree tree;
  for (const auto& [name, t] : tensors) tree.add(name, t);
  torch::serialize::OutputArchive archive, model_part;
  tree.write_to(model_part);
  archive.write("model", model_part);
  write_state(archive, state);
  save_archive(archive, path);
}

namespace {

/// Writes `archive` to "<path>.tmp" (parent folders made) and renames it to `path`.
void save_archive(torch::serialize::OutputArchive& archive, const std::string& path) {
  std::error_code ec;
  const auto parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  ATTNLAB_CHECK(!ec, DataError, "cannot create folder {} for checkpoint {}: {}", parent.string(), path, ec.message());
  const std::string tmp = path + ".tmp";
  try {
    archive.save_to(tmp);
  } catch (const c10::Error& e) {
    throw DataError(fmt::format("cannot write checkpoint {}: {}", tmp, e.what_without_backtrace()));
  }
  fs::rename(tmp, path, ec);
  ATTNLAB_CHECK(!ec, DataError, "cannot rename checkpoint {} to {}: {}", tmp, path, ec.message());
}

}  // namespace

void copy_checkpoint(const std::string& from, const std::string& to) {
  const std::string tmp = to + ".tmp";
  std::error_code ec;
  fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
  ATTNLAB_CHECK(!ec, DataError, "cannot copy checkpoint {} to {}: {}", from, tmp, ec.message());
  fs::rename(tmp, to, ec);
  ATTNLAB_CHECK(!ec, DataError, "cannot rename checkpoint {} to {}: {}", tmp, to, ec.message());
}

TrainingState load_checkpoint(const std::string& path, torch::nn::Module& model, torch::optim::Optimizer* optimizer) {
  auto archive = open(path, device_of(model));
  load_model_part(archive, model, path);
  TrainingState state;
  try {
    if (optimizer != nullptr) {
      torch::serialize::InputArchive opt_part;
      ATTNLAB_CHECK(archive.try_read("optimizer", opt_part), DataError, "checkpoint {} holds no optimizer state", path);
      optimizer->load(opt_part);
    }
    state = read_state(archive, path);
    set_generator_state(at::detail::getDefaultCPUGenerator(), read_tensor(archive, "rng_cpu", /*is_buffer=*/true));
    const int64_t saved = read_tensor(archive, "rng_cuda_count").item<int64_t>();
    const int64_t gpus = torch::cuda::is_available() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
    for (int64_t i = 0; i < std::min(saved, gpus); ++i) {
      set_generator_state(at::globalContext().defaultGenerator(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(i))),
                          read_tensor(archive, fmt::format("rng_cuda_{}", i), /*is_buffer=*/true));
    }
  } catch (const c10::Error& e) {
    throw DataError(fmt::format("checkpoint {} is incomplete or does not fit this optimizer: {}", path,
                                e.what_without_backtrace()));
  }
  return state;
}

TrainingState read_training_state(const std::string& path) {
  auto archive = open(path, torch::kCPU);
  try {
    return read_state(archive, path);
  } catch (const c10::Error& e) {
    throw DataError(fmt::format("checkpoint {} holds no training state: {}", path, e.what_without_backtrace()));
  }
}

void load_model_weights(const std::string& path, torch::nn::Module& model) {
  auto archive = open(path, device_of(model));
  load_model_part(archive, model, path);
}

void check_model_fits(const std::string& path, const torch::nn::Module& model) {
  check_fits(checkpoint_tensors(path), model, path);
}

std::map<std::string, torch::Tensor> checkpoint_tensors(const std::string& path) {
  auto archive = open(path, torch::kCPU);
  std::map<std::string, torch::Tensor> out;
  try {
    torch::serialize::InputArchive part;
    archive.read("model", part);
    flatten(part, "", out);
  } catch (const c10::Error& e) {
    throw DataError(fmt::format("checkpoint {} holds no model: {}", path, e.what_without_backtrace()));
  }
  return out;
}

std::string epoch_checkpoint_path(const std::string& dir, int64_t epoch) {
  return (fs::path(dir) / fmt::format("epoch-{}.pt", epoch)).string();
}

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

}  // namespace attnlab::train
