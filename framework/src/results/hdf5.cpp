#include "results/hdf5.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>

namespace attnlab::results::h5 {

void fail(const std::string& file, const std::string& what) {
  throw ResultsError(fmt::format("{} in results file {}: {}", what, file, error_stack()));
}

void Handle::reset() noexcept {
  if (id_ < 0) return;
  switch (H5Iget_type(id_)) {
    case H5I_FILE: H5Fclose(id_); break;
    case H5I_GROUP: H5Gclose(id_); break;
    case H5I_DATASET: H5Dclose(id_); break;
    case H5I_DATASPACE: H5Sclose(id_); break;
    case H5I_DATATYPE: H5Tclose(id_); break;
    case H5I_ATTR: H5Aclose(id_); break;
    case H5I_GENPROP_LST: H5Pclose(id_); break;
    default: break;
  }
  id_ = H5I_INVALID_HID;
}

Handle check(hid_t id, const std::string& file, const std::string& what) {
  if (id < 0) fail(file, what);
  return Handle(id);
}

void check(herr_t status, const std::string& file, const std::string& what) {
  if (status < 0) fail(file, what);
}

Handle vlen_string_type(const std::string& file) {
  Handle t = check(H5Tcopy(H5T_C_S1), file, "cannot create the string type");
  check(H5Tset_size(t.get(), H5T_VARIABLE), file, "cannot make the string type variable-length");
  check(H5Tset_cset(t.get(), H5T_CSET_UTF8), file, "cannot make the string type UTF-8");
  return t;
}

Handle dataspace(const std::string& file, const std::vector<hsize_t>& dims, bool scalar) {
  if (scalar) return check(H5Screate(H5S_SCALAR), file, "cannot create a scalar dataspace");
  return check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), file,
               fmt::format("cannot create a {}-D dataspace", dims.size()));
}

Handle link_props(const std::string& file) {
  Handle p = check(H5Pcreate(H5P_LINK_CREATE), file, "cannot create link properties");
  check(H5Pset_create_intermediate_group(p.get(), 1), file, "cannot enable intermediate groups");
  check(H5Pset_char_encoding(p.get(), H5T_CSET_UTF8), file, "cannot make link names UTF-8");
  return p;
}

std::string type_class_words(H5T_class_t cls) {
  switch (cls) {
    case H5T_INTEGER: return "integers";
    case H5T_FLOAT: return "floating-point numbers";
    case H5T_STRING: return "strings";
    case H5T_COMPOUND: return "compound records";
    case H5T_ENUM: return "enumerated values";
    case H5T_ARRAY: return "fixed-size arrays";
    case H5T_VLEN: return "variable-length sequences";
    case H5T_REFERENCE: return "object references";
    case H5T_OPAQUE: return "opaque bytes";
    case H5T_BITFIELD: return "bit fields";
    case H5T_TIME: return "times";
    default: return "data of no known type";
  }
}

std::string link_name(const std::string& text) {
  if (text.empty()) return "_";
  if (text == ".") return "_.";
  std::string out = text;
  std::replace(out.begin(), out.end(), '/', '_');
  return out;
}

bool exists(hid_t loc, const std::string& path) {
  // H5Lexists fails (rather than answering no) when an intermediate link is missing: walk down.
  std::string prefix = path.rfind('/', 0) == 0 ? "" : ".";
  size_t start = path.rfind('/', 0) == 0 ? 1 : 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end > start) {
      prefix += "/" + path.substr(start, end - start);
      htri_t found = H5Lexists(loc, prefix.c_str(), H5P_DEFAULT);
      if (found <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return false;
      }
    }
    start = end + 1;
  }
  return true;
}

void remove_if_present(hid_t loc, const std::string& path, const std::string& file) {
  if (exists(loc, path)) check(H5Ldelete(loc, path.c_str(), H5P_DEFAULT), file, fmt::format("cannot replace {}", path));
}

namespace {

Handle new_attr(hid_t obj, const std::string& name, hid_t type, hid_t space, const std::string& file) {
  htri_t present = H5Aexists(obj, name.c_str());
  check(static_cast<herr_t>(present), file, fmt::format("cannot look up attribute '{}'", name));
  if (present > 0) check(H5Adelete(obj, name.c_str()), file, fmt::format("cannot replace attribute '{}'", name));
  return check(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), file,
               fmt::format("cannot create attribute '{}'", name));
}

