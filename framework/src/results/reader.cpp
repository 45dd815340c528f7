#include "attnlab/results/reader.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <attnlab/error.hpp>
#include <attnlab/files.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "results/hdf5.hpp"
#include "results/lock.hpp"

namespace attnlab::results {

using h5::check;
using h5::Handle;

Status parse_status(const std::string& name) {
  for (Status s : {Status::Running, Status::Completed, Status::Interrupted, Status::Failed, Status::Diverged}) {
    if (name == status_name(s)) return s;
  }
  throw ResultsError(
      fmt::format("unknown run status '{}': expected running, completed, interrupted, failed or diverged", name));
}

struct ResultsReader::Impl {
  std::unique_ptr<FileShare> share;  // declared first: let go of after the file is closed
  Handle file;
  Handle root;
};

namespace {

/// A file that a live run is writing may not be readable yet (just created, not flushed): say
/// so rather than calling it foreign.
[[noreturn]] void not_results(const std::string& path, const std::string& why) {
  if (const auto pid = WriterLock::holder(path)) {
    throw ResultsError(fmt::format("results file {} is being written by a running run ({}) and cannot be read yet: {}",
                                   path, WriterLock::who(pid), why));
  }
  throw ResultsError(fmt::format("not an attnlab results file: {} ({})", path, why));
}

herr_t add_attr_name(hid_t /*obj*/, const char* name, const H5A_info_t* /*info*/, void* data) {
  static_cast<std::vector<std::string>*>(data)->emplace_back(name);
  return 0;
}

std::string absolute(const std::string& path) {
  std::string clean = path;
  while (!clean.empty() && clean.front() == '/') clean.erase(0, 1);
  return "/" + clean;
}

}  // namespace

ResultsReader::ResultsReader(const std::string& path, ReadCheck read_check)
    : impl_(std::make_unique<Impl>()), path_(path) {
  h5::silence_errors();
  if (const auto why = files::problem(path, files::Want::File); !why.empty()) not_results(path, why);
  ATTNLAB_CHECK(::access(path.c_str(), R_OK) == 0, ResultsError, "cannot read results file {}: {}", path,
                std::strerror(errno));
  // Shared, as HDF5 takes it: a live run's writer writes between our reads, not during them. Past
  // the wait (a long write) the read goes on as before, best effort.
  impl_->share = std::make_unique<FileShare>(path, FileShare::Role::reader);
  impl_->share->begin(FileShare::wait_seconds());
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    not_results(path, "not an HDF5 file");
  }
  if (read_check == ReadCheck::before_open) check_readable(path, ReadCheckLimits::for_file(path));
  hid_t file = h5::open_read_only(path, false);
  if (file < 0) {
    std::string why = h5::error_stack();
    // The writer is in this process: HDF5 shares its open file only with matching lock settings.
    file = h5::open_read_only(path, true);
    if (file < 0) not_results(path, "HDF5 cannot open it: " + why);
  }
  impl_->file = Handle(file);
  impl_->root = check(H5Gopen2(file, "/", H5P_DEFAULT), path, "cannot open the root group");
  for (const char* required : {"experiment", "status"}) {
    if (!has_attr(required)) not_results(path, fmt::format("no root attribute '{}'", required));
  }
}

ResultsReader::~ResultsReader() {
  if (impl_) {
    impl_->root.reset();
    impl_->file.reset();
    H5Eclear2(H5E_DEFAULT);
  }
}

bool ResultsReader::has_attr(const std::string& name) const {
  htri_t found = H5Aexists(impl_->root.get(), name.c_str());
  check(static_cast<herr_t>(found), path_, fmt::format("cannot look up attribute '{}'", name));
  return found > 0;
}

std::vector<std::string> ResultsReader::attr_names() const {
  std::vector<std::string> names;
  check(H5Aiterate2(impl_->root.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, add_attr_name, &names), path_,
        "cannot list the root attributes");
  return names;
}

