// Registers fra_eng with the plugin registry: option schema and factory.
#include "fra_eng.hpp"

#include <attnlab/config/binding.hpp>
#include <attnlab/data/fetch.hpp>
#include <attnlab/plugin/plugin.hpp>

#include <fmt/format.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace attnlab;
using datasets::fra_eng::FraEng;
using datasets::fra_eng::FraEngOptions;

/// FraEngOptions as the config gives them: one URL and a SHA-1 and/or SHA-256 instead of the lists.
struct Config : FraEngOptions {
  std::string url;  // "" = FraEngOptions::urls
  std::string sha1, sha256;
};

const config::Binding<Config>& binding() {
  static const auto b =
      config::Binding<Config>()
          .option("batch_size", &Config::batch_size, "pairs per batch (the last batch may be smaller)", {.min = 1})
          .option("num_steps", &Config::num_steps, "tokens per sentence after padding/trimming (targets get <bos> too)",
                  {.min = 1})
          .option("num_train", &Config::num_train,
                  "training pairs (d2l 1.0 split; validation = the rest of the num_train + num_val + 1 pairs d2l "
                  "reads)",
                  {.min = 1})
          .option("num_val", &Config::num_val, "validation pairs requested (d2l reads one more)", {.min = 0})
          .option("min_freq", &Config::min_freq, "tokens rarer than this become <unk>", {.min = 0})
          .option("num_examples", &Config::num_examples,
                  "0: d2l 1.0 train/val split; > 0: d2l 0.17 mode, the first num_examples (+1, as d2l) pairs, all "
                  "for training",
                  {.min = 0})
          .option("data_dir", &Config::data_dir, "where fra-eng/fra-eng.zip lives or is fetched to (\"\" = runner's)")
          .option("url", &Config::url,
                  "one download URL (http://, https://, file://) replacing the default sources, which are d2l's "
                  "copy then manythings.org (\"\" = those); the mirror, when set, still comes first")
          .option("sha1", &Config::sha1, "accepted SHA-1 of the zip, replacing the pinned sums (\"\" = pinned ones)")
          .option("sha256", &Config::sha256,
                  "accepted SHA-256 of the zip, replacing the pinned sums (\"\" = pinned ones)")
          .choice("verify", &Config::strict, {{"content", false}, {"strict", true}},
                  "a zip no accepted sum matches: 'content' uses it after checking its content (with a warning "
                  "naming its checksum), 'strict' refuses it")
          .option("shuffle", &Config::shuffle, "shuffle training batches (seeded by the experiment seed)");
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<data::Dataset> make(const config::Options& o, const plugin::BuildContext&) {
  Config c = binding().read(o);
  if (!c.url.empty()) {
    if (const std::string why = data::url_problem(c.url); !why.empty()) binding().fail(o, &Config::url, why);
    c.urls = {c.url};
  }
  std::vector<std::string> sums;
  for (const auto& [field, kind, digits] :
       {std::tuple{&Config::sha1, "SHA-1", 40}, std::tuple{&Config::sha256, "SHA-256", 64}}) {
    const std::string& sum = c.*field;
    if (sum.empty()) continue;
    if (data::checksum_kind(sum) != kind) {
      binding().fail(o, field, fmt::format("'{}' is not a {} ({} lowercase hex digits)", sum, kind, digits));
    }
    sums.push_back(sum);
  }
  if (!sums.empty()) c.sums = std::move(sums);
  return std::make_shared<FraEng>(static_cast<FraEngOptions&&>(std::move(c)));
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::data::Dataset, "fra_eng",
               "English-French pairs (manythings.org/anki via d2l), d2l 1.0.3 MTFraEng", schema, make)
