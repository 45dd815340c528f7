#include "results/layout.hpp"

#include <fmt/format.h>
#include <attnlab/error.hpp>

namespace attnlab::results {

using h5::check;
using h5::Handle;

namespace {
constexpr hsize_t kMetricChunk = 256;  // rows per chunk of an extendible metric series
}  // namespace

void set_if_absent(hid_t obj, const char* name, const std::string& value, const std::string& file) {
  if (H5Aexists(obj, name) <= 0) h5::write_string_attr(obj, name, value, file);
}

void describe_nexus(hid_t root, const std::string& parent, const std::string& group, const std::string& signal,
                    const std::string& file) {
  Handle r = check(H5Gopen2(root, "/", H5P_DEFAULT), file, "cannot open the root group");
  set_if_absent(r.get(), "default", parent.substr(1), file);
  Handle p = check(H5Gopen2(root, parent.c_str(), H5P_DEFAULT), file, fmt::format("cannot open group {}", parent));
  set_if_absent(p.get(), "NX_class", "NXentry", file);
  Handle g = check(H5Gopen2(root, (parent + "/" + group).c_str(), H5P_DEFAULT), file,
                   fmt::format("cannot open group {}/{}", parent, group));
  if (group == "train") {  // the training curves, whichever series came first (step/lr does)
    h5::write_string_attr(p.get(), "default", group, file);
  } else {
    set_if_absent(p.get(), "default", group, file);
  }
  set_if_absent(g.get(), "NX_class", "NXdata", file);
  if (signal == "loss") h5::write_string_attr(g.get(), "signal", signal, file);
  set_if_absent(g.get(), "signal", signal, file);
}

void append_rows(hid_t root, const std::string& key, const std::vector<double>& values, const std::string& file) {
  const auto slash = key.find('/');
  const std::string group = key.substr(0, slash), name = key.substr(slash + 1);
  const std::string ds_path = "/metrics/" + key;
  Handle ds;
  if (h5::exists(root, ds_path)) {
    ds = check(H5Dopen2(root, ds_path.c_str(), H5P_DEFAULT), file, fmt::format("cannot open dataset {}", ds_path));
  } else {
    hsize_t zero = 0, unlimited = H5S_UNLIMITED;
    Handle space = check(H5Screate_simple(1, &zero, &unlimited), file, "cannot create an extendible dataspace");
    Handle dcpl = check(H5Pcreate(H5P_DATASET_CREATE), file, "cannot create dataset properties");
    check(H5Pset_chunk(dcpl.get(), 1, &kMetricChunk), file, fmt::format("cannot set the chunking of {}", ds_path));
    Handle lcpl = h5::link_props(file);
    ds = check(H5Dcreate2(root, ds_path.c_str(), H5T_IEEE_F64LE, space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT),
               file, fmt::format("cannot create dataset {}", ds_path));
    h5::write_string_attr(ds.get(), "long_name", fmt::format("{} {}", group, name), file);
    describe_nexus(root, "/metrics", group, name, file);
    Handle g = check(H5Gopen2(root, ("/metrics/" + group).c_str(), H5P_DEFAULT), file,
                     fmt::format("cannot open group /metrics/{}", group));
    set_if_absent(g.get(), "axes", ".", file);  // rows: epochs (or steps), no axis dataset of their own
  }
  Handle space = check(H5Dget_space(ds.get()), file, fmt::format("cannot read the shape of {}", ds_path));
  ATTNLAB_CHECK(H5Sget_simple_extent_ndims(space.get()) == 1, ResultsError,
                "results file {}: {} should be a 1-D metric series, found rank {}", file, ds_path,
                H5Sget_simple_extent_ndims(space.get()));
  hsize_t rows = 0;
  check(H5Sget_simple_extent_dims(space.get(), &rows, nullptr), file,
        fmt::format("cannot read the shape of {}", ds_path));
  const hsize_t count = values.size();
  if (count == 0) return;
  hsize_t grown = rows + count;
  check(H5Dset_extent(ds.get(), &grown), file, fmt::format("cannot extend {} to {} rows", ds_path, grown));
  Handle file_space = check(H5Dget_space(ds.get()), file, fmt::format("cannot read the shape of {}", ds_path));
  check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &rows, nullptr, &count, nullptr), file,
        fmt::format("cannot select rows {} to {} of {}", rows, grown - 1, ds_path));
  Handle mem_space = check(H5Screate_simple(1, &count, nullptr), file, "cannot create a dataspace for metric rows");
  check(H5Dwrite(ds.get(), H5T_NATIVE_DOUBLE, mem_space.get(), file_space.get(), H5P_DEFAULT, values.data()), file,
        fmt::format("cannot append rows {} to {} of {}", rows, grown - 1, ds_path));
}

}  // namespace attnlab::results