std::vector<const char*> c_strings(const std::vector<std::string>& values) {
  std::vector<const char*> ptrs;
  ptrs.reserve(values.size() + 1);
  for (const auto& v : values) ptrs.push_back(v.c_str());
  ptrs.push_back("");  // HDF5 refuses a null buffer even for zero elements
  return ptrs;
}

// Reads n strings of string type `type` through `read(memtype, buffer)`.
std::vector<std::string> read_strings(hid_t type, hid_t space, size_t n, const std::string& file,
                                      const std::string& what, const std::function<herr_t(hid_t, void*)>& read) {
  if (H5Tget_class(type) != H5T_STRING) {
    throw ResultsError(fmt::format("{} in results file {} is not a string: it holds {}", what, file,
                                   type_class_words(H5Tget_class(type))));
  }
  std::vector<std::string> out;
  out.reserve(n);
  if (H5Tis_variable_str(type) > 0) {
    std::vector<char*> ptrs(n + 1, nullptr);
    check(read(type, ptrs.data()), file, fmt::format("cannot read {}", what));
    for (size_t i = 0; i < n; ++i) out.emplace_back(ptrs[i] ? ptrs[i] : "");
    H5Dvlen_reclaim(type, space, H5P_DEFAULT, ptrs.data());
    return out;
  }
  size_t size = H5Tget_size(type);
  std::vector<char> buf(n * size + 1, '\0');
  check(read(type, buf.data()), file, fmt::format("cannot read {}", what));
  for (size_t i = 0; i < n; ++i) {
    std::string s(buf.data() + i * size, size);
    s.erase(std::find(s.begin(), s.end(), '\0'), s.end());
    if (H5Tget_strpad(type) == H5T_STR_SPACEPAD) s.erase(s.find_last_not_of(' ') + 1);
    out.push_back(std::move(s));
  }
  return out;
}

/// The number of elements to read: the shape's, when the bytes stored for the object hold that
/// many elements of `type`; a damaged shape claiming more (up to 2^64, whose buffer size wrapped to
/// 0 and crashed inside H5Dread, or a count whose buffer cannot be allocated) is a ResultsError.
/// `noun` names the elements ("strings", "numbers"). The writer stores no compressed datasets.
size_t stored_elements(hid_t type, hid_t space, hsize_t stored_bytes, const std::string& file, const std::string& what,
                       const char* noun) {
  const hssize_t points = H5Sget_simple_extent_npoints(space);
  ATTNLAB_CHECK(points >= 0, ResultsError, "cannot read the shape of {} in results file {} (a damaged file?)", what,
                file);
  const auto n = static_cast<size_t>(points);
  const size_t size = std::max<size_t>(1, H5Tget_size(type));
  ATTNLAB_CHECK(n <= stored_bytes / size, ResultsError,
                "{} in results file {} claims {} {} of {} bytes but stores {} bytes (a damaged file?)", what, file, n,
                noun, size, stored_bytes);
  return n;
}

size_t stored_strings(hid_t type, hid_t space, hsize_t stored_bytes, const std::string& file, const std::string& what) {
  return stored_elements(type, space, stored_bytes, file, what, "strings");
}

}  // namespace

void write_string_attr(hid_t obj, const std::string& name, const std::string& value, const std::string& file) {
  Handle type = vlen_string_type(file);
  Handle space = dataspace(file, {}, true);
  Handle attr = new_attr(obj, name, type.get(), space.get(), file);
  const char* ptr = value.c_str();
  check(H5Awrite(attr.get(), type.get(), &ptr), file, fmt::format("cannot write attribute '{}'", name));
}

void write_strings_attr(hid_t obj, const std::string& name, const std::vector<std::string>& values,
                        const std::string& file) {
  Handle type = vlen_string_type(file);
  Handle space = dataspace(file, {values.size()});
  Handle attr = new_attr(obj, name, type.get(), space.get(), file);
  auto ptrs = c_strings(values);
  check(H5Awrite(attr.get(), type.get(), ptrs.data()), file, fmt::format("cannot write attribute '{}'", name));
}

void write_int_attr(hid_t obj, const std::string& name, int64_t value, const std::string& file) {
  Handle space = dataspace(file, {}, true);
  Handle attr = new_attr(obj, name, H5T_STD_I64LE, space.get(), file);
  check(H5Awrite(attr.get(), H5T_NATIVE_INT64, &value), file, fmt::format("cannot write attribute '{}'", name));
}

