// The located YAML tree: locations, paths, scalar conversions, errors, merge, emit round trip.
#include <gtest/gtest.h>

#include <attnlab/config/node.hpp>
#include <functional>
#include <string>

#include "config/json.hpp"
#include "testing/testing.hpp"

// A namespace of its own: the file shares a translation unit with its neighbours (tests/CMakeLists.txt).
namespace config_test {

using attnlab::ConfigError;
using namespace attnlab::config;

namespace {

/// The message of the ConfigError `f` throws ("" and a test failure if it throws none).
/// The ConfigError message that f throws.
std::string error_of(const std::function<void()>& f) { return attnlab::testutil::message_of<ConfigError>(f); }

const char* kModel = R"(name: demo
model:
  encoder:
    num_hiddens: 256
    num_heads: four
  decoder: {layers: 2}
samples:
  - src: hello
    tgt: bonjour
  - src: bye
  - [1, 2]
empty:
)";

}  // namespace

TEST(ConfigNode, LocationsAndPathsOfNestedNodes) {
  const Node root = parse_yaml(kModel, "exp.yaml");
  ASSERT_TRUE(root.is_map());
  EXPECT_EQ(root.keys(), (std::vector<std::string>{"name", "model", "samples", "empty"}));

  const Node& hiddens = root.at("model").at("encoder").at("num_hiddens");
  EXPECT_EQ(hiddens.path(), "model.encoder.num_hiddens");
  EXPECT_EQ(hiddens.location().file, "exp.yaml");
  EXPECT_EQ(hiddens.location().line, 4);
  EXPECT_EQ(hiddens.location().col, 18);
  EXPECT_EQ(hiddens.location().str(), "exp.yaml:4:18");
  EXPECT_EQ(hiddens.where(), "exp.yaml:4:18 (at 'model.encoder.num_hiddens')");
  EXPECT_EQ(hiddens.as_int(), 256);

  // Collections given as map values are located at their key.
  const Node& encoder = root.at("model").at("encoder");
  EXPECT_EQ(encoder.location().line, 3);
  EXPECT_EQ(encoder.location().col, 3);
  EXPECT_EQ(root.at("model").at("decoder").at("layers").path(), "model.decoder.layers");

  const Node& samples = root.at("samples");
  ASSERT_TRUE(samples.is_seq());
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[1].at("src").path(), "samples[1].src");
  EXPECT_EQ(samples[1].at("src").location().line, 10);
  EXPECT_EQ(samples[2][1].path(), "samples[2][1]");
  EXPECT_EQ(samples[2][1].as_int(), 2);

  const Node& empty = root.at("empty");
  EXPECT_TRUE(empty.is_null());
  EXPECT_EQ(empty.location().line, 12);  // the key's line, not the next one
}

TEST(ConfigNode, ScalarConversions) {
  const Node root =
      parse_yaml("i: -42\nh: 0x10\nf: 1.5e-3\nt: yes\nn: Off\ninf: .inf\nbig: 99999999999999999999\n", "c.yaml");
  EXPECT_EQ(root.at("i").as_int(), -42);
  EXPECT_EQ(root.at("h").as_int(), 16);
  EXPECT_DOUBLE_EQ(root.at("f").as_double(), 1.5e-3);
  EXPECT_DOUBLE_EQ(root.at("i").as_double(), -42.0);
  EXPECT_TRUE(root.at("t").as_bool());
  EXPECT_FALSE(root.at("n").as_bool());
  EXPECT_TRUE(std::isinf(root.at("inf").as_double()));
  EXPECT_NE(error_of([&] { root.at("big").as_int(); }).find("out of range"), std::string::npos);
}

TEST(ConfigNode, WrongScalarTypeNamesPlaceExpectedAndFound) {
  const Node root = parse_yaml(kModel, "exp.yaml");
  const std::string msg = error_of([&] { root.at("model").at("encoder").at("num_heads").as_int(); });
  EXPECT_EQ(msg, "exp.yaml:5:16: expected an integer at 'model.encoder.num_heads', found 'four'");
  EXPECT_EQ(error_of([&] { root.at("model").at("encoder").at("num_hiddens").as_bool(); }).rfind("exp.yaml:4:18:", 0),
            0u);
  EXPECT_NE(error_of([&] { parse_yaml("x: 1.5", "f").at("x").as_int(); }).find("found '1.5'"), std::string::npos);
  const std::string map_msg = error_of([&] { root.at("model").as_double(); });
  EXPECT_EQ(map_msg, "exp.yaml:2:1: expected a scalar at 'model', found a map");
}

