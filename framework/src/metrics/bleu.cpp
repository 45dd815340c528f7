// d2l's bleu (d2l 1.0 chapter "Sequence-to-Sequence Learning"), line for line:
//   pred_tokens, label_tokens = pred_seq.split(' '), label_seq.split(' ')
//   score = exp(min(0, 1 - len_label / len_pred))
//   for n in 1..min(k, len_pred): clipped n-gram matches against a dict of label n-grams,
//     score *= (num_matches / (len_pred - n + 1)) ** (0.5 ** n)
#include <attnlab/metrics/bleu.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>
#include <vector>

namespace attnlab::metrics {
namespace {

/// Python's str.split(' '): keeps empty strings ('' -> [''], 'a  b' -> ['a', '', 'b']).
std::vector<std::string> split_keep_empty(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = s.find(' ', start);
    if (end == std::string::npos) {
      out.emplace_back(s, start);
      return out;
    }
    out.emplace_back(s, start, end - start);
    start = end + 1;
  }
}

/// ' '.join(tokens[i:i + n]), the dictionary key d2l uses.
std::string join_ngram(const std::vector<std::string>& tokens, size_t i, size_t n) {
  std::string key = tokens[i];
  for (size_t j = i + 1; j < i + n; ++j) {
    key += ' ';
    key += tokens[j];
  }
  return key;
}

}  // namespace

double d2l_bleu(const std::string& pred, const std::string& label, int k) {
  if (pred.empty()) return 0.0;  // documented contract (d2l would score '' against '' as 1)
  const auto pred_tokens = split_keep_empty(pred);
  const auto label_tokens = split_keep_empty(label);
  const auto len_pred = static_cast<double>(pred_tokens.size());
  const auto len_label = static_cast<double>(label_tokens.size());
  double score = std::exp(std::min(0.0, 1.0 - len_label / len_pred));
  const size_t max_n = std::min<size_t>(static_cast<size_t>(std::max(k, 0)), pred_tokens.size());
  for (size_t n = 1; n <= max_n; ++n) {
    int64_t num_matches = 0;
    std::unordered_map<std::string, int64_t> label_subs;
    for (size_t i = 0; i + n <= label_tokens.size(); ++i) ++label_subs[join_ngram(label_tokens, i, n)];
    for (size_t i = 0; i + n <= pred_tokens.size(); ++i) {
      auto it = label_subs.find(join_ngram(pred_tokens, i, n));
      if (it != label_subs.end() && it->second > 0) {
        ++num_matches;
        --it->second;
      }
    }
    const double precision = static_cast<double>(num_matches) / (len_pred - static_cast<double>(n) + 1.0);
    score *= std::pow(precision, std::pow(0.5, static_cast<double>(n)));
  }
  return score;
}

}  // namespace attnlab::metrics
