// Fuzz target: sacreBLEU's 13a tokenizer (metrics::tokenize_13a) and corpus BLEU on its output.
//
// Input: byte 0 picks the BLEU options (tokenizer 13a/none, smoothing, n-gram order 1-4,
// effective order); the rest is the text: tokenized whole, then split into lines that alternate
// hypothesis / reference for corpus_bleu.
// Properties: tokens come out separated by single spaces with none at either end; BLEU, its
// precisions and brevity penalty stay in range and finite; a corpus scored against itself with
// effective order is 100.
#include <attnlab/error.hpp>
#include <attnlab/metrics/sacrebleu.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common.hpp"

namespace {

void check_tokens(const std::string& in, const std::string& out) {
  if (out.empty()) return;
  if (out.front() == ' ' || out.back() == ' ' || out.find("  ") != std::string::npos)
    fuzz::fail("tokenize_13a('" + in + "') = '" + out + "': empty token or space at an end");
}

bool in_range(double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi + 1e-9; }

void check_score(const attnlab::metrics::BleuScore& s, const std::string& what) {
  if (!in_range(s.score, 0, 100) || !in_range(s.bp, 0, 1))
    fuzz::fail(what + ": score or brevity penalty out of range: " + s.format());
  for (double p : s.precisions)
    if (!in_range(p, 0, 100)) fuzz::fail(what + ": precision out of range: " + s.format());
  (void)s.format();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t sel = data[0];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);

  check_tokens(text, attnlab::metrics::tokenize_13a(text));

  attnlab::metrics::BleuOptions o;
  o.tokenize = (sel & 1) ? "none" : "13a";
  static const char* const kSmooth[] = {"exp", "none", "floor", "add-k"};
  o.smooth_method = kSmooth[(sel >> 1) & 3];
  o.max_ngram_order = 1 + ((sel >> 3) & 3);
  o.effective_order = (sel >> 5) & 1;

  std::vector<std::string> hyps, refs;
  const auto lines = fuzz::split(text, '\n');
  for (size_t i = 0; i + 1 < lines.size(); i += 2) {
    hyps.push_back(lines[i]);
    refs.push_back(lines[i + 1]);
  }
  try {
    check_score(attnlab::metrics::corpus_bleu(hyps, refs, o), "corpus_bleu");
  } catch (const attnlab::Error&) {
    // no hypotheses: a DataError
  }
  if (lines.empty() || lines.size() > 64) return 0;
  // Self-BLEU with effective order: every n-gram of the hypothesis is in its reference.
  o.effective_order = true;
  const auto self = attnlab::metrics::corpus_bleu(lines, lines, o);
  check_score(self, "self-BLEU");
  if (self.sys_len > 0 && o.smooth_method != "add-k" && std::fabs(self.score - 100.0) > 1e-6)
    fuzz::fail("self-BLEU of a corpus is not 100: " + self.format());
  return 0;
}
