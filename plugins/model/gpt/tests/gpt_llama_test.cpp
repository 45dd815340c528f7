// The gpt plugin's `pretrained:` Llama folder against Hugging Face transformers: a small random
// LlamaForCausalLM (tests/python/hf_llama_fixture.py: RMSNorm, SwiGLU, RoPE of base 500000, 4 query
// heads sharing 2 key/value heads, an untied output layer; and the same weights tied, saved without
// the "model." prefix) loads into the plugin, whose logits equal transformers' within 1e-4 and whose
// greedy continuation equals generate()'s with and without the KV cache. The options it records
// rebuild the same model; options that disagree with config.json, and the Llama configurations it
// does not run (scaled RoPE, another activation, biases, a wider head, Mistral's sliding window),
// are one error naming the place.
#include <attnlab/config/node.hpp>

#include "hf_testing.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

namespace attnlab::models::gpt {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class HfLlama : public HfFixtureTest {
 protected:
  HfLlama() : HfFixtureTest("hf_llama_fixture.py") {}
  /// A copy of the fixture's model folder whose config.json `edit` changed.
  std::string edited(const std::string& name, const std::function<void(json&)>& edit) const {
    const fs::path out = fs::path(testutil::temp_dir("attnlab-hf-llama-edited")) / name;
    fs::create_directories(out);
    fs::copy_file(fs::path(dir()) / "model" / "model.safetensors", out / "model.safetensors");
    std::ifstream in(fs::path(dir()) / "model" / "config.json");
    json j = json::parse(in);
    edit(j);
    std::ofstream(out / "config.json") << j.dump(2);
    return out.string();
  }
};

TEST_F(HfLlama, LogitsEqualTransformersUntiedAndTiedWithAndWithoutThePrefix) {
  EXPECT_LT(logits_difference(*make("model"), "logits"), 1e-4);      // model.*, lm_head
  EXPECT_LT(logits_difference(*make("bare"), "logits_tied"), 1e-4);  // no prefix, tied
}

TEST_F(HfLlama, FusedOrNotTheLogitsAreTheSame) {
  EXPECT_LT(logits_difference(*make("model", ", fused: false"), "logits"), 1e-4);
}

TEST_F(HfLlama, GreedyContinuationEqualsGenerateWithAndWithoutTheCache) { expect_greedy_equal(*make("model")); }

TEST_F(HfLlama, TheModelIsLlamaShapedAndItsRecordedOptionsRebuildIt) {
  auto lm = make("model");
  const auto params = lm->named_parameters();
  EXPECT_NE(params.find("decoder.blks.0.ffn.gate.weight"), nullptr);
  EXPECT_EQ(params.find("decoder.blks.0.ffn.gate.bias"), nullptr);
  EXPECT_EQ(params.find("decoder.blks.0.attention1.W_q.bias"), nullptr);
  EXPECT_EQ(params.find("decoder.blks.0.addnorm1.ln.bias"), nullptr);  // RMSNorm: a weight only
  EXPECT_EQ(params.find("decoder.final_ln.bias"), nullptr);
  EXPECT_EQ(params["decoder.blks.0.attention1.W_k.weight"].sizes(), (std::vector<int64_t>{16, 32}));  // 2 kv heads
  EXPECT_NE(params.find("decoder.dense.weight"), nullptr);
  EXPECT_EQ(lm->max_positions(), 0);  // RoPE: no table of positions
  // The model's entry of the run's /config: what config.json said, as options.
  config::Node recorded;
  for (const auto& n : registry.resolved()) {
    if (n.has("pretrained")) recorded = n;
  }
  ASSERT_TRUE(recorded.is_map());
  const std::string text = config::to_yaml(recorded);
  for (const char* part : {"norm_type: rms", "activation: swiglu", "kv_heads: 2", "positional_encoding: none",
                           "plugin: rope", "base: 500000", "tie_embeddings: false", "bias: false"}) {
    EXPECT_TRUE(testutil::contains(text, part)) << part << " in\n" << text;
  }
  // Made again from it: the pretrained model once more (the recorded options agree with config.json),
  EXPECT_LT(logits_difference(*make_from(recorded), "logits"), 1e-4);
  // and without the folder, the same architecture (a checkpoint of it loads).
  recorded.erase("pretrained");
  auto again = make_from(recorded);
  const auto rebuilt = again->named_parameters();
  ASSERT_EQ(rebuilt.size(), params.size());
  for (const auto& p : params) {
    ASSERT_NE(rebuilt.find(p.key()), nullptr) << p.key();
    EXPECT_EQ(rebuilt[p.key()].sizes(), p.value().sizes()) << p.key();
  }
}

TEST_F(HfLlama, OptionsThatDisagreeWithConfigJsonAreRefused) {
  const std::string model = dir() + "/model";
  {
    const auto msg = message(model, ", attention: {scorer: {plugin: rope, base: 10000}}");
    EXPECT_TRUE(testutil::contains(msg, "attention")) << msg;
    EXPECT_TRUE(testutil::contains(msg, "rope_theta 500000")) << msg;
  }
  {
    const auto msg = message(model, ", attention: {scorer: dot_product}");
    EXPECT_TRUE(testutil::contains(msg, "disagrees with the pretrained model")) << msg;
  }
  {
    const auto msg = message(model, ", kv_heads: 4");
    EXPECT_TRUE(testutil::contains(msg, "kv_heads")) << msg;
    EXPECT_TRUE(testutil::contains(msg, "num_key_value_heads 2")) << msg;
  }
  {
    const auto msg = message(model, ", norm_type: layer");
    EXPECT_TRUE(testutil::contains(msg, "norm_type")) << msg;
  }
  // Agreeing ones are fine.
  EXPECT_LT(
      logits_difference(*make("model", ", attention: {scorer: {plugin: rope, base: 500000}}, kv_heads: 2"), "logits"),
      1e-4);
}

TEST_F(HfLlama, ConfigurationsItDoesNotRunAreOneErrorNamingTheFile) {
  const auto expect_refused = [&](const std::string& name, const std::function<void(json&)>& edit,
                                  const std::string& part) {
    const auto msg = message(edited(name, edit));
    EXPECT_TRUE(testutil::contains(msg, "config.json")) << name << ": " << msg;
    EXPECT_TRUE(testutil::contains(msg, part)) << name << ": " << msg;
  };
  expect_refused(
      "scaling",
      [](json& j) {
        j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
      },
      "\"rope_scaling\" is {");
  expect_refused(
      "rope_type", [](json& j) { j["rope_parameters"]["rope_type"] = "yarn"; }, "\"yarn\"");
  expect_refused(
      "act", [](json& j) { j["hidden_act"] = "gelu"; }, "\"hidden_act\" is \"gelu\"");
  expect_refused(
      "attention_bias", [](json& j) { j["attention_bias"] = true; }, "\"attention_bias\" is true");
  expect_refused(
      "head_dim", [](json& j) { j["head_dim"] = 16; }, "\"head_dim\" is 16");
  expect_refused(
      "sliding",
      [](json& j) {
        j["model_type"] = "mistral";
        j["sliding_window"] = 4096;
      },
      "\"sliding_window\" is 4096");
}

TEST_F(HfLlama, MistralWithoutASlidingWindowIsLlama) {
  const auto mistral = edited("mistral", [](json& j) {
    j["model_type"] = "mistral";
    j["sliding_window"] = nullptr;
  });
  EXPECT_LT(logits_difference(*make_at(mistral), "logits"), 1e-4);
}

}  // namespace
}  // namespace attnlab::models::gpt
