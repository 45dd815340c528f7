#pragma once
// `runner compare --group-by KEYS`: runs grouped by the values of config keys, and per group the
// mean, sample sd, n, min and max of every quantity compare shows (each metric's final and best
// value, the evaluation scores, the attention statistics); with exactly two groups Welch's t-test
// (two-sided p) and Hedges' g of the first group minus the second.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tools/runs.hpp"
#include "tools/table.hpp"

namespace attnlab::tools {

struct Group {
  std::vector<std::string> values;  // one per key; "(unset)" where a run's config lacks the key
  std::string label;                // "model.norm=first, seed=3"
  std::vector<const Run*> runs;
};

/// Groups in the order of their values (sorted). ConfigError-like Error when a key is in no run's
/// config (with did-you-mean among the config keys).
std::vector<Group> group_runs(const std::vector<Run>& runs, const std::vector<std::string>& keys);

/// One number per run (nullopt where the run lacks it): "train/loss" "final", "eval test" "sacrebleu", ...
struct Quantity {
  std::string section;  // "metric", "eval", "samples", "attention"
  std::string name;     // "train/loss", "test", "encoder_self layer 1 head 2"
  std::string value;    // "final", "best (min)", "sacrebleu", "d2l_mean_bleu", "mean", "entropy", "max_weight"
  std::function<std::optional<double>(const Run&)> of;
};
/// With `heads`, also the summaries of runner ablate and runner prune (head_tables.hpp), when a run has them.
std::vector<Quantity> quantities(const std::vector<Run>& runs, const std::vector<std::string>& metrics,
                                 bool attention, bool heads = true);

/// quantity | value | one column per group ("mean ± sd [min, max]") | p (Welch) | Hedges' g.
Table grouped_table(const std::vector<Group>& groups, const std::vector<Quantity>& qs);
/// Long form for scripts: key columns, section, quantity, value, n, mean, sd, min, max, t, df,
/// p_welch, hedges_g; one row per group and quantity, full precision.
Table grouped_csv(const std::vector<Group>& groups, const std::vector<Quantity>& qs, const std::vector<std::string>& keys);
/// group | n | files
Table groups_table(const std::vector<Group>& groups);

}  // namespace attnlab::tools
