#include "tools/rollout.hpp"

#include <attnlab/error.hpp>

#include <algorithm>
#include <limits>
#include <queue>

namespace attnlab::tools::rollout {

Matrix::Matrix(int64_t r, int64_t c, double fill) : rows(r), cols(c), values(static_cast<size_t>(r * c), fill) {}

Matrix identity(int64_t n) {
  Matrix m(n, n);
  for (int64_t i = 0; i < n; ++i) m(i, i) = 1.0;
  return m;
}

Matrix multiply(const Matrix& a, const Matrix& b) {
  ATTNLAB_CHECK(a.cols == b.rows, Error, "rollout: cannot multiply a [{}, {}] matrix by a [{}, {}] one", a.rows, a.cols,
                b.rows, b.cols);
  Matrix out(a.rows, b.cols);
  for (int64_t i = 0; i < a.rows; ++i) {
    for (int64_t k = 0; k < a.cols; ++k) {
      const double x = a(i, k);
      if (x == 0.0) continue;
      for (int64_t j = 0; j < b.cols; ++j) out(i, j) += x * b(k, j);
    }
  }
  return out;
}

void normalise_rows(Matrix& m) {
  for (int64_t i = 0; i < m.rows; ++i) {
    double sum = 0.0;
    for (int64_t j = 0; j < m.cols; ++j) sum += m(i, j);
    if (sum == 0.0) continue;
    for (int64_t j = 0; j < m.cols; ++j) m(i, j) /= sum;
  }
}

Matrix head_mean(const results::FloatArray& weights, int64_t layer, int64_t queries, int64_t keys) {
  ATTNLAB_CHECK(weights.dim() == 4, Error, "rollout: attention weights have {} dimensions, expected 4 "
                "[layers, heads, queries, keys]", weights.dim());
  const int64_t heads = weights.size(1), q_all = weights.size(2), k_all = weights.size(3);
  ATTNLAB_CHECK(layer >= 0 && layer < weights.size(0) && queries <= q_all && keys <= k_all && heads > 0, Error,
                "rollout: cannot take layer {} of [{}, {}] positions from weights [{}, {}, {}, {}]", layer, queries, keys,
                weights.size(0), heads, q_all, k_all);
  Matrix m(queries, keys);
  for (int64_t h = 0; h < heads; ++h) {
    const size_t base = static_cast<size_t>((layer * heads + h) * q_all * k_all);
    for (int64_t i = 0; i < queries; ++i) {
      for (int64_t j = 0; j < keys; ++j) m(i, j) += weights.values[base + static_cast<size_t>(i * k_all + j)];
    }
  }
  for (auto& v : m.values) v /= static_cast<double>(heads);
  normalise_rows(m);
  return m;
}

Matrix with_residual(const Matrix& a) {
  ATTNLAB_CHECK(a.rows == a.cols, Error, "rollout: the residual needs a square map, found [{}, {}]", a.rows, a.cols);
  Matrix out(a.rows, a.cols);
  for (int64_t i = 0; i < a.rows; ++i) {
    for (int64_t j = 0; j < a.cols; ++j) out(i, j) = 0.5 * a(i, j) + (i == j ? 0.5 : 0.0);
  }
  normalise_rows(out);
  return out;
}

Matrix rollout(const std::vector<Matrix>& layers) {
  ATTNLAB_CHECK(!layers.empty(), Error, "rollout: no layers");
  Matrix r = identity(layers.front().rows);
  for (const auto& a : layers) r = multiply(a, r);  // Â_l · (Â_{l-1} ··· Â_1)
  return r;
}

namespace {

/// Dinic's maximum flow on adjacency lists; each edge stored with its reverse at index ^ 1.
class FlowGraph {
 public:
  explicit FlowGraph(int64_t nodes) : adj_(static_cast<size_t>(nodes)) {}
  void add(int64_t u, int64_t v, double cap) {
    adj_[static_cast<size_t>(u)].push_back(edges_.size());
    edges_.push_back({v, cap});
    adj_[static_cast<size_t>(v)].push_back(edges_.size());
    edges_.push_back({u, 0.0});
  }
  double max_flow(int64_t s, int64_t t) {
    double total = 0.0;
    while (levels(s, t)) {
      next_.assign(adj_.size(), 0);
      for (double f; (f = push(s, t, std::numeric_limits<double>::infinity())) > kEps;) total += f;
    }
    return total;
  }

