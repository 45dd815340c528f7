#pragma once
// safetensors, Hugging Face's weight files, read in place: an 8-byte little-endian header length, a
// JSON header naming each tensor's dtype, shape and byte range ("data_offsets", relative to the end
// of the header) plus an optional "__metadata__" map of strings, then the bytes. The file is
// memory-mapped read-only and a tensor is a view of the mapping, so loading a model costs its weights
// once (copied into the model's parameters); the file's pages are the kernel's page cache.
//
//   safetensors::Weights w("models/gpt2");                 // model.safetensors, or the shards its
//                                                          // model.safetensors.index.json names
//   param.copy_(w.view("h.0.attn.c_attn.weight").t());     // dtype converts in copy_
//
// Every fault is one DataError naming the file and what is wrong: missing, not a regular file,
// shorter than 8 bytes, a header length past the end of the file or over the 100 MB the reference
// implementation allows, a header that is not JSON (the parser's message with the line and column
// where it stopped) or not an object, an entry without dtype/shape/
// data_offsets or with the wrong JSON types, an unknown dtype, a negative dimension, offsets that
// are reversed, run past the data section or overlap another tensor, a byte range whose size is not
// the shape's element count times the dtype's size (counted without overflow), bytes in the data
// section no tensor covers. The header is checked whole when the File opens, before any view.
// Little-endian hosts only (the file's byte order; safetensors.cpp asserts it at compile time).
#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace attnlab::safetensors {

struct TensorInfo {
  std::string name;
  std::string dtype_name;  // as the header writes it: "F32", "BF16", ...
  torch::ScalarType dtype = torch::kFloat;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data section (after the header)
  uint64_t end = 0;
};

/// One memory-mapped safetensors file; move-only, unmapped on destruction.
/// Dtypes: F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL (others: DataError naming the dtype).
class File {
 public:
  explicit File(const std::string& path);
  ~File();
  File(File&&) noexcept;
  File& operator=(File&&) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::string& path() const;
  /// Every tensor, in the order of their byte ranges.
  const std::vector<TensorInfo>& tensors() const;
  /// The tensor named `name`, or null.
  const TensorInfo* find(const std::string& name) const;
  /// A CPU tensor viewing the mapping: no copy, and it holds the mapping, so it stays valid after
  /// this File goes. Never write to it: the mapping is read-only (a write is a segmentation fault);
  /// clone() what is to be changed. A tensor whose bytes are not aligned to its element size (the
  /// format does not align them) is returned as a copy instead. DataError naming the file when there
  /// is no such tensor.
  torch::Tensor view(const std::string& name) const;
  /// Drops the pages of `name`'s bytes from this process's memory (madvise MADV_DONTNEED; they stay
  /// in the kernel's page cache), once they are copied: loading a model then holds the weights once,
  /// in the parameters, not a second time in mapped pages. A view stays valid (a read maps the pages
  /// again). No-op for a tensor without bytes or absent. `rows` > 0: only rows first_row ..
  /// first_row + rows - 1 of its first dimension (a large tensor copied a block at a time).
  void release(const std::string& name, int64_t first_row = 0, int64_t rows = -1) const;
  /// The header's "__metadata__" (empty when absent).
  const std::map<std::string, std::string>& metadata() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A model's weights: a .safetensors file, or a folder with model.safetensors (taken when present) or
/// the shards that its model.safetensors.index.json's "weight_map" names (each shard mapped once). DataError naming the
/// folder when it has neither, naming the index when it does not parse or names a missing shard or a
/// tensor its shard lacks, and naming both files when two shards hold the same tensor.
class Weights {
 public:
  explicit Weights(const std::string& path);
  /// Every tensor name, sorted.
  std::vector<std::string> names() const;
  const TensorInfo* find(const std::string& name) const;
  /// The file holding `name` ("" when none).
  std::string file_of(const std::string& name) const;
  /// As File::view; DataError naming the folder when no shard has the tensor.
  torch::Tensor view(const std::string& name) const;
  /// As File::release.
  void release(const std::string& name, int64_t first_row = 0, int64_t rows = -1) const;
  /// Bytes of all tensors together.
  uint64_t bytes() const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::unique_ptr<File>> files_;
  std::map<std::string, size_t> where_;  // name -> index into files_
};

}  // namespace attnlab::safetensors
