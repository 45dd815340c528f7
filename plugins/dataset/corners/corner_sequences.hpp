#pragma once
// Corner sequences (Deep Learning with PyTorch Step-by-Step, ch. 9-10): each sequence walks the
// four corners of the square [[-1,-1],[-1,1],[1,1],[1,-1]] from a random start corner, clockwise
// or counter-clockwise, with N(0, noise^2) added to every coordinate.
//
// The generator is our own, seeded through a private torch CPU generator (the global torch RNG is
// not touched). It draws in the book's order (start corners, lengths, directions, noise) but does
// NOT reproduce NumPy's stream: the same seed gives different sequences than the book's
// generate_sequences(seed=13), with the same distribution.
//
// Used by the corners dataset plugin (corners.cpp) alone; tests/corner_sequences_test.cpp tests it.
#include <torch/types.h>

#include <cstdint>

namespace attnlab::datasets::corners {

struct CornerSequences {
  torch::Tensor points;      // [n, 4, 2] float32; rows at or past `lengths` are 0
  torch::Tensor lengths;     // [n] int64: 4, or 2..4 with variable_len
  torch::Tensor directions;  // [n] int64: 1 = clockwise, 0 = counter-clockwise
  torch::Tensor starts;      // [n] int64: index into square_corners() of the first point
};

/// The square's corners in clockwise order from the bottom-left: [4, 2] float32
/// [[-1,-1],[-1,1],[1,1],[1,-1]] (x, y).
torch::Tensor square_corners();

/// Corner indices in walk order from `start`: clockwise start, start+1, ... (mod 4); counter-
/// clockwise is the book's reversed slice, start+3, start+2, ... -> [4] int64
torch::Tensor corner_order(int64_t start, bool clockwise);

/// n sequences; variable_len draws lengths 2..4 (the book's option), otherwise all have 4 points.
CornerSequences generate_corners(int64_t n, uint64_t seed, bool variable_len = false, double noise = 0.1);

}  // namespace attnlab::datasets::corners
