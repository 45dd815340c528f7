#pragma once
// What the gpt plugin's `pretrained:` tests share: a Hugging Face fixture folder made once per
// script (tests/python/hf_*_fixture.py, with the venv's python), the plugin made from one of its
// model folders, and its logits and greedy continuation against what transformers computed
// (the folder's expected.safetensors: ids, logits..., prompt, greedy).
#include <attnlab/error.hpp>
#include <attnlab/nn/safetensors.hpp>
#include <attnlab/nn/transformer_lm.hpp>
#include <attnlab/train/generate.hpp>

#include "testing/plugins.hpp"
#include "testing/testing.hpp"

#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace attnlab::models::gpt {

class HfFixtureTest : public testutil::RegistryTest {
 protected:
  /// `script`: the fixture's script in tests/python.
  explicit HfFixtureTest(std::string script) : script_(std::move(script)) {}

  void SetUp() override {
    RegistryTest::SetUp();
    ATTNLAB_REQUIRE(made().why.empty(), made().why);
    expected = std::make_unique<safetensors::File>(dir() + "/expected.safetensors");
    ctx.data.tgt_vocab_size = vocab();
  }
  /// The fixture's folder.
  const std::string& dir() const { return made().dir; }
  int64_t vocab() const { return 397; }  // the fixtures' tokenizer (checked by the logits' shape)

  std::shared_ptr<nn::TransformerLMImpl> make_from(const config::Node& node) {
    auto lm = std::dynamic_pointer_cast<nn::TransformerLMImpl>(registry.create<nn::Model>(node, ctx));
    EXPECT_NE(lm, nullptr);
    if (lm) lm->eval();
    return lm;
  }
  /// The plugin from the model folder `path`, without dropout; `extra`: more options (", a: 1").
  std::shared_ptr<nn::TransformerLMImpl> make_at(const std::string& path, const std::string& extra = "") {
    return make_from(yaml(fmt::format("{{plugin: gpt, pretrained: '{}', dropout: 0{}}}", path, extra)));
  }
  /// The same from the fixture's folder `folder` ("model").
  std::shared_ptr<nn::TransformerLMImpl> make(const std::string& folder, const std::string& extra = "") {
    return make_at(dir() + "/" + folder, extra);
  }
  /// The error of making the plugin from `path`.
  std::string message(const std::string& path, const std::string& extra = "") {
    return testutil::message_of<Error>([&] { make_at(path, extra); });
  }
  torch::Tensor want(const std::string& name) const { return expected->view(name).clone(); }

  /// The largest difference of `lm`'s logits of the fixture's ids to the fixture's `name`.
  double logits_difference(nn::TransformerLMImpl& lm, const std::string& name) {
    torch::NoGradGuard no_grad;
    const auto ours = lm.forward(want("ids")), theirs = want(name);
    EXPECT_EQ(theirs.size(2), vocab());
    EXPECT_EQ(ours.sizes(), theirs.sizes());
    if (ours.sizes() != theirs.sizes()) return 1e9;
    const double d = (ours - theirs).abs().max().item<double>();
    std::cout << script_ << ": max |logits - transformers'| (" << name << "): " << d << "\n";
    return d;
  }
  /// `lm`'s greedy continuation of the fixture's prompt equals generate()'s, with and without the cache.
  void expect_greedy_equal(nn::TransformerLMImpl& lm) {
    const auto prompt = want("prompt"), greedy = want("greedy");
    std::vector<int64_t> p(prompt.data_ptr<int64_t>(), prompt.data_ptr<int64_t>() + prompt.numel());
    std::vector<int64_t> all(greedy.data_ptr<int64_t>(), greedy.data_ptr<int64_t>() + greedy.numel());
    for (const bool cache : {true, false}) {
      train::GenerateOptions o;
      o.tokens = static_cast<int64_t>(all.size() - p.size());
      o.temperature = 0.0;
      o.cache = cache;
      EXPECT_EQ(train::generate(lm, p, o, torch::kCPU).ids, all) << "cache " << cache;
    }
  }

  std::unique_ptr<safetensors::File> expected;

 private:
  /// The script's folder and why it could not be made ("" when it was), made once per script.
  struct Made {
    std::string dir, why;
  };
  const Made& made() const {
    static std::map<std::string, Made> all;
    auto it = all.find(script_);
    if (it == all.end()) {
      const std::string out = testutil::temp_dir("attnlab-" + script_.substr(0, script_.find('.')));
      it = all.emplace(script_, Made{out, testutil::run_python_fixture(script_, out)}).first;
    }
    return it->second;
  }
  std::string script_;
};

}  // namespace attnlab::models::gpt