void write_ints_attr(hid_t obj, const std::string& name, const std::vector<int64_t>& values, const std::string& file) {
  Handle space = dataspace(file, {values.size()});
  Handle attr = new_attr(obj, name, H5T_STD_I64LE, space.get(), file);
  const int64_t none = 0;  // HDF5 refuses a null buffer even for zero elements
  check(H5Awrite(attr.get(), H5T_NATIVE_INT64, values.empty() ? &none : values.data()), file,
        fmt::format("cannot write attribute '{}'", name));
}

void write_doubles_attr(hid_t obj, const std::string& name, const std::vector<double>& values,
                        const std::string& file) {
  Handle space = dataspace(file, {values.size()});
  Handle attr = new_attr(obj, name, H5T_IEEE_F64LE, space.get(), file);
  const double none = 0;  // HDF5 refuses a null buffer even for zero elements
  check(H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, values.empty() ? &none : values.data()), file,
        fmt::format("cannot write attribute '{}'", name));
}

void write_double_attr(hid_t obj, const std::string& name, double value, const std::string& file) {
  Handle space = dataspace(file, {}, true);
  Handle attr = new_attr(obj, name, H5T_IEEE_F64LE, space.get(), file);
  check(H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, &value), file, fmt::format("cannot write attribute '{}'", name));
}

std::vector<std::string> read_strings_attr(hid_t obj, const std::string& name, const std::string& file) {
  std::string what = fmt::format("attribute '{}'", name);
  Handle attr = check(H5Aopen(obj, name.c_str(), H5P_DEFAULT), file, fmt::format("cannot open {}", what));
  Handle type = check(H5Aget_type(attr.get()), file, fmt::format("cannot read the type of {}", what));
  Handle space = check(H5Aget_space(attr.get()), file, fmt::format("cannot read the shape of {}", what));
  return read_strings(type.get(), space.get(),
                      stored_strings(type.get(), space.get(), H5Aget_storage_size(attr.get()), file, what), file, what,
                      [&](hid_t mem, void* buf) { return H5Aread(attr.get(), mem, buf); });
}

namespace {

/// A numeric attribute (scalar or 1-D) as a list of `T`, read through HDF5's conversion to
/// `memory_type`; ints_only refuses floating point.
template <class T>
std::vector<T> read_numbers_attr(hid_t obj, const std::string& name, hid_t memory_type, bool ints_only,
                                 const std::string& file) {
  std::string what = fmt::format("attribute '{}'", name);
  Handle attr = check(H5Aopen(obj, name.c_str(), H5P_DEFAULT), file, fmt::format("cannot open {}", what));
  Handle type = check(H5Aget_type(attr.get()), file, fmt::format("cannot read the type of {}", what));
  Handle space = check(H5Aget_space(attr.get()), file, fmt::format("cannot read the shape of {}", what));
  const H5T_class_t cls = H5Tget_class(type.get());
  ATTNLAB_CHECK(cls == H5T_INTEGER || (!ints_only && cls == H5T_FLOAT), ResultsError,
                "{} in results file {} is not {}: it holds {}", what, file, ints_only ? "an integer" : "a number",
                type_class_words(cls));
  const size_t n = stored_elements(type.get(), space.get(), H5Aget_storage_size(attr.get()), file, what,
                                   ints_only ? "integers" : "numbers");
  std::vector<T> out(n + 1);  // + 1: HDF5 refuses a null buffer even for zero elements
  check(H5Aread(attr.get(), memory_type, out.data()), file, fmt::format("cannot read {}", what));
  out.resize(n);
  return out;
}

}  // namespace

std::vector<int64_t> read_ints_attr(hid_t obj, const std::string& name, const std::string& file) {
  return read_numbers_attr<int64_t>(obj, name, H5T_NATIVE_INT64, /*ints_only=*/true, file);
}

std::vector<double> read_doubles_attr(hid_t obj, const std::string& name, const std::string& file) {
  return read_numbers_attr<double>(obj, name, H5T_NATIVE_DOUBLE, /*ints_only=*/false, file);
}

void write_string_dataset(hid_t loc, const std::string& path, const std::vector<std::string>& values, bool scalar,
                          const std::string& file) {
  remove_if_present(loc, path, file);
  Handle type = vlen_string_type(file);
  Handle space = dataspace(file, {values.size()}, scalar);
  Handle lcpl = link_props(file);
  Handle ds = check(H5Dcreate2(loc, path.c_str(), type.get(), space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
                    file, fmt::format("cannot create dataset {}", path));
  auto ptrs = c_strings(values);
  check(H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), file,
        fmt::format("cannot write dataset {}", path));
}