TEST(ConfigNode, MissingKeyNamesMapPlaceAndPath) {
  const Node root = parse_yaml(kModel, "exp.yaml");
  const std::string msg = error_of([&] { root.at("model").at("encoder").at("num_hidden"); });
  EXPECT_EQ(msg.rfind("exp.yaml:3:3: missing required key 'num_hidden' at 'model.encoder.num_hidden'", 0), 0u) << msg;
  EXPECT_NE(msg.find("did you mean 'num_hiddens'?"), std::string::npos) << msg;
  EXPECT_EQ(root.find("nope"), nullptr);
  EXPECT_FALSE(root.has("nope"));
  EXPECT_TRUE(root.has("empty"));
}

TEST(ConfigNode, DuplicateKeyNamesBothLines) {
  const std::string msg = error_of([] { parse_yaml("a:\n  x: 1\n  y: 2\n  x: 3\n", "dup.yaml"); });
  EXPECT_EQ(msg.rfind("dup.yaml:4:3: duplicate key 'x' at 'a.x'", 0), 0u) << msg;
  EXPECT_NE(msg.find("line 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 4"), std::string::npos) << msg;
}

TEST(ConfigNode, YamlSyntaxErrorLocation) {
  // yaml-cpp notices the unclosed list where the next line starts.
  const std::string msg = error_of([] { parse_yaml("a: 1\nb: [1, 2\nc: 3\n", "bad.yaml"); });
  EXPECT_EQ(msg, "bad.yaml:3:2: YAML syntax error: end of sequence flow not found");
  const std::string tab = error_of([] { parse_yaml("a:\n  b: 1\n c: 2\n", "indent.yaml"); });
  EXPECT_EQ(tab.rfind("indent.yaml:3:", 0), 0u) << tab;
}

TEST(ConfigNode, LocationStrForPseudoFiles) {
  EXPECT_EQ((Location{"<command line>", 0, 0}).str(), "<command line>");
  EXPECT_EQ((Location{"", 0, 0}).str(), "<default>");
  EXPECT_EQ((Location{"<default>", 0, 0}).str(), "<default>");
  EXPECT_EQ((Location{"a.yaml", 3, 7}).str(), "a.yaml:3:7");
}

TEST(ConfigNode, SetEraseMergeRepath) {
  Node root = parse_yaml("model:\n  width: 8\n  depth: 2\n  tags: [a, b]\nlr: 0.1\n", "base.yaml");
  const Node over = parse_yaml("model:\n  depth: 4\n  tags: [c]\n  extra: {k: v}\nseed: 3\n", "over.yaml");
  root.merge(over);
  EXPECT_EQ(root.keys(), (std::vector<std::string>{"model", "lr", "seed"}));
  const Node& model = root.at("model");
  EXPECT_EQ(model.keys(), (std::vector<std::string>{"width", "depth", "tags", "extra"}));
  EXPECT_EQ(model.at("width").as_int(), 8);
  EXPECT_EQ(model.at("width").location().file, "base.yaml");
  EXPECT_EQ(model.at("depth").as_int(), 4);
  EXPECT_EQ(model.at("depth").location().file, "over.yaml");
  ASSERT_EQ(model.at("tags").size(), 1u);  // lists replace, not append
  EXPECT_EQ(model.at("tags")[0].str(), "c");
  EXPECT_EQ(model.at("extra").at("k").path(), "model.extra.k");

  Node sub = Node::map();
  sub.set("inner", Node::scalar("1"));
  Node& placed = root.set("new", sub);
  EXPECT_EQ(placed.at("inner").path(), "new.inner");
  Node& list = root.set("list", Node::seq());
  list.push_back(Node::scalar("x"));
  EXPECT_EQ(root.at("list")[0].path(), "list[0]");

  EXPECT_TRUE(root.erase("lr"));
  EXPECT_FALSE(root.erase("lr"));
  EXPECT_FALSE(root.has("lr"));
  // Keys after the erased one are still found (lookups go through an index).
  EXPECT_EQ(root.keys(), (std::vector<std::string>{"model", "seed", "new", "list"}));
  EXPECT_EQ(root.at("seed").as_int(), 3);
  EXPECT_EQ(root.at("list")[0].str(), "x");
  root.set("lr", Node::scalar("0.2"));
  EXPECT_EQ(root.at("lr").str(), "0.2");
  EXPECT_EQ(root.keys().back(), "lr");

  root.repath("exp");
  EXPECT_EQ(root.at("model").at("extra").at("k").path(), "exp.model.extra.k");
  EXPECT_EQ(root.at("list")[0].path(), "exp.list[0]");

  Node scalar = Node::scalar("1", {}, "s");
  EXPECT_NE(error_of([&] { scalar.set("k", Node()); }).find("expected a map at 's'"), std::string::npos);
}

