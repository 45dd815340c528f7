// Option schemas: unknown keys with did-you-mean, required keys, types, choices, bounds, defaults.
#include <gtest/gtest.h>

#include <attnlab/config/schema.hpp>
#include <cmath>
#include <functional>
#include <string>

#include "testing/testing.hpp"

// A namespace of its own: the file shares a translation unit with its neighbours (tests/CMakeLists.txt).
namespace config_schema_test {

using attnlab::ConfigError;
using namespace attnlab::config;

namespace {

/// The ConfigError message that f throws.
std::string error_of(const std::function<void()>& f) { return attnlab::testutil::message_of<ConfigError>(f); }

Schema encoder_schema() {
  return {
      opt_int("num_hiddens", 256, "model width", 1),
      opt_int("num_heads", 4, "attention heads", 1, 64),
      opt_float("dropout", 0.1, "dropout probability", 0.0, 1.0),
      opt_bool("bias", true, "use biases"),
      opt_enum("norm", "last", {"first", "last"}, "where layer norm goes"),
      opt_string("name", "", "display name"),
      opt_int("vocab", std::nullopt, "vocabulary size", 1),
      opt_node("layers", Type::List, "[1, 2]", "per-layer sizes"),
      opt_node("extra", Type::Map, "{}", "passed through"),
      opt_node("anything", Type::Any, "~", "anything at all"),
  };
}

/// Parse `body` as the map at model.encoder of exp.yaml (the body starts on line 3).
Node encoder_node(const std::string& body) {
  static Node root;
  root = parse_yaml("model:\n  encoder:\n" + body, "exp.yaml");
  return root.at("model").at("encoder");
}

}  // namespace

TEST(ConfigSchema, TypeNames) {
  EXPECT_STREQ(type_name(Type::Int), "int");
  EXPECT_STREQ(type_name(Type::Float), "float");
  EXPECT_STREQ(type_name(Type::Bool), "bool");
  EXPECT_STREQ(type_name(Type::String), "string");
  EXPECT_STREQ(type_name(Type::Map), "map");
  EXPECT_STREQ(type_name(Type::List), "list");
  EXPECT_STREQ(type_name(Type::Any), "any");
}

TEST(ConfigSchema, ValidValuesAndDefaultsFilled) {
  const Node node = encoder_node(
      "    plugin: transformer\n    vocab: 1000\n    num_heads: 8\n    dropout: 0\n"
      "    norm: first\n");
  const Options o(node, encoder_schema(), "encoder 'transformer'");
  EXPECT_EQ(o.get_int("vocab"), 1000);
  EXPECT_EQ(o.get_int("num_heads"), 8);
  EXPECT_EQ(o.get_int("num_hiddens"), 256);       // default
  EXPECT_DOUBLE_EQ(o.get_float("dropout"), 0.0);  // an int is a valid float
  EXPECT_DOUBLE_EQ(o.get_float("num_heads"), 8.0);
  EXPECT_TRUE(o.get_bool("bias"));
  EXPECT_EQ(o.get_string("norm"), "first");
  EXPECT_EQ(o.get_string("name"), "");
  ASSERT_TRUE(o.node("layers").is_seq());
  EXPECT_EQ(o.node("layers")[1].as_int(), 2);
  EXPECT_TRUE(o.node("extra").is_map());
  EXPECT_TRUE(o.node("anything").is_null());
  EXPECT_TRUE(o.given("vocab"));
  EXPECT_FALSE(o.given("num_hiddens"));
  EXPECT_EQ(o.owner(), "encoder 'transformer'");

  const Node& r = o.resolved();
  ASSERT_TRUE(r.is_map());
  EXPECT_EQ(r.keys(), (std::vector<std::string>{"plugin", "num_hiddens", "num_heads", "dropout", "bias", "norm", "name",
                                                "vocab", "layers", "extra", "anything"}));
  EXPECT_EQ(r.path(), "model.encoder");
  EXPECT_EQ(r.at("num_hiddens").path(), "model.encoder.num_hiddens");
  EXPECT_EQ(r.at("num_hiddens").location().str(), "<default>");
  EXPECT_EQ(r.at("layers")[0].path(), "model.encoder.layers[0]");
  EXPECT_EQ(r.at("vocab").location().str(), "exp.yaml:4:12");
  EXPECT_EQ(r.at("plugin").str(), "transformer");
}

TEST(ConfigSchema, NullNodeMeansAllDefaults) {
  const Schema s = {opt_int("steps", 10, "steps"), opt_string("tricky", "a: b", "needs quoting")};
  const Options o(Node(), s, "trainer");
  EXPECT_EQ(o.get_int("steps"), 10);
  EXPECT_EQ(o.get_string("tricky"), "a: b");
}

TEST(ConfigSchema, UnknownKeyHasLineAndDidYouMean) {
  const Node node = encoder_node("    vocab: 10\n    num_hiden: 128\n");
  const std::string msg = error_of([&] { Options(node, encoder_schema(), "encoder 'transformer'"); });
  EXPECT_EQ(msg,
            "exp.yaml:4:16: unknown option 'num_hiden' for encoder 'transformer' (at 'model.encoder.num_hiden'); "
            "did you mean 'num_hiddens'? Known options: num_hiddens, num_heads, dropout, bias, norm, name, vocab, "
            "layers, extra, anything");
  // A nested map given under an unknown key is reported at its key's line.
  const Node nested = encoder_node("    vocab: 10\n    colour:\n      x: 1\n");
  const std::string msg2 = error_of([&] { Options(nested, encoder_schema(), "encoder"); });
  EXPECT_EQ(
      msg2.rfind("exp.yaml:4:5: unknown option 'colour' for encoder (at 'model.encoder.colour'); Known options:", 0),
      0u)
      << msg2;
}

TEST(ConfigSchema, IgnoredKeysAreAllowed) {
  const Node node = encoder_node("    vocab: 10\n    plugin: x\n    kind: y\n");
  EXPECT_NE(error_of([&] { Options(node, encoder_schema(), "encoder"); }).find("unknown option 'kind'"),
            std::string::npos);
  const Options o(node, encoder_schema(), "encoder", {"plugin", "kind"});
  EXPECT_EQ(o.resolved().at("kind").str(), "y");
}

TEST(ConfigSchema, MissingRequiredNamesMapPathAndOwner) {
  const Node node = encoder_node("    num_heads: 2\n");
  const std::string msg = error_of([&] { Options(node, encoder_schema(), "encoder 'transformer'"); });
  EXPECT_EQ(msg.rfind("exp.yaml:2:3: missing required option 'vocab' for encoder 'transformer' "
                      "(at 'model.encoder.vocab'",
                      0),
            0u)
      << msg;
}

TEST(ConfigSchema, WrongTypes) {
  const Schema s = encoder_schema();
  EXPECT_EQ(error_of([&] { Options(encoder_node("    vocab: 10\n    num_heads: four\n"), s, "enc"); }),
            "exp.yaml:4:16 (at 'model.encoder.num_heads'): enc: expected an integer, found 'four'");
  EXPECT_EQ(error_of([&] { Options(encoder_node("    vocab: 1.5\n"), s, "enc"); }),
            "exp.yaml:3:12 (at 'model.encoder.vocab'): enc: expected an integer, found '1.5'");
  EXPECT_NE(error_of([&] {
              Options(encoder_node("    vocab: 1\n    dropout: lots\n"), s, "enc");
            }).find("expected a number, found 'lots'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              Options(encoder_node("    vocab: 1\n    bias: maybe\n"), s, "enc");
            }).find("expected a boolean (true/false), found 'maybe'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              Options(encoder_node("    vocab: 1\n    name: [a]\n"), s, "enc");
            }).find("expected a string, found a list"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              Options(encoder_node("    vocab: 1\n    layers: 3\n"), s, "enc");
            }).find("(at 'model.encoder.layers'): enc: expected a list, found '3'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              Options(encoder_node("    vocab: 1\n    extra: [1]\n"), s, "enc");
            }).find("expected a map, found a list"),
            std::string::npos);
  const std::string null_msg = error_of([&] { Options(encoder_node("    vocab:\n"), s, "enc"); });
  EXPECT_EQ(null_msg, "exp.yaml:3:5 (at 'model.encoder.vocab'): enc: expected an integer, found null");
  // Anything goes for Any.
  EXPECT_NO_THROW(Options(encoder_node("    vocab: 1\n    anything: {a: [1]}\n"), s, "enc"));
}

