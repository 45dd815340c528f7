// The gpt plugin's `pretrained:` folder against Hugging Face transformers: a small random GPT-2 saved
// by save_pretrained (tests/python/hf_gpt2_fixture.py, run here with the venv's python) loads into
// the plugin, whose logits equal transformers' within 1e-4 (fp32; fp16 weights too), whose greedy
// continuation equals generate()'s token for token (with and without the KV cache), from files
// named with and without the "transformer." prefix; and every bad folder is one DataError naming
// the file.
#include "hf_testing.hpp"

#include <filesystem>
#include <fstream>
#include <string>

namespace attnlab::models::gpt {
namespace {

namespace fs = std::filesystem;

class HfGpt2 : public HfFixtureTest {
 protected:
  HfGpt2() : HfFixtureTest("hf_gpt2_fixture.py") {}
};

TEST_F(HfGpt2, LogitsEqualTransformersWithAndWithoutThePrefix) {
  for (const std::string folder : {"model", "bare"}) {
    EXPECT_LT(logits_difference(*make(folder), "logits"), 1e-4) << folder;
  }
}

TEST_F(HfGpt2, HalfPrecisionWeightsLoadAsTheirFloat32Values) {
  EXPECT_LT(logits_difference(*make("fp16"), "logits16"), 1e-4);
  EXPECT_LT(logits_difference(*make("bf16"), "logits_bf16"), 1e-4);
}

TEST_F(HfGpt2, GreedyContinuationEqualsGenerateWithAndWithoutTheCache) { expect_greedy_equal(*make("model")); }

TEST_F(HfGpt2, ShapeOptionsThatDisagreeWithConfigJsonAreRefused) {
  const auto msg = testutil::message_of<Error>([&] { make("model", ", num_heads: 2"); });
  EXPECT_TRUE(testutil::contains(msg, "num_heads")) << msg;
  EXPECT_TRUE(testutil::contains(msg, "n_head 4")) << msg;  // config.json: n_head 4
  ctx.data.tgt_vocab_size = 50;
  const auto vocab_msg = testutil::message_of<Error>([&] { make("model"); });
  EXPECT_TRUE(testutil::contains(vocab_msg, "vocab_size 397")) << vocab_msg;
  EXPECT_TRUE(testutil::contains(vocab_msg, "byte_bpe")) << vocab_msg;
}

/// A copy of the model folder `from` to break.
std::string copy_folder(const std::string& from, const std::string& name) {
  const fs::path dir = fs::path(testutil::temp_dir("attnlab-hf-broken")) / name;
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"}) {
    fs::copy_file(fs::path(from) / f, dir / f);
  }
  return dir.string();
}

void replace_in(const std::string& file, const std::string& from, const std::string& to) {
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from << " in " << file;
  text.replace(at, from.size(), to);
  std::ofstream(file, std::ios::trunc) << text;
}

TEST_F(HfGpt2, BadFoldersAreOneErrorNamingTheFile) {
  const auto broken_copy = [&](const std::string& name) { return copy_folder(dir() + "/model", name); };
  {  // no folder
    const auto msg = message(dir() + "/nowhere");
    EXPECT_TRUE(testutil::contains(msg, "nowhere: no such file")) << msg;
  }
  {  // an architecture we do not run
    const auto dir = broken_copy("llama");
    replace_in(dir + "/config.json", "\"gpt2\"", "\"mamba\"");
    const auto msg = message(dir);
    EXPECT_TRUE(testutil::contains(msg, "model_type \"mamba\"")) << msg;
    EXPECT_TRUE(testutil::contains(msg, "config.json")) << msg;
  }
  {  // config.json that is not JSON
    const auto dir = broken_copy("json");
    replace_in(dir + "/config.json", "{", "{,");
    const auto msg = message(dir);
    EXPECT_TRUE(testutil::contains(msg, "config.json: not JSON")) << msg;
  }
  {  // config.json that lies about the width: the tensors' shapes disagree
    const auto dir = broken_copy("width");
    replace_in(dir + "/config.json", "\"n_embd\": 32", "\"n_embd\": 16");
    const auto msg = message(dir);
    EXPECT_TRUE(testutil::contains(msg, "model.safetensors")) << msg;
    EXPECT_TRUE(testutil::contains(msg, "has shape")) << msg;
  }
  {  // a layer more than the file has
    const auto dir = broken_copy("layers");
    replace_in(dir + "/config.json", "\"n_layer\": 2", "\"n_layer\": 3");
    const auto msg = message(dir);
    EXPECT_TRUE(testutil::contains(msg, "h.2.")) << msg;
  }
  {  // a layer fewer: the file's extra tensors have no place
    const auto dir = broken_copy("fewer");
    replace_in(dir + "/config.json", "\"n_layer\": 2", "\"n_layer\": 1");
    const auto msg = message(dir);
    EXPECT_TRUE(testutil::contains(msg, "has no place")) << msg;
  }
  {  // a weight stored as integers: the header's first "F32" made "I32" (the same size, a valid file)
    const auto dir = broken_copy("dtype");
    replace_in(dir + "/model.safetensors", "\"F32\"", "\"I32\"");
    const auto msg = message(dir);
    EXPECT_TRUE(testutil::contains(msg, "model.safetensors: tensor")) << msg;
    EXPECT_TRUE(testutil::contains(msg, "is I32, expected a floating dtype")) << msg;
  }
  {  // a truncated weights file
    const auto dir = broken_copy("truncated");
    fs::resize_file(dir + "/model.safetensors", fs::file_size(dir + "/model.safetensors") / 2);
    const auto msg = message(dir);
    EXPECT_TRUE(testutil::contains(msg, "model.safetensors")) << msg;
  }
}

}  // namespace
}  // namespace attnlab::models::gpt
