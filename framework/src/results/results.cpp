#include "attnlab/results/results.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <attnlab/error.hpp>
#include <attnlab/files.hpp>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <utility>
#include <vector>

#include "results/hdf5.hpp"
#include "results/layout.hpp"
#include "results/lock.hpp"

namespace attnlab::results {

using h5::check;
using h5::Handle;

const char* status_name(Status s) {
  switch (s) {
    case Status::Running:
      return "running";
    case Status::Completed:
      return "completed";
    case Status::Interrupted:
      return "interrupted";
    case Status::Failed:
      return "failed";
    case Status::Diverged:
      return "diverged";
  }
  return "unknown";
}

std::string utc_now() {
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

struct Results::Impl {
  std::unique_ptr<WriterLock> lock;  // declared first: released after the file is closed
  std::unique_ptr<FileShare> share;  // readers in other processes (docs/RESULTS.md, "Reading a live run")
  Handle file;
  Handle root;  // the root group, where the run's attributes live
  // wall_seconds: this process's time with the file, plus what earlier sessions (a resumed run)
  // recorded.
  std::chrono::steady_clock::time_point opened = std::chrono::steady_clock::now();
  double wall_before = 0;
  // Metric rows appended since the last flush ("group/name", rows), in the order first appended:
  // flush() writes them together, so a reader sees every series of an epoch or none.
  std::vector<std::pair<std::string, std::vector<double>>> pending;
  int depth = 0;                            // Writing scopes open
  double wait = FileShare::wait_seconds();  // for readers to close the file
  bool beside = false;                      // the last write did not get the lock
  bool warned = false;

  /// Writes the pending metric rows.
  void write_pending(const std::string& file);

  class Writing;
};

/// One write of the file: from the first HDF5 call to the flush that ends the outermost Writing,
/// this process holds the file's lock exclusively, so a reader elsewhere opens the file either
/// before the write or after it, never half-way. A reader that keeps the file open longer than
/// `wait` gets one warning and the write goes on beside it; later writes try once and go on.
class Results::Impl::Writing {
 public:
  Writing(Impl& impl, const std::string& path) : impl_(impl), path_(path) {
    if (impl_.depth++ > 0) return;
    if (impl_.share->begin(impl_.beside ? 0.0 : impl_.wait)) {
      impl_.beside = false;
      return;
    }
    impl_.beside = true;
    if (!std::exchange(impl_.warned, true)) {
      spdlog::warn(
          "results file {} is held open by a reader in another process for more than {} s; writing beside it "
          "(that reader sees the run as it was when it opened the file; docs/RESULTS.md, \"Reading a live run\")",
          path_, impl_.wait);
    }
  }
  ~Writing() noexcept(false) {
    if (--impl_.depth > 0) return;
    const bool flushed = !impl_.file.valid() || H5Fflush(impl_.file.get(), H5F_SCOPE_GLOBAL) >= 0;
    const std::string why = flushed ? std::string() : h5::error_stack();
    impl_.share->end();
    if (!flushed && std::uncaught_exceptions() == unwinding_) {
      throw ResultsError(fmt::format("results file {}: cannot flush: {}", path_, why));
    }
  }
  Writing(const Writing&) = delete;
  Writing& operator=(const Writing&) = delete;

 private:
  Impl& impl_;
  const std::string& path_;
  const int unwinding_ = std::uncaught_exceptions();
};

namespace {

// A link name given by the caller (metric group or name) must be one plain component.
void check_component(const std::string& kind, const std::string& name, const std::string& file) {
  ATTNLAB_CHECK(!name.empty() && name.find('/') == std::string::npos && name != ".", ResultsError,
                "results file {}: {} must be a non-empty name without '/', found '{}'", file, kind, name);
}

/// "/a/b" from "a/b" or "/a/b"; ResultsError for empty or malformed paths.
/// "/eval/test" from "eval/test" (or "/eval/test"); ResultsError for an empty path, one that ends
/// in '/' or holds "//" ("<what> must be like \"<example>\"").
std::string clean_path(const std::string& path, const std::string& file, const char* what = "path",
                       const char* example = "eval/test") {
  std::string clean = path;
  while (!clean.empty() && clean.front() == '/') clean.erase(0, 1);
  ATTNLAB_CHECK(!clean.empty() && clean.back() != '/' && clean.find("//") == std::string::npos, ResultsError,
                "results file {}: {} must be like \"{}\", found '{}'", file, what, example, path);
  return "/" + clean;
}

Handle open_or_create_object(hid_t root, const std::string& path, const std::string& file) {
  if (!h5::exists(root, path)) {
    Handle lcpl = h5::link_props(file);
    Handle g = check(H5Gcreate2(root, path.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT), file,
                     fmt::format("cannot create group {}", path));
  }
  return check(H5Oopen(root, path.c_str(), H5P_DEFAULT), file, fmt::format("cannot open {}", path));
}

/// How the writer opens the file. 1.8 format: dense attribute storage (no 64 KiB limit) but no
/// superblock "open for write" flag, so a killed writer leaves a file that h5py opens without
/// h5clear. Without HDF5's own lock, which would be held from open to close: FileShare takes the
/// same lock for each write only, so readers open the file between writes.
Handle writer_access(const std::string& path) {
  Handle fapl = check(H5Pcreate(H5P_FILE_ACCESS), path, "cannot create file access properties");
  check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V18), path, "cannot select the file format");
  check(H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG), path, "cannot set the close degree");
#if H5_VERSION_GE(1, 10, 7)
  check(H5Pset_file_locking(fapl.get(), false, true), path, "cannot configure file locking");
#endif
  return fapl;
}

}  // namespace