TEST(ConfigSchema, NotAMap) {
  const Node root = parse_yaml("model:\n  encoder: transformer\n", "exp.yaml");
  EXPECT_EQ(error_of([&] { Options(root.at("model").at("encoder"), encoder_schema(), "encoder"); }),
            "exp.yaml:2:12: expected a map of options for encoder at 'model.encoder', found 'transformer'");
}

TEST(ConfigSchema, ChoicesAndBounds) {
  const Schema s = encoder_schema();
  EXPECT_EQ(error_of([&] { Options(encoder_node("    vocab: 1\n    norm: middle\n"), s, "enc"); }),
            "exp.yaml:4:11 (at 'model.encoder.norm'): enc: expected one of first|last, found 'middle'");
  EXPECT_NE(error_of([&] {
              Options(encoder_node("    vocab: 1\n    norm: frist\n"), s, "enc");
            }).find("did you mean 'first'?"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { Options(encoder_node("    vocab: -3\n"), s, "enc"); }),
            "exp.yaml:3:12 (at 'model.encoder.vocab'): enc: expected >= 1, found -3");
  EXPECT_EQ(error_of([&] { Options(encoder_node("    vocab: 1\n    num_heads: 65\n"), s, "enc"); }),
            "exp.yaml:4:16 (at 'model.encoder.num_heads'): enc: expected <= 64, found 65");
  EXPECT_NE(error_of([&] {
              Options(encoder_node("    vocab: 1\n    dropout: 1.5\n"), s, "enc");
            }).find("expected <= 1, found 1.5"),
            std::string::npos);
  EXPECT_NO_THROW(Options(encoder_node("    vocab: 1\n    num_heads: 64\n    dropout: 1\n"), s, "enc"));
}