 private:
  static constexpr double kEps = 1e-13;
  struct Edge {
    int64_t to;
    double cap;
  };
  bool levels(int64_t s, int64_t t) {
    level_.assign(adj_.size(), -1);
    level_[static_cast<size_t>(s)] = 0;
    std::queue<int64_t> q;
    q.push(s);
    while (!q.empty()) {
      const auto u = q.front();
      q.pop();
      for (auto e : adj_[static_cast<size_t>(u)]) {
        const auto& edge = edges_[e];
        if (edge.cap > kEps && level_[static_cast<size_t>(edge.to)] < 0) {
          level_[static_cast<size_t>(edge.to)] = level_[static_cast<size_t>(u)] + 1;
          q.push(edge.to);
        }
      }
    }
    return level_[static_cast<size_t>(t)] >= 0;
  }
  double push(int64_t u, int64_t t, double limit) {
    if (u == t) return limit;
    auto& i = next_[static_cast<size_t>(u)];
    for (; i < adj_[static_cast<size_t>(u)].size(); ++i) {
      const auto e = adj_[static_cast<size_t>(u)][i];
      auto& edge = edges_[e];
      if (edge.cap <= kEps || level_[static_cast<size_t>(edge.to)] != level_[static_cast<size_t>(u)] + 1) continue;
      const double f = push(edge.to, t, std::min(limit, edge.cap));
      if (f > kEps) {
        edge.cap -= f;
        edges_[e ^ 1].cap += f;
        return f;
      }
    }
    return 0.0;
  }
  std::vector<Edge> edges_;
  std::vector<std::vector<size_t>> adj_;
  std::vector<int64_t> level_;
  std::vector<size_t> next_;
};

}  // namespace

double max_flow(const Matrix& capacity, int64_t source, int64_t sink) {
  ATTNLAB_CHECK(capacity.rows == capacity.cols, Error, "max_flow: capacities must be square, found [{}, {}]",
                capacity.rows, capacity.cols);
  FlowGraph g(capacity.rows);
  for (int64_t u = 0; u < capacity.rows; ++u) {
    for (int64_t v = 0; v < capacity.cols; ++v) {
      if (capacity(u, v) > 0.0) g.add(u, v, capacity(u, v));
    }
  }
  return g.max_flow(source, sink);
}

Matrix flow(const std::vector<Matrix>& layers) {
  ATTNLAB_CHECK(!layers.empty(), Error, "flow: no layers");
  const int64_t n = layers.front().rows, depth = static_cast<int64_t>(layers.size());
  for (const auto& a : layers) {
    ATTNLAB_CHECK(a.rows == n && a.cols == n, Error, "flow: every layer must be [{}, {}], found [{}, {}]", n, n,
                  a.rows, a.cols);
  }
  Matrix out(n, n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      // Node (l, p) is l * n + p; edges point down, from a layer's output to its input.
      FlowGraph g((depth + 1) * n);
      for (int64_t l = 1; l <= depth; ++l) {
        const auto& a = layers[static_cast<size_t>(l - 1)];
        for (int64_t p = 0; p < n; ++p) {
          for (int64_t q = 0; q < n; ++q) {
            if (a(p, q) > 0.0) g.add(l * n + p, (l - 1) * n + q, a(p, q));
          }
        }
      }
      out(i, j) = g.max_flow(depth * n + i, j);
    }
  }
  normalise_rows(out);
  return out;
}

Matrix encoder_decoder(const std::vector<Matrix>& decoder_self, const std::vector<Matrix>& decoder_cross,
                       const Matrix& encoder_rollout) {
  ATTNLAB_CHECK(!decoder_self.empty() && decoder_self.size() == decoder_cross.size(), Error,
                "rollout: the encoder-decoder path needs as many decoder self-attention layers as cross-attention "
                "layers, found {} and {}",
                decoder_self.size(), decoder_cross.size());
  const int64_t tt = decoder_self.front().rows, ts = encoder_rollout.rows;
  Matrix t = identity(tt), s(tt, ts);
  for (size_t l = 0; l < decoder_self.size(); ++l) {
    const auto& c = decoder_cross[l];
    ATTNLAB_CHECK(c.rows == tt && c.cols == ts, Error,
                  "rollout: decoder cross-attention layer {} is [{}, {}], expected [{}, {}] (target x source)", l,
                  c.rows, c.cols, tt, ts);
    t = multiply(decoder_self[l], t);
    s = multiply(decoder_self[l], s);
    for (auto& v : t.values) v *= 0.5;
    for (size_t k = 0; k < s.values.size(); ++k) s.values[k] = 0.5 * s.values[k] + 0.5 * c.values[k];
  }
  Matrix out = multiply(s, encoder_rollout);
  normalise_rows(out);
  return out;
}

}  // namespace attnlab::tools::rollout
