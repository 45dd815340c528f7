// safetensors::File and Weights (framework/include/attnlab/nn/safetensors.hpp): hand-written files
// read back exactly, every fault the header lists refused with the file and the reason, and files
// the real Python library writes (safetensors.torch.save_file, huggingface_hub's sharded save)
// compared byte for byte with what the same Python process dumps raw.
#include <attnlab/error.hpp>
#include <attnlab/nn/safetensors.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <fstream>
#include <random>
#include <sstream>

#include "testing/testing.hpp"

namespace {

namespace fs = std::filesystem;
namespace st = attnlab::safetensors;
using attnlab::DataError;
using attnlab::testutil::contains;
using attnlab::testutil::message_of;
using json = nlohmann::json;

/// Writes a safetensors file: the 8-byte little-endian length of `header` (or `claimed_length`),
/// the header, then `data`.
void write_file(const std::string& path, const std::string& header, const std::string& data,
                std::optional<uint64_t> claimed_length = std::nullopt) {
  const uint64_t n = claimed_length.value_or(header.size());
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  std::ofstream(path, std::ios::binary) << bytes << header << data;
}

/// The bytes of a contiguous CPU tensor.
std::string bytes_of(const torch::Tensor& t) {
  auto c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A header and data section built from tensors laid out one after another, as writers do.
struct Builder {
  json header = json::object();
  std::string data;
  Builder& add(const std::string& name, const std::string& dtype, const torch::Tensor& t) {
    const auto b = bytes_of(t);
    header[name] = {{"dtype", dtype}, {"shape", t.sizes().vec()}, {"data_offsets", {data.size(), data.size() + b.size()}}};
    data += b;
    return *this;
  }
  /// Pads the header with spaces so the data section starts on an 8-byte boundary, as the Python
  /// library does (an unaligned tensor would be copied, not viewed).
  void write(const std::string& path) const {
    auto text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    write_file(path, text, data);
  }
};

class Safetensors : public attnlab::testutil::SeededTest {
 protected:
  std::string dir_ = attnlab::testutil::temp_dir("attnlab-safetensors");
  std::string file(const std::string& name) const { return dir_ + "/" + name; }
  /// The DataError File(path) throws for a header and data section.
  std::string fault(const std::string& header, const std::string& data) {
    const auto path = file("bad.safetensors");
    write_file(path, header, data);
    return message_of<DataError>([&] { st::File f(path); });
  }
};

TEST_F(Safetensors, ReadsEveryDtypeBackExactly) {
  const auto f32 = torch::randn({2, 3});
  const auto f16 = torch::randn({4}).to(torch::kHalf);
  const auto bf16 = torch::randn({3, 1}).to(torch::kBFloat16);
  const auto f64 = torch::randn({2}, torch::kDouble);
  const auto i64 = torch::tensor({int64_t{-1} << 40, int64_t{7}, int64_t{-3}});
  const auto i32 = torch::tensor({-5, 1 << 30}, torch::kInt32);
  const auto i16 = torch::tensor({-300, 300}, torch::kInt16);
  const auto i8 = torch::tensor({-128, 127}, torch::kInt8);
  const auto u8 = torch::tensor({0, 255}, torch::kUInt8);
  const auto b = torch::tensor({true, false, true});
  Builder w;
  w.add("f32", "F32", f32).add("f16", "F16", f16).add("bf16", "BF16", bf16).add("f64", "F64", f64);
  w.add("i64", "I64", i64).add("i32", "I32", i32).add("i16", "I16", i16).add("i8", "I8", i8);
  w.add("u8", "U8", u8).add("bool", "BOOL", b);
  w.write(file("all.safetensors"));
  st::File f(file("all.safetensors"));
  EXPECT_EQ(f.tensors().size(), 10u);
  for (const auto& [name, want] : std::vector<std::pair<std::string, torch::Tensor>>{
           {"f32", f32}, {"f16", f16}, {"bf16", bf16}, {"f64", f64}, {"i64", i64}, {"i32", i32}, {"i16", i16},
           {"i8", i8}, {"u8", u8}, {"bool", b}}) {
    const auto got = f.view(name);
    EXPECT_EQ(got.scalar_type(), want.scalar_type()) << name;
    EXPECT_EQ(got.sizes(), want.sizes()) << name;
    EXPECT_TRUE(got.is_contiguous()) << name;
    EXPECT_TRUE(torch::equal(got, want)) << name;
  }
  // In the order of their bytes, with the header's names for the dtypes.
  EXPECT_EQ(f.tensors().front().name, "f32");
  EXPECT_EQ(f.tensors().back().name, "bool");
  ASSERT_NE(f.find("bf16"), nullptr);
  EXPECT_EQ(f.find("bf16")->dtype_name, "BF16");
  EXPECT_EQ(f.find("bf16")->dtype, torch::kBFloat16);
  EXPECT_EQ(f.find("nothing"), nullptr);
}

TEST_F(Safetensors, HalfAndBfloatAreNotSwapped) {
  // 1.0 is 0x3C00 as IEEE half and 0x3F80 as bfloat16 (little-endian bytes).
  write_file(file("one.safetensors"),
             R"({"h":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},"b":{"dtype":"BF16","shape":[1],"data_offsets":[2,4]}})",
             std::string("\x00\x3c\x80\x3f", 4));
  st::File f(file("one.safetensors"));
  EXPECT_EQ(f.view("h").item<float>(), 1.0f);
  EXPECT_EQ(f.view("b").item<float>(), 1.0f);
}

TEST_F(Safetensors, ScalarEmptyTensorAndMetadata) {
  Builder w;
  w.add("scalar", "F32", torch::tensor(2.5f)).add("empty", "F32", torch::zeros({0, 3}));
  w.add("after", "I64", torch::tensor({int64_t{9}}));
  w.header["__metadata__"] = {{"format", "pt"}, {"note", "hand-written"}};
  w.write(file("small.safetensors"));
  st::File f(file("small.safetensors"));
  const auto scalar = f.view("scalar");
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.item<float>(), 2.5f);
  const auto empty = f.view("empty");
  EXPECT_EQ(empty.sizes(), torch::IntArrayRef({0, 3}));
  EXPECT_EQ(f.view("after").item<int64_t>(), 9);
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"note", "hand-written"}}));
  EXPECT_EQ(f.tensors().size(), 3u);  // __metadata__ is no tensor
}

