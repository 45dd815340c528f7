#pragma once
// The data of a `runner report` page, as the JSON its script reads (docs/REPORT.md): the runs and
// their configs, every metric series, compare's tables, the recorded attention, translations and
// declared figures.
#include <string>
#include <vector>

#include "tools/report/extras.hpp"
#include "tools/runs.hpp"

namespace attnlab::tools::report {

struct PageInput {
  std::vector<Run> runs;              // as load_run read them
  std::vector<RunExtras> extras;      // one per run, same order
  std::vector<std::string> group_by;  // config keys of --group-by; empty: the runs side by side
  std::string attention_note;         // subsample_attention's note ("" when all was kept)
};

/// Points per curve at most: a longer series (step/lr over thousands of steps) keeps every n-th
/// point and the last.
inline constexpr size_t kMaxCurvePoints = 2000;
/// The rows of a series of `size` values that its curve shows (all, or thinned as above).
std::vector<size_t> curve_rows(size_t size);

/// The page's JSON (script-safe strings: json.hpp).
std::string page_data(const PageInput& in);

}  // namespace attnlab::tools::report