Results::Results(const std::string& path, Open) : impl_(std::make_unique<Impl>()), path_(path) {
  h5::silence_errors();
  auto not_ours = [&](const std::string& why) {
    return ResultsError(fmt::format("not an attnlab results file: {} ({})", path, why));
  };
  if (const auto why = files::problem(path, files::Want::File); !why.empty()) throw not_ours(why);
  impl_->lock = std::make_unique<WriterLock>(path);  // before HDF5 touches it
  ATTNLAB_CHECK(::access(path.c_str(), W_OK) == 0, ResultsError,
                "results file {} is read-only ({}): cannot write to it", path, std::strerror(errno));
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw not_ours("not an HDF5 file");
  }
  impl_->share = std::make_unique<FileShare>(path, FileShare::Role::writer);
  Impl::Writing writing(*impl_, path_);
  Handle fapl = writer_access(path);
  hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDWR, fapl.get());
  if (id < 0) throw not_ours("HDF5 cannot open it for writing: " + h5::error_stack());
  impl_->file = Handle(id);
  impl_->root = check(H5Gopen2(impl_->file.get(), "/", H5P_DEFAULT), path, "cannot open the root group");
  for (const char* required : {"experiment", "status"}) {
    if (H5Aexists(impl_->root.get(), required) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      throw not_ours(fmt::format("no root attribute '{}'", required));
    }
  }
  if (H5Aexists(impl_->root.get(), "wall_seconds") > 0) {  // a resumed run: its earlier sessions' time
    Handle attr(H5Aopen(impl_->root.get(), "wall_seconds", H5P_DEFAULT));
    double before = 0;
    if (attr.get() >= 0 && H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &before) >= 0 && std::isfinite(before) &&
        before >= 0) {
      impl_->wall_before = before;
    }
    H5Eclear2(H5E_DEFAULT);
  }
  impl_->opened = std::chrono::steady_clock::now();
}

Results::Results(const std::string& path, const std::string& experiment)
    : impl_(std::make_unique<Impl>()), path_(path) {
  h5::silence_errors();
  // A symlink loop, a directory or a FIFO in the way is refused by name here, not by HDF5's stack.
  if (const auto why = files::problem(path, files::Want::FileToWrite); !why.empty()) {
    throw ResultsError(fmt::format("cannot write results file {}: {}", path, why));
  }
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    ATTNLAB_CHECK(!ec, ResultsError, "cannot create folder {} for results file {}: {}", parent.string(), path,
                  ec.message());
  }
  // The lock first: a second run on the path of a live one is refused before anything is truncated.
  impl_->lock = std::make_unique<WriterLock>(path);
  // A file already there is replaced by a new one, not truncated: a reader that has the old run
  // open goes on reading it whole. (A symlink's target is truncated, as HDF5 does.)
  std::error_code ec;
  if (std::filesystem::is_regular_file(std::filesystem::symlink_status(path, ec))) {
    ATTNLAB_CHECK(::access(path.c_str(), W_OK) == 0, ResultsError, "cannot write results file {}: {}", path,
                  std::strerror(errno));
    ATTNLAB_CHECK(::unlink(path.c_str()) == 0, ResultsError, "cannot replace results file {}: {}", path,
                  std::strerror(errno));
  }
  impl_->share = std::make_unique<FileShare>(path, FileShare::Role::writer, /*create=*/true);
  Impl::Writing writing(*impl_, path_);
  Handle fapl = writer_access(path);
  impl_->file = check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), path, "cannot create the file");
  impl_->root = check(H5Gopen2(impl_->file.get(), "/", H5P_DEFAULT), path, "cannot open the root group");
  set_attr("experiment", experiment);
  set_attr("status", std::string(status_name(Status::Running)));
  set_attr("started", utc_now());
}

