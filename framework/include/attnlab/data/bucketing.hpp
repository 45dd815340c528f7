#pragma once
// Length bucketing: batches of examples with similar lengths, so padding to each batch's longest
// example wastes little, while the order stays random from epoch to epoch (seeded).
#include <cstdint>
#include <vector>

namespace attnlab::data {

struct BucketOptions {
  int64_t batch_size = 128;
  /// Examples are shuffled, cut into chunks of chunk_batches * batch_size, each chunk sorted by
  /// length and cut into batches; the batches are then shuffled. Larger = less padding, less
  /// randomness.
  int64_t chunk_batches = 100;
  uint64_t seed = 0;
};

/// Batches (lists of example indices into `lengths`) of at most batch_size examples, every index
/// exactly once; only the last batch of the last chunk may be short. Same seed, same batches.
/// DataError for batch_size or chunk_batches < 1 or a negative length.
std::vector<std::vector<int64_t>> bucket_batches(const std::vector<int64_t>& lengths, const BucketOptions& options);

/// Batches of consecutive indices of a seeded random permutation (no bucketing), for comparison
/// and for datasets that turn bucketing off.
std::vector<std::vector<int64_t>> random_batches(int64_t n, int64_t batch_size, uint64_t seed);

/// Fraction of padding when each batch is padded to its longest example:
/// sum(B * max_len - sum(len)) / sum(B * max_len) over batches (0 when nothing is padded).
double padding_fraction(const std::vector<int64_t>& lengths, const std::vector<std::vector<int64_t>>& batches);

/// Fisher–Yates permutation of 0..n-1 from a 64-bit Mersenne Twister seeded with `seed` (the same
/// on every platform: no std::uniform_int_distribution).
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed);

}  // namespace attnlab::data
