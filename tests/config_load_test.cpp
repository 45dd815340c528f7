// Experiment loading: `defaults:` composition, include cycles and missing files, overrides.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <attnlab/config/load.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "testing/testing.hpp"

// A namespace of its own: the file shares a translation unit with its neighbours (tests/CMakeLists.txt).
namespace config_load_test {

using attnlab::ConfigError;
using namespace attnlab::config;
namespace fs = std::filesystem;

namespace {

/// The ConfigError message that f throws.
std::string error_of(const std::function<void()>& f) { return attnlab::testutil::message_of<ConfigError>(f); }

using attnlab::testutil::contains;

class ConfigLoad : public ::testing::Test {
 protected:
  // POSIX calls only, and the directory is left behind: std::filesystem's free functions may bind
  // to libtorch's exported, ABI-incompatible copies (its remove_all crashes).
  void SetUp() override {
    std::string tmpl = "/tmp/attnlab-config-load-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = fs::path(dir_) / name;
    ::mkdir(p.parent_path().c_str(), 0755);  // one level is all the fixtures need
    std::ofstream(p) << text;
    return p.string();
  }
  std::string dir_;
};

const char* kBase = R"(model:
  encoder:
    plugin: transformer
    num_hiddens: 256
    num_heads: 4
  decoder:
    plugin: transformer
    num_layers: 2
train:
  lr: 0.001
  steps: 100
tags: [base]
)";

}  // namespace

TEST_F(ConfigLoad, PlainFile) {
  const std::string path = write("exp.yaml", kBase);
  const Node root = load_experiment(path);
  EXPECT_EQ(root.at("model").at("encoder").at("num_heads").as_int(), 4);
  EXPECT_EQ(root.at("model").at("encoder").at("num_heads").location().str(), path + ":5:16");
  EXPECT_EQ(root.at("train").at("lr").path(), "train.lr");
}

TEST_F(ConfigLoad, DefaultsComposeAndOverrideOneNestedKey) {
  write("configs/base.yaml", kBase);
  const std::string exp = write("configs/exp.yaml",
                                "defaults: base.yaml\n"
                                "model:\n"
                                "  encoder:\n"
                                "    num_heads: 8\n"
                                "tags: [exp]\n");
  const Node root = load_experiment(exp);
  EXPECT_FALSE(root.has("defaults"));
  const Node& enc = root.at("model").at("encoder");
  EXPECT_EQ(enc.at("num_heads").as_int(), 8);
  EXPECT_EQ(enc.at("num_heads").location().str(), exp + ":4:16");
  // The other keys survive, located in the base file.
  EXPECT_EQ(enc.at("num_hiddens").as_int(), 256);
  EXPECT_EQ(enc.at("plugin").str(), "transformer");
  EXPECT_EQ(enc.keys(), (std::vector<std::string>{"plugin", "num_hiddens", "num_heads"}));
  EXPECT_EQ(fs::path(enc.at("num_hiddens").location().file).filename(), "base.yaml");
  EXPECT_EQ(enc.at("num_hiddens").location().line, 4);
  EXPECT_EQ(root.at("model").at("decoder").at("num_layers").as_int(), 2);
  EXPECT_DOUBLE_EQ(root.at("train").at("lr").as_double(), 0.001);
  ASSERT_EQ(root.at("tags").size(), 1u);  // lists are replaced
  EXPECT_EQ(root.at("tags")[0].str(), "exp");
  EXPECT_EQ(root.at("tags")[0].path(), "tags[0]");
}

TEST_F(ConfigLoad, DefaultsListInOrderAndNested) {
  write("a.yaml", "x: 1\ny: a\nz: a\n");
  write("sub/b.yaml", "defaults: [../a.yaml]\ny: b\nw: b\n");
  write("c.yaml", "z: c\nw: c\n");
  const std::string exp = write("exp.yaml", "defaults:\n  - sub/b.yaml\n  - c.yaml\nw: exp\n");
  const Node root = load_experiment(exp);
  EXPECT_EQ(root.at("x").as_int(), 1);
  EXPECT_EQ(root.at("y").str(), "b");
  EXPECT_EQ(root.at("z").str(), "c");
  EXPECT_EQ(root.at("w").str(), "exp");
  EXPECT_FALSE(root.has("defaults"));
}

