// sacreBLEU 2.6.0's corpus BLEU, step for step:
//   tokenizers/tokenizer_13a.py + tokenizer_re.py  -> tokenize_13a
//   metrics/helpers.py extract_all_word_ngrams      -> ngram_counts
//   metrics/bleu.py _compute_segment_statistics, _get_closest_ref_len, compute_bleu
// The regex rules of TokenizerRegexp only ever match ASCII characters next to "any non-digit", so
// they are applied to UTF-8 bytes with the same left-to-right, non-overlapping scan as Python's
// re.sub (a multi-byte character behaves like its last byte before a match and its first after);
// whitespace (str.split / str.rstrip) is Python's Unicode whitespace.
#include <attnlab/data/text.hpp>
#include <attnlab/error.hpp>
#include <attnlab/metrics/sacrebleu.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

namespace attnlab::metrics {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

/// Length in bytes of the Python-whitespace character starting at s[i], 0 when it is not one
/// (str.isspace: \t\n\v\f\r \x1c-\x1f, U+0085, U+00A0, U+1680, U+2000-200A, U+2028, U+2029,
/// U+202F, U+205F, U+3000).
size_t space_len(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  const unsigned c = b(0);
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return 1;
  if (c == 0xC2 && (b(1) == 0x85 || b(1) == 0xA0)) return 2;
  if (c == 0xE1 && b(1) == 0x9A && b(2) == 0x80) return 3;
  if (c == 0xE2 && b(1) == 0x80 && ((b(2) >= 0x80 && b(2) <= 0x8A) || b(2) == 0xA8 || b(2) == 0xA9 || b(2) == 0xAF))
    return 3;
  if (c == 0xE2 && b(1) == 0x81 && b(2) == 0x9F) return 3;
  if (c == 0xE3 && b(1) == 0x80 && b(2) == 0x80) return 3;
  return 0;
}

/// Python's str.split(): runs of whitespace separate, no empty tokens.
std::vector<std::string> split_whitespace(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 0; i < s.size();) {
    const size_t w = space_len(s, i);
    if (w > 0) {
      if (!cur.empty()) out.push_back(std::move(cur)), cur.clear();
      i += w;
    } else {
      cur += s[i++];
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

/// Python's str.rstrip().
std::string rstrip(const std::string& s) {
  size_t end = 0;  // one past the last non-space character
  for (size_t i = 0; i < s.size();) {
    const size_t w = space_len(s, i);
    if (w > 0) {
      i += w;
    } else {
      end = ++i;
    }
  }
  return s.substr(0, end);
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  std::string out;
  size_t start = 0;
  for (size_t pos; (pos = s.find(from, start)) != std::string::npos; start = pos + from.size()) {
    out.append(s, start, pos - start);
    out += to;
  }
  if (start == 0) return;
  out.append(s, start, std::string::npos);
  s = std::move(out);
}

/// re.compile(r'([\{-\~\[-\` -\&\(-\+\:-\@\/])') -> r' \1 '
bool rule1_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u >= 0x7B && u <= 0x7E) || (u >= 0x5B && u <= 0x60) || (u >= 0x20 && u <= 0x26) ||
         (u >= 0x28 && u <= 0x2B) || (u >= 0x3A && u <= 0x40) || u == 0x2F;
}

/// One pass of a two-character rule (first, second) -> out(first, second), scanning left to right
/// and resuming after each match, as re.sub does.
template <class Match, class Emit>
std::string two_char_rule(const std::string& s, Match match, Emit emit) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && match(s[i], s[i + 1])) {
      emit(out, s[i], s[i + 1]);
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

using NgramCounts = std::unordered_map<std::string, int64_t>;  // n-gram tokens joined by ' ' -> count

/// extract_all_word_ngrams(line, 1, max_order): n-gram counts and the token count.
NgramCounts ngram_counts(const std::string& line, int max_order, int64_t& len) {
  const auto tokens = split_whitespace(line);
  len = static_cast<int64_t>(tokens.size());
  NgramCounts counts;
  for (int n = 1; n <= max_order; ++n) {
    for (size_t i = 0; i + n <= tokens.size(); ++i) {
      std::string key = tokens[i];
      for (size_t j = i + 1; j < i + n; ++j) key += ' ' + tokens[j];
      ++counts[key];
    }
  }
  return counts;
}

int order_of(const std::string& key) {
  int n = 1;
  for (char c : key) n += c == ' ';
  return n;
}

double my_log(double x) { return x == 0.0 ? -9999999999.0 : std::log(x); }

}  // namespace

