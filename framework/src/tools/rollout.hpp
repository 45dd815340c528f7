#pragma once
// Attention rollout and attention flow (Abnar & Zuidema 2020, "Quantifying Attention Flow in
// Transformers") over recorded attention maps: the math of `runner rollout`, on plain row-major
// matrices of doubles (no LibTorch). The definitions are written out in docs/COMMANDS.md,
// "runner rollout".
#include <attnlab/results/array.hpp>

#include <cstdint>
#include <vector>

namespace attnlab::tools::rollout {

/// A dense row-major matrix of doubles.
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<double> values;  // [rows, cols], row-major

  Matrix() = default;
  Matrix(int64_t r, int64_t c, double fill = 0.0);
  double& operator()(int64_t i, int64_t j) { return values[static_cast<size_t>(i * cols + j)]; }
  double operator()(int64_t i, int64_t j) const { return values[static_cast<size_t>(i * cols + j)]; }
};

Matrix identity(int64_t n);
/// a · b: [a.rows, b.cols]; Error when a.cols != b.rows.
Matrix multiply(const Matrix& a, const Matrix& b);
/// Each row divided by its sum; a row that sums to 0 stays all zeros.
void normalise_rows(Matrix& m);

/// Layer row `layer` of recorded weights [layers, heads, queries, keys], averaged over the heads
/// and cut to its first `queries` x `keys` positions, rows re-normalised to sum to 1: [queries, keys].
Matrix head_mean(const results::FloatArray& weights, int64_t layer, int64_t queries, int64_t keys);

/// Â = 0.5·A + 0.5·I, rows re-normalised (the residual connection): A square [n, n].
Matrix with_residual(const Matrix& a);

/// Attention rollout R = Â_L ··· Â_1 of residual-augmented layers given lowest first (each
/// [n, n]): row i is output position i of the last layer, column j input token j.
Matrix rollout(const std::vector<Matrix>& layers);

/// The maximum flow from `source` to `sink` of the directed graph whose edge u -> v has capacity
/// `capacity(u, v)` (0: no edge); Dinic's algorithm over doubles.
double max_flow(const Matrix& capacity, int64_t source, int64_t sink);

/// Attention flow: in the layered graph of the residual-augmented layers (lowest first, each
/// [n, n]; node (l, i) is position i at the output of layer l, (0, j) input token j; an edge
/// (l, i) -> (l-1, j) of capacity Â_l(i, j)), the maximum flow from each node (L, i) to each
/// (0, j), each row then normalised to sum to 1 (as Abnar & Zuidema's code does): [n, n].
Matrix flow(const std::vector<Matrix>& layers);

/// The encoder-decoder path: a target position's relevance to each source input token.
/// `decoder_self` are the decoder layers' residual-augmented self-attention D_l [Tt, Tt],
/// `decoder_cross` their head-averaged cross-attention C_l [Tt, Ts] (rows summing to 1), lowest
/// first; `encoder_rollout` R_enc [Ts, Ts]. T_0 = I, S_0 = 0; per layer T' = D_l·T, S' = D_l·S, then
/// T = 0.5·T', S = 0.5·S' + 0.5·C_l; the result is S_L·R_enc with rows normalised: [Tt, Ts].
Matrix encoder_decoder(const std::vector<Matrix>& decoder_self, const std::vector<Matrix>& decoder_cross,
                       const Matrix& encoder_rollout);

}  // namespace attnlab::tools::rollout