TEST_F(Safetensors, NoTensorsAtAll) {
  write_file(file("none.safetensors"), "{}", "");
  st::File f(file("none.safetensors"));
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_TRUE(f.metadata().empty());
  write_file(file("meta.safetensors"), R"({"__metadata__":{"a":"b"}})", "");
  st::File g(file("meta.safetensors"));
  EXPECT_TRUE(g.tensors().empty());
  EXPECT_EQ(g.metadata().at("a"), "b");
  // Header padding with spaces, as the Python library writes it.
  write_file(file("padded.safetensors"), "{}      ", "");
  EXPECT_TRUE(st::File(file("padded.safetensors")).tensors().empty());
}

TEST_F(Safetensors, ViewsTheMappingWithoutCopyAndOutlivesTheFile) {
  Builder w;
  w.add("x", "F32", torch::arange(6, torch::kFloat).reshape({2, 3}));
  w.write(file("x.safetensors"));
  torch::Tensor kept;
  {
    st::File f(file("x.safetensors"));
    const auto a = f.view("x");
    const auto b = f.view("x");
    EXPECT_EQ(a.data_ptr(), b.data_ptr());  // both view the same mapped bytes
    st::File moved(std::move(f));
    EXPECT_EQ(moved.view("x").data_ptr(), a.data_ptr());
    kept = moved.view("x");
  }
  EXPECT_TRUE(torch::equal(kept, torch::arange(6, torch::kFloat).reshape({2, 3})));
}

TEST_F(Safetensors, ReleasedPagesReadBackTheSameValues) {
  // Three tensors, the middle one several pages long: releasing all of it, or some of its rows, drops
  // pages from memory, and a view made before (or after) reads the file's values again.
  Builder w;
  const auto a = torch::arange(5, torch::kFloat), big = torch::randn({300, 100}), c = torch::arange(7, torch::kLong);
  w.add("a", "F32", a);
  w.add("big", "F32", big);
  w.add("c", "I64", c);
  w.write(file("r.safetensors"));
  st::Weights weights(file("r.safetensors"));
  const auto before = weights.view("big");
  weights.release("big", 100, 150);  // rows 100..249
  EXPECT_TRUE(torch::equal(before, big));
  weights.release("big");
  weights.release("a");
  weights.release("nothing");  // absent: nothing to do
  EXPECT_TRUE(torch::equal(weights.view("big"), big));
  EXPECT_TRUE(torch::equal(weights.view("a"), a));
  EXPECT_TRUE(torch::equal(weights.view("c"), c));
}

