#pragma once
// Input checks shared by scorer plugins (additive, gaussian_kernel, average).
#include <torch/types.h>

namespace attnlab::nn {

/// A scorer's input check: queries [B, Q, Dq] and keys [B, K, Dk] with one batch size; else a
/// c10::Error "<who>: expected queries [B, Q, Dq] and keys [B, K, Dk] with one batch size, ...".
inline void check_queries_and_keys(const char* who, const torch::Tensor& queries, const torch::Tensor& keys) {
  TORCH_CHECK(queries.dim() == 3 && keys.dim() == 3 && queries.size(0) == keys.size(0), who,
              ": expected queries [B, Q, Dq] and keys [B, K, Dk] with one batch size, found ", queries.sizes(), " and ",
              keys.sizes());
}

}  // namespace attnlab::nn