Results::~Results() {
  try {
    if (impl_ && impl_->file.valid()) {
      Impl::Writing writing(*impl_, path_);
      impl_->write_pending(path_);
    }
  } catch (const std::exception& e) {  // a destructor never throws; a lost epoch is said
    spdlog::error("{}", e.what());
  } catch (...) {
  }
  if (impl_) {
    impl_->root.reset();
    impl_->file.reset();
    H5Eclear2(H5E_DEFAULT);
  }
}

void Results::set_attr(const std::string& name, const std::string& value) {
  Impl::Writing writing(*impl_, path_);
  h5::write_string_attr(impl_->root.get(), name, value, path_);
}

void Results::set_attr(const std::string& name, int64_t value) {
  Impl::Writing writing(*impl_, path_);
  h5::write_int_attr(impl_->root.get(), name, value, path_);
}

void Results::set_attr(const std::string& name, double value) {
  Impl::Writing writing(*impl_, path_);
  h5::write_double_attr(impl_->root.get(), name, value, path_);
}

void Results::set_attr(const std::string& name, const std::vector<std::string>& value) {
  Impl::Writing writing(*impl_, path_);
  h5::write_strings_attr(impl_->root.get(), name, value, path_);
}

void Results::set_status(Status status) {
  Impl::Writing writing(*impl_, path_);
  set_attr("status", std::string(status_name(status)));
  if (status == Status::Running) {
    // Back to running (a resumed run): a stale "finished" would contradict the status, and a run
    // that patience had stopped may now train on (a --resume with a larger patience).
    for (const char* stale : {"finished", "error", "interrupted_during", "diverged", "stopped_early_after_epoch"}) {
      if (H5Aexists(impl_->root.get(), stale) > 0)
        check(H5Adelete(impl_->root.get(), stale), path_, fmt::format("cannot remove attribute '{}'", stale));
    }
  } else {
    set_attr("finished", utc_now());
    const std::chrono::duration<double> held = std::chrono::steady_clock::now() - impl_->opened;
    set_attr("wall_seconds", impl_->wall_before + held.count());
  }
  impl_->write_pending(path_);  // every metric before the status that ends them
}

void Results::write_config(const std::string& yaml) {
  Impl::Writing writing(*impl_, path_);
  h5::write_string_dataset(impl_->root.get(), "/config", {yaml}, /*scalar=*/true, path_);
}

void Results::append_metric(const std::string& group, const std::string& name, double value) {
  check_component("metric group", group, path_);
  check_component("metric name", name, path_);
  const std::string key = group + "/" + name;
  auto it = std::find_if(impl_->pending.begin(), impl_->pending.end(), [&](const auto& p) { return p.first == key; });
  if (it == impl_->pending.end()) it = impl_->pending.insert(it, {key, {}});
  it->second.push_back(value);
}

void Results::Impl::write_pending(const std::string& file) {
  for (const auto& [key, values] : pending) append_rows(root.get(), key, values, file);
  pending.clear();
}

std::map<std::string, int64_t> Results::metric_rows() const {
  std::map<std::string, int64_t> rows;
  hid_t root = impl_->root.get();
  for (const auto& group : h5::list_group(root, "/metrics", path_)) {
    for (const auto& name : h5::list_group(root, "/metrics/" + group, path_)) {
      const std::string ds_path = fmt::format("/metrics/{}/{}", group, name);
      Handle ds =
          check(H5Dopen2(root, ds_path.c_str(), H5P_DEFAULT), path_, fmt::format("cannot open dataset {}", ds_path));
      Handle space = check(H5Dget_space(ds.get()), path_, fmt::format("cannot read the shape of {}", ds_path));
      hsize_t n = 0;
      check(H5Sget_simple_extent_dims(space.get(), &n, nullptr), path_,
            fmt::format("cannot read the shape of {}", ds_path));
      rows[group + "/" + name] = static_cast<int64_t>(n);
    }
  }
  for (const auto& [key, values] : impl_->pending) rows[key] += static_cast<int64_t>(values.size());
  return rows;
}