void write_double_dataset(hid_t loc, const std::string& path, const std::vector<double>& values,
                          const std::string& file) {
  remove_if_present(loc, path, file);
  Handle space = dataspace(file, {values.size()});
  Handle lcpl = link_props(file);
  Handle ds = check(H5Dcreate2(loc, path.c_str(), H5T_IEEE_F64LE, space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
                    file, fmt::format("cannot create dataset {}", path));
  double dummy = 0.0;
  check(H5Dwrite(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.empty() ? &dummy : values.data()),
        file, fmt::format("cannot write dataset {}", path));
}

namespace {

/// A dataset of `file_type` with the array's shape, written from `values` in `memory_type`.
template <class T>
void write_typed(hid_t loc, const std::string& path, const NdArray<T>& values, hid_t file_type, hid_t memory_type,
                 const std::string& file) {
  int64_t count = 1;
  for (int64_t d : values.shape) {
    ATTNLAB_CHECK(d >= 0, ResultsError, "cannot write {} in results file {}: a negative size {} in its shape", path,
                  file, d);
    count *= d;
  }
  ATTNLAB_CHECK(count == values.numel(), ResultsError,
                "cannot write {} in results file {}: its shape holds {} values, found {}", path, file, count,
                values.numel());
  std::vector<hsize_t> dims(values.shape.begin(), values.shape.end());
  remove_if_present(loc, path, file);
  Handle space = dataspace(file, dims, values.shape.empty());
  Handle lcpl = link_props(file);
  Handle ds = check(H5Dcreate2(loc, path.c_str(), file_type, space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT), file,
                    fmt::format("cannot create dataset {}", path));
  T dummy{};
  check(H5Dwrite(ds.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.empty() ? &dummy : values.values.data()),
        file, fmt::format("cannot write dataset {}", path));
}

}  // namespace

void write_array(hid_t loc, const std::string& path, const FloatArray& values, const std::string& file) {
  write_typed(loc, path, values, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, file);
}

void write_array(hid_t loc, const std::string& path, const IntArray& values, const std::string& file) {
  write_typed(loc, path, values, H5T_STD_I64LE, H5T_NATIVE_INT64, file);
}

namespace {

Handle open_dataset(hid_t loc, const std::string& path, const std::string& file) {
  if (!exists(loc, path)) throw ResultsError(fmt::format("results file {} has no dataset {}", file, path));
  return check(H5Dopen2(loc, path.c_str(), H5P_DEFAULT), file, fmt::format("cannot open dataset {}", path));
}

}  // namespace

std::vector<std::string> read_string_dataset(hid_t loc, const std::string& path, const std::string& file) {
  Handle ds = open_dataset(loc, path, file);
  Handle type = check(H5Dget_type(ds.get()), file, fmt::format("cannot read the type of {}", path));
  Handle space = check(H5Dget_space(ds.get()), file, fmt::format("cannot read the shape of {}", path));
  const std::string what = fmt::format("dataset {}", path);
  return read_strings(type.get(), space.get(),
                      stored_strings(type.get(), space.get(), H5Dget_storage_size(ds.get()), file, what), file, what,
                      [&](hid_t mem, void* buf) { return H5Dread(ds.get(), mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf); });
}

namespace {

void require_numeric(hid_t ds, const std::string& path, const std::string& file) {
  Handle type = check(H5Dget_type(ds), file, fmt::format("cannot read the type of {}", path));
  H5T_class_t cls = H5Tget_class(type.get());
  ATTNLAB_CHECK(cls == H5T_FLOAT || cls == H5T_INTEGER, ResultsError,
                "dataset {} in results file {}: expected numbers, found {}", path, file, type_class_words(cls));
}

/// How many numbers dataset `ds` holds, checked against the bytes it stores (as stored_strings).
size_t stored_numbers(hid_t ds, hid_t space, const std::string& path, const std::string& file) {
  Handle type = check(H5Dget_type(ds), file, fmt::format("cannot read the type of {}", path));
  return stored_elements(type.get(), space, H5Dget_storage_size(ds), file, fmt::format("dataset {}", path), "numbers");
}

}  // namespace

std::vector<double> read_double_dataset(hid_t loc, const std::string& path, const std::string& file) {
  Handle ds = open_dataset(loc, path, file);
  require_numeric(ds.get(), path, file);
  Handle space = check(H5Dget_space(ds.get()), file, fmt::format("cannot read the shape of {}", path));
  std::vector<double> out(stored_numbers(ds.get(), space.get(), path, file) + 1);
  check(H5Dread(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), file,
        fmt::format("cannot read dataset {}", path));
  out.pop_back();
  return out;
}

FloatArray read_float_array(hid_t loc, const std::string& path, const std::string& file) {
  Handle ds = open_dataset(loc, path, file);
  require_numeric(ds.get(), path, file);
  Handle space = check(H5Dget_space(ds.get()), file, fmt::format("cannot read the shape of {}", path));
  int rank = H5Sget_simple_extent_ndims(space.get());
  check(static_cast<herr_t>(rank), file, fmt::format("cannot read the rank of {}", path));
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  check(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), file,
        fmt::format("cannot read the shape of {}", path));
  FloatArray out;
  out.shape.assign(dims.begin(), dims.end());  // the dataset's shape
  // Checked against the bytes stored before allocating what the shape claims.
  out.values.resize(stored_numbers(ds.get(), space.get(), path, file));
  float dummy = 0.0f;
  check(H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.empty() ? &dummy : out.values.data()),
        file, fmt::format("cannot read dataset {}", path));
  return out;
}

