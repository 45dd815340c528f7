// Results writer and ResultsReader: round trip of every kind of content, status transitions,
// appends, replace semantics, refusal of foreign files, a flushed file copied while still open
// (a simulated kill), and the h5py layout check of tests/python/check_results.py.
#include <attnlab/results/tensor.hpp>
#include <attnlab/error.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/results/results.hpp>
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include "testing/testing.hpp"

namespace fs = std::filesystem;
namespace results = attnlab::results;
using attnlab::ResultsError;
using attnlab::results::Attention;
using attnlab::results::Results;
using attnlab::results::ResultsReader;
using attnlab::results::Sample;
using attnlab::results::Status;

namespace {

class ResultsTest : public attnlab::testutil::SeededTest {
 protected:
  void SetUp() override {
    SeededTest::SetUp();
    dir_ = attnlab::testutil::temp_dir("attnlab-results");
  }
  std::string file(const std::string& name) const { return (fs::path(dir_) / name).string(); }
  std::string dir_;
};

// Runs `fn` and returns the ResultsError message it throws ("" when it does not throw one).
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const ResultsError& e) {
    return e.what();
  }
  return "";
}

const std::vector<Sample> kSamples = {
    {"i'm home .", "je suis à la maison .", "je suis chez moi .", 0.42},
    {"a/b \"quoted\" ünïcode", "ref 2", "hyp 2", 1.0},
    {"", "", "", 0.0},
};

// Writes one file holding every kind of content; returns the attention tensor written.
torch::Tensor write_everything(Results& r) {
  r.set_attr("seed", int64_t{1234});
  r.set_attr("lr", 2.5e-4);
  r.set_attr("device", "cpu");
  r.set_attr("plugins", std::vector<std::string>{"scorer/dot 1.0", "model/transformer 0.3"});
  r.set_attr("empty_list", std::vector<std::string>{});
  r.write_config("experiment: demo\nmodel:\n  name: transformer  # ü\n");
  for (int epoch = 0; epoch < 3; ++epoch) {
    r.append_metric("train", "loss", 3.0 - epoch);
    r.append_metric("valid", "bleu", 10.0 * epoch);
    r.flush();
  }
  r.write_samples(kSamples);
  torch::Tensor w = torch::softmax(torch::randn({2, 3, 4, 5}), -1);  // [layers, heads, queries, keys]
  r.write_attention("i'm home .", "encoder.self",
                    {.weights = results::to_float_array(w),
                     .query_tokens = {"i", "'m", "home", "."},
                     .key_tokens = {"<s>", "i", "'m", "home", "."},
                     .layers = {2, 5},
                     .query_side = "source",
                     .key_side = "source"});
  r.write_attention("i'm home .", "decoder.cross", {.weights = results::to_float_array(w.to(torch::kDouble))});
  r.write_attention("a/b", "m", {.weights = results::to_float_array(w.narrow(2, 0, 1)), .query_tokens = {"q"}});
  results::write_tensor(r, "predictions/test", torch::arange(6, torch::kDouble).reshape({3, 2}));  // [3, 2]
  results::write_tensor(r, "/scalar", torch::tensor(7.5));
  return w;
}

}  // namespace

