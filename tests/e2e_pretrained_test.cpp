// End to end with the real runner: a model someone else trained, as Hugging Face saves it (a small
// random GPT-2 from tests/python/hf_gpt2_fixture.py, and a Llama from hf_llama_fixture.py), imported with `runner import hf`, measured by
// running the experiment file it writes (trainer.max_epochs 0: no training, no checkpoint), then
// opened by heads, generate, eval --text and ablate with its weights from the folder; the greedy
// continuation is transformers' own; and what it cannot run is refused in one line (docs/PRETRAINED.md).
#include <attnlab/nn/safetensors.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/train/checkpoint.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "testing/runner.hpp"
#include "testing/testing.hpp"

namespace e2e_pretrained_test {
namespace {
using namespace attnlab;
namespace fs = std::filesystem;

class Pretrained : public testutil::RunnerFixture {
 protected:
  std::string scratch_prefix() const override { return "attnlab-pretrained"; }
  void SetUp() override {
    RunnerFixture::SetUp();
    const auto why = testutil::run_python_fixture("hf_gpt2_fixture.py", tmp_ + "/hf");
    ATTNLAB_REQUIRE(why.empty(), why);
    model_ = tmp_ + "/hf/model";
    text_ = tmp_ + "/text.txt";
    std::ofstream t(text_);
    for (int i = 0; i < 40; ++i) t << "The quick brown fox jumps over the lazy dog. Tom doesn't know where Mary lives.\n";
  }
  testutil::ProcessResult import(const std::string& out, std::vector<std::string> extra = {}) {
    std::vector<std::string> a{"import", "hf", model_, "-o", out, "--text", text_, "--block-size", "16"};
    a.insert(a.end(), extra.begin(), extra.end());
    return run(a);
  }
  std::string model_, text_;
};

TEST_F(Pretrained, ImportRunAndEveryCommandOnTheFoldersWeights) {
  const auto yaml = tmp_ + "/exp/tiny.yaml", res = tmp_ + "/tiny.h5";
  auto r = import(yaml);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto text = testutil::read_file(yaml);
  EXPECT_TRUE(testutil::contains(text, "pretrained: " + model_)) << text;
  EXPECT_TRUE(testutil::contains(text, "plugin: byte_bpe")) << text;

  r = run({yaml, "--results", res, "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  {
    results::ResultsReader rr(res);
    EXPECT_EQ(rr.attr_string("status"), "completed");
    const auto loss = rr.metric("val", "loss");
    ASSERT_EQ(loss.size(), 1u);  // one measurement, nothing trained
    EXPECT_GT(loss[0], 0.0);
    EXPECT_EQ(rr.metric("train", "step"), std::vector<double>{0});
  }
  EXPECT_FALSE(fs::exists(train::checkpoint_dir(res))) << "the weights are the folder's: no checkpoint";

  {  // the continuation transformers' generate() made from the same prompt (the same ids: byte_bpe = HF's)
    const safetensors::File expected(tmp_ + "/hf/expected.safetensors");
    const auto greedy = expected.view("greedy").flatten();  // generate() stops early at <|endoftext|>
    const auto tokens = std::to_string(greedy.numel() - expected.view("prompt").numel());
    r = run({"generate", res, "--prompt", "I'm going", "--tokens", tokens, "--temperature", "0"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    results::ResultsReader rr(res);
    const auto ids = rr.array("generations/generation-1/ids");  // as float32: ids < 2^24 are exact
    ASSERT_EQ(static_cast<int64_t>(ids.values.size()), greedy.numel());
    for (int64_t i = 0; i < greedy.numel(); ++i) {
      EXPECT_EQ(static_cast<int64_t>(ids.values[i]), greedy[i].item<int64_t>()) << i;
    }
  }

  r = run({"eval", res, "--text", text_});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(testutil::contains(r.out, "text " + text_)) << r.out;
  EXPECT_TRUE(testutil::contains(r.out, "perplexity")) << r.out;

  r = run({"heads", res, "--length", "6", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  r = run({"ablate", res, "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  results::ResultsReader rr(res);
  for (const char* group : {"eval/text", "head_scores", "ablation/val"}) EXPECT_TRUE(rr.has(group)) << group;
}

TEST_F(Pretrained, ALlamaImportsRunsAndContinuesAsTransformers) {
  const auto why = testutil::run_python_fixture("hf_llama_fixture.py", tmp_ + "/llama");
  ATTNLAB_REQUIRE(why.empty(), why);
  const auto yaml = tmp_ + "/llama.yaml", res = tmp_ + "/llama.h5";
  auto r = run({"import", "hf", tmp_ + "/llama/model", "-o", yaml, "--text", text_, "--block-size", "16"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(testutil::contains(testutil::read_file(yaml), "# llama from")) << testutil::read_file(yaml);
  r = run({yaml, "--results", res, "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const safetensors::File expected(tmp_ + "/llama/expected.safetensors");
  const auto greedy = expected.view("greedy").flatten();  // generate() stops early at <|endoftext|>
  const auto tokens = std::to_string(greedy.numel() - expected.view("prompt").numel());
  r = run({"generate", res, "--prompt", "I'm going", "--tokens", tokens, "--temperature", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto ids = results::ResultsReader(res).array("generations/generation-1/ids");
  ASSERT_EQ(static_cast<int64_t>(ids.values.size()), greedy.numel());
  for (int64_t i = 0; i < greedy.numel(); ++i) EXPECT_EQ(static_cast<int64_t>(ids.values[i]), greedy[i].item<int64_t>()) << i;
  r = run({"heads", res, "--length", "6", "-q"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST_F(Pretrained, ImportNeverReplacesAFileUnlessForced) {
  const auto yaml = tmp_ + "/mine.yaml";
  { std::ofstream(yaml) << "# the user's own\n"; }
  auto r = import(yaml);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(testutil::contains(r.err, "exists")) << r.err;
  EXPECT_EQ(testutil::read_file(yaml), "# the user's own\n");
  r = import(yaml, {"--force"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(Pretrained, WhatItCannotRunIsOneLineNamingTheFile) {
  {  // a folder without weights
    fs::create_directories(tmp_ + "/empty");
    fs::copy_file(model_ + "/config.json", tmp_ + "/empty/config.json");
    const auto r = run({"import", "hf", tmp_ + "/empty", "-o", tmp_ + "/e.yaml"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_TRUE(testutil::contains(r.err, tmp_ + "/empty: has no model.safetensors")) << r.err;
  }
  {  // the model's weights with another tokenizer: the vocabularies differ
    const auto yaml = tmp_ + "/chars.yaml";
    ASSERT_EQ(import(yaml).exit_code, 0);
    const auto r = run({yaml, "--results", tmp_ + "/chars.h5", "dataset.tokenizer=chars", "-q"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_TRUE(testutil::contains(r.err, "vocab_size 397")) << r.err;
    EXPECT_TRUE(testutil::contains(r.err, "byte_bpe")) << r.err;
  }
  {  // an option that contradicts config.json
    const auto yaml = tmp_ + "/wide.yaml";
    ASSERT_EQ(import(yaml).exit_code, 0);
    const auto r = run({yaml, "--results", tmp_ + "/wide.h5", "model.num_heads=2", "-q"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_TRUE(testutil::contains(r.err, "n_head 4")) << r.err;
  }
}

}  // namespace
}  // namespace e2e_pretrained_test
