// The byte_bpe tokenizer's options and its entry in the registry (the tokenizer: byte_bpe.hpp).
#include <attnlab/config/binding.hpp>
#include <attnlab/config/schema.hpp>
#include <attnlab/data/tokenizer.hpp>
#include <attnlab/error.hpp>
#include <attnlab/plugin/plugin.hpp>

#include "byte_bpe.hpp"
#include "hf_files.hpp"

#include <memory>
#include <string>

namespace {

using namespace attnlab;
using namespace attnlab::tokenizers::byte_bpe;

struct ByteBpeOptions {
  std::string path;  // a folder with tokenizer.json, or vocab.json + merges.txt; or a tokenizer.json file
};

const config::Binding<ByteBpeOptions>& binding() {
  static const auto b = config::Binding<ByteBpeOptions>().required(
      "path", &ByteBpeOptions::path,
      "Hugging Face tokenizer files: a folder holding tokenizer.json (preferred) or vocab.json and merges.txt, or a "
      "tokenizer.json file (a relative path from the working directory)");
  return b;
}

config::Schema schema() { return binding().schema(); }

std::shared_ptr<data::Tokenizer> make(const config::Options& o, const plugin::BuildContext&) {
  const ByteBpeOptions opt = binding().read(o);
  if (opt.path.empty()) binding().fail(o, &ByteBpeOptions::path, "give the folder or file of the tokenizer");
  return std::make_shared<ByteBpe>(read_hf_files(opt.path), opt.path);
}

}  // namespace

ATTNLAB_PLUGIN(attnlab::data::Tokenizer, "byte_bpe",
               "GPT-2's byte-level BPE from Hugging Face files (tokenizer.json, or vocab.json + merges.txt), token "
               "for token as Hugging Face's tokenizers; fixed ids, nothing to train",
               schema, make)