TEST_F(ConfigLoad, IncludeCycleNamesTheChain) {
  write("a.yaml", "defaults: b.yaml\nx: 1\n");
  write("b.yaml", "defaults: [a.yaml]\ny: 2\n");
  const std::string a = fs::path(dir_) / "a.yaml";
  const std::string msg = error_of([&] { load_experiment(a); });
  EXPECT_TRUE(contains(msg, "include cycle")) << msg;
  EXPECT_TRUE(contains(msg, "a.yaml -> " + (fs::path(dir_) / "b.yaml").string() + " -> ")) << msg;
  EXPECT_EQ(msg.rfind((fs::path(dir_) / "b.yaml").string() + ":1:12", 0), 0u) << msg;  // where b includes a

  write("self.yaml", "defaults: self.yaml\n");
  EXPECT_TRUE(contains(error_of([&] { load_experiment(fs::path(dir_) / "self.yaml"); }), "include cycle"));
}

TEST_F(ConfigLoad, MissingIncludeNamesTheIncludingFile) {
  const std::string exp = write("exp.yaml", "x: 1\ndefaults:\n  - base.yaml\n  - nowhere.yaml\n");
  write("base.yaml", "y: 2\n");
  const std::string msg = error_of([&] { load_experiment(exp); });
  EXPECT_EQ(msg.rfind(exp + ":4:5 (at 'defaults[1]' in '" + exp + "'): cannot read config file", 0), 0u) << msg;
  EXPECT_TRUE(contains(msg, "nowhere.yaml")) << msg;
  EXPECT_TRUE(contains(msg, "no such file")) << msg;
}

TEST_F(ConfigLoad, MissingTopLevelFile) {
  const std::string path = (fs::path(dir_) / "absent.yaml").string();
  EXPECT_EQ(error_of([&] { load_experiment(path); }),
            "<command line>: cannot read config file '" + path + "': no such file");
}

TEST_F(ConfigLoad, SyntaxErrorInIncludedFileIsLocatedThere) {
  const std::string base = write("base.yaml", "a: 1\nb: {x: 1\n");
  const std::string exp = write("exp.yaml", "defaults: base.yaml\n");
  const std::string msg = error_of([&] { load_experiment(exp); });
  EXPECT_EQ(msg.rfind(base + ":", 0), 0u) << msg;
  EXPECT_TRUE(contains(msg, "YAML syntax error")) << msg;
}

TEST_F(ConfigLoad, TopLevelMustBeAMap) {
  const std::string path = write("list.yaml", "- a\n- b\n");
  EXPECT_TRUE(contains(error_of([&] { load_experiment(path); }), "expected a map at the top level"));
  const std::string empty = write("empty.yaml", "");
  EXPECT_TRUE(load_experiment(empty).is_map());
}

TEST_F(ConfigLoad, Overrides) {
  const std::string exp = write("exp.yaml", kBase);
  const Node root =
      load_experiment(exp, {"model.encoder.num_heads=2", "train.new_key=hello", "model.attention.kind=additive",
                            "tags=[x, y]", "train.on=true", "train.lr = 0.5", "model.decoder={plugin: gru}"});
  const Node& heads = root.at("model").at("encoder").at("num_heads");
  EXPECT_EQ(heads.as_int(), 2);
  EXPECT_EQ(heads.location().str(), "<command line>");
  EXPECT_EQ(heads.where(), "<command line> (at 'model.encoder.num_heads')");
  EXPECT_EQ(root.at("model").at("encoder").at("num_hiddens").as_int(), 256);  // siblings kept
  EXPECT_EQ(root.at("train").at("new_key").str(), "hello");
  EXPECT_EQ(root.at("train").at("new_key").path(), "train.new_key");
  EXPECT_EQ(root.at("model").at("attention").at("kind").path(), "model.attention.kind");
  ASSERT_EQ(root.at("tags").size(), 2u);
  EXPECT_EQ(root.at("tags")[1].str(), "y");
  EXPECT_EQ(root.at("tags")[1].path(), "tags[1]");
  EXPECT_TRUE(root.at("train").at("on").as_bool());
  EXPECT_DOUBLE_EQ(root.at("train").at("lr").as_double(), 0.5);
  EXPECT_EQ(root.at("model").at("decoder").keys(), (std::vector<std::string>{"plugin"}));  // replaced
}

