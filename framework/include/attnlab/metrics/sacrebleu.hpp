#pragma once
// Corpus BLEU computed exactly as sacreBLEU 2.6.0 (`sacrebleu.corpus_bleu(hyps, [refs])` with its
// defaults): the mteval-v13a tokenizer ("13a"), clipped n-gram counts up to order 4 summed over the
// corpus, closest reference length (ties -> the shorter), brevity penalty exp(1 - r/c), 'exp'
// smoothing, no effective order. Scores are percentages (0..100), like sacreBLEU's.
//
//   auto s = metrics::corpus_bleu(hyps, refs);   // refs[i] is the one reference of hyps[i]
//   fmt::print("BLEU = {:.2f} ({})\n", s.score, s.signature);
#include <cstdint>
#include <string>
#include <vector>

namespace attnlab::metrics {

/// sacreBLEU's package version these semantics follow (goes into the signature).
inline constexpr const char* kSacreBleuVersion = "2.6.0";

struct BleuOptions {
  std::string tokenize = "13a";      // "13a" (mteval-v13a, sacreBLEU's default) or "none"
  std::string smooth_method = "exp";  // "exp", "none", "floor" or "add-k"
  double smooth_value = -1;           // floor / add-k value; < 0 = sacreBLEU's default (0.1 / 1)
  int max_ngram_order = 4;
  bool effective_order = false;       // corpus BLEU default; true for sentence-level BLEU
  bool lowercase = false;             // sacreBLEU's -lc: both sides lowercased first ("case:lc")
};

struct BleuScore {
  double score = 0;                 // 0..100
  std::vector<double> counts;       // matched n-grams per order (add-k adds its value, as sacreBLEU)
  std::vector<double> totals;       // hypothesis n-grams per order
  std::vector<double> precisions;   // per order, percentages
  double bp = 1;                    // brevity penalty
  int64_t sys_len = 0;              // hypothesis tokens
  int64_t ref_len = 0;              // closest reference tokens
  /// e.g. "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
  std::string signature;
  /// sacreBLEU's str(score): "BLEU = 34.12 68.2/42.0/27.5/18.2 (BP = 1.000 ratio = 1.012 hyp_len = 85
  /// ref_len = 84)"
  std::string format() const;
};

/// Corpus BLEU of hyps against one reference per hypothesis. DataError when the sizes differ or
/// there are no hypotheses, ConfigError for an unknown tokenizer or smoothing method.
BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                      const BleuOptions& options = {});

/// Several reference streams: ref_streams[k][i] is the k-th reference of hyps[i] (sacreBLEU's
/// `corpus_bleu(hyps, ref_streams)`); every stream must have hyps.size() lines.
BleuScore corpus_bleu_multi(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& ref_streams,
                            const BleuOptions& options = {});

/// sacreBLEU's Tokenizer13a (mteval-v13a) on one segment: the returned tokens are space-separated.
std::string tokenize_13a(const std::string& line);

}  // namespace attnlab::metrics
