// Options declared once (config::Binding): each option bound to a field of an options struct,
// its type from the field, its default from the struct; read back as the struct.
#include <gtest/gtest.h>

#include <attnlab/config/binding.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "testing/testing.hpp"

using attnlab::ConfigError;
using namespace attnlab::config;
using attnlab::testutil::contains;

namespace {

std::string error_of(const std::function<void()>& f) { return attnlab::testutil::message_of<ConfigError>(f); }

enum class Norm { First, Last };

struct Block {
  int64_t num_hiddens = 256;
  double dropout = 0.1;
  Norm norm = Norm::Last;
};

struct Encoder : Block {
  int32_t num_heads = 4;
  bool bias = false;
  std::string name = "null";  // a YAML keyword as a string: its default must be quoted
  std::string activation = "relu";
  Node layers;
};

Binding<Block> block_binding(Block defaults = {}) {
  return Binding<Block>(defaults)
      .option("num_hiddens", &Block::num_hiddens, "model width", {.min = 1})
      .option("dropout", &Block::dropout, "dropout probability", {.min = 0.0, .max = 1.0})
      .choice("norm", &Block::norm, {{"first", Norm::First}, {"last", Norm::Last}}, "layer norm placement");
}

Binding<Encoder> encoder_binding() {
  return Binding<Encoder>()
      .include(block_binding())
      .option("num_heads", &Encoder::num_heads, "attention heads", {.min = 1})
      .option("bias", &Encoder::bias, "biases")
      .option("name", &Encoder::name, "display name")
      .choice("activation", &Encoder::activation, {"relu", "gelu"}, "FFN activation")
      .node("layers", &Encoder::layers, Type::List, "[1, 2]", "per-layer sizes")
      .unbound(opt_node("attention", Type::Map, "{}", "read by someone else"));
}

Node encoder_node(const std::string& body) {
  static Node root;
  root = parse_yaml("model:\n  encoder:\n" + body, "exp.yaml");
  return root.at("model").at("encoder");
}

const OptionSpec& spec_named(const Schema& s, const std::string& name) {
  for (const auto& spec : s) {
    if (spec.name == name) return spec;
  }
  throw std::runtime_error("no option " + name);
}

}  // namespace

TEST(ConfigBinding, TheSchemaTakesNamesTypesAndDefaultsFromTheStruct) {
  const Schema s = encoder_binding().schema();
  ASSERT_EQ(s.size(), 9u);
  EXPECT_EQ(s[0].name, "num_hiddens");  // the included options first, in their order
  EXPECT_EQ(s[0].type, Type::Int);
  EXPECT_EQ(s[0].default_value, "256");
  EXPECT_EQ(s[0].min, 1.0);
  EXPECT_FALSE(s[0].max.has_value());  // an int64_t field: only the bounds given
  EXPECT_EQ(spec_named(s, "dropout").type, Type::Float);
  EXPECT_EQ(spec_named(s, "dropout").default_value, "0.1");
  EXPECT_EQ(spec_named(s, "norm").type, Type::String);
  EXPECT_EQ(spec_named(s, "norm").choices, (std::vector<std::string>{"first", "last"}));
  EXPECT_EQ(spec_named(s, "norm").default_value, "last");
  // An int32_t field cannot hold more than INT32_MAX: the option says so.
  EXPECT_EQ(spec_named(s, "num_heads").max, double(INT32_MAX));
  EXPECT_EQ(spec_named(s, "num_heads").min, 1.0);
  EXPECT_EQ(spec_named(s, "bias").type, Type::Bool);
  EXPECT_EQ(spec_named(s, "bias").default_value, "false");
  EXPECT_EQ(spec_named(s, "name").default_value, "\"null\"");
  EXPECT_EQ(spec_named(s, "activation").default_value, "relu");
  EXPECT_EQ(spec_named(s, "layers").type, Type::List);
  EXPECT_EQ(spec_named(s, "attention").type, Type::Map);
}

TEST(ConfigBinding, ReadFillsTheStructFromGivenValuesAndDefaults) {
  const auto b = encoder_binding();
  const Options o(encoder_node("    num_hiddens: 32\n    norm: first\n    bias: true\n    layers: [3]\n"
                               "    activation: gelu\n"),
                  b.schema(), "encoder plugin 'x'");
  const Encoder e = b.read(o);
  EXPECT_EQ(e.num_hiddens, 32);
  EXPECT_EQ(e.norm, Norm::First);
  EXPECT_TRUE(e.bias);
  EXPECT_EQ(e.activation, "gelu");
  EXPECT_EQ(e.layers.size(), 1u);
  EXPECT_DOUBLE_EQ(e.dropout, 0.1);  // defaults
  EXPECT_EQ(e.num_heads, 4);
  EXPECT_EQ(e.name, "null");  // the quoted default reads back as the string
}

TEST(ConfigBinding, DefaultsOfAnotherInstanceAreThatPluginsOwn) {
  const auto b = block_binding(Block{.num_hiddens = 32, .dropout = 0.0, .norm = Norm::First});
  const Schema s = b.schema();
  EXPECT_EQ(s[0].default_value, "32");
  EXPECT_EQ(s[1].default_value, "0");
  EXPECT_EQ(s[2].default_value, "first");
  const Block read = b.read(Options(Node(), s, "model plugin 'y'"));
  EXPECT_EQ(read.num_hiddens, 32);
  EXPECT_EQ(read.norm, Norm::First);
}