TEST_F(ConfigLoad, OverrideListItem) {
  Node root = parse_yaml("samples:\n  - src: a\n  - src: b\n", "exp.yaml");
  apply_override(root, "samples[1].src=c");
  EXPECT_EQ(root.at("samples")[1].at("src").str(), "c");
  EXPECT_EQ(root.at("samples")[1].at("src").path(), "samples[1].src");
  EXPECT_TRUE(contains(error_of([&] { apply_override(root, "samples[5].src=c"); }), "index 5 out of range"));
  EXPECT_TRUE(contains(error_of([&] { apply_override(root, "samples.src=c"); }), "not a map"));
}

TEST_F(ConfigLoad, MalformedOverrides) {
  Node root = parse_yaml("train:\n  lr: 0.1\n", "exp.yaml");
  EXPECT_EQ(error_of([&] { apply_override(root, "train.lr"); }),
            "<command line>: malformed override 'train.lr': expected key=value (e.g. model.encoder.num_heads=4)");
  EXPECT_TRUE(contains(error_of([&] { apply_override(root, "=3"); }), "malformed override '=3': empty key"));
  EXPECT_TRUE(contains(error_of([&] { apply_override(root, "train..lr=3"); }), "empty key segment"));
  EXPECT_TRUE(contains(error_of([&] { apply_override(root, "a[x]=3"); }), "expected a list index"));
  EXPECT_TRUE(contains(error_of([&] { apply_override(root, "x=[1,"); }), "malformed override 'x=[1,'"));
  const std::string scalar = error_of([&] { apply_override(root, "train.lr.value=3"); });
  EXPECT_EQ(scalar.rfind("exp.yaml:2:7: cannot apply override 'train.lr.value=3': 'train.lr' is '0.1', not a map", 0),
            0u)
      << scalar;
  EXPECT_THROW(load_experiment(write("e.yaml", "a: 1\n"), {"a.b=2"}), ConfigError);
}

TEST_F(ConfigLoad, NonRegularFilesAreRefusedWithoutOpeningThem) {
  // Opening a FIFO for reading blocks until a writer comes: the runner hung forever.
  const std::string fifo = dir_ + "/exp.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(error_of([&] { load_experiment(fifo); }),
            "<command line>: cannot read config file '" + fifo + "': it is a FIFO (named pipe), not a regular file");
  EXPECT_EQ(error_of([&] { load_experiment(dir_); }),
            "<command line>: cannot read config file '" + dir_ + "': it is a directory, not a regular file");
  EXPECT_TRUE(contains(error_of([&] { load_experiment("/dev/null"); }), "it is a device, not a regular file"));
  // The same for an included file, named with the place that includes it.
  const auto exp = write("inc_fifo.yaml", "defaults: [exp.fifo]\n");
  const std::string msg = error_of([&] { load_experiment(exp); });
  EXPECT_TRUE(contains(msg, exp + ":1:12 (at 'defaults[0]'")) << msg;
  EXPECT_TRUE(contains(msg, "it is a FIFO (named pipe), not a regular file")) << msg;
}

TEST_F(ConfigLoad, FileOverTheSizeLimitIsRefused) {
  const auto big = write("big.yaml", "# " + std::string(kMaxConfigBytes, 'x') + "\nexperiment: big\n");
  EXPECT_EQ(error_of([&] { load_experiment(big); }),
            fmt::format("<command line>: cannot read config file '{}': it has {} bytes, more than the {} a config "
                        "file may have",
                        big, kMaxConfigBytes + 19, kMaxConfigBytes));
}

TEST_F(ConfigLoad, ProcFilesAreBoundedWhileRead) {
  // /proc files report size 0 but have content: the 4 MiB limit holds for what is read, not for
  // what stat says (/proc/kallsyms holds tens of MB of text).
  EXPECT_EQ(error_of([&] { load_experiment("/proc/kallsyms"); }),
            fmt::format("<command line>: cannot read config file '/proc/kallsyms': it has more than the {} bytes a "
                        "config file may have",
                        kMaxConfigBytes));
  EXPECT_TRUE(contains(error_of([&] { load_experiment("/dev/zero"); }), "it is a device, not a regular file"));
  // A file that is one long scalar is quoted in part (the whole of /proc/kallsyms was printed).
  const auto text = write("text.yaml", std::string(5000, 'x') + "\n");
  EXPECT_EQ(error_of([&] { load_experiment(text); }), text + ":1:1: expected a map at the top level of '" + text +
                                                          "', found '" + std::string(100, 'x') + "...' (5000 bytes)");
}