TEST_F(Safetensors, UnalignedDataIsCopied) {
  // A header of odd length puts the data section, and the F32 tensor at its start, at an odd address.
  std::string header = R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})";
  if (header.size() % 2 == 0) header += ' ';
  const auto x = torch::tensor({1.5f, -2.0f, 3.25f});
  write_file(file("odd.safetensors"), header, bytes_of(x));
  st::File f(file("odd.safetensors"));
  const auto got = f.view("x");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(got.data_ptr()) % 4, 0u);
  EXPECT_TRUE(torch::equal(got, x));
}

TEST_F(Safetensors, NoSuchTensorNamesTheFile) {
  write_file(file("none.safetensors"), "{}", "");
  st::File f(file("none.safetensors"));
  const auto msg = message_of<DataError>([&] { f.view("h.0.w"); });
  EXPECT_TRUE(contains(msg, file("none.safetensors"))) << msg;
  EXPECT_TRUE(contains(msg, "no tensor 'h.0.w'")) << msg;
}

struct Fault {
  const char* what;
  std::string header;
  size_t data_bytes;
  std::vector<std::string> says;
};

TEST_F(Safetensors, EveryHeaderFaultIsOneDataErrorNamingTheFile) {
  const std::string ok_offsets = R"("data_offsets":[0,4])";
  const std::vector<Fault> faults = {
      {"not JSON", R"({"a": {"dtype": )", 0, {"the header is not JSON: parse error at line 1, column 17: syntax error"}},
      {"not an object", "[1, 2]", 0, {"the header must be a JSON object, but it is an array"}},
      {"entry not an object", R"({"a": 3})", 0, {"tensor 'a' must be an object, but it is an integer"}},
      {"no dtype", R"({"a":{"shape":[1],)" + ok_offsets + "}}", 4, {"tensor 'a' has no \"dtype\""}},
      {"no shape", R"({"a":{"dtype":"F32",)" + ok_offsets + "}}", 4, {"tensor 'a' has no \"shape\""}},
      {"no offsets", R"({"a":{"dtype":"F32","shape":[1]}})", 4, {"tensor 'a' has no \"data_offsets\""}},
      {"dtype type", R"({"a":{"dtype":4,"shape":[1],)" + ok_offsets + "}}", 4,
       {"tensor 'a': \"dtype\" must be a string, but it is an integer"}},
      {"unknown dtype", R"({"a":{"dtype":"F8_E4M3","shape":[4],)" + ok_offsets + "}}", 4,
       {"tensor 'a' has dtype 'F8_E4M3', which attnlab does not read", "BF16"}},
      {"shape type", R"({"a":{"dtype":"F32","shape":"1",)" + ok_offsets + "}}", 4,
       {"tensor 'a': \"shape\" must be an array, but it is a string"}},
      {"fractional dim", R"({"a":{"dtype":"F32","shape":[1.5],)" + ok_offsets + "}}", 4,
       {"tensor 'a': shape[0] must be a non-negative integer, but it is a fractional number"}},
      {"negative dim", R"({"a":{"dtype":"F32","shape":[-1,-4],)" + ok_offsets + "}}", 4,
       {"tensor 'a' has a negative dimension: shape [-1,-4]"}},
      {"dim past int64", R"({"a":{"dtype":"F32","shape":[9223372036854775808],)" + ok_offsets + "}}", 4,
       {"tensor 'a' has dimension 0 = 9223372036854775808, more than a tensor may have"}},
      // 2^62 F32 elements are 2^64 bytes, which wraps to 0: these offsets [0, 0] must not match.
      {"shape overflow", R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})", 0,
       {"tensor 'a' has shape [4611686018427387904] of F32 = more than 2^64 bytes, but its data_offsets [0, 0] hold 0"}},
      {"offsets type", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":"0-4"}})", 4,
       {"tensor 'a': \"data_offsets\" must be an array of two integers [begin, end], but it is a string"}},
      {"offsets count", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4]}})", 4, {"but it is an array of 1"}},
      {"negative offset", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,-4]}})", 4,
       {"tensor 'a': data_offsets[1] is negative (-4)"}},
      {"reversed", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", 4,
       {"tensor 'a' has reversed data_offsets [4, 0]"}},
      {"past end", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4,
       {"tensor 'a' has data_offsets [0, 8], past the end of the data section (4 bytes)"}},
      {"size mismatch", R"({"h.0.attn.c_attn.weight":{"dtype":"F32","shape":[2,3],"data_offsets":[0,4]}})", 4,
       {"tensor 'h.0.attn.c_attn.weight' has shape [2, 3] of F32 = 24 bytes, but its data_offsets [0, 4] hold 4"}},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8, {"tensor 'b' (data_offsets [4, 8]) overlaps tensor 'a' (data_offsets [0, 8])"}},
      {"empty tensor inside another",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})",
       8, {"tensor 'e' (data_offsets [4, 4]) overlaps tensor 'a' (data_offsets [0, 8])"}},
      {"gap", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8,
       {"bytes [0, 4) of the data section belong to no tensor (the next is 'a')"}},
      {"uncovered tail", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8,
       {"bytes [4, 8) at the end of the data section belong to no tensor"}},
      {"metadata type", R"({"__metadata__":["a"]})", 0, {"\"__metadata__\" must be an object of strings, but it is an array"}},
      {"metadata value", R"({"__metadata__":{"k":1}})", 0,
       {"\"__metadata__\" must map names to strings, but 'k' is an integer"}},
  };
  for (const auto& f : faults) {
    const auto msg = fault(f.header, std::string(f.data_bytes, '\0'));
    EXPECT_TRUE(msg.rfind(file("bad.safetensors") + ": ", 0) == 0) << f.what << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << f.what << ": " << msg;
    for (const auto& part : f.says) EXPECT_TRUE(contains(msg, part)) << f.what << ": " << msg;
  }
}