namespace {

bool same_tree(const Node& a, const Node& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Node::Kind::Null:
      return true;
    case Node::Kind::Scalar:
      return a.str() == b.str();
    case Node::Kind::Seq:
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!same_tree(a[i], b[i])) return false;
      }
      return true;
    case Node::Kind::Map:
      if (a.keys() != b.keys()) return false;
      for (const auto& k : a.keys()) {
        if (!same_tree(a.at(k), b.at(k))) return false;
      }
      return true;
  }
  return false;
}

}  // namespace

TEST(ConfigNode, ToYamlRoundTrip) {
  const Node root = parse_yaml(kModel, "exp.yaml");
  const std::string text = to_yaml(root);
  const Node back = parse_yaml(text, "emitted.yaml");
  EXPECT_TRUE(same_tree(root, back)) << text;
  EXPECT_EQ(back.at("samples")[1].at("src").path(), "samples[1].src");

  // Strings that would read back as something else must be quoted.
  Node tricky = Node::map();
  for (const std::string s : {"null", "~", "", "a: b", "- x", "#c", "multi\nline", "  padded", "[x]", "{y}", "it's",
                              "\"q\"", "@at", "%p", "true", "1.5", "tab\there", "ünï"}) {
    tricky.set("k" + s, Node::scalar(s));
  }
  tricky.set("null_value", Node());
  tricky.set("empty_map", Node::map());
  tricky.set("empty_list", Node::seq());
  Node nested = Node::seq();
  nested.push_back(Node::map()).set("a", Node::scalar("1"));
  nested.push_back(Node::seq()).push_back(Node::scalar("2"));
  tricky.set("nested", nested);
  const std::string tricky_text = to_yaml(tricky);
  EXPECT_TRUE(same_tree(tricky, parse_yaml(tricky_text, "t.yaml"))) << tricky_text;
  EXPECT_NE(tricky_text.find("nested:\n  - a: 1\n  -\n    - 2\n"), std::string::npos) << tricky_text;  // block style
}

// Fuzz findings (fuzz/README.md, "Findings"), each also a plain test here.

TEST(ConfigNode, InvalidUtf8KeyOrValueIsRefusedAtFileLineCol) {
  // config_load/regress-invalid-utf8-key.yaml: yaml-cpp's emitter wrote U+FFFD for such a key, so
  // the config stored in the results file was not the one that ran.
  const std::string key = error_of([] { parse_yaml("model:\n  num_hea\xc1\xc1s: 8\n", "bad.yaml"); });
  EXPECT_EQ(key.rfind("bad.yaml:2:3: the key at 'model.num_hea", 0), 0u) << key;
  EXPECT_NE(key.find("is not UTF-8 text: byte 0xc1 at offset 7"), std::string::npos) << key;
  const std::string value = error_of([] { parse_yaml("a:\n  b: x\xffy\n", "v.yaml"); });
  EXPECT_EQ(value.rfind("v.yaml:2:6: the value at 'a.b' is not UTF-8 text: byte 0xff at offset 1", 0), 0u) << value;
}

TEST(ConfigNode, CarriageReturnRoundTripsThroughToYaml) {
  // config_override/regress-carriage-return: a value "a\r" was stored as "a".
  Node root = Node::map();
  root.set("record", Node::scalar("a\r"));
  root.set("mid\rkey", Node::scalar("x\ry"));
  const std::string text = to_yaml(root);
  const Node back = parse_yaml(text, "emitted.yaml");
  EXPECT_EQ(back.at("record").str(), "a\r") << text;
  EXPECT_EQ(back.at("mid\rkey").str(), "x\ry") << text;
}