std::vector<std::string> ResultsReader::attr_strings(const std::string& name) const {
  ATTNLAB_CHECK(has_attr(name), ResultsError, "results file {} has no attribute '{}' (attributes: {})", path_, name,
                fmt::join(attr_names(), ", "));
  return h5::read_strings_attr(impl_->root.get(), name, path_);
}

std::string ResultsReader::attr_string(const std::string& name) const {
  auto values = attr_strings(name);
  ATTNLAB_CHECK(values.size() == 1, ResultsError, "results file {}: attribute '{}' holds {} strings, expected one",
                path_, name, values.size());
  return values.front();
}

namespace {

// Reads a scalar numeric attribute into `out` as `mem` (H5T_NATIVE_INT64 or H5T_NATIVE_DOUBLE).
void read_number(hid_t root, const std::string& name, bool integer, hid_t mem, void* out, const std::string& file) {
  Handle attr = check(H5Aopen(root, name.c_str(), H5P_DEFAULT), file, fmt::format("cannot open attribute '{}'", name));
  Handle type = check(H5Aget_type(attr.get()), file, fmt::format("cannot read the type of attribute '{}'", name));
  Handle space = check(H5Aget_space(attr.get()), file, fmt::format("cannot read the shape of attribute '{}'", name));
  H5T_class_t cls = H5Tget_class(type.get());
  bool ok = integer ? cls == H5T_INTEGER : (cls == H5T_INTEGER || cls == H5T_FLOAT);
  ATTNLAB_CHECK(ok && H5Sget_simple_extent_npoints(space.get()) == 1, ResultsError,
                "results file {}: attribute '{}' should be one {}, found {} ({} of them)", file, name,
                integer ? "integer" : "number", h5::type_class_words(cls), H5Sget_simple_extent_npoints(space.get()));
  check(H5Aread(attr.get(), mem, out), file, fmt::format("cannot read attribute '{}'", name));
}

}  // namespace

int64_t ResultsReader::attr_int(const std::string& name) const {
  ATTNLAB_CHECK(has_attr(name), ResultsError, "results file {} has no attribute '{}' (attributes: {})", path_, name,
                fmt::join(attr_names(), ", "));
  int64_t value = 0;
  read_number(impl_->root.get(), name, true, H5T_NATIVE_INT64, &value, path_);
  return value;
}

double ResultsReader::attr_double(const std::string& name) const {
  ATTNLAB_CHECK(has_attr(name), ResultsError, "results file {} has no attribute '{}' (attributes: {})", path_, name,
                fmt::join(attr_names(), ", "));
  double value = 0.0;
  read_number(impl_->root.get(), name, false, H5T_NATIVE_DOUBLE, &value, path_);
  return value;
}

Status ResultsReader::status() const {
  try {
    return parse_status(attr_string("status"));
  } catch (const ResultsError& e) {
    // parse_status's errors do not say which file; attr_string's do.
    const std::string what = e.what();
    if (what.find(path_) != std::string::npos) throw;
    throw ResultsError(fmt::format("results file {}: {}", path_, what));
  }
}

std::string ResultsReader::config() const {
  if (!h5::exists(impl_->root.get(), "/config")) return "";
  auto values = h5::read_string_dataset(impl_->root.get(), "/config", path_);
  ATTNLAB_CHECK(values.size() == 1, ResultsError, "results file {}: /config holds {} strings, expected one", path_,
                values.size());
  return values.front();
}

std::vector<std::string> ResultsReader::metric_groups() const {
  return h5::list_group(impl_->root.get(), "/metrics", path_);
}

std::vector<std::string> ResultsReader::metric_names(const std::string& group) const {
  const std::string g = "/metrics/" + group;
  ATTNLAB_CHECK(h5::exists(impl_->root.get(), g), ResultsError, "results file {} has no metric group '{}' (groups: {})",
                path_, group, fmt::join(metric_groups(), ", "));
  return h5::list_group(impl_->root.get(), g, path_);
}

