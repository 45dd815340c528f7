// Corner sequences (Step-by-Step ch. 9-10) from a private, seeded torch generator.
#include "corner_sequences.hpp"

#include <attnlab/error.hpp>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

namespace attnlab::datasets::corners {

torch::Tensor square_corners() {
  return torch::tensor({-1.f, -1.f, -1.f, 1.f, 1.f, 1.f, 1.f, -1.f}).reshape({4, 2});  // [4, 2]
}

torch::Tensor corner_order(int64_t start, bool clockwise) {
  auto order = torch::remainder(torch::arange(4, torch::kLong) + start, 4);  // [4] clockwise from start
  // The book slices the clockwise walk with step -1: start+3, start+2, start+1, start.
  return clockwise ? order : order.flip({0});
}

CornerSequences generate_corners(int64_t n, uint64_t seed, bool variable_len, double noise) {
  ATTNLAB_CHECK(n >= 1, DataError, "corner sequences: n must be >= 1, found {}", n);
  ATTNLAB_CHECK(noise >= 0.0, DataError, "corner sequences: noise must be >= 0, found {}", noise);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto i64 = torch::TensorOptions(torch::kLong);
  // The book's draw order: start corners, lengths (only when variable), directions, noise.
  auto starts = torch::randint(4, {n}, gen, i64);                                      // [n]
  auto lengths = variable_len ? torch::randint(3, {n}, gen, i64) + 2 : torch::full({n}, 4, i64);  // [n]
  auto directions = torch::randint(2, {n}, gen, i64);                                  // [n]
  auto jitter = torch::randn({n, 4, 2}, gen, torch::TensorOptions(torch::kFloat32)) * noise;  // [n, 4, 2]

  // Walk order per sequence: (start + k) mod 4, reversed for counter-clockwise.
  auto k = torch::arange(4, i64).unsqueeze(0);                                   // [1, 4]
  auto cw = torch::remainder(starts.unsqueeze(1) + k, 4);                        // [n, 4]
  auto ccw = cw.flip({1});                                                       // [n, 4]
  auto order = torch::where(directions.unsqueeze(1) == 1, cw, ccw);              // [n, 4]
  auto points = square_corners().index_select(0, order.reshape(-1)).reshape({n, 4, 2}) + jitter;  // [n, 4, 2]
  auto valid = (k < lengths.unsqueeze(1)).unsqueeze(2);                          // [n, 4, 1]
  points = points * valid.to(torch::kFloat32);

  CornerSequences out;
  out.points = points.contiguous();
  out.lengths = lengths;
  out.directions = directions;
  out.starts = order.select(1, 0).contiguous();  // [n] the first corner walked
  return out;
}

}  // namespace attnlab::datasets::corners
