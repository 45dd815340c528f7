// Registers multi30k with the plugin registry: option schema and factory (the tokenizers are
// plugins too, created through the registry from the `tokenizer` option, one per language).
#include "multi30k.hpp"

#include <attnlab/config/schema.hpp>
#include <attnlab/data/fetch.hpp>
#include <attnlab/error.hpp>
#include <attnlab/plugin/plugin.hpp>
#include <attnlab/plugin/registry.hpp>

#include <memory>

namespace {

using namespace attnlab;
using datasets::multi30k::Multi30k;
using datasets::multi30k::Multi30kOptions;

config::Schema schema() {
  return {
      config::opt_enum("src", "de", {"de", "en", "fr"}, "source language"),
      config::opt_enum("tgt", "en", {"de", "en", "fr"}, "target language"),
      config::opt_node("tokenizer", config::Type::Any, "{plugin: d2l_words}",
                       "tokenizer plugin (a name or a map with `plugin:` and its options), one instance per "
                       "language, trained on that language's training split"),
      config::opt_int("min_freq", 2, "training-split tokens rarer than this become <unk> (not for tokenizers with their own inventory, "
                      "e.g. sentencepiece)", 0),
      config::opt_int("max_len", 0, "drop training pairs with more tokens than this on either side (0 = keep all)",
                      0),
      config::opt_int("num_train", 0, "train on the first N training pairs only (0 = all; the tokenizers still "
                      "learn from every pair)", 0),
      config::opt_int("batch_size", 128, "pairs per batch (padded to the batch's longest)", 1),
      config::opt_bool("bucketing", true, "training batches of similar lengths (else a random permutation)"),
      config::opt_int("bucket_chunk", 100, "bucketing: batches per length-sorted chunk", 1),
      config::opt_string("data_dir", "", "where multi30k/ lives or is fetched to (\"\" = runner's)"),
      config::opt_string("url_base", "",
                         "one upstream folder (http://, https://, file://) replacing the default ones, GitHub's "
                         "raw view then raw.githubusercontent.com (\"\" = those); the mirror still comes first"),
      config::opt_bool("verify", true, "check the files' pinned SHA-256 sums"),
  };
}

std::shared_ptr<data::Dataset> make(const config::Options& o, const plugin::BuildContext& ctx) {
  Multi30kOptions opt;
  opt.src = o.get_string("src");
  opt.tgt = o.get_string("tgt");
  if (opt.src == opt.tgt) o.fail("tgt", "source and target language must differ");
  opt.min_freq = o.get_int("min_freq");
  opt.max_len = o.get_int("max_len");
  opt.num_train = o.get_int("num_train");
  opt.batch_size = o.get_int("batch_size");
  opt.bucketing = o.get_bool("bucketing");
  opt.bucket_chunk = o.get_int("bucket_chunk");
  opt.data_dir = o.get_string("data_dir");
  if (const std::string base = o.get_string("url_base"); !base.empty()) {
    if (const std::string why = data::url_problem(base); !why.empty()) o.fail("url_base", why);
    opt.url_bases = {base};
  }
  opt.verify = o.get_bool("verify");
  ATTNLAB_CHECK(ctx.registry != nullptr, PluginError,
                "multi30k needs the plugin registry in its build context to create its tokenizers");
  auto src_tok = ctx.registry->create<data::Tokenizer>(o.node("tokenizer"), ctx);
  auto tgt_tok = ctx.registry->create<data::Tokenizer>(o.node("tokenizer"), ctx);
  return std::make_shared<Multi30k>(std::move(opt), std::move(src_tok), std::move(tgt_tok));
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::data::Dataset, "multi30k",
               "Multi30K task 1 (de/en/fr image captions, 29k/1014/1000), tokenizer plugin, bucketed batches", schema,
               make)
