// Length bucketing (the "sort within shuffled chunks" scheme of fairseq/torchtext BucketIterator):
// shuffle, cut into chunks of chunk_batches batches, sort each chunk by length, cut into batches,
// shuffle the batches.
#include <attnlab/data/bucketing.hpp>
#include <attnlab/error.hpp>

#include <algorithm>
#include <random>

namespace attnlab::data {
namespace {

/// Uniform integer in [0, range) by rejection (unbiased, platform-independent).
uint64_t bounded(std::mt19937_64& rng, uint64_t range) {
  const uint64_t threshold = (0 - range) % range;  // 2^64 mod range
  while (true) {
    const uint64_t r = rng();
    if (r >= threshold) return r % range;
  }
}

void check_batch_size(int64_t batch_size, const char* what) {
  ATTNLAB_CHECK(batch_size >= 1, DataError, "{}: batch_size must be >= 1, found {}", what, batch_size);
}

}  // namespace

std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> perm(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  std::mt19937_64 rng(seed);
  for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[bounded(rng, i)]);
  return perm;
}

std::vector<std::vector<int64_t>> random_batches(int64_t n, int64_t batch_size, uint64_t seed) {
  check_batch_size(batch_size, "random_batches");
  const auto perm = seeded_permutation(n, seed);
  std::vector<std::vector<int64_t>> out;
  for (int64_t b = 0; b < n; b += batch_size) out.emplace_back(perm.begin() + b, perm.begin() + std::min(n, b + batch_size));
  return out;
}

std::vector<std::vector<int64_t>> bucket_batches(const std::vector<int64_t>& lengths, const BucketOptions& options) {
  check_batch_size(options.batch_size, "bucket_batches");
  ATTNLAB_CHECK(options.chunk_batches >= 1, DataError, "bucket_batches: chunk_batches must be >= 1, found {}",
                options.chunk_batches);
  const auto n = static_cast<int64_t>(lengths.size());
  for (int64_t i = 0; i < n; ++i) {
    ATTNLAB_CHECK(lengths[i] >= 0, DataError, "bucket_batches: length of example {} is negative ({})", i, lengths[i]);
  }
  auto order = seeded_permutation(n, options.seed);
  const int64_t chunk = options.batch_size * options.chunk_batches;
  std::vector<std::vector<int64_t>> batches;
  batches.reserve(static_cast<size_t>((n + options.batch_size - 1) / options.batch_size));
  for (int64_t c = 0; c < n; c += chunk) {
    const auto first = order.begin() + c;
    const auto last = order.begin() + std::min(n, c + chunk);
    // Stable: equal lengths keep their random order.
    std::stable_sort(first, last, [&](int64_t a, int64_t b) { return lengths[a] < lengths[b]; });
    for (auto it = first; it < last; it += std::min<int64_t>(options.batch_size, last - it)) {
      batches.emplace_back(it, it + std::min<int64_t>(options.batch_size, last - it));
    }
  }
  // The batches' order is random too (a different stream than the examples' shuffle).
  const auto batch_order = seeded_permutation(static_cast<int64_t>(batches.size()), options.seed ^ 0x9E3779B97F4A7C15ULL);
  std::vector<std::vector<int64_t>> out;
  out.reserve(batches.size());
  for (int64_t i : batch_order) out.push_back(std::move(batches[static_cast<size_t>(i)]));
  return out;
}

double padding_fraction(const std::vector<int64_t>& lengths, const std::vector<std::vector<int64_t>>& batches) {
  double padded = 0, total = 0;
  for (const auto& batch : batches) {
    int64_t longest = 0, sum = 0;
    for (int64_t i : batch) {
      ATTNLAB_CHECK(i >= 0 && i < static_cast<int64_t>(lengths.size()), DataError,
                    "padding_fraction: index {} out of range for {} lengths", i, lengths.size());
      longest = std::max(longest, lengths[static_cast<size_t>(i)]);
      sum += lengths[static_cast<size_t>(i)];
    }
    const double cells = static_cast<double>(longest) * static_cast<double>(batch.size());
    padded += cells - static_cast<double>(sum);
    total += cells;
  }
  return total > 0 ? padded / total : 0.0;
}

}  // namespace attnlab::data