void Results::truncate_metrics(const std::map<std::string, int64_t>& rows) {
  Impl::Writing writing(*impl_, path_);
  impl_->write_pending(path_);
  hid_t root = impl_->root.get();
  for (const auto& [key, have] : metric_rows()) {
    const std::string ds_path = "/metrics/" + key;
    auto it = rows.find(key);
    if (it == rows.end()) {
      h5::remove_if_present(root, ds_path, path_);
      continue;
    }
    ATTNLAB_CHECK(it->second <= have, ResultsError, "results file {}: cannot cut {} back to {} rows, it has only {}",
                  path_, ds_path, it->second, have);
    if (it->second == have) continue;
    Handle ds =
        check(H5Dopen2(root, ds_path.c_str(), H5P_DEFAULT), path_, fmt::format("cannot open dataset {}", ds_path));
    hsize_t n = static_cast<hsize_t>(it->second);
    check(H5Dset_extent(ds.get(), &n), path_, fmt::format("cannot cut {} back to {} rows", ds_path, n));
  }
}

void Results::write_samples(const std::vector<Sample>& samples) {
  Impl::Writing writing(*impl_, path_);
  std::vector<std::string> source, reference, hypothesis;
  std::vector<double> bleu;
  for (const auto& s : samples) {
    source.push_back(s.source);
    reference.push_back(s.reference);
    hypothesis.push_back(s.hypothesis);
    bleu.push_back(s.bleu);
  }
  hid_t root = impl_->root.get();
  h5::write_string_dataset(root, "/samples/source", source, false, path_);
  h5::write_string_dataset(root, "/samples/reference", reference, false, path_);
  h5::write_string_dataset(root, "/samples/hypothesis", hypothesis, false, path_);
  h5::write_double_dataset(root, "/samples/bleu", bleu, path_);
}

void Results::write_attention(const std::string& sample, const std::string& module, const Attention& attention) {
  const std::string group = "/attention/" + h5::link_name(sample);
  const std::string ds_path = group + "/" + h5::link_name(module);
  const auto& weights = attention.weights;  // [layers, heads, queries, keys]
  ATTNLAB_CHECK(weights.dim() == 4, ResultsError,
                "results file {}: attention for {} must be [layers, heads, queries, keys], found {}-D [{}]", path_,
                ds_path, weights.dim(), fmt::join(weights.shape, ", "));
  ATTNLAB_CHECK(
      attention.query_tokens.empty() || static_cast<int64_t>(attention.query_tokens.size()) == weights.size(2),
      ResultsError, "results file {}: attention {} has {} queries but {} query labels", path_, ds_path, weights.size(2),
      attention.query_tokens.size());
  ATTNLAB_CHECK(attention.key_tokens.empty() || static_cast<int64_t>(attention.key_tokens.size()) == weights.size(3),
                ResultsError, "results file {}: attention {} has {} keys but {} key labels", path_, ds_path,
                weights.size(3), attention.key_tokens.size());
  ATTNLAB_CHECK(attention.layers.empty() || static_cast<int64_t>(attention.layers.size()) == weights.size(0),
                ResultsError, "results file {}: attention {} has {} layers but {} layer indices", path_, ds_path,
                weights.size(0), attention.layers.size());
  std::vector<int64_t> layers = attention.layers;
  for (int64_t l = static_cast<int64_t>(layers.size()); l < weights.size(0); ++l) layers.push_back(l);
  Impl::Writing writing(*impl_, path_);
  hid_t root = impl_->root.get();
  h5::write_array(root, ds_path, weights, path_);  // [layers, heads, queries, keys]
  Handle ds =
      check(H5Dopen2(root, ds_path.c_str(), H5P_DEFAULT), path_, fmt::format("cannot open dataset {}", ds_path));
  h5::write_strings_attr(ds.get(), "query_tokens", attention.query_tokens, path_);
  h5::write_strings_attr(ds.get(), "key_tokens", attention.key_tokens, path_);
  h5::write_string_attr(ds.get(), "dims", "layers,heads,queries,keys", path_);
  h5::write_ints_attr(ds.get(), "layers", layers, path_);
  h5::write_int_attr(ds.get(), "heads", weights.size(1), path_);
  if (!attention.query_side.empty()) h5::write_string_attr(ds.get(), "query_side", attention.query_side, path_);
  if (!attention.key_side.empty()) h5::write_string_attr(ds.get(), "key_side", attention.key_side, path_);
  h5::write_string_attr(ds.get(), "interpretation", "image", path_);  // a viewer draws [query, key] slices
  h5::write_string_attr(ds.get(), "long_name", fmt::format("{} attention weights (layer, head, query, key)", module),
                        path_);
  Handle g = check(H5Gopen2(root, group.c_str(), H5P_DEFAULT), path_, fmt::format("cannot open group {}", group));
  h5::write_string_attr(g.get(), "text", sample, path_);
  describe_nexus(root, "/attention", h5::link_name(sample), h5::link_name(module), path_);
}

