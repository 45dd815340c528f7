#pragma once
// Tensors to and from a results file, for code that has LibTorch (trainers, datasets, tests). The
// results library itself deals in arrays (attnlab/results/array.hpp) and needs no LibTorch, so the
// tools that read results files start without it; these inline conversions are the bridge.
#include <attnlab/error.hpp>
#include <attnlab/results/array.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/results/results.hpp>

#include <torch/types.h>

#include <string>
#include <vector>

namespace attnlab::results {

/// The tensor's values, on the CPU as float32, with its shape.
inline FloatArray to_float_array(const torch::Tensor& t) {
  ATTNLAB_CHECK(t.defined(), ResultsError, "cannot store an undefined tensor");
  ATTNLAB_CHECK(!t.is_complex(), ResultsError, "cannot store a tensor of dtype {}: expected a real tensor",
                c10::toString(t.scalar_type()));
  const auto c = t.detach().to(torch::kCPU, torch::kFloat).contiguous();
  FloatArray a;
  a.shape.assign(c.sizes().begin(), c.sizes().end());
  a.values.assign(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  return a;
}

/// The tensor's values, on the CPU as int64, with its shape.
inline IntArray to_int_array(const torch::Tensor& t) {
  ATTNLAB_CHECK(t.defined(), ResultsError, "cannot store an undefined tensor");
  const auto c = t.detach().to(torch::kCPU, torch::kLong).contiguous();
  IntArray a;
  a.shape.assign(c.sizes().begin(), c.sizes().end());
  a.values.assign(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
  return a;
}

/// A float32 CPU tensor holding a copy of the array.
inline torch::Tensor to_tensor(const FloatArray& a) { return torch::tensor(a.values, torch::kFloat).reshape(a.shape); }

/// `values` as /<path> (e.g. "predictions/test") with its shape: int64 for integer and bool
/// tensors (token ids, lengths), float32 for everything else; replaces what was there.
inline void write_tensor(Results& res, const std::string& path, const torch::Tensor& values) {
  ATTNLAB_CHECK(values.defined(), ResultsError, "cannot write {} in results file {}: the tensor is undefined", path,
                res.path());
  ATTNLAB_CHECK(!values.is_complex(), ResultsError,
                "cannot write {} in results file {}: expected a real tensor, found dtype {}", path, res.path(),
                c10::toString(values.scalar_type()));
  if (c10::isIntegralType(values.scalar_type(), /*includeBool=*/true)) {
    res.write_array(path, to_int_array(values));
  } else {
    res.write_array(path, to_float_array(values));
  }
}

/// Any numeric dataset of the file as a float32 CPU tensor with its shape.
inline torch::Tensor read_tensor(const ResultsReader& in, const std::string& path) { return to_tensor(in.array(path)); }

}  // namespace attnlab::results