TEST_F(Safetensors, BrokenFilesAreOneDataErrorNamingTheFile) {
  const auto path = file("broken.safetensors");
  const auto says = [&](const std::string& part) {
    const auto msg = message_of<DataError>([&] { st::File f(path); });
    EXPECT_TRUE(contains(msg, path)) << msg;
    EXPECT_TRUE(contains(msg, part)) << msg;
  };
  says("no such file");
  std::ofstream(path, std::ios::binary) << std::string("\x05\x00\x00", 3);
  says("3 bytes, shorter than the 8-byte header length");
  std::ofstream(path, std::ios::binary).close();
  says("0 bytes, shorter than the 8-byte header length");
  write_file(path, "{}", "", 1000);
  says("header length 1000 runs past the end of the file (10 bytes, so at most 2)");
  write_file(path, "{}", "", uint64_t{1} << 63);
  says("header length 9223372036854775808 runs past the end of the file");
  // A file cut in its data: the header still names the bytes the file no longer has.
  Builder w;
  w.add("w", "F32", torch::randn({4, 4}));
  w.write(path);
  const auto whole = read_bytes(path);
  std::ofstream(path, std::ios::binary) << whole.substr(0, whole.size() - 5);
  says("tensor 'w' has data_offsets [0, 64], past the end of the data section (59 bytes)");
  fs::create_directories(file("dir.safetensors"));
  const auto msg = message_of<DataError>([&] { st::File f(file("dir.safetensors")); });
  EXPECT_TRUE(contains(msg, file("dir.safetensors") + ": cannot read safetensors file: it is a directory")) << msg;
}