std::string tokenize_13a(const std::string& input) {
  std::string line = input;
  replace_all(line, "<skipped>", "");
  replace_all(line, "-\n", "");
  replace_all(line, "\n", " ");
  if (line.find('&') != std::string::npos) {
    replace_all(line, "&quot;", "\"");
    replace_all(line, "&amp;", "&");
    replace_all(line, "&lt;", "<");
    replace_all(line, "&gt;", ">");
  }
  line = " " + line + " ";
  // Rule 1: symbols get spaces around them.
  std::string r1;
  r1.reserve(line.size() * 2);
  for (char c : line) {
    if (rule1_char(c)) {
      r1 += ' ';
      r1 += c;
      r1 += ' ';
    } else {
      r1 += c;
    }
  }
  const auto dot_comma = [](char c) { return c == '.' || c == ','; };
  // Rule 2: ([^0-9])([\.,]) -> '\1 \2 '
  std::string r2 = two_char_rule(
      r1, [&](char a, char b) { return !is_digit(a) && dot_comma(b); },
      [](std::string& o, char a, char b) { o += a, o += ' ', o += b, o += ' '; });
  // Rule 3: ([\.,])([^0-9]) -> ' \1 \2'
  std::string r3 = two_char_rule(
      r2, [&](char a, char b) { return dot_comma(a) && !is_digit(b); },
      [](std::string& o, char a, char b) { o += ' ', o += a, o += ' ', o += b; });
  // Rule 4: ([0-9])(-) -> '\1 \2 '
  std::string r4 = two_char_rule(
      r3, [](char a, char b) { return is_digit(a) && b == '-'; },
      [](std::string& o, char a, char b) { o += a, o += ' ', o += b, o += ' '; });
  const auto tokens = split_whitespace(r4);
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) out += ' ';
    out += tokens[i];
  }
  return out;
}

std::string BleuScore::format() const {
  std::string prec;
  for (size_t i = 0; i < precisions.size(); ++i) prec += fmt::format("{}{:.1f}", i ? "/" : "", precisions[i]);
  const double ratio = ref_len ? static_cast<double>(sys_len) / static_cast<double>(ref_len) : 0.0;
  return fmt::format("BLEU = {:.2f} {} (BP = {:.3f} ratio = {:.3f} hyp_len = {} ref_len = {})", score, prec, bp,
                     ratio, sys_len, ref_len);
}

BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                      const BleuOptions& options) {
  return corpus_bleu_multi(hyps, {refs}, options);
}

