#pragma once
#include <string>

namespace attnlab::metrics {

/// d2l's bleu(pred_seq, label_seq, k), exactly: space-split tokens, brevity penalty
/// exp(min(0, 1 - len_label / len_pred)), n-gram precisions weighted by 0.5^n for n = 1..k.
/// Returns 0 for an empty prediction.
double d2l_bleu(const std::string& pred, const std::string& label, int k);

}  // namespace attnlab::metrics