TEST(ConfigNode, KeyStartingWithADocumentMarkerRoundTrips) {
  // config_load/regress-document-marker-key.yaml: a key "---   = 11" (plain inside an indented
  // map) was written at column 0, where YAML reads a document marker.
  const Node root = parse_yaml("a:\n  ---   = 11: x\n  ...k: y\n", "m.yaml");
  ASSERT_TRUE(root.at("a").has("---   = 11"));
  Node top = Node::map();
  for (const auto& k : root.at("a").keys()) top.set(k, Node::scalar(root.at("a").at(k).str()));
  const std::string text = to_yaml(top);
  const Node back = parse_yaml(text, "emitted.yaml");
  EXPECT_EQ(back.at("---   = 11").str(), "x") << text;
  EXPECT_EQ(back.at("...k").str(), "y") << text;
}

TEST(ConfigNode, YamlCppRefusesNestingDeeperThan498Collections) {
  // What node.hpp says: yaml-cpp 0.7 itself refuses a document nested deeper than this ("bad
  // file"), so only aliases reach the converter's 1000-level limit.
  const auto nested = [](int depth) { return "a: " + std::string(depth, '[') + "1" + std::string(depth, ']') + "\n"; };
  EXPECT_NO_THROW(parse_yaml(nested(497), "deep.yaml"));  // 498 collections with the top map
  const std::string msg = error_of([&] { parse_yaml(nested(498), "deep.yaml"); });
  EXPECT_EQ(msg.rfind("deep.yaml:", 0), 0u) << msg;
}

TEST(ConfigNode, DidYouMean) {
  const std::vector<std::string> known = {"num_hiddens", "num_heads", "dropout", "norm"};
  EXPECT_EQ(did_you_mean("num_hiden", known), "num_hiddens");
  EXPECT_EQ(did_you_mean("num_head", known), "num_heads");
  EXPECT_EQ(did_you_mean("dropuot", known), "dropout");
  EXPECT_EQ(did_you_mean("nrom", known), "norm");
  EXPECT_EQ(did_you_mean("learning_rate", known), std::nullopt);
  EXPECT_EQ(did_you_mean("x", {}), std::nullopt);
}

// The JSON stored beside /config (config/json.hpp): each scalar typed as a YAML 1.2 reader of the
// stored YAML types it, so that the Python package reads the same values from either.
TEST(ConfigNode, ToJsonTypesScalarsAsYaml12) {
  const auto root = parse_yaml(
      "s: first\nno_: no\non_: on\nyes_: yes\nt: true\nf: FALSE\ni: 32\nneg: -7\nplus: +5\nlead: 007\n"
      "big: 123456789012345678901234567890\nfl: 0.005\nexp: 1e-05\nwhole: 2.\nhalf: .5\nhex: 0x1F\noct: 0o17\n"
      "inf: .inf\nninf: -.Inf\nnan: .nan\nnull_: ~\nempty:\nquoted_null: \"null\"\nquoted_empty: \"\"\n"
      "date: 2026-11-27\ntext: \"a \\\"b\\\" \\\\ c\\n\\t\\u0001 ü\"\n"
      "list: [1, x, 2.5, [true]]\nmap: {b: 1, a: {c: null}}\n",
      "t.yaml");
  EXPECT_EQ(to_json(root),
            R"({"s": "first", "no_": "no", "on_": "on", "yes_": "yes", "t": true, "f": false, "i": 32, "neg": -7, )"
            R"("plus": 5, "lead": 7, "big": 123456789012345678901234567890, "fl": 0.005, "exp": 1e-05, "whole": 2.0, )"
            R"("half": 0.5, "hex": 31, "oct": 15, "inf": Infinity, "ninf": -Infinity, "nan": NaN, "null_": null, )"
            R"("empty": null, "quoted_null": "null", "quoted_empty": "", "date": "2026-11-27", )"
            R"("text": "a \"b\" \\ c\n\t\u0001 ü", "list": [1, "x", 2.5, [true]], "map": {"b": 1, "a": {"c": null}}})");
}

}  // namespace config_test
