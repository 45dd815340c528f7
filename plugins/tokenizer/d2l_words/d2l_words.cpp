// Tokenizer "d2l_words": d2l's word rules (data::d2l_preprocess: lowercase, spaces before ",.!?",
// U+202F/U+00A0 as spaces) split on spaces; decode joins with single spaces. Nothing to learn.
#include <attnlab/config/schema.hpp>
#include <attnlab/data/text.hpp>
#include <attnlab/data/tokenizer.hpp>
#include <attnlab/plugin/plugin.hpp>

#include <memory>
#include <string>
#include <vector>

namespace {

using namespace attnlab;

class D2lWords final : public data::Tokenizer {
 public:
  std::string name() const override { return "d2l_words"; }
  bool train(const std::vector<std::string>& corpus, const std::string& cache_dir) override { return false; }
  std::vector<std::string> encode(const std::string& text) const override {
    return data::split_spaces(data::d2l_preprocess(text));
  }
  std::string decode(const std::vector<std::string>& tokens) const override {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) out += ' ';
      out += tokens[i];
    }
    return out;
  }
};

config::Schema schema() { return {}; }

std::shared_ptr<data::Tokenizer> make(const config::Options&, const plugin::BuildContext&) {
  return std::make_shared<D2lWords>();
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::data::Tokenizer, "d2l_words",
               "d2l word tokens: lowercased, space before ,.!?, split on spaces (decode joins with spaces)", schema,
               make)
