#pragma once
// A dense array as a results file stores it: a shape and its values, row-major. What a results
// file holds besides metric series and strings (predictions, attention weights, token ids) is read
// and written as these, so that reading a results file needs no LibTorch (the tools: compare, plot,
// report); code that has tensors converts them with attnlab/results/tensor.hpp.
#include <attnlab/error.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace attnlab::results {

template <class T>
struct NdArray {
  std::vector<int64_t> shape;  // {} for a scalar (one value)
  std::vector<T> values;       // row-major: the last index varies fastest

  int64_t dim() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const { return static_cast<int64_t>(values.size()); }
  bool empty() const { return values.empty(); }
  /// Size of dimension `d`; negative counts from the end (-1 = the last).
  int64_t size(int64_t d) const {
    const int64_t n = dim();
    ATTNLAB_CHECK(d >= -n && d < n, Error, "array of {} dimensions has no dimension {}", n, d);
    return shape[static_cast<size_t>(d < 0 ? d + n : d)];
  }
  /// The value at a full index (one per dimension, each in range).
  const T& at(std::initializer_list<int64_t> index) const { return values[offset(index)]; }
  T& at(std::initializer_list<int64_t> index) { return values[offset(index)]; }
  /// Values in one block of the leading index: row i of a [N, ...] array is values[i * row_size()
  /// ...]; the product of every dimension but the first (1 for a 1-D array, 0 for a scalar).
  int64_t row_size() const {
    if (shape.empty()) return 0;
    int64_t n = 1;
    for (size_t d = 1; d < shape.size(); ++d) n *= shape[d];
    return n;
  }

 private:
  size_t offset(std::initializer_list<int64_t> index) const {
    ATTNLAB_CHECK(static_cast<int64_t>(index.size()) == dim(), Error, "array of {} dimensions indexed with {}", dim(),
                  index.size());
    int64_t at = 0;
    size_t d = 0;
    for (int64_t i : index) {
      ATTNLAB_CHECK(i >= 0 && i < shape[d], Error, "index {} is out of range for dimension {} of size {}", i, d,
                    shape[d]);
      at = at * shape[d] + i;
      ++d;
    }
    return static_cast<size_t>(at);
  }
};

/// float32 datasets: predictions, attention weights (what ResultsReader::array reads any numeric
/// dataset as).
using FloatArray = NdArray<float>;
/// int64 datasets: token ids, lengths, labels.
using IntArray = NdArray<int64_t>;

}  // namespace attnlab::results
