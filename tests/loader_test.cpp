// Plugin loader failure paths (pluginlib's habit): missing file, not a plugin, ABI mismatch,
// duplicate kind+name, a factory that throws; and the happy path keeping the library alive.
#include <attnlab/config/node.hpp>
#include <attnlab/nn/attention.hpp>
#include <attnlab/nn/scorer.hpp>
#include <attnlab/plugin/registry.hpp>

#include <gtest/gtest.h>
#include <torch/types.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

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
  EXPECT_EQ(msg, "/nonexistent/libattnlab_scorer_x.so: no such file");
}

TEST(PluginLoader, FoldersAndLibrariesThatAreNoneAreNamed) {
  // directory_entry::is_regular_file() threw "filesystem error: status: Too many levels of
  // symbolic links" for a loop in a plugin folder; a --plugin-path that was no folder was ignored.
  const std::string dir = testutil::temp_dir("attnlab-loader-loops");
  const std::string lib = dir + "/libattnlab_scorer_loop.so", loop = dir + "/loop";
  ASSERT_EQ(::symlink("libattnlab_scorer_loop.so", lib.c_str()), 0);
  ASSERT_EQ(::symlink("loop", loop.c_str()), 0);
  plugin::Registry r;
  r.add_search_dir(dir);
  ASSERT_NO_THROW(r.discover());
  ASSERT_EQ(r.broken().size(), 1u);
  EXPECT_EQ(r.broken()[0].reason, lib + ": it is a symlink loop");
  auto msg = message_of<PluginError>([&] { r.find("scorer", "loop"); });
  EXPECT_NE(msg.find(lib + ": it is a symlink loop"), std::string::npos) << msg;

  const auto discover_error = [](const std::string& folder) {
    plugin::Registry reg;
    reg.add_search_dir(folder);
    return message_of<PluginError>([&] { reg.discover(); });
  };
  EXPECT_EQ(discover_error(loop), "plugin folder " + loop + " (--plugin-path): it is a symlink loop");
  EXPECT_EQ(discover_error("/dev/zero"), "plugin folder /dev/zero (--plugin-path): it is a device, not a directory");
  EXPECT_EQ(discover_error(dir + "/missing"), "plugin folder " + dir + "/missing (--plugin-path): no such directory");
  // ATTNLAB_PLUGIN_PATH may list folders that do not exist (skipped), but not a loop.
  const std::string plugins = testutil::env_or("ATTNLAB_PLUGIN_PATH", "");
  {
    testutil::ScopedEnv env("ATTNLAB_PLUGIN_PATH", dir + "/missing:" + plugins);
    plugin::Registry reg;
    EXPECT_NO_THROW(reg.discover());
  }
  testutil::ScopedEnv env("ATTNLAB_PLUGIN_PATH", loop + ":" + plugins);
  plugin::Registry reg;
  EXPECT_EQ(message_of<PluginError>([&] { reg.discover(); }),
            "plugin folder " + loop + " (ATTNLAB_PLUGIN_PATH): it is a symlink loop");
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
  auto msg = message_of<PluginError>([&] { r.create<nn::Scorer>(node, ctx, nn::ScorerContext{}); });
  EXPECT_NE(msg.find("scorer 'test_scorer'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("deliberate failure in the factory"), std::string::npos) << msg;
}

TEST(PluginLoader, UnknownPluginSuggestsAName) {
  REQUIRE_TEST_PLUGINS();
  plugin::Registry r;
  r.load(test_plugin("attnlab_scorer_test_good"));
  plugin::BuildContext ctx;
  auto node = config::parse_yaml("scorer: test_scorr\n", "exp.yaml");
  auto msg = message_of<ConfigError>([&] { r.create<nn::Scorer>(node.at("scorer"), ctx, nn::ScorerContext{}); });
  EXPECT_NE(msg.find("exp.yaml:1:9"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'test_scorer'"), std::string::npos) << msg;
  // Where it looked, and how to make it look where an out-of-tree plugin was built.
  EXPECT_NE(msg.find("searched: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("found with --plugin-path DIR or ATTNLAB_PLUGIN_PATH=DIR"), std::string::npos) << msg;
}

TEST(PluginLoader, UnknownOptionIsAConfigErrorWithLocation) {
  REQUIRE_TEST_PLUGINS();
  plugin::Registry r;
  r.load(test_plugin("attnlab_scorer_test_good"));
  plugin::BuildContext ctx;
  auto node = config::parse_yaml("attention:\n  scorer:\n    plugin: test_scorer\n    scael: 2\n", "exp.yaml");
  auto msg = message_of<ConfigError>(
      [&] { r.create<nn::Scorer>(node.at("attention").at("scorer"), ctx, nn::ScorerContext{}); });
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
    scorer = r.create<nn::Scorer>(node, ctx, nn::ScorerContext{});
    ASSERT_EQ(r.used().size(), 1u);
  }  // registry (and its handle on the library) gone: the object must still work
  auto q = torch::ones({1, 2, 3}), k = torch::ones({1, 4, 3});
  auto s = scorer->score(q, k, {});  // [1, 2, 4], every entry 2 * 3
  EXPECT_ALLCLOSE(s, torch::full({1, 2, 4}, 6.0));
  scorer.reset();  // destroys the object, then unloads the library
}

TEST(PluginLoader, AnExceptionFromScoreMidRunNamesThePlugin) {
  // Thrown by the plugin's score() at its 2nd call, inside the framework's attention: it leaves as
  // a PluginError naming the plugin, its library and its place in the experiment file.
  REQUIRE_TEST_PLUGINS();
  plugin::Registry r;
  const auto path = test_plugin("attnlab_scorer_test_good");
  r.load(path);
  plugin::BuildContext ctx;
  auto node =
      config::parse_yaml("model:\n  attention:\n    scorer: {plugin: test_scorer, throw_at_call: 2}\n", "exp.yaml");
  auto scorer = r.create<nn::Scorer>(node.at("model").at("attention").at("scorer"), ctx, nn::ScorerContext{});
  EXPECT_EQ(scorer->made_by(), "scorer 'test_scorer' (" + path + ") at 'model.attention.scorer'");
  nn::Attention attention(scorer, 0.0);
  auto q = torch::ones({1, 2, 3}), kv = torch::ones({1, 4, 3});
  attention->forward(q, kv, kv);  // call 1 works
  auto msg = message_of<PluginError>([&] { attention->forward(q, kv, kv); });
  EXPECT_EQ(msg, "plugin scorer 'test_scorer' (" + path +
                     ") at 'model.attention.scorer' failed in score(): deliberate failure in score() call 2");
}

TEST(PluginLoader, AnExceptionFromAScorerNoRegistryMadePassesUnchanged) {
  struct Throws final : nn::Scorer {
    torch::Tensor score(const torch::Tensor&, const torch::Tensor&, const nn::Positions&) override {
      throw std::runtime_error("not a plugin");
    }
  };
  nn::Attention attention(std::make_shared<Throws>(), 0.0);
  auto q = torch::ones({1, 2, 3});
  EXPECT_EQ(message_of<std::runtime_error>([&] { attention->forward(q, q, q); }), "not a plugin");
}

/// A folder holding copies of libraries under the given file names (discover() reads libattnlab_*.so).
std::string folder_of(const std::vector<std::pair<std::string, std::string>>& copies) {
  auto dir = testutil::temp_dir("attnlab-plugins");
  for (const auto& [from, name] : copies) fs::copy_file(from, fs::path(dir) / name);
  return dir;
}

/// A copy of a good plugin cut to `bytes` bytes.
std::string truncated_copy(const std::string& dir, const std::string& name, std::uintmax_t bytes) {
  auto to = fs::path(dir) / name;
  fs::copy_file(test_plugin("attnlab_scorer_test_good"), to);
  fs::resize_file(to, bytes);
  return to.string();
}

TEST(PluginLoader, ConfigErrorFromAFactoryOutlivesTheRegistry) {
  // The runner printed "config error: " and crashed: the error object's code lived in the plugin
  // and was unloaded with the registry before the message was read.
  REQUIRE_TEST_PLUGINS();
  std::exception_ptr caught;
  {
    plugin::Registry r;
    r.load(test_plugin("attnlab_scorer_test_config_error"));
    plugin::BuildContext ctx;
    auto node = config::parse_yaml("scorer:\n  plugin: test_config_error\n  scale: 2\n", "exp.yaml");
    try {
      r.create<nn::Scorer>(node.at("scorer"), ctx, nn::ScorerContext{});
    } catch (...) {
      caught = std::current_exception();
    }
  }  // the registry and every handle it had on the library are gone
  ASSERT_TRUE(caught);
  try {
    std::rethrow_exception(caught);
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("exp.yaml:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(at 'scorer')"), std::string::npos) << msg;
    EXPECT_NE(msg.find("refuses scale 2 (deliberate config error)"), std::string::npos) << msg;
  } catch (...) {
    FAIL() << "expected a ConfigError";
  }
}

TEST(PluginLoader, PluginBuiltAgainstModifiedHeadersIsRefused) {
  // attnlab_scorer_test_stale_sdk was compiled against a copy of the SDK whose Scorer has one more
  // virtual method; the ABI version is the same, only the header hash tells them apart.
  REQUIRE_TEST_PLUGINS();
  plugin::Registry r;
  auto path = test_plugin("attnlab_scorer_test_stale_sdk");
  auto msg = message_of<PluginError>([&] { r.load(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("built against other attnlab SDK headers"), std::string::npos) << msg;
  EXPECT_NE(msg.find(plugin::sdk_hash()), std::string::npos) << msg;
  EXPECT_NE(msg.find("rebuild it against this attnlab"), std::string::npos) << msg;
}

TEST(PluginLoader, UnresolvedSymbolIsRefusedAtLoadWithTheLoadersReason) {
  REQUIRE_TEST_PLUGINS();
  plugin::Registry r;
  auto path = test_plugin("attnlab_scorer_test_undefined");
  auto msg = message_of<PluginError>([&] { r.load(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("undefined symbol: attnlab_test_symbol_nobody_defines"), std::string::npos) << msg;
}

TEST(PluginLoader, TruncatedOrGarbageLibrariesAreRefusedBeforeDlopen) {
  // dlopen of a truncated library maps pages past the end of the file: SIGBUS on first touch.
  REQUIRE_TEST_PLUGINS();
  auto dir = testutil::temp_dir("attnlab-truncated");
  const auto size = fs::file_size(test_plugin("attnlab_scorer_test_good"));
  plugin::Registry r;
  for (std::uintmax_t bytes : {std::uintmax_t{0}, std::uintmax_t{40}, std::uintmax_t{4096}, size / 2, size - 1}) {
    auto path = truncated_copy(dir, fmt::format("libattnlab_scorer_cut{}.so", bytes), bytes);
    auto msg = message_of<PluginError>([&] { r.load(path); });
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_TRUE(msg.find("truncated") != std::string::npos || msg.find("not a shared library") != std::string::npos)
        << bytes << " bytes: " << msg;
  }
  auto text = fs::path(dir) / "libattnlab_scorer_text.so";
  std::ofstream(text) << std::string(200, '#') << "\nthis is not an ELF file, whatever its name says\n";
  auto msg = message_of<PluginError>([&] { r.load(text.string()); });
  EXPECT_NE(msg.find("no ELF header"), std::string::npos) << msg;
  msg = message_of<PluginError>([&] { r.load(dir); });
  EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
}

TEST(PluginLoader, DiscoverSkipsBrokenLibrariesAndNamesThemWhenAsked) {
  REQUIRE_TEST_PLUGINS();
  auto dir = folder_of({{test_plugin("attnlab_scorer_test_abi"), "libattnlab_scorer_test_abi.so"},
                        {test_plugin("attnlab_scorer_test_undefined"), "libattnlab_scorer_test_undefined.so"},
                        {test_plugin("attnlab_not_a_plugin"), "libattnlab_scorer_nothing.so"}});
  truncated_copy(dir, "libattnlab_scorer_cut.so", 4096);
  plugin::Registry r;
  r.add_search_dir(dir);
  ASSERT_NO_THROW(r.discover());
  ASSERT_EQ(r.broken().size(), 4u);
  // The build's own plugins are all there.
  EXPECT_NO_THROW(r.find("trainer", "seq2seq"));
  EXPECT_NO_THROW(r.find("scorer", "dot_product"));
  // Asking for what a broken library provides names it and why: by its descriptor (the ABI
  // mismatch declares scorer 'test_scorer'), else by its file name.
  auto msg = message_of<PluginError>([&] { r.find("scorer", "test_scorer"); });
  EXPECT_NE(msg.find("libattnlab_scorer_test_abi.so"), std::string::npos) << msg;
  EXPECT_NE(msg.find("built for ABI 999"), std::string::npos) << msg;
  msg = message_of<PluginError>([&] { r.find("scorer", "test_undefined"); });
  EXPECT_NE(msg.find("undefined symbol"), std::string::npos) << msg;
  msg = message_of<PluginError>([&] { r.find("scorer", "cut"); });
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST(PluginLoader, DiscoverKeepsTheFirstOfTwoLibrariesWithOneName) {
  // A stale copy of a plugin in an earlier folder must not make every command fail.
  REQUIRE_TEST_PLUGINS();
  auto first = folder_of({{test_plugin("attnlab_scorer_test_good"), "libattnlab_scorer_test.so"}});
  auto second = folder_of({{test_plugin("attnlab_scorer_test_dup"), "libattnlab_scorer_test.so"}});
  plugin::Registry r;
  r.add_search_dir(first);
  r.add_search_dir(second);
  ASSERT_NO_THROW(r.discover());
  EXPECT_EQ(fs::path(r.find("scorer", "test_scorer").path).parent_path(), fs::canonical(first));
  ASSERT_EQ(r.broken().size(), 1u);
  EXPECT_NE(r.broken()[0].reason.find("two plugins claim scorer 'test_scorer'"), std::string::npos);
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
