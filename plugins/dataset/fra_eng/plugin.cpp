// Registers fra_eng with the plugin registry: option schema and factory.
#include "fra_eng.hpp"

#include <attnlab/config/schema.hpp>
#include <attnlab/data/fetch.hpp>
#include <attnlab/plugin/plugin.hpp>

#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

namespace {

using namespace attnlab;
using datasets::fra_eng::FraEng;
using datasets::fra_eng::FraEngOptions;

config::Schema schema() {
  return {
      config::opt_int("batch_size", 128, "pairs per batch (the last batch may be smaller)", 1),
      config::opt_int("num_steps", 9, "tokens per sentence after padding/trimming (targets get <bos> too)", 1),
      config::opt_int("num_train", 512, "training pairs (d2l 1.0 split; validation = the rest of the "
                                         "num_train + num_val + 1 pairs d2l reads)", 1),
      config::opt_int("num_val", 128, "validation pairs requested (d2l reads one more)", 0),
      config::opt_int("min_freq", 2, "tokens rarer than this become <unk>", 0),
      config::opt_int("num_examples", 0,
                      "0: d2l 1.0 train/val split; > 0: d2l 0.17 mode, the first num_examples (+1, as d2l) "
                      "pairs, all for training",
                      0),
      config::opt_string("data_dir", "", "where fra-eng/fra-eng.zip lives or is fetched to (\"\" = runner's)"),
      config::opt_string("url", "",
                         "one download URL (http://, https://, file://) replacing the default sources, which are "
                         "d2l's copy then manythings.org (\"\" = those); the mirror, when set, still comes first"),
      config::opt_string("sha1", "", "accepted SHA-1 of the zip, replacing the pinned sums (\"\" = pinned ones)"),
      config::opt_string("sha256", "", "accepted SHA-256 of the zip, replacing the pinned sums (\"\" = pinned ones)"),
      config::opt_enum("verify", "content", {"content", "strict"},
                       "a zip no accepted sum matches: 'content' uses it after checking its content (with a "
                       "warning naming its checksum), 'strict' refuses it"),
      config::opt_bool("shuffle", true, "shuffle training batches (seeded by the experiment seed)"),
  };
}

std::shared_ptr<data::Dataset> make(const config::Options& o, const plugin::BuildContext& ctx) {
  FraEngOptions opt;
  opt.batch_size = o.get_int("batch_size");
  opt.num_steps = o.get_int("num_steps");
  opt.num_train = o.get_int("num_train");
  opt.num_val = o.get_int("num_val");
  opt.min_freq = o.get_int("min_freq");
  opt.num_examples = o.get_int("num_examples");
  opt.data_dir = o.get_string("data_dir");
  if (const std::string url = o.get_string("url"); !url.empty()) {
    if (const std::string why = data::url_problem(url); !why.empty()) o.fail("url", why);
    opt.urls = {url};
  }
  std::vector<std::string> sums;
  for (const char* name : {"sha1", "sha256"}) {
    const std::string sum = o.get_string(name);
    if (sum.empty()) continue;
    const std::string kind = name == std::string("sha1") ? "SHA-1" : "SHA-256";
    if (data::checksum_kind(sum) != kind) {
      o.fail(name, fmt::format("'{}' is not a {} ({} lowercase hex digits)", sum, kind, kind == "SHA-1" ? 40 : 64));
    }
    sums.push_back(sum);
  }
  if (!sums.empty()) opt.sums = std::move(sums);
  opt.strict = o.get_string("verify") == "strict";
  opt.shuffle = o.get_bool("shuffle");
  return std::make_shared<FraEng>(std::move(opt));
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::data::Dataset, "fra_eng", "English-French pairs (manythings.org/anki via d2l), d2l 1.0.3 MTFraEng",
               schema, make)