BleuScore corpus_bleu_multi(const std::vector<std::string>& hyps,
                            const std::vector<std::vector<std::string>>& ref_streams, const BleuOptions& options) {
  const auto& o = options;
  ATTNLAB_CHECK(o.tokenize == "13a" || o.tokenize == "none", ConfigError,
                "corpus_bleu: unknown tokenizer '{}' (expected '13a' or 'none')", o.tokenize);
  const bool known_smooth = o.smooth_method == "exp" || o.smooth_method == "none" || o.smooth_method == "floor" ||
                            o.smooth_method == "add-k";
  ATTNLAB_CHECK(known_smooth, ConfigError,
                "corpus_bleu: unknown smoothing method '{}' (expected 'exp', 'none', 'floor' or 'add-k')",
                o.smooth_method);
  ATTNLAB_CHECK(o.max_ngram_order >= 1, ConfigError, "corpus_bleu: max_ngram_order must be >= 1, found {}",
                o.max_ngram_order);
  ATTNLAB_CHECK(!hyps.empty(), DataError, "corpus_bleu: no hypotheses to score");
  ATTNLAB_CHECK(!ref_streams.empty(), DataError, "corpus_bleu: no reference streams for {} hypotheses", hyps.size());
  for (size_t k = 0; k < ref_streams.size(); ++k) {
    ATTNLAB_CHECK(ref_streams[k].size() == hyps.size(), DataError,
                  "corpus_bleu: reference stream {} has {} lines, expected one per hypothesis ({})", k,
                  ref_streams[k].size(), hyps.size());
  }
  const auto preprocess = [&](const std::string& s) {
    // sacreBLEU's _preprocess_segment: lowercase (str.lower()), then rstrip and tokenize.
    std::string t = rstrip(o.lowercase ? data::utf8_lower(s) : s);
    return o.tokenize == "13a" ? tokenize_13a(t) : t;
  };
  const int max_n = o.max_ngram_order;
  int64_t sys_len = 0, ref_len = 0;
  std::vector<int64_t> correct(max_n, 0), total(max_n, 0);
  for (size_t i = 0; i < hyps.size(); ++i) {
    // _extract_reference_info: n-gram counts maxed over the references, and their lengths.
    NgramCounts ref_ngrams;
    std::vector<int64_t> ref_lens;
    for (const auto& stream : ref_streams) {
      int64_t len = 0;
      NgramCounts c = ngram_counts(preprocess(stream[i]), max_n, len);
      ref_lens.push_back(len);
      for (auto& [key, count] : c) ref_ngrams[key] = std::max(ref_ngrams[key], count);
    }
    int64_t hyp_len = 0;
    const NgramCounts hyp_ngrams = ngram_counts(preprocess(hyps[i]), max_n, hyp_len);
    // _get_closest_ref_len: smallest |hyp - ref|, ties to the shorter reference.
    int64_t closest_diff = -1, closest_len = -1;
    for (int64_t r : ref_lens) {
      const int64_t diff = std::llabs(hyp_len - r);
      if (closest_diff == -1 || diff < closest_diff) {
        closest_diff = diff, closest_len = r;
      } else if (diff == closest_diff && r < closest_len) {
        closest_len = r;
      }
    }
    sys_len += hyp_len;
    ref_len += closest_len;
    for (const auto& [key, count] : hyp_ngrams) {
      const int n = order_of(key) - 1;
      total[n] += count;
      auto it = ref_ngrams.find(key);
      if (it != ref_ngrams.end()) correct[n] += std::min(count, it->second);
    }
  }

  // compute_bleu
  BleuScore s;
  s.sys_len = sys_len;
  s.ref_len = ref_len;
  s.counts.assign(correct.begin(), correct.end());
  s.totals.assign(total.begin(), total.end());
  s.precisions.assign(max_n, 0.0);
  const bool floor = o.smooth_method == "floor", add_k = o.smooth_method == "add-k";
  const double smooth_value = o.smooth_value >= 0 ? o.smooth_value : (floor ? 0.1 : 1.0);
  std::string smooth = o.smooth_method;
  if (floor || add_k) smooth += fmt::format("[{:.2f}]", smooth_value);
  s.signature = fmt::format("nrefs:{}|case:{}|eff:{}|tok:{}|smooth:{}|version:{}", ref_streams.size(),
                            o.lowercase ? "lc" : "mixed", o.effective_order ? "yes" : "no", o.tokenize, smooth,
                            kSacreBleuVersion);
  if (sys_len < ref_len) s.bp = sys_len > 0 ? std::exp(1.0 - static_cast<double>(ref_len) / sys_len) : 0.0;
  bool any_correct = false;
  for (int64_t c : correct) any_correct = any_correct || c != 0;
  if (!any_correct) return s;  // score 0 (sacreBLEU #141)
  double smooth_mteval = 1.0;
  int eff_order = max_n;
  for (int n = 1; n <= max_n; ++n) {
    double& c = s.counts[n - 1];
    double& t = s.totals[n - 1];
    if (add_k && n > 1) c += smooth_value, t += smooth_value;
    if (t == 0) break;
    if (o.effective_order) eff_order = n;
    if (c == 0) {
      if (o.smooth_method == "exp") {
        smooth_mteval *= 2;
        s.precisions[n - 1] = 100.0 / (smooth_mteval * t);
      } else if (floor) {
        s.precisions[n - 1] = 100.0 * smooth_value / t;
      }
    } else {
      s.precisions[n - 1] = 100.0 * c / t;
    }
  }
  double log_sum = 0;
  for (int n = 0; n < eff_order; ++n) log_sum += my_log(s.precisions[n]);
  s.score = s.bp * std::exp(log_sum / eff_order);
  return s;
}

}  // namespace attnlab::metrics