TEST_F(ResultsTest, RoundTripsEveryKindOfContent) {
  const std::string path = file("nested/folders/run.h5");  // parent folders are created
  torch::Tensor w;
  {
    Results r(path, "demo");
    EXPECT_EQ(r.path(), path);
    w = write_everything(r);
    r.set_status(Status::Completed);
  }
  ResultsReader in(path);
  EXPECT_EQ(in.attr_string("experiment"), "demo");
  EXPECT_EQ(in.attr_string("status"), "completed");
  EXPECT_EQ(in.status(), Status::Completed);
  EXPECT_EQ(in.attr_int("seed"), 1234);
  EXPECT_DOUBLE_EQ(in.attr_double("lr"), 2.5e-4);
  EXPECT_DOUBLE_EQ(in.attr_double("seed"), 1234.0);
  EXPECT_EQ(in.attr_string("device"), "cpu");
  EXPECT_EQ(in.attr_strings("plugins"), (std::vector<std::string>{"scorer/dot 1.0", "model/transformer 0.3"}));
  EXPECT_TRUE(in.attr_strings("empty_list").empty());
  EXPECT_TRUE(in.has_attr("started"));
  EXPECT_FALSE(in.has_attr("nope"));
  EXPECT_EQ(in.config(), "experiment: demo\nmodel:\n  name: transformer  # ü\n");

  EXPECT_EQ(in.metric_groups(), (std::vector<std::string>{"train", "valid"}));
  EXPECT_EQ(in.metric_names("train"), std::vector<std::string>{"loss"});
  EXPECT_EQ(in.metric("train", "loss"), (std::vector<double>{3.0, 2.0, 1.0}));
  EXPECT_EQ(in.metric("valid", "bleu"), (std::vector<double>{0.0, 10.0, 20.0}));

  auto samples = in.samples();
  ASSERT_EQ(samples.size(), kSamples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ(samples[i].source, kSamples[i].source);
    EXPECT_EQ(samples[i].reference, kSamples[i].reference);
    EXPECT_EQ(samples[i].hypothesis, kSamples[i].hypothesis);
    EXPECT_DOUBLE_EQ(samples[i].bleu, kSamples[i].bleu);
  }

  EXPECT_EQ(in.attention_samples(), (std::vector<std::string>{"a/b", "i'm home ."}));
  EXPECT_EQ(in.attention_modules("i'm home ."), (std::vector<std::string>{"decoder.cross", "encoder.self"}));
  Attention a = in.attention("i'm home .", "encoder.self");
  EXPECT_ALLCLOSE(results::to_tensor(a.weights), w);
  EXPECT_EQ(a.query_tokens, (std::vector<std::string>{"i", "'m", "home", "."}));
  EXPECT_EQ(a.key_tokens, (std::vector<std::string>{"<s>", "i", "'m", "home", "."}));
  EXPECT_EQ(a.layers, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(a.query_side, "source");
  EXPECT_EQ(a.key_side, "source");
  EXPECT_EQ(in.attr_double_at("attention/i'm home ./encoder.self", "heads"), 3.0);
  Attention cross = in.attention("i'm home .", "decoder.cross");  // written as float64, stored float32
  EXPECT_ALLCLOSE(results::to_tensor(cross.weights), w);
  EXPECT_TRUE(cross.query_tokens.empty());
  EXPECT_TRUE(cross.key_tokens.empty());
  EXPECT_EQ(cross.layers, (std::vector<int64_t>{0, 1}));  // not given: 0, 1, ...
  EXPECT_EQ(cross.query_side, "");                        // not given: not written
  Attention slash = in.attention("a/b", "m");
  EXPECT_EQ(slash.weights.shape, (std::vector<int64_t>{2, 3, 1, 5}));
  EXPECT_TRUE(in.has("/attention/a_b/m"));  // '/' in a sample name becomes '_' in the link

  EXPECT_TRUE(in.has("predictions/test"));
  EXPECT_FALSE(in.has("predictions/train"));
  EXPECT_ALLCLOSE(results::read_tensor(in, "predictions/test"), torch::arange(6, torch::kFloat).reshape({3, 2}));
  torch::Tensor scalar = results::read_tensor(in, "scalar");
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_FLOAT_EQ(scalar.item<float>(), 7.5f);
}

TEST_F(ResultsTest, StatusTransitionsSetFinishedForTerminalStates) {
  const std::string path = file("status.h5");
  const std::regex iso(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)");
  Results r(path, "status");
  {
    ResultsReader in(path);  // the constructor flushes: readable straight away
    EXPECT_EQ(in.status(), Status::Running);
    EXPECT_TRUE(std::regex_match(in.attr_string("started"), iso)) << in.attr_string("started");
    EXPECT_FALSE(in.has_attr("finished"));
  }
  for (Status s : {Status::Interrupted, Status::Failed, Status::Diverged, Status::Completed}) {
    r.set_status(s);  // flushes
    ResultsReader in(path);
    EXPECT_EQ(in.attr_string("status"), attnlab::results::status_name(s));
    EXPECT_EQ(in.status(), s);
    ASSERT_TRUE(in.has_attr("finished"));
    EXPECT_TRUE(std::regex_match(in.attr_string("finished"), iso)) << in.attr_string("finished");
  }
  r.set_status(Status::Running);  // resumed: no stale "finished"
  ResultsReader in(path);
  EXPECT_EQ(in.status(), Status::Running);
  EXPECT_FALSE(in.has_attr("finished"));

  EXPECT_STREQ(attnlab::results::status_name(Status::Diverged), "diverged");
  EXPECT_EQ(attnlab::results::parse_status("interrupted"), Status::Interrupted);
  EXPECT_NE(error_of([] { attnlab::results::parse_status("done"); }).find("unknown run status 'done'"),
            std::string::npos);
  EXPECT_TRUE(std::regex_match(attnlab::results::utc_now(), iso));
}

TEST_F(ResultsTest, AppendsMetricsAcrossManyCallsAndChunks) {
  const std::string path = file("metrics.h5");
  std::vector<double> expected;
  {
    Results r(path, "metrics");
    for (int i = 0; i < 600; ++i) {  // more than two 256-row chunks
      r.append_metric("step", "loss", 1.0 / (i + 1));
      if (i % 3 == 0) r.append_metric("step", "lr", i * 0.5);
      if (i % 100 == 0) r.flush();
      expected.push_back(1.0 / (i + 1));
    }
  }
  ResultsReader in(path);
  EXPECT_EQ(in.metric("step", "loss"), expected);
  EXPECT_EQ(in.metric("step", "lr").size(), 200u);
  EXPECT_DOUBLE_EQ(in.metric("step", "lr").back(), 597 * 0.5);
  EXPECT_EQ(in.metric_names("step"), (std::vector<std::string>{"loss", "lr"}));
}

TEST_F(ResultsTest, ReplacesSamplesAttentionTensorsConfigAndAttributes) {
  const std::string path = file("replace.h5");
  {
    Results r(path, "replace");
    r.set_attr("seed", "not yet");
    r.set_attr("seed", int64_t{7});  // replaced, even with another type
    r.write_config("a: 1");
    r.write_config("a: 2");
    r.write_samples(kSamples);
    r.write_samples({{"only", "one", "row", 0.5}});
    r.write_attention("s", "m",
                      {.weights = results::to_float_array(torch::ones({1, 1, 2, 2})),
                       .query_tokens = {"a", "b"},
                       .key_tokens = {"c", "d"},
                       .query_side = "target",
                       .key_side = "source"});
    r.write_attention("s", "m", {.weights = results::to_float_array(torch::zeros({2, 1, 3, 1})), .query_tokens = {"x", "y", "z"}});
    results::write_tensor(r, "predictions/test", torch::ones({4}));
    results::write_tensor(r, "predictions/test", torch::zeros({2, 2}));
  }
  ResultsReader in(path);
  EXPECT_EQ(in.attr_int("seed"), 7);
  EXPECT_EQ(in.config(), "a: 2");
  auto samples = in.samples();
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].source, "only");
  EXPECT_DOUBLE_EQ(samples[0].bleu, 0.5);
  Attention a = in.attention("s", "m");
  EXPECT_ALLCLOSE(results::to_tensor(a.weights), torch::zeros({2, 1, 3, 1}));
  EXPECT_EQ(a.query_tokens, (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_TRUE(a.key_tokens.empty());
  EXPECT_EQ(a.layers, (std::vector<int64_t>{0, 1}));  // the replaced map's attributes went with it
  EXPECT_EQ(a.query_side, "");
  EXPECT_ALLCLOSE(results::read_tensor(in, "predictions/test"), torch::zeros({2, 2}));
}

TEST_F(ResultsTest, ReadsAttentionWrittenBeforeLayersAndSidesWereStored) {
  const std::string path = file("old_attention.h5");
  {
    Results r(path, "old");
    r.write_attention("s", "m",
                      {.weights = results::to_float_array(torch::ones({3, 1, 2, 2})),
                       .query_tokens = {"a", "b"},
                       .key_tokens = {"c", "d"},
                       .layers = {4, 5, 6},
                       .query_side = "target",
                       .key_side = "source"});
  }
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t ds = H5Dopen2(f, "/attention/s/m", H5P_DEFAULT);
  for (const char* name : {"layers", "heads", "query_side", "key_side"}) EXPECT_GE(H5Adelete(ds, name), 0) << name;
  H5Dclose(ds);
  H5Fclose(f);
  ResultsReader in(path);
  Attention a = in.attention("s", "m");
  EXPECT_EQ(a.layers, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(a.query_side, "");
  EXPECT_EQ(a.key_side, "");
  EXPECT_EQ(a.query_tokens, (std::vector<std::string>{"a", "b"}));
}

TEST_F(ResultsTest, RefusesFilesThatAreNotResults) {
  const std::string text = file("notes.txt");
  std::ofstream(text) << "just some text\n";
  std::string msg = error_of([&] { ResultsReader in(text); });
  EXPECT_NE(msg.find("not an attnlab results file: " + text + " (not an HDF5 file)"), std::string::npos) << msg;

  msg = error_of([&] { ResultsReader in(file("missing.h5")); });
  EXPECT_NE(msg.find("not an attnlab results file: " + file("missing.h5") + " (no such file)"), std::string::npos)
      << msg;
  const std::string folder = file("a_folder.h5");
  fs::create_directory(folder);
  EXPECT_EQ(error_of([&] { ResultsReader in(folder); }),
            "not an attnlab results file: " + folder + " (it is a directory, not a regular file)");

  // A valid HDF5 file made by someone else: no experiment / status attributes.
  const std::string foreign = file("foreign.h5");
  hid_t f = H5Fcreate(foreign.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  H5Fclose(f);
  msg = error_of([&] { ResultsReader in(foreign); });
  EXPECT_NE(msg.find("not an attnlab results file: " + foreign + " (no root attribute 'experiment')"),
            std::string::npos)
      << msg;
}

TEST_F(ResultsTest, SymlinkLoopsAndDevicesAreNamed) {
  // A raw "Too many levels of symbolic links" (or HDF5's error stack) named no cause.
  const std::string loop = file("loop.h5");
  ASSERT_EQ(::symlink("loop.h5", loop.c_str()), 0);
  EXPECT_EQ(error_of([&] { ResultsReader in(loop); }),
            "not an attnlab results file: " + loop + " (it is a symlink loop)");
  EXPECT_EQ(error_of([&] { Results out(loop, "x"); }), "cannot write results file " + loop + ": it is a symlink loop");
  EXPECT_EQ(error_of([&] { Results out(loop, Results::Open::Existing); }),
            "not an attnlab results file: " + loop + " (it is a symlink loop)");
  EXPECT_EQ(error_of([&] { Results out(loop + "/run.h5", "x"); }),
            "cannot write results file " + loop + "/run.h5: a directory on its way is a symlink loop");
  EXPECT_EQ(error_of([&] { ResultsReader in("/dev/zero"); }),
            "not an attnlab results file: /dev/zero (it is a device, not a regular file)");
  EXPECT_EQ(error_of([&] { Results out("/dev/null", "x"); }),
            "cannot write results file /dev/null: it is a device, not a regular file");
}

TEST_F(ResultsTest, DamagedElementCountsAreRefusedNotAllocated) {
  // Fuzz finding (results_reader/regress-string-count-overflow.h5): a dataspace claiming ~2^64
  // strings wrapped the buffer size to 0 and H5Dread wrote through a null pointer (SIGSEGV).
  const std::string source = attnlab::testutil::env_or("ATTNLAB_SOURCE_DIR", "");
  ATTNLAB_REQUIRE(!source.empty(), "ATTNLAB_SOURCE_DIR is not set (run through ctest)");
  const std::string regress = source + "/fuzz/corpus/results_reader/regress-string-count-overflow.h5";
  ASSERT_TRUE(fs::exists(regress)) << regress;
  std::string msg = error_of([&] { ResultsReader(regress).config(); });
  EXPECT_NE(msg.find("claims"), std::string::npos) << msg;
  EXPECT_NE(msg.find("strings of"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(a damaged file?)"), std::string::npos) << msg;

  // The same check for numbers (metrics, tensors): datasets whose shape claims more than they store,
  // as a run killed between creating a dataset and writing it leaves, or a damaged shape claiming
  // 2^40 values (std::bad_alloc, or 8 TB, before).
  const std::string path = file("damaged.h5");
  {
    Results r(path, "damaged");
    r.append_metric("train", "loss", 1.0);
    results::write_tensor(r, "predictions/test", torch::ones({2, 3}));
  }
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  ASSERT_GE(H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_LATE), 0);  // nothing stored until written
  for (const auto& [name, count] :
       std::vector<std::pair<std::string, hsize_t>>{{"/metrics/train/never_written", 5},
                                                    {"/metrics/train/huge", hsize_t{1} << 40},
                                                    {"/predictions/huge", hsize_t{1} << 40}}) {
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t space = H5Screate_simple(1, &count, nullptr);
    hid_t ds = H5Dcreate2(f, name.c_str(), H5T_IEEE_F64LE, space, lcpl, dcpl, H5P_DEFAULT);
    ASSERT_GE(ds, 0) << name;
    H5Dclose(ds), H5Sclose(space), H5Pclose(lcpl);
  }
  H5Pclose(dcpl);
  H5Fclose(f);
  ResultsReader in(path);
  EXPECT_EQ(in.metric("train", "loss"), std::vector<double>{1.0});
  EXPECT_EQ(error_of([&] { in.metric("train", "never_written"); }),
            "dataset /metrics/train/never_written in results file " + path +
                " claims 5 numbers of 8 bytes but stores 0 bytes (a damaged file?)");
  msg = error_of([&] { in.metric("train", "huge"); });
  EXPECT_NE(msg.find("claims 1099511627776 numbers of 8 bytes but stores 0 bytes"), std::string::npos) << msg;
  msg = error_of([&] { results::read_tensor(in, "predictions/huge"); });
  EXPECT_NE(msg.find("dataset /predictions/huge in results file " + path + " claims 1099511627776 numbers"),
            std::string::npos)
      << msg;
  EXPECT_TRUE(attnlab::testutil::AllClose(results::read_tensor(in, "predictions/test"), torch::ones({2, 3})));
}

TEST_F(ResultsTest, ReportsBadInputAndHdf5FailuresNamingTheFile) {
  const std::string path = file("errors.h5");
  Results r(path, "errors");
  r.write_config("x: 1");
  std::string msg = error_of([&] { r.write_attention("s", "m", {.weights = results::to_float_array(torch::ones({2, 3, 4}))}); });
  EXPECT_NE(msg.find("[layers, heads, queries, keys], found 3-D"), std::string::npos) << msg;
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  msg = error_of([&] {
    r.write_attention("s", "m", {.weights = results::to_float_array(torch::ones({1, 1, 2, 3})), .query_tokens = {"only one"}});
  });
  EXPECT_NE(msg.find("has 2 queries but 1 query labels"), std::string::npos) << msg;
  msg = error_of([&] { r.write_attention("s", "m", {.weights = results::to_float_array(torch::ones({2, 1, 2, 3})), .layers = {0, 1, 2}}); });
  EXPECT_NE(msg.find("has 2 layers but 3 layer indices"), std::string::npos) << msg;
  msg = error_of([&] { r.append_metric("train", "a/b", 1.0); });
  EXPECT_NE(msg.find("metric name must be a non-empty name without '/', found 'a/b'"), std::string::npos) << msg;
  msg = error_of([&] { results::write_tensor(r, "", torch::ones({1})); });
  EXPECT_NE(msg.find("tensor path must be like"), std::string::npos) << msg;
  // An HDF5-level failure: /config is a dataset, so it cannot hold a child.
  msg = error_of([&] { results::write_tensor(r, "config/child", torch::ones({1})); });
  EXPECT_NE(msg.find("in results file " + path), std::string::npos) << msg;
  EXPECT_NE(msg.find("/config/child"), std::string::npos) << msg;
  // The file is still usable after a failure.
  r.append_metric("train", "loss", 1.0);
  r.flush();

  // A folder that cannot be created (a regular file is in the way).
  std::ofstream(file("blocker")) << "x";
  msg = error_of([&] { Results bad(file("blocker/sub/run.h5"), "x"); });
  EXPECT_EQ(msg, "cannot write results file " + file("blocker/sub/run.h5") + ": a part of it is not a directory");

  ResultsReader in(path);
  msg = error_of([&] { in.metric("train", "bleu"); });
  EXPECT_NE(msg.find("has no metric 'bleu' in group 'train' (metrics there: loss)"), std::string::npos) << msg;
  msg = error_of([&] { in.metric_names("valid"); });
  EXPECT_NE(msg.find("has no metric group 'valid' (groups: train)"), std::string::npos) << msg;
  msg = error_of([&] { in.attr_int("experiment"); });
  EXPECT_NE(msg.find("attribute 'experiment' should be one integer, found strings (1 of them)"), std::string::npos)
      << msg;  // the type in words, not HDF5's class number
  msg = error_of([&] { in.attr_string("seed"); });
  EXPECT_NE(msg.find("has no attribute 'seed'"), std::string::npos) << msg;
  msg = error_of([&] { results::read_tensor(in, "predictions/none"); });
  EXPECT_NE(msg.find("has no dataset /predictions/none"), std::string::npos) << msg;
  msg = error_of([&] { in.attention("x", "m"); });
  EXPECT_NE(msg.find("has no attention for sample 'x'"), std::string::npos) << msg;
}

TEST_F(ResultsTest, FlushedFileCopiedWhileOpenIsReadable) {
  const std::string path = file("live.h5");
  const std::string copy = file("killed.h5");
  Results r(path, "live");
  write_everything(r);
  r.flush();
  // Simulate a kill: take the bytes as they are on disk while the writer still holds the file.
  fs::copy_file(path, copy);
  ResultsReader in(copy);
  EXPECT_EQ(in.status(), Status::Running);
  EXPECT_FALSE(in.has_attr("finished"));
  EXPECT_EQ(in.metric("train", "loss"), (std::vector<double>{3.0, 2.0, 1.0}));
  EXPECT_EQ(in.samples().size(), kSamples.size());
  EXPECT_EQ(in.attention("i'm home .", "encoder.self").weights.shape, (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(in.config().substr(0, 16), "experiment: demo");
}

TEST_F(ResultsTest, KilledWriterLeavesTheLastFlushReadable) {
  const std::string path = file("sigkill.h5");
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the writer: flush twice, write more without flushing, then die hard
    Results r(path, "killed");
    r.write_config("a: 1");
    for (int epoch = 0; epoch < 2; ++epoch) {
      r.append_metric("train", "loss", epoch);
      r.flush();
    }
    r.append_metric("train", "loss", 99.0);
    results::write_tensor(r, "predictions/test", torch::ones({64, 64}));
    kill(getpid(), SIGKILL);
    _exit(0);  // not reached
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child status " << status;
  ResultsReader in(path);
  EXPECT_EQ(in.attr_string("experiment"), "killed");
  EXPECT_EQ(in.status(), Status::Running);  // nobody said otherwise: the process died
  EXPECT_EQ(in.config(), "a: 1");
  auto loss = in.metric("train", "loss");
  ASSERT_GE(loss.size(), 2u);  // at least what was flushed
  EXPECT_EQ(std::vector<double>(loss.begin(), loss.begin() + 2), (std::vector<double>{0.0, 1.0}));
}

namespace {

// Runs tests/python/check_results.py on `file` with $ATTNLAB_PYTHON; returns {exit code, output}.
std::pair<int, std::string> run_check(const std::string& python, const std::string& file) {
  std::string script = attnlab::testutil::env_or("ATTNLAB_SOURCE_DIR", ".") + "/tests/python/check_results.py";
  std::string cmd = "'" + python + "' '" + script + "' '" + file + "' 2>&1";
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed: " + cmd};
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace

TEST_F(ResultsTest, H5pySeesTheDocumentedLayout) {
  std::string python = attnlab::testutil::env_or("ATTNLAB_PYTHON", "");
  ATTNLAB_REQUIRE(!python.empty() && fs::exists(python), "the venv's python (ATTNLAB_PYTHON='" << python << "')");
  const std::string path = file("h5py.h5");
  const std::string copy = file("h5py-killed.h5");
  {
    Results r(path, "h5py");
    write_everything(r);
    r.flush();
    fs::copy_file(path, copy);  // a running run's file, as a kill would leave it
    r.set_status(Status::Completed);
  }
  for (const auto& f : {path, copy}) {
    auto [code, out] = run_check(python, f);
    EXPECT_EQ(code, 0) << f << ":\n" << out;
    EXPECT_NE(out.find("OK"), std::string::npos) << out;
  }
}