TEST(ConfigBinding, AValueTheFieldCannotHoldIsRefusedNotWrapped) {
  const auto b = encoder_binding();
  const auto message = error_of([&] { Options(encoder_node("    num_heads: 4294967297\n"), b.schema(), "enc"); });
  EXPECT_TRUE(contains(message, "exp.yaml:3:16")) << message;
  EXPECT_TRUE(contains(message, "expected <= 2147483647, found 4294967297")) << message;
}

TEST(ConfigBinding, FailNamesTheFieldsOptionAtItsPlace) {
  const auto b = encoder_binding();
  const Options o(encoder_node("    num_hiddens: 30\n    num_heads: 4\n"), b.schema(), "encoder plugin 'x'");
  // A field of the struct and one of the included base.
  EXPECT_EQ(b.name_of(&Encoder::num_heads), "num_heads");
  EXPECT_EQ(b.name_of(&Block::num_hiddens), "num_hiddens");
  const auto message = error_of([&] { b.fail(o, &Encoder::num_heads, "4 heads do not divide num_hiddens 30"); });
  EXPECT_EQ(message,
            "exp.yaml:4:16 (at 'model.encoder.num_heads'): encoder plugin 'x': 4 heads do not divide "
            "num_hiddens 30");
  struct Other {
    int64_t unbound = 0;
  };
  EXPECT_THROW((void)Binding<Other>().name_of(&Other::unbound), std::logic_error);
}

TEST(ConfigBinding, MistakesInTheBindingItselfAreLogicErrors) {
  // The same name twice, and a default that is none of the choices.
  EXPECT_THROW(Binding<Block>().option("x", &Block::num_hiddens, "").option("x", &Block::dropout, ""),
               std::logic_error);
  EXPECT_THROW(Binding<Block>(Block{.norm = Norm::First}).choice("norm", &Block::norm, {{"last", Norm::Last}}, ""),
               std::logic_error);
}

TEST(ConfigBinding, AnOptionalFloatIsNullUntilGivenAndCheckedWhenGiven) {
  struct Attn {
    double dropout = 0.3;
    std::optional<double> attention_dropout;  // null: the dropout
    std::optional<double> temperature = 2.0;  // an optional with a default of its own
  };
  const auto b = Binding<Attn>()
                     .option("dropout", &Attn::dropout, "")
                     .option("attention_dropout", &Attn::attention_dropout, "", {.min = 0.0, .max = 1.0})
                     .option("temperature", &Attn::temperature, "", {.min = 0.0});
  const Schema s = b.schema();
  EXPECT_EQ(spec_named(s, "attention_dropout").type, Type::Float);
  EXPECT_TRUE(spec_named(s, "attention_dropout").nullable);
  EXPECT_EQ(spec_named(s, "attention_dropout").default_value, "null");
  EXPECT_EQ(spec_named(s, "temperature").default_value, "2");
  EXPECT_FALSE(spec_named(s, "dropout").nullable);

  const Attn unset = b.read(Options(Node(), s, "enc"));
  EXPECT_FALSE(unset.attention_dropout.has_value());
  EXPECT_EQ(unset.temperature, 2.0);
  const Attn given = b.read(Options(encoder_node("    attention_dropout: 0\n    temperature: null\n"), s, "enc"));
  ASSERT_TRUE(given.attention_dropout.has_value());
  EXPECT_EQ(*given.attention_dropout, 0.0);
  EXPECT_FALSE(given.temperature.has_value());  // null given: unset, not the default

  // A given value is still a number within its bounds; null is not accepted where not nullable.
  auto message = error_of([&] { Options(encoder_node("    attention_dropout: 1.5\n"), s, "enc"); });
  EXPECT_TRUE(contains(message, "exp.yaml:3:24")) << message;
  EXPECT_TRUE(contains(message, "expected <= 1, found 1.5")) << message;
  message = error_of([&] { Options(encoder_node("    attention_dropout: lots\n"), s, "enc"); });
  EXPECT_TRUE(contains(message, "expected a number, found")) << message;
  message = error_of([&] { Options(encoder_node("    dropout: null\n"), s, "enc"); });
  EXPECT_TRUE(contains(message, "expected a number, found")) << message;
}

TEST(ConfigBinding, ARequiredOptionHasNoDefaultAndIsMissedByName) {
  struct Section {
    std::string experiment;  // required: its initializer is no default
    Node dataset;            // a required map
    int64_t seed = 0;
  };
  const auto b = Binding<Section>()
                     .required("experiment", &Section::experiment, "experiment name")
                     .node("dataset", &Section::dataset, Type::Map, std::nullopt, "dataset plugin")
                     .option("seed", &Section::seed, "seed", {.min = 0});
  const Schema s = b.schema();
  EXPECT_FALSE(spec_named(s, "experiment").default_value.has_value());
  EXPECT_EQ(spec_named(s, "experiment").type, Type::String);
  EXPECT_FALSE(spec_named(s, "dataset").default_value.has_value());
  EXPECT_EQ(spec_named(s, "seed").default_value, "0");

  const Node given = parse_yaml("experiment: x\ndataset: {plugin: corners}\n", "exp.yaml");
  const Section read = b.read(Options(given, s, "the experiment"));
  EXPECT_EQ(read.experiment, "x");
  EXPECT_EQ(read.dataset.at("plugin").str(), "corners");
  const auto missing = error_of([&] { Options(parse_yaml("dataset: {}\n", "exp.yaml"), s, "the experiment"); });
  EXPECT_TRUE(contains(missing, "'experiment'")) << missing;
  const auto no_map = error_of([&] { Options(parse_yaml("experiment: x\n", "exp.yaml"), s, "the experiment"); });
  EXPECT_TRUE(contains(no_map, "'dataset'")) << no_map;
}