TEST(ConfigSchema, FailNamesTheOption) {
  const Node node = encoder_node("    vocab: 10\n    num_heads: 3\n");
  const Options o(node, encoder_schema(), "enc");
  EXPECT_EQ(error_of([&] { o.fail("num_heads", "3 heads do not divide 256"); }),
            "exp.yaml:4:16 (at 'model.encoder.num_heads'): enc: 3 heads do not divide 256");
  // A defaulted option is reported at the map, with the option's path.
  EXPECT_EQ(error_of([&] { o.fail("num_hiddens", "too wide"); }),
            "exp.yaml:2:3 (at 'model.encoder.num_hiddens'): enc: too wide");
  EXPECT_NE(error_of([&] { o.get_int("nope"); }).find("no option 'nope'"), std::string::npos);
  EXPECT_NE(error_of([&] { o.get_bool("vocab"); }).find("option 'vocab' is of type int, read as a bool"),
            std::string::npos);
}

TEST(ConfigSchema, FloatsAreFiniteUnlessTheSpecAllowsOtherwise) {
  // NaN compares false with every bound, so it passed min/max; .inf passed an open upper bound.
  const Schema s = encoder_schema();
  EXPECT_EQ(error_of([&] { Options(encoder_node("    vocab: 1\n    dropout: .nan\n"), s, "enc"); }),
            "exp.yaml:4:14 (at 'model.encoder.dropout'): enc: expected a finite number, found '.nan'");
  EXPECT_EQ(error_of([&] { Options(encoder_node("    vocab: 1\n    dropout: -.Inf\n"), s, "enc"); }),
            "exp.yaml:4:14 (at 'model.encoder.dropout'): enc: expected a finite number, found '-.Inf'");
  const Schema lr{opt_float("lr", 0.001, "learning rate", 0.0)};
  EXPECT_EQ(error_of([&] { Options(encoder_node("    lr: .inf\n"), lr, "trainer"); }),
            "exp.yaml:3:9 (at 'model.encoder.lr'): trainer: expected a finite number, found '.inf'");
  EXPECT_EQ(error_of([&] { Options(encoder_node("    lr: .NaN\n"), lr, "trainer"); }),
            "exp.yaml:3:9 (at 'model.encoder.lr'): trainer: expected a finite number, found '.NaN'");

  Schema open = lr;
  open[0].allow_non_finite = true;
  EXPECT_TRUE(std::isinf(Options(encoder_node("    lr: .inf\n"), open, "trainer").get_float("lr")));
  EXPECT_TRUE(std::isnan(Options(encoder_node("    lr: .nan\n"), open, "trainer").get_float("lr")));
}

}  // namespace config_schema_test
