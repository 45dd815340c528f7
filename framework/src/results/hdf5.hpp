#pragma once
// Thin RAII + helpers over the HDF5 C API shared by the results writer and reader (internal).
// Every failing call throws ResultsError naming the file and what was being done; HDF5's own
// error printing is silenced and its error stack is folded into the message.
#include <attnlab/error.hpp>
#include <attnlab/results/array.hpp>
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attnlab::results::h5 {

/// Silence HDF5's automatic error printing (idempotent, per thread in thread-safe builds).
void silence_errors();

/// The current HDF5 error stack as one line in words, then cleared: "the file is damaged: ..." for a
/// failed checksum or signature, "another process holds the file locked" for a lock, else "HDF5:
/// <what it was doing>: <why>"; never HDF5's internal function names.
std::string error_stack();

/// Throws ResultsError("<what> in results file <file>: <hdf5 error stack>").
[[noreturn]] void fail(const std::string& file, const std::string& what);

/// Owns one hid_t and closes it with the matching H5*close (never throws).
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(o.id_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      o.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset() noexcept;

 private:
  hid_t id_ = H5I_INVALID_HID;
};

/// Wrap an id returned by an HDF5 call; a negative id throws via fail(file, what).
Handle check(hid_t id, const std::string& file, const std::string& what);
/// Throw via fail(file, what) when an HDF5 status is negative.
void check(herr_t status, const std::string& file, const std::string& what);

/// A variable-length UTF-8 string type (H5T_C_S1, H5T_VARIABLE, H5T_CSET_UTF8).
Handle vlen_string_type(const std::string& file);
/// A simple 1-D dataspace of n elements, or a scalar one when `scalar`.
Handle dataspace(const std::string& file, const std::vector<hsize_t>& dims, bool scalar = false);
/// Link creation properties: intermediate groups and UTF-8 link names.
Handle link_props(const std::string& file);

/// What an HDF5 type class holds, in words for messages: "strings", "integers", "floating-point
/// numbers", "compound records", ... (never the class's number).
std::string type_class_words(H5T_class_t cls);

/// One link name from free text: '/' becomes '_', "" becomes "_" and "." becomes "_." (HDF5
/// reads '/' as a separator and "." as the current group). The original text is stored apart.
std::string link_name(const std::string& text);

/// Whether a link `path` (absolute, may be nested) exists below `loc`, checking each level.
bool exists(hid_t loc, const std::string& path);
/// Delete the link `path` if present (used for replace semantics).
void remove_if_present(hid_t loc, const std::string& path, const std::string& file);

// Attributes on an object (replace if present).
void write_string_attr(hid_t obj, const std::string& name, const std::string& value, const std::string& file);
void write_strings_attr(hid_t obj, const std::string& name, const std::vector<std::string>& values,
                        const std::string& file);
void write_int_attr(hid_t obj, const std::string& name, int64_t value, const std::string& file);
void write_ints_attr(hid_t obj, const std::string& name, const std::vector<int64_t>& values, const std::string& file);
void write_double_attr(hid_t obj, const std::string& name, double value, const std::string& file);
void write_doubles_attr(hid_t obj, const std::string& name, const std::vector<double>& values,
                        const std::string& file);

/// Read a string attribute (scalar or 1-D, variable or fixed length) as a list of strings.
std::vector<std::string> read_strings_attr(hid_t obj, const std::string& name, const std::string& file);
/// Read an integer attribute (scalar or 1-D) as a list.
std::vector<int64_t> read_ints_attr(hid_t obj, const std::string& name, const std::string& file);
/// Read a numeric attribute (scalar or 1-D, integer or floating point) as a list of doubles.
std::vector<double> read_doubles_attr(hid_t obj, const std::string& name, const std::string& file);

// Datasets.
void write_string_dataset(hid_t loc, const std::string& path, const std::vector<std::string>& values, bool scalar,
                          const std::string& file);
void write_double_dataset(hid_t loc, const std::string& path, const std::vector<double>& values,
                          const std::string& file);
/// A dataset with the array's shape: float32, or int64.
void write_array(hid_t loc, const std::string& path, const FloatArray& values, const std::string& file);
void write_array(hid_t loc, const std::string& path, const IntArray& values, const std::string& file);

std::vector<std::string> read_string_dataset(hid_t loc, const std::string& path, const std::string& file);
std::vector<double> read_double_dataset(hid_t loc, const std::string& path, const std::string& file);
/// Any numeric dataset read as float32 values with the dataset's shape.
FloatArray read_float_array(hid_t loc, const std::string& path, const std::string& file);
/// The dims of a dataset.
std::vector<int64_t> dataset_dims(hid_t loc, const std::string& path, const std::string& file);
/// The block [start[i], start[i] + count[i]) of every dimension of a numeric dataset (clipped to
/// its dims), as float32, reading only those numbers (a hyperslab): `runner report` and `compare`
/// read a large attention map a crop or a few rows at a time, never whole.
FloatArray read_float_block(hid_t loc, const std::string& path, const std::vector<int64_t>& start,
                            const std::vector<int64_t>& count, const std::string& file);

/// H5Fopen read-only as ResultsReader opens files (strong close degree; HDF5's file lock only when
/// `lock`, where the library can switch it off): -1, error stack kept, when HDF5 refuses.
hid_t open_read_only(const std::string& path, bool lock);

/// Names of the links directly inside group `path`, sorted by name; empty if it is absent.
std::vector<std::string> list_group(hid_t loc, const std::string& path, const std::string& file);

}  // namespace attnlab::results::h5
