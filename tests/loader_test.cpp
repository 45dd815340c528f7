// Plugin loader failure paths (pluginlib's habit): missing file, not a plugin, ABI mismatch,
// duplicate kind+name, a factory that throws; and the happy path keeping the library alive.
#include <attnlab/config/node.hpp>
#include <attnlab/nn/scorer.hpp>
#include <attnlab/plugin/registry.hpp>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "testing/testing.hpp"

namespace {
using namespace attnlab;
namespace fs = std::filesystem;

std::string test_plugin(const std::string& name) {
  auto dir = testutil::env_or("ATTNLAB_TEST_PLUGIN_DIR", "");
  if (dir.empty()) return "";
  return (fs::path(dir) / name / ("lib" + name + ".so")).string();
}

#define REQUIRE_TEST_PLUGINS()                                                    \
  ATTNLAB_REQUIRE(!testutil::env_or("ATTNLAB_TEST_PLUGIN_DIR", "").empty(), \
                  "ATTNLAB_TEST_PLUGIN_DIR is not set (run through ctest)")

using testutil::message_of;

TEST(PluginLoader, MissingFileIsNamed) {
  plugin::Registry r;
  auto msg = message_of<PluginError>([&] { r.load("/nonexistent/libattnlab_scorer_x.so"); });
  EXPECT_NE(msg.find("not found"), std::string::npos) << msg;
  EXPECT_NE(msg.find("/nonexistent/libattnlab_scorer_x.so"), std::string::npos) << msg;
}

TEST(PluginLoader, LibraryThatIsNotAPlugin) {
  REQUIRE_TEST_PLUGINS();
  plugin::Registry r;
  auto path = test_plugin("attnlab_not_a_plugin");
  auto msg = message_of<PluginError>([&] { r.load(path); });
  EXPECT_NE(msg.find("is not an attnlab plugin"), std::string::npos) << msg;
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
}

TEST(PluginLoader, AbiMismatchSaysExpectedAndFound) {
  REQUIRE_TEST_PLUGINS();
  plugin::Registry r;
  auto path = test_plugin("attnlab_scorer_test_abi");
  auto msg = message_of<PluginError>([&] { r.load(path); });
  EXPECT_NE(msg.find(fmt::format("supports ABI {}", kAbiVersion)), std::string::npos) << msg;
  EXPECT_NE(msg.find("built for ABI 999"), std::string::npos) << msg;
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
}

TEST(PluginLoader, DuplicateKindAndNameNamesBothFiles) {
  REQUIRE_TEST_PLUGINS();
  plugin::Registry r;
  auto a = test_plugin("attnlab_scorer_test_good"), b = test_plugin("attnlab_scorer_test_dup");
  r.load(a);
  auto msg = message_of<PluginError>([&] { r.load(b); });
  EXPECT_NE(msg.find("two plugins claim scorer 'test_scorer'"), std::string::npos) << msg;
  EXPECT_NE(msg.find(a), std::string::npos) << msg;
  EXPECT_NE(msg.find(b), std::string::npos) << msg;
}

TEST(PluginLoader, FactoryExceptionIsWrappedWithPluginName) {
  REQUIRE_TEST_PLUGINS();
  plugin::Registry r;
  r.load(test_plugin("attnlab_scorer_test_throws"));
  plugin::BuildContext ctx;
  auto node = config::parse_yaml("plugin: test_scorer\n", "inline.yaml");
  auto msg = message_of<PluginError>([&] { r.create<nn::Scorer>(node, ctx); });
  EXPECT_NE(msg.find("scorer 'test_scorer'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("deliberate failure in the factory"), std::string::npos) << msg;
}

TEST(PluginLoader, UnknownPluginSuggestsAName) {
  REQUIRE_TEST_PLUGINS();
  plugin::Registry r;
  r.load(test_plugin("attnlab_scorer_test_good"));
  plugin::BuildContext ctx;
  auto node = config::parse_yaml("scorer: test_scorr\n", "exp.yaml");
  auto msg = message_of<ConfigError>([&] { r.create<nn::Scorer>(node.at("scorer"), ctx); });
  EXPECT_NE(msg.find("exp.yaml:1:9"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'test_scorer'"), std::string::npos) << msg;
}

TEST(PluginLoader, UnknownOptionIsAConfigErrorWithLocation) {
  REQUIRE_TEST_PLUGINS();
  plugin::Registry r;
  r.load(test_plugin("attnlab_scorer_test_good"));
  plugin::BuildContext ctx;
  auto node = config::parse_yaml("attention:\n  scorer:\n    plugin: test_scorer\n    scael: 2\n", "exp.yaml");
  auto msg = message_of<ConfigError>([&] { r.create<nn::Scorer>(node.at("attention").at("scorer"), ctx); });
  EXPECT_NE(msg.find("exp.yaml:4:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("attention.scorer.scael"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'scale'"), std::string::npos) << msg;
}

TEST(PluginLoader, CreatedObjectWorksAndKeepsLibraryAlive) {
  REQUIRE_TEST_PLUGINS();
  std::shared_ptr<nn::Scorer> scorer;
  {
    plugin::Registry r;
    r.load(test_plugin("attnlab_scorer_test_good"));
    plugin::BuildContext ctx;
    auto node = config::parse_yaml("plugin: test_scorer\nscale: 2\n", "inline.yaml");
    scorer = r.create<nn::Scorer>(node, ctx);
    ASSERT_EQ(r.used().size(), 1u);
  }  // registry (and its handle on the library) gone: the object must still work
  auto q = torch::ones({1, 2, 3}), k = torch::ones({1, 4, 3});
  auto s = scorer->score(q, k);  // [1, 2, 4], every entry 2 * 3
  EXPECT_ALLCLOSE(s, torch::full({1, 2, 4}, 6.0));
  scorer.reset();  // destroys the object, then unloads the library
}

TEST(PluginLoader, DiscoverFindsTheBuiltPlugins) {
  plugin::Registry r;
  r.discover();
  const auto& info = r.find("trainer", "seq2seq");
  EXPECT_FALSE(info.description.empty());
  EXPECT_NE(info.path.find("libattnlab_trainer_seq2seq.so"), std::string::npos);
}

}  // namespace

namespace {
// libtorch.so exports its own std::filesystem functions; the build puts libstdc++ first so the
// real ones are used (remove_all on a non-empty folder crashed inside libtorch before).
TEST(Toolchain, StdFilesystemRemoveAllWorksNextToTorch) {
  auto dir = std::filesystem::temp_directory_path() / "attnlab-fs-check";
  std::filesystem::create_directories(dir / "a" / "b");
  std::ofstream(dir / "a" / "b" / "f.txt") << "x";
  EXPECT_EQ(std::filesystem::remove_all(dir), 4u);
  EXPECT_FALSE(std::filesystem::exists(dir));
}
}  // namespace