std::vector<int64_t> dataset_dims(hid_t loc, const std::string& path, const std::string& file) {
  Handle ds = open_dataset(loc, path, file);
  Handle space = check(H5Dget_space(ds.get()), file, fmt::format("cannot read the shape of {}", path));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  check(static_cast<herr_t>(rank), file, fmt::format("cannot read the rank of {}", path));
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  check(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), file,
        fmt::format("cannot read the shape of {}", path));
  return {dims.begin(), dims.end()};
}

FloatArray read_float_block(hid_t loc, const std::string& path, const std::vector<int64_t>& first,
                            const std::vector<int64_t>& size, const std::string& file) {
  Handle ds = open_dataset(loc, path, file);
  require_numeric(ds.get(), path, file);
  Handle space = check(H5Dget_space(ds.get()), file, fmt::format("cannot read the shape of {}", path));
  stored_numbers(ds.get(), space.get(), path, file);  // the shape checked against the bytes stored
  const auto dims = dataset_dims(loc, path, file);
  ATTNLAB_CHECK(dims.size() == first.size() && dims.size() == size.size(), ResultsError,
                "dataset {} in results file {}: expected {} dimensions, found {}", path, file, first.size(),
                dims.size());
  std::vector<hsize_t> start(dims.size()), count(dims.size());
  FloatArray out;
  size_t n = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    start[i] = static_cast<hsize_t>(std::clamp<int64_t>(first[i], 0, dims[i]));
    count[i] = static_cast<hsize_t>(std::clamp<int64_t>(size[i], 0, dims[i] - static_cast<int64_t>(start[i])));
    out.shape.push_back(static_cast<int64_t>(count[i]));
    n *= count[i];
  }
  out.values.resize(n);
  if (n == 0) return out;
  check(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), file,
        fmt::format("cannot select a corner of {}", path));
  Handle memory = check(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), file,
                        "cannot create a memory dataspace");
  check(H5Dread(ds.get(), H5T_NATIVE_FLOAT, memory.get(), space.get(), H5P_DEFAULT, out.values.data()), file,
        fmt::format("cannot read dataset {}", path));
  return out;
}

hid_t open_read_only(const std::string& path, bool lock) {
  Handle fapl = check(H5Pcreate(H5P_FILE_ACCESS), path, "cannot create file access properties");
  check(H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG), path, "cannot set the close degree");
#if H5_VERSION_GE(1, 10, 7)
  // Without a lock by default: another process writing a running experiment holds one, and
  // reading its last flush is what `runner plot` wants.
  check(H5Pset_file_locking(fapl.get(), lock, true), path, "cannot configure file locking");
#endif
  return H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
}

namespace {

herr_t add_name(hid_t /*group*/, const char* name, const H5L_info_t* /*info*/, void* data) {
  static_cast<std::vector<std::string>*>(data)->emplace_back(name);
  return 0;
}

}  // namespace

std::vector<std::string> list_group(hid_t loc, const std::string& path, const std::string& file) {
  std::vector<std::string> names;
  if (!exists(loc, path)) return names;
  check(H5Literate_by_name(loc, path.c_str(), H5_INDEX_NAME, H5_ITER_INC, nullptr, add_name, &names, H5P_DEFAULT), file,
        fmt::format("cannot list group {}", path));
  return names;
}

}  // namespace attnlab::results::h5
