// Registers multi30k with the plugin registry: option schema and factory (the tokenizers are
// plugins too, created through the registry from the `tokenizer` option, one per language).
#include "multi30k.hpp"

#include <attnlab/config/binding.hpp>
#include <attnlab/data/fetch.hpp>
#include <attnlab/error.hpp>
#include <attnlab/plugin/plugin.hpp>
#include <attnlab/plugin/registry.hpp>

#include <memory>
#include <string>
#include <vector>

namespace {

using namespace attnlab;
using datasets::multi30k::Multi30k;
using datasets::multi30k::Multi30kOptions;

/// Multi30kOptions as the config gives them: one URL base instead of the list, and the tokenizer.
struct Config : Multi30kOptions {
  std::string url_base;  // "" = Multi30kOptions::url_bases
  config::Node tokenizer;
};

const config::Binding<Config>& binding() {
  static const std::vector<std::string> languages = {"de", "en", "fr"};
  static const auto b =
      config::Binding<Config>()
          .choice("src", &Config::src, languages, "source language")
          .choice("tgt", &Config::tgt, languages, "target language")
          .node("tokenizer", &Config::tokenizer, config::Type::Any, "{plugin: d2l_words}",
                "tokenizer plugin (a name or a map with `plugin:` and its options), one instance per language, "
                "trained on that language's training split (with shared_vocab one, trained on both)")
          .option("min_freq", &Config::min_freq,
                  "training-split tokens rarer than this become <unk> (not for tokenizers with their own "
                  "inventory, e.g. sentencepiece)",
                  {.min = 0})
          .option("max_len", &Config::max_len,
                  "drop training pairs with more tokens than this on either side (0 = keep all)", {.min = 0})
          .option("num_train", &Config::num_train,
                  "train on the first N training pairs only (0 = all, more than the split holds is an error; the tokenizers still learn from every pair)",
                  {.min = 0})
          .option("batch_size", &Config::batch_size, "pairs per batch (padded to the batch's longest)", {.min = 1})
          .option("bucketing", &Config::bucketing, "training batches of similar lengths (else a random permutation)")
          .option("bucket_chunk", &Config::bucket_chunk, "bucketing: batches per length-sorted chunk", {.min = 1})
          .option("data_dir", &Config::data_dir, "where multi30k/ lives or is fetched to (\"\" = runner's)")
          .option("url_base", &Config::url_base,
                  "one upstream folder (http://, https://, file://) replacing the default ones, GitHub's raw view "
                  "then raw.githubusercontent.com (\"\" = those); the mirror still comes first")
          .option("verify", &Config::verify, "check the files' pinned SHA-256 sums")
          .option("shared_vocab", &Config::shared_vocab,
                  "one tokenizer trained on both languages and one vocabulary for source and target (for "
                  "model.share_embeddings)");
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<data::Dataset> make(const config::Options& o, const plugin::BuildContext& ctx) {
  Config c = binding().read(o);
  if (c.src == c.tgt) binding().fail(o, &Config::tgt, "source and target language must differ");
  if (!c.url_base.empty()) {
    if (const std::string why = data::url_problem(c.url_base); !why.empty()) {
      binding().fail(o, &Config::url_base, why);
    }
    c.url_bases = {c.url_base};
  }
  ATTNLAB_CHECK(ctx.registry != nullptr, PluginError,
                "multi30k needs the plugin registry in its build context to create its tokenizers");
  auto src_tok = ctx.registry->create<data::Tokenizer>(c.tokenizer, ctx);
  auto tgt_tok = c.shared_vocab ? src_tok : ctx.registry->create<data::Tokenizer>(c.tokenizer, ctx);
  return std::make_shared<Multi30k>(static_cast<Multi30kOptions&&>(std::move(c)), std::move(src_tok),
                                    std::move(tgt_tok));
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::data::Dataset, "multi30k",
               "Multi30K task 1 (de/en/fr image captions, 29k/1014/1000), tokenizer plugin, bucketed batches", schema,
               make)