TEST_F(ConfigLoad, SymlinkLoopsAreNamed) {
  // std::filesystem and fopen said "Too many levels of symbolic links" and nothing else.
  const std::string loop = dir_ + "/loop.yaml";
  ASSERT_EQ(::symlink("loop.yaml", loop.c_str()), 0);
  EXPECT_EQ(error_of([&] { load_experiment(loop); }),
            "<command line>: cannot read config file '" + loop + "': it is a symlink loop");
  const auto exp = write("inc_loop.yaml", "defaults: [loop.yaml]\n");
  const std::string msg = error_of([&] {
    load_experiment(exp); });
  EXPECT_EQ(msg, exp + ":1:12 (at 'defaults[0]' in '" + exp + "'): cannot read config file '" + loop +
                     "': it is a symlink loop")
      << msg;
  const std::string through = dir_ + "/loop.yaml/exp.yaml";  // a loop on the way to the file
  EXPECT_TRUE(contains(error_of([&] {
    load_experiment(through); }), "a directory on its way is a symlink loop"));
}

TEST_F(ConfigLoad, InvalidUtf8OverrideKeyIsRefused) {
  // Fuzz finding (config_override/regress-invalid-utf8): a stored config that could not be read back.
  Node root = parse_yaml("a: 1\n", "exp.yaml");
  const std::string msg = error_of([&] {
    apply_override(root,
                   "mod\xe1\xe1"
                   "el=1");
  });
  EXPECT_TRUE(contains(msg, "<command line>: malformed override")) << msg;
  EXPECT_TRUE(contains(msg, "the key is not UTF-8 text: byte 0xe1 at offset 3")) << msg;
}

TEST_F(ConfigLoad, RecursiveAliasIsRefusedNotRecursedInto) {
  // Fuzz finding (config_load/regress-recursive-alias.yaml): an alias inside the map it names is a
  // cycle; converting it recursed until the stack overflowed (runner summary died with SIGSEGV).
  const auto exp = write("recursive.yaml", "model:\n  encoder: &t\n    plugin: transformer\n    decoder: *t\n");
  const std::string msg = error_of([&] { load_experiment(exp); });
  EXPECT_TRUE(contains(msg, exp + ":")) << msg;
  EXPECT_TRUE(contains(msg, "the YAML tree nests deeper than 1000 levels at 'model.encoder.decoder.decoder")) << msg;
  EXPECT_TRUE(contains(msg, "an alias inside the value it names")) << msg;
}

TEST_F(ConfigLoad, AliasExpansionIsBounded) {
  // "Billion laughs": 9 levels of 10 aliases each expand to 10^9 values (8 GB before the limit).
  std::string text = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i <= 9; ++i) {
    text += fmt::format("a{0}: &a{0} [", i);
    for (int j = 0; j < 10; ++j) text += fmt::format("{}*a{}", j ? ", " : "", i - 1);
    text += "]\n";
  }
  const auto exp = write("laughs.yaml", text);
  const std::string msg = error_of([&] { load_experiment(exp); });
  EXPECT_TRUE(contains(msg, exp + ":")) << msg;
  EXPECT_TRUE(contains(msg, fmt::format("the YAML tree has more than {} values (aliases expanded)", kMaxConfigNodes)))
      << msg;
  // A few aliases are fine.
  const auto ok = write("alias.yaml", "base: &b {x: 1}\nuse: *b\n");
  EXPECT_EQ(load_experiment(ok).at("use").at("x").as_int(), 1);
}

TEST_F(ConfigLoad, LargeMapsLoadInLinearTime) {
  // Key lookups were linear searches, so a map of n keys took n^2/2 string comparisons to build
  // and to merge (minutes for 700k keys). 90k keys in a base file and the including one: quadratic
  // work would be ~8e9 comparisons, linear is instant.
  std::string base_text = "big:\n", over_text = "defaults: [big_base.yaml]\nbig:\n";
  for (int i = 0; i < 45000; ++i) {
    base_text += fmt::format("  k{}: {}\n", i, i);
    over_text += fmt::format("  k{}: {}\n", i + 20000, -i);
  }
  write("big_base.yaml", base_text);
  const Node root = load_experiment(write("big_over.yaml", over_text));
  const Node& big = root.at("big");
  EXPECT_EQ(big.size(), 65000u);
  EXPECT_EQ(big.at("k0").as_int(), 0);
  EXPECT_EQ(big.at("k20000").as_int(), 0);
  EXPECT_EQ(big.at("k64999").as_int(), -44999);
  EXPECT_EQ(big.keys().back(), "k64999");
}

}  // namespace config_load_test