TEST_F(Safetensors, WeightsFromAFileOrAFolder) {
  Builder w;
  w.add("b", "F32", torch::ones({2})).add("a", "I64", torch::tensor({int64_t{3}}));
  fs::create_directories(file("model"));
  w.write(file("model/model.safetensors"));
  for (const auto& path : {file("model"), file("model/model.safetensors")}) {
    st::Weights weights(path);
    EXPECT_EQ(weights.path(), path);
    EXPECT_EQ(weights.names(), (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(weights.file_of("a"), file("model/model.safetensors"));
    EXPECT_EQ(weights.file_of("z"), "");
    EXPECT_EQ(weights.find("z"), nullptr);
    EXPECT_EQ(weights.bytes(), 16u);
    EXPECT_TRUE(torch::equal(weights.view("b"), torch::ones({2})));
    const auto msg = message_of<DataError>([&] { weights.view("z"); });
    EXPECT_TRUE(contains(msg, path + ": no tensor 'z'")) << msg;
  }
}

TEST_F(Safetensors, WeightsRefuseWhatIsNotThere) {
  fs::create_directories(file("empty"));
  auto msg = message_of<DataError>([&] { st::Weights w(file("empty")); });
  EXPECT_TRUE(contains(msg, file("empty") + ": no weights in this folder")) << msg;
  msg = message_of<DataError>([&] { st::Weights w(file("missing")); });
  EXPECT_TRUE(contains(msg, file("missing") + ": cannot read weights: no such file")) << msg;
}

TEST_F(Safetensors, ShardedIndexFaults) {
  const auto dir = file("sharded");
  fs::create_directories(dir);
  Builder one, two;
  one.add("x", "F32", torch::ones({1}));
  two.add("y", "F32", torch::ones({1})).add("x", "F32", torch::zeros({1}));
  one.write(dir + "/one.safetensors");
  two.write(dir + "/two.safetensors");
  const auto index = dir + "/model.safetensors.index.json";
  const auto fails = [&](const std::string& text, const std::string& part) {
    std::ofstream(index) << text;
    const auto msg = message_of<DataError>([&] { st::Weights w(dir); });
    EXPECT_TRUE(contains(msg, part)) << msg;
  };
  fails("{\"weight_map\": ", index + ": not JSON: ");
  fails("{\"metadata\": {}}", index + ": has no \"weight_map\" object");
  fails(R"({"weight_map": {"x": 1}})", index + ": weight_map['x'] must be a file name, but it is an integer");
  fails(R"({"weight_map": {"x": "three.safetensors"}})",
        index + ": names shard three.safetensors for tensor 'x', but " + dir + "/three.safetensors: no such file");
  fails(R"({"weight_map": {"x": "one.safetensors", "y": "two.safetensors"}})",
        dir + ": tensor 'x' is in two shards: " + dir + "/one.safetensors and " + dir + "/two.safetensors");
  Builder only_y;
  only_y.add("y", "F32", torch::ones({1}));
  only_y.write(dir + "/two.safetensors");
  fails(R"({"weight_map": {"x": "two.safetensors"}})",
        index + ": names tensor 'x' in " + dir + "/two.safetensors, which does not hold it");
  // A broken shard is its own file's error.
  write_file(dir + "/one.safetensors", "{", "");
  fails(R"({"weight_map": {"x": "one.safetensors"}})", dir + "/one.safetensors: the header is not JSON");
}

// Damaged copies of a valid file (bytes changed, cut or inserted, mostly in the header): each is
// read whole or refused with a DataError, never a crash or another exception, and what is read
// views every tensor.
TEST_F(Safetensors, DamagedFilesAreReadOrRefused) {
  Builder w;
  w.add("a", "F32", torch::randn({2, 3})).add("b", "BF16", torch::randn({5}).to(torch::kBFloat16));
  w.add("c", "I64", torch::tensor({int64_t{1}})).add("d", "BOOL", torch::zeros({0}, torch::kBool));
  w.header["__metadata__"] = {{"k", "v"}};
  w.write(file("good.safetensors"));
  const auto good = read_bytes(file("good.safetensors"));
  const auto header_end = good.size() - w.data.size();  // the length and the header
  std::mt19937 rng(7);
  int read = 0, refused = 0;
  for (int i = 0; i < 1000; ++i) {
    auto bytes = good;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n && !bytes.empty(); ++k) {
      // Nine in ten in the length and header, where the parsing is.
      const size_t at = rng() % (rng() % 10 ? std::min(header_end, bytes.size()) : bytes.size());
      switch (rng() % 4) {
        case 0: bytes[at] = static_cast<char>(rng()); break;
        case 1: bytes[at] = "0123456789-[]{},:\" e"[rng() % 20]; break;
        case 2: bytes.insert(at, 1, static_cast<char>(rng() % 2 ? '9' : ' ')); break;
        default: bytes.resize(std::min(bytes.size(), at)); break;
      }
    }
    const auto path = file("damaged.safetensors");
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
    try {
      st::File f(path);
      for (const auto& t : f.tensors()) EXPECT_EQ(f.view(t.name).nbytes(), t.end - t.begin) << t.name;
      ++read;
    } catch (const DataError& e) {
      EXPECT_TRUE(contains(e.what(), path)) << e.what();
      ++refused;
    }
  }
  EXPECT_GT(refused, 500);  // most damage is noticed
  EXPECT_GT(read, 0);       // and some is harmless (a digit of a name, a space)
}

/// Runs the venv's python (ATTNLAB_PYTHON) on `script` with `args`; returns {exit code, output}.
std::pair<int, std::string> run_python(const std::string& python, const std::string& script, const std::string& args) {
  const std::string cmd = "'" + python + "' '" + script + "' " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed: " + cmd};
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// What the real library writes: every tensor saved with safetensors.torch.save_file and with
// huggingface_hub.save_torch_state_dict (sharded), and its bytes dumped raw by the same process.
constexpr const char* kWriter = R"(import json, os, sys, torch
from safetensors.torch import save_file
from huggingface_hub import save_torch_state_dict
out = sys.argv[1]
g = torch.Generator().manual_seed(1)
tensors = {
    "f32": torch.randn(3, 5, generator=g),
    "f16": torch.randn(7, generator=g).half(),
    "bf16": torch.randn(2, 3, 4, generator=g).bfloat16(),
    "f64": torch.randn(2, generator=g).double(),
    "i64": torch.randint(-2**40, 2**40, (4,), generator=g),
    "bool": torch.rand(5, generator=g) > 0.5,
    "scalar": torch.tensor(3.5),
    "empty": torch.zeros(0, 3),
}
save_file(tensors, os.path.join(out, "single.safetensors"), metadata={"format": "pt", "by": "safetensors.torch"})
shapes = {}
for name, t in tensors.items():
    with open(os.path.join(out, name + ".bin"), "wb") as f:
        f.write(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    shapes[name] = list(t.shape)
os.makedirs(os.path.join(out, "sharded"))
state = {f"h.{i}.w": torch.randn(8, 8, generator=g) for i in range(3)}
save_torch_state_dict(state, os.path.join(out, "sharded"), max_shard_size=300)
for name, t in state.items():
    with open(os.path.join(out, name + ".bin"), "wb") as f:
        f.write(t.view(torch.uint8).numpy().tobytes())
    shapes[name] = list(t.shape)
with open(os.path.join(out, "shapes.json"), "w") as f:
    json.dump(shapes, f)
)";

TEST_F(Safetensors, ReadsWhatThePythonLibraryWrites) {
  const std::string python = attnlab::testutil::env_or("ATTNLAB_PYTHON", "");
  ATTNLAB_REQUIRE(!python.empty() && fs::exists(python), "the venv's python (ATTNLAB_PYTHON='" << python << "')");
  std::ofstream(file("writer.py")) << kWriter;
  const auto [code, out] = run_python(python, file("writer.py"), "'" + dir_ + "'");
  ASSERT_EQ(code, 0) << out;
  const auto shapes = json::parse(read_bytes(file("shapes.json")));

  const auto same = [&](const torch::Tensor& got, const std::string& name) {
    EXPECT_EQ(got.sizes().vec(), shapes.at(name).get<std::vector<int64_t>>()) << name;
    EXPECT_EQ(bytes_of(got), read_bytes(file(name + ".bin"))) << name;
  };
  st::File single(file("single.safetensors"));
  EXPECT_EQ(single.metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"by", "safetensors.torch"}}));
  const std::map<std::string, torch::ScalarType> dtypes = {
      {"f32", torch::kFloat}, {"f16", torch::kHalf}, {"bf16", torch::kBFloat16}, {"f64", torch::kDouble},
      {"i64", torch::kLong},  {"bool", torch::kBool}, {"scalar", torch::kFloat},  {"empty", torch::kFloat}};
  EXPECT_EQ(single.tensors().size(), dtypes.size());
  for (const auto& [name, dtype] : dtypes) {
    const auto got = single.view(name);
    EXPECT_EQ(got.scalar_type(), dtype) << name;
    same(got, name);
  }

  // Three 256-byte tensors, at most 300 bytes a shard: three shards and their index.
  st::Weights sharded(file("sharded"));
  EXPECT_EQ(sharded.names(), (std::vector<std::string>{"h.0.w", "h.1.w", "h.2.w"}));
  EXPECT_EQ(sharded.bytes(), 3u * 256u);
  std::set<std::string> shard_files;
  for (const auto& name : sharded.names()) {
    same(sharded.view(name), name);
    shard_files.insert(sharded.file_of(name));
  }
  EXPECT_EQ(shard_files.size(), 3u);
  EXPECT_TRUE(fs::exists(file("sharded/model.safetensors.index.json")));
}

}  // namespace