void Results::write_array(const std::string& path, const FloatArray& values) {
  Impl::Writing writing(*impl_, path_);
  h5::write_array(impl_->root.get(), clean_path(path, path_, "tensor path", "predictions/test"), values, path_);
}

void Results::write_array(const std::string& path, const IntArray& values) {
  Impl::Writing writing(*impl_, path_);
  h5::write_array(impl_->root.get(), clean_path(path, path_, "tensor path", "predictions/test"), values, path_);
}

void Results::write_strings(const std::string& path, const std::vector<std::string>& values) {
  Impl::Writing writing(*impl_, path_);
  h5::write_string_dataset(impl_->root.get(), clean_path(path, path_), values, /*scalar=*/false, path_);
}

void Results::set_attr_at(const std::string& path, const std::string& name, const std::string& value) {
  Impl::Writing writing(*impl_, path_);
  Handle obj = open_or_create_object(impl_->root.get(), clean_path(path, path_), path_);
  h5::write_string_attr(obj.get(), name, value, path_);
}

void Results::set_attr_at(const std::string& path, const std::string& name, double value) {
  Impl::Writing writing(*impl_, path_);
  Handle obj = open_or_create_object(impl_->root.get(), clean_path(path, path_), path_);
  h5::write_double_attr(obj.get(), name, value, path_);
}

void Results::set_attr_at(const std::string& path, const std::string& name, int64_t value) {
  Impl::Writing writing(*impl_, path_);
  Handle obj = open_or_create_object(impl_->root.get(), clean_path(path, path_), path_);
  h5::write_int_attr(obj.get(), name, value, path_);
}

void Results::set_attr_at(const std::string& path, const std::string& name, const std::vector<std::string>& values) {
  Impl::Writing writing(*impl_, path_);
  Handle obj = open_or_create_object(impl_->root.get(), clean_path(path, path_), path_);
  h5::write_strings_attr(obj.get(), name, values, path_);
}

void Results::set_attr_at(const std::string& path, const std::string& name, const std::vector<double>& values) {
  Impl::Writing writing(*impl_, path_);
  Handle obj = open_or_create_object(impl_->root.get(), clean_path(path, path_), path_);
  h5::write_doubles_attr(obj.get(), name, values, path_);
}

void Results::remove(const std::string& path) {
  Impl::Writing writing(*impl_, path_);
  h5::remove_if_present(impl_->root.get(), clean_path(path, path_), path_);
}

std::vector<std::string> Results::children(const std::string& path) const {
  return h5::list_group(impl_->root.get(), clean_path(path, path_), path_);
}

void Results::move(const std::string& from, const std::string& to) {
  Impl::Writing writing(*impl_, path_);
  hid_t root = impl_->root.get();
  const std::string src = clean_path(from, path_), dst = clean_path(to, path_);
  ATTNLAB_CHECK(h5::exists(root, src), ResultsError, "results file {}: cannot move {}: it does not exist", path_, src);
  ATTNLAB_CHECK(dst.rfind(src + "/", 0) != 0 && src != dst, ResultsError,
                "results file {}: cannot move {} into itself ({})", path_, src, dst);
  h5::remove_if_present(root, dst, path_);
  Handle lcpl = h5::link_props(path_);
  check(H5Lmove(root, src.c_str(), root, dst.c_str(), lcpl.get(), H5P_DEFAULT), path_,
        fmt::format("cannot move {} to {}", src, dst));
}

void Results::flush() {
  Impl::Writing writing(*impl_, path_);  // which flushes as it ends
  impl_->write_pending(path_);
}

}  // namespace attnlab::results