std::vector<double> ResultsReader::metric(const std::string& group, const std::string& name) const {
  const std::string ds = fmt::format("/metrics/{}/{}", group, name);
  ATTNLAB_CHECK(h5::exists(impl_->root.get(), ds), ResultsError,
                "results file {} has no metric '{}' in group '{}' (metrics there: {})", path_, name, group,
                fmt::join(metric_names(group), ", "));
  return h5::read_double_dataset(impl_->root.get(), ds, path_);
}

std::vector<Sample> ResultsReader::samples() const {
  hid_t root = impl_->root.get();
  if (!h5::exists(root, "/samples")) return {};
  auto source = h5::read_string_dataset(root, "/samples/source", path_);
  auto reference = h5::read_string_dataset(root, "/samples/reference", path_);
  auto hypothesis = h5::read_string_dataset(root, "/samples/hypothesis", path_);
  auto bleu = h5::read_double_dataset(root, "/samples/bleu", path_);
  ATTNLAB_CHECK(reference.size() == source.size() && hypothesis.size() == source.size() && bleu.size() == source.size(),
                ResultsError,
                "results file {}: /samples columns differ in length: source {}, reference {}, hypothesis {}, bleu {}",
                path_, source.size(), reference.size(), hypothesis.size(), bleu.size());
  std::vector<Sample> out(source.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = {source[i], reference[i], hypothesis[i], bleu[i]};
  return out;
}

std::vector<std::string> ResultsReader::attention_samples() const {
  std::vector<std::string> texts;
  for (const auto& link : h5::list_group(impl_->root.get(), "/attention", path_)) {
    Handle g = check(H5Gopen2(impl_->root.get(), ("/attention/" + link).c_str(), H5P_DEFAULT), path_,
                     fmt::format("cannot open group /attention/{}", link));
    bool has_text = H5Aexists(g.get(), "text") > 0;
    texts.push_back(has_text ? h5::read_strings_attr(g.get(), "text", path_).at(0) : link);
  }
  return texts;
}

std::vector<std::string> ResultsReader::attention_modules(const std::string& sample) const {
  const std::string g = "/attention/" + h5::link_name(sample);
  ATTNLAB_CHECK(h5::exists(impl_->root.get(), g), ResultsError,
                "results file {} has no attention for sample '{}' (samples: {})", path_, sample,
                fmt::join(attention_samples(), " | "));
  return h5::list_group(impl_->root.get(), g, path_);
}

Attention ResultsReader::attention(const std::string& sample, const std::string& module) const {
  const std::string ds_path = "/attention/" + h5::link_name(sample) + "/" + h5::link_name(module);
  hid_t root = impl_->root.get();
  ATTNLAB_CHECK(h5::exists(root, ds_path), ResultsError,
                "results file {} has no attention for module '{}' of sample '{}' (modules: {})", path_, module, sample,
                fmt::join(attention_modules(sample), ", "));
  Attention out;
  out.weights = h5::read_float_array(root, ds_path, path_);  // [layers, heads, queries, keys]
  ATTNLAB_CHECK(out.weights.dim() == 4, ResultsError,
                "results file {}: {} should be [layers, heads, queries, keys], found {}-D", path_, ds_path,
                out.weights.dim());
  Handle ds = check(H5Dopen2(root, ds_path.c_str(), H5P_DEFAULT), path_, fmt::format("cannot open {}", ds_path));
  if (H5Aexists(ds.get(), "query_tokens") > 0)
    out.query_tokens = h5::read_strings_attr(ds.get(), "query_tokens", path_);
  if (H5Aexists(ds.get(), "key_tokens") > 0) out.key_tokens = h5::read_strings_attr(ds.get(), "key_tokens", path_);
  if (H5Aexists(ds.get(), "layers") > 0) {
    out.layers = h5::read_ints_attr(ds.get(), "layers", path_);
    ATTNLAB_CHECK(static_cast<int64_t>(out.layers.size()) == out.weights.size(0), ResultsError,
                  "results file {}: {} has {} layers but its attribute 'layers' names {}", path_, ds_path,
                  out.weights.size(0), out.layers.size());
  } else {
    for (int64_t l = 0; l < out.weights.size(0); ++l) out.layers.push_back(l);  // written before layers were stored
  }
  if (H5Aexists(ds.get(), "query_side") > 0) out.query_side = attr_string_at(ds_path, "query_side");
  if (H5Aexists(ds.get(), "key_side") > 0) out.key_side = attr_string_at(ds_path, "key_side");
  return out;
}

bool ResultsReader::has(const std::string& path) const { return h5::exists(impl_->root.get(), absolute(path)); }

std::vector<std::string> ResultsReader::children(const std::string& path) const {
  return h5::list_group(impl_->root.get(), absolute(path), path_);
}

FloatArray ResultsReader::array(const std::string& path) const {
  return h5::read_float_array(impl_->root.get(), absolute(path), path_);
}

bool ResultsReader::holds_strings(const std::string& path) const {
  const auto at = absolute(path);
  ATTNLAB_CHECK(h5::exists(impl_->root.get(), at), ResultsError, "results file {} has no dataset {}", path_, at);
  Handle ds = check(H5Dopen2(impl_->root.get(), at.c_str(), H5P_DEFAULT), path_, fmt::format("cannot open dataset {}", at));
  Handle type = check(H5Dget_type(ds.get()), path_, fmt::format("cannot read the type of {}", at));
  return H5Tget_class(type.get()) == H5T_STRING;
}

std::vector<std::string> ResultsReader::strings(const std::string& path) const {
  return h5::read_string_dataset(impl_->root.get(), absolute(path), path_);
}

std::string ResultsReader::attr_string_at(const std::string& path, const std::string& name) const {
  const auto at = absolute(path);
  Handle obj = check(H5Oopen(impl_->root.get(), at.c_str(), H5P_DEFAULT), path_, fmt::format("cannot open {}", at));
  auto values = h5::read_strings_attr(obj.get(), name, path_);
  ATTNLAB_CHECK(values.size() == 1, ResultsError,
                "results file {}: attribute '{}' of {} holds {} strings, expected one", path_, name, at, values.size());
  return values.front();
}

double ResultsReader::attr_double_at(const std::string& path, const std::string& name) const {
  const auto at = absolute(path);
  Handle obj = check(H5Oopen(impl_->root.get(), at.c_str(), H5P_DEFAULT), path_, fmt::format("cannot open {}", at));
  ATTNLAB_CHECK(H5Aexists(obj.get(), name.c_str()) > 0, ResultsError, "results file {}: {} has no attribute '{}'",
                path_, at, name);
  double value = 0.0;
  read_number(obj.get(), name, false, H5T_NATIVE_DOUBLE, &value, path_);
  return value;
}

std::vector<std::string> ResultsReader::attr_strings_at(const std::string& path, const std::string& name) const {
  const auto at = absolute(path);
  Handle obj = check(H5Oopen(impl_->root.get(), at.c_str(), H5P_DEFAULT), path_, fmt::format("cannot open {}", at));
  return h5::read_strings_attr(obj.get(), name, path_);
}

std::vector<double> ResultsReader::attr_doubles_at(const std::string& path, const std::string& name) const {
  const auto at = absolute(path);
  Handle obj = check(H5Oopen(impl_->root.get(), at.c_str(), H5P_DEFAULT), path_, fmt::format("cannot open {}", at));
  return h5::read_doubles_attr(obj.get(), name, path_);
}

bool ResultsReader::has_attr_at(const std::string& path, const std::string& name) const {
  const auto at = absolute(path);
  if (!h5::exists(impl_->root.get(), at)) return false;
  Handle obj = check(H5Oopen(impl_->root.get(), at.c_str(), H5P_DEFAULT), path_, fmt::format("cannot open {}", at));
  const htri_t found = H5Aexists(obj.get(), name.c_str());
  check(static_cast<herr_t>(found), path_, fmt::format("cannot look up attribute '{}' of {}", name, at));
  return found > 0;
}

}  // namespace attnlab::results
