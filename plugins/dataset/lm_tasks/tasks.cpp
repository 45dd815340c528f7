// The rows of lm_tasks' tasks (repeated, mqar, copy, reverse, sort), drawn from a given generator.
#include "tasks.hpp"

#include <torch/types.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace attnlab::datasets::lm_tasks {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

const char* task_name(Task t) {
  switch (t) {
    case Task::Repeated:
      return "repeated";
    case Task::Mqar:
      return "mqar";
    case Task::Copy:
      return "copy";
    case Task::Reverse:
      return "reverse";
    case Task::Sort:
      return "sort";
  }
  return "?";
}

bool transduction(Task t) { return t == Task::Copy || t == Task::Reverse || t == Task::Sort; }

uint64_t mix(uint64_t a, uint64_t b) { return splitmix64(splitmix64(a) ^ b); }

torch::Tensor sample_distinct(int64_t n, int64_t k, int64_t lo, int64_t hi, at::Generator& gen) {
  const int64_t pool = hi - lo;
  const auto u = torch::rand({n, 2 * k}, gen, torch::kDouble);  // [n, 2k]: Floyd's draws, the shuffle's
  auto out = torch::empty({n, k}, torch::kLong);                // [n, k]
  const auto ua = u.accessor<double, 2>();
  auto oa = out.accessor<int64_t, 2>();
  const auto below = [](double x, int64_t m) {
    return std::min(static_cast<int64_t>(x * static_cast<double>(m)), m - 1);
  };
  std::vector<int64_t> chosen;
  chosen.reserve(static_cast<size_t>(k));
  for (int64_t i = 0; i < n; ++i) {
    chosen.clear();
    for (int64_t j = pool - k, m = 0; j < pool; ++j, ++m) {
      const int64_t t = below(ua[i][m], j + 1);  // in [0, j]
      chosen.push_back(std::find(chosen.begin(), chosen.end(), t) == chosen.end() ? t : j);
    }
    for (int64_t m = k - 1; m > 0; --m) {
      std::swap(chosen[static_cast<size_t>(m)], chosen[static_cast<size_t>(below(ua[i][k + m], m + 1))]);
    }
    for (int64_t m = 0; m < k; ++m) oa[i][m] = lo + chosen[static_cast<size_t>(m)];
  }
  return out;
}

Rows repeated(int64_t n, const RepeatedParams& p, at::Generator& gen) {
  const int64_t most = p.half_len, least = p.min_half_len, b = p.bos >= 0 ? 1 : 0, T = p.steps();
  // Draw order: every r at its longest, then (only when they vary) the lengths.
  const auto r = torch::randint(p.low, p.high, {n, most}, gen, torch::kLong);  // [N, most]
  const auto halves = least == most ? torch::full({n}, most, torch::kLong)
                                    : torch::randint(least, most + 1, {n}, gen, torch::kLong);  // [N]
  Rows d;
  d.in = torch::full({n, T}, p.pad, torch::kLong);   // [N, T]
  d.out = torch::full({n, T}, p.pad, torch::kLong);  // [N, T]
  auto in = d.in.accessor<int64_t, 2>(), out = d.out.accessor<int64_t, 2>();
  const auto ra = r.accessor<int64_t, 2>();
  const auto ha = halves.accessor<int64_t, 1>();
  std::vector<int64_t> row;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t h = ha[i], inputs = 2 * h + b - 1;
    row.assign(static_cast<size_t>(b), p.bos);
    for (int copy = 0; copy < 2; ++copy) {
      for (int64_t t = 0; t < h; ++t) row.push_back(ra[i][t]);
    }
    for (int64_t t = 0; t < inputs; ++t) {
      in[i][t] = row[static_cast<size_t>(t)];
      // second_half: the last h labels, the tokens of the second copy.
      if (p.loss_on_all || t >= inputs - h) out[i][t] = row[static_cast<size_t>(t + 1)];
    }
  }
  d.lens = p.loss_on_all ? halves * 2 + (b - 1) : halves;
  return d;
}

Rows mqar(int64_t n, const MqarParams& p, at::Generator& gen) {
  const int64_t V = p.vocab_size, L = p.seq_len, kv = p.num_kv_pairs;
  const int64_t context = 2 * kv, space = (L - context) / 2;
  // Draw order: keys, values, the queries' gaps, then (with random_non_queries) the other tokens.
  const auto keys = sample_distinct(n, kv, 1, V / 2, gen);    // [N, kv] from [1, V/2)
  const auto values = sample_distinct(n, kv, V / 2, V, gen);  // [N, kv] from [V/2, V)
  const double a = p.power_a;
  const auto w = a * torch::arange(1, space + 1, torch::kDouble).pow(a - 1.0);                          // [space]
  const auto gaps = torch::multinomial((w / w.sum()).expand({n, space}).contiguous(), kv, false, gen);  // [N, kv]
  const auto at = context + 2 * gaps;  // [N, kv] query positions
  Rows d;
  d.in = torch::zeros({n, L}, torch::kLong);  // [N, L]
  d.in.slice(1, 0, context, 2).copy_(keys);
  d.in.slice(1, 1, context, 2).copy_(values);
  d.in.scatter_(1, at, keys);
  d.out = torch::full({n, L}, p.pad, torch::kLong).scatter_(1, at, values);  // [N, L]
  if (p.random_non_queries) {  // Zoology: every 0 left becomes a uniform token of [0, V)
    const auto fill = torch::randint(0, V, {n, L}, gen, torch::kLong);  // [N, L]
    d.in = torch::where(d.in == 0, fill, d.in);
  }
  d.lens = torch::full({n}, kv, torch::kLong);  // [N]
  return d;
}

Rows transduced(int64_t n, const TransducedParams& p, at::Generator& gen) {
  const Lengths range = p.lengths;
  const int64_t T = p.steps();
  // Draw order: every x at its longest, then the lengths.
  const auto x = torch::randint(p.low, p.high, {n, range.max}, gen, torch::kLong);     // [N, max]
  const auto lens = torch::randint(range.min, range.max + 1, {n}, gen, torch::kLong);  // [N]
  Rows d;
  d.in = torch::full({n, T}, p.pad, torch::kLong);   // [N, T]
  d.out = torch::full({n, T}, p.pad, torch::kLong);  // [N, T]
  auto in = d.in.accessor<int64_t, 2>(), out = d.out.accessor<int64_t, 2>();
  const auto xa = x.accessor<int64_t, 2>();
  const auto la = lens.accessor<int64_t, 1>();
  std::vector<int64_t> y;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = la[i];
    y.resize(static_cast<size_t>(len));
    for (int64_t t = 0; t < len; ++t) y[static_cast<size_t>(t)] = in[i][t] = xa[i][t];
    if (p.task == Task::Reverse) std::reverse(y.begin(), y.end());
    if (p.task == Task::Sort) std::sort(y.begin(), y.end());
    in[i][len] = p.sep;
    for (int64_t t = 0; t < len; ++t) in[i][len + 1 + t] = out[i][len + t] = y[static_cast<size_t>(t)];
    out[i][2 * len] = p.eos;
  }
  d.lens = lens + 1;  // f(x) and <eos>
  return d;
}

}  // namespace attnlab::datasets::lm_tasks
