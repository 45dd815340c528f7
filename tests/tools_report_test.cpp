// runner report's page data (framework/src/cli/report/): the JSON writer's escaping, the
// attention maps (pads cut, tokens capped, quantised) and their subsampling, the page model built
// from runs, the HTML around it and the atomic write.
#include <attnlab/results/tensor.hpp>
#include <attnlab/error.hpp>
#include <attnlab/results/results.hpp>

#include "tools/report/extras.hpp"
#include "tools/report/json.hpp"
#include "tools/report/model.hpp"
#include "tools/report/page.hpp"
#include "testing/runner.hpp"
#include "testing/testing.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <torch/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>

namespace {
using namespace attnlab;
using namespace attnlab::tools;
using namespace attnlab::tools::report;
namespace fs = std::filesystem;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

/// A map of `layers` x `heads` x q x k weights, with labels.
results::Attention attention(int64_t layers, int64_t heads, std::vector<std::string> q, std::vector<std::string> k) {
  results::Attention a;
  a.weights = results::to_float_array(
      torch::rand({layers, heads, static_cast<int64_t>(q.size()), static_cast<int64_t>(k.size())}));
  a.query_tokens = std::move(q);
  a.key_tokens = std::move(k);
  return a;
}

TEST(ReportJson, StringsCannotEndTheScriptElement) {
  EXPECT_EQ(json_string("</script><!--&"), R"("\u003c/script\u003e\u003c!--\u0026")");
  EXPECT_EQ(json_string("a\"b\\c\nd\te\x01"), R"("a\"b\\c\nd\te\u0001")");
  EXPECT_EQ(json_string("line\xe2\x80\xa8sep"), R"("line\u2028sep")");
  EXPECT_EQ(json_string("caf\xc3\xa9 'q'"), "\"caf\xc3\xa9 'q'\"");  // UTF-8 and single quotes stay
}

TEST(ReportJson, WriterNestsAndSeparates) {
  JsonWriter j;
  j.begin_object().key("a").array(std::vector<int64_t>{1, 2}).key("b").begin_object().key("c").value("x");
  j.end_object().key("d").array(std::vector<double>{0.5, NAN, 1e-7}).key("e").value(true).key("f").null();
  j.end_object();
  EXPECT_EQ(j.str(), R"({"a":[1,2],"b":{"c":"x"},"d":[0.5,null,1e-07],"e":true,"f":null})");
  EXPECT_EQ(json_number(INFINITY), "null");
  EXPECT_EQ(json_number(0.123456789, 3), "0.123");
}

TEST(ReportAttention, PadsCutTokensCappedWeightsQuantised) {
  auto a = attention(2, 3, {"a", "b", "<pad>", "<pad>"}, {"x", "y", "z", "<pad>"});
  a.weights.at({1, 2, 1, 0}) = 0.12349f;
  a.weights.at({0, 0, 0, 2}) = 1.0f;
  a.layers = {3, 5};
  const auto m = make_map("encoder_self", a, 40);
  EXPECT_EQ(m.queries, 2);
  EXPECT_EQ(m.keys, 3);
  EXPECT_EQ(m.query_tokens, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(m.key_tokens, (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(m.layers, (std::vector<int64_t>{3, 5}));
  ASSERT_EQ(m.cells(), 2 * 3 * 2 * 3);
  EXPECT_EQ(m.weights[((1 * 3 + 2) * 2 + 1) * 3 + 0], 123);  // [layer 1, head 2, q 1, k 0]
  EXPECT_EQ(m.weights[2], kWeightScale);                     // [0, 0, 0, 2]
  const auto capped = make_map("encoder_self", a, 1);
  EXPECT_EQ(capped.queries, 1);
  EXPECT_EQ(capped.keys, 1);
  EXPECT_EQ(capped.cells(), 2 * 3);
  // No labels: every stored row stays, layers numbered 0, 1, ...
  results::Attention bare;
  bare.weights = results::to_float_array(torch::full({1, 1, 2, 2}, 0.5));
  const auto b = make_map("decoder_cross", bare, 40);
  EXPECT_EQ(b.queries, 2);
  EXPECT_TRUE(b.query_tokens.empty());
  EXPECT_EQ(b.layers, (std::vector<int64_t>{0}));
  EXPECT_EQ(b.weights, (std::vector<int32_t>{500, 500, 500, 500}));
}

/// A results file whose one sample has an encoder_self map of n x n weights over n - 10 tokens and
/// 10 trailing <pad>, weight 0.5 at [0, 0, 1, 2].
std::string write_square_map(const std::string& path, int64_t n) {
  std::vector<std::string> tokens;
  for (int64_t i = 0; i < n; ++i) tokens.push_back(i < n - 10 ? fmt::format("t{}", i) : "<pad>");
  auto a = attention(1, 1, tokens, tokens);
  a.weights.at({0, 0, 1, 2}) = 0.5f;
  results::Results w(path, "square");
  w.write_config("x: 1\n");
  w.append_metric("train", "loss", 1.0);
  w.write_attention("the sentence", "encoder_self", a);
  w.set_status(results::Status::Completed);
  return path;
}

/// Peak resident memory (KiB) of `runner report FILE -o PAGE`, run by a small Python process
/// that reads its children's peak (a child forked from this test would count this process's own
/// memory, which the test's maps inflate, in its peak).
long report_peak_kib(const std::string& python, const std::string& runner, const std::string& file,
                     const std::string& page, const std::string& dir) {
  const std::string script =
      "import resource, subprocess, sys\n"
      "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
      "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if r.returncode == 0 else -r.returncode - 1)\n";
  auto r = testutil::run_process(python, {"-c", script, runner, "report", file, "-o", page}, dir, dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const long kib = std::stol(r.out);
  EXPECT_GT(kib, 0) << "runner report " << file << " failed";
  return kib;
}

// Issue 42: the page shows at most --max-tokens (40) of each axis, so `runner report` reads only
// that corner of a stored map (a hyperslab), and the attention statistics of its tables read a
// block of rows at a time: a 4000 x 4000 map (64 MB of floats) costs about as much memory as a
// 50 x 50 one (before: 63 MB more), and the crop holds the right weights.
TEST(ReportAttention, OnlyTheCropOfALargeMapIsRead) {
  const auto runner = testutil::env_or("ATTNLAB_RUNNER", ""), python = testutil::env_or("ATTNLAB_PYTHON", "");
  ATTNLAB_REQUIRE(!runner.empty() && !python.empty(), "ATTNLAB_RUNNER or ATTNLAB_PYTHON is not set (run through ctest)");
  const auto dir = testutil::temp_dir("attnlab-report-crop");
  const auto small = write_square_map(dir + "/small.h5", 50), large = write_square_map(dir + "/large.h5", 4000);
  const auto x = read_extras(large, 40);
  ASSERT_EQ(x.attention.size(), 1u);
  ASSERT_EQ(x.attention[0].maps.size(), 1u);
  const auto& m = x.attention[0].maps[0];
  EXPECT_EQ(m.queries, 40);
  EXPECT_EQ(m.keys, 40);
  EXPECT_EQ(m.query_tokens.back(), "t39");
  EXPECT_EQ(m.weights[1 * 40 + 2], 500);  // [0, 0, 1, 2]
  EXPECT_EQ(x.maps_cut, 1);
  const auto s = read_extras(small, 40);  // 40 real tokens of 50: the 10 pads cut, nothing else
  EXPECT_EQ(s.attention[0].maps[0].queries, 40);
  EXPECT_EQ(s.maps_cut, 0);
  // The page's crop and compare's statistics (read 256 query rows at a time): 64 MB never held.
  const long base = report_peak_kib(python, runner, small, dir + "/small.html", dir);
  const long big = report_peak_kib(python, runner, large, dir + "/large.html", dir);
  EXPECT_LT(big - base, 24 * 1024) << "runner report of a 64 MB map peaked at " << big << " KiB, of a 10 KB one at "
                                   << base << " KiB: it held more than a crop and a block of rows";
  EXPECT_TRUE(testutil::contains(testutil::read_file(dir + "/large.html"), "\"queries\":40"));
}

TEST(ReportAttention, SubsamplingKeepsWholeSamplesInOrderUnderTheBudget) {
  auto run = [](std::vector<std::string> texts) {
    RunExtras x;
    for (const auto& t : texts) {
      x.attention.push_back({t, {make_map("encoder_self", attention(2, 2, {"a", "b", "c"}, {"a", "b", "c"}), 40)}});
    }
    return x;
  };
  std::vector<RunExtras> runs{run({"s1", "s2", "s3"}), run({"s1", "s2", "s3"})};  // 36 weights per map
  auto all = runs;
  EXPECT_EQ(subsample_attention(all, {40, 1000}), "");
  EXPECT_EQ(all[0].attention.size(), 3u);
  const auto note = subsample_attention(runs, {40, 150});  // two samples of both runs: 144 weights
  ASSERT_EQ(runs[0].attention.size(), 2u);
  EXPECT_EQ(runs[1].attention[1].text, "s2");
  EXPECT_NE(note.find("kept the first 2 of 3 recorded samples (in recording order; left out: 's3')"), std::string::npos)
      << note;
  EXPECT_NE(note.find("at most 150 weights (144 kept of 216)"), std::string::npos) << note;
  std::vector<RunExtras> tiny{run({"s1", "s2"})};
  subsample_attention(tiny, {40, 1});  // the first sample stays whatever the budget
  EXPECT_EQ(tiny[0].attention.size(), 1u);
  tiny[0].maps_cut = 2;
  EXPECT_NE(subsample_attention(tiny, {40, 1}).find("2 map(s) longer than 40 tokens"), std::string::npos);
}

TEST(ReportModel, CurveRowsThinLongSeriesAndKeepTheLast) {
  EXPECT_EQ(curve_rows(3), (std::vector<size_t>{0, 1, 2}));
  const auto rows = curve_rows(10001);
  EXPECT_LE(rows.size(), kMaxCurvePoints);
  EXPECT_EQ(rows.front(), 0u);
  EXPECT_EQ(rows.back(), 10000u);
  EXPECT_TRUE(curve_rows(0).empty());
}

PageInput two_runs() {
  PageInput in;
  for (const char* norm : {"first", "</script><b>last & \"more\""}) {
    Run r;
    r.path = std::string("results/") + (norm[0] == 'f' ? "first.h5" : "last.h5");
    r.experiment = "corners";
    r.status = norm[0] == 'f' ? "completed" : "diverged";
    r.config = {{"model.norm", norm}, {"seed", "1"}};
    r.metrics = {{"epoch/index", {1, 2, 3}},
                 {"train/loss", {1.0, 0.5, 0.25}},
                 {"step/lr", {0.1, 0.2, 0.3, 0.4}},
                 {"train/seconds", {1, 1, 1}},
                 {"test/loss", {0.3}}};
    r.epochs = {1, 2, 3};
    in.runs.push_back(r);
    RunExtras x;
    x.config_yaml = std::string("model:\n  norm: ") + norm + "\n";
    x.detail = r.status == "diverged" ? "val loss is nan at epoch 3" : "";
    x.attention.push_back(
        {"</script> sample", {make_map("encoder_self", attention(1, 2, {"</script>", "&"}, {"<b>"}), 40)}});
    x.samples.push_back({"src <i>", "ref", "hyp", 0.5});
    in.extras.push_back(std::move(x));
  }
  return in;
}

TEST(ReportModel, PageDataHoldsRunsSeriesTablesAndAttention) {
  const auto in = two_runs();
  const auto json = page_data(in);
  EXPECT_NE(json.find(R"("differing":["model.norm"])"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("status":"diverged","detail":"val loss is nan at epoch 3")"), std::string::npos);
  // Every metric but the bookkeeping series, one series per run; epochs, or steps for step/.
  EXPECT_EQ(count(json, R"({"name":")"), 3u) << json;
  EXPECT_NE(json.find(R"({"name":"step/lr","per_step":true,"higher_is_better":false,"series":[{"run":0,"x":[1,2,3,4])"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find(R"({"name":"test/loss","per_step":false,"higher_is_better":false,"series":[{"run":0,"x":[3])"),
            std::string::npos);
  EXPECT_EQ(json.find("train/seconds\",\"per_step"), std::string::npos);
  // compare's tables: runs, metrics, attention statistics are absent (no Run::attention given).
  for (const char* id : {R"("id":"runs")", R"("id":"metrics")"}) EXPECT_NE(json.find(id), std::string::npos) << id;
  EXPECT_NE(json.find(R"("header":["metric","value","A","B"])"), std::string::npos);
  // One attention sample shared by both runs (matched by text), with its weights in 0..1000.
  EXPECT_EQ(count(json, R"("text":"\u003c/script\u003e sample","runs":[{"run":0,)"), 1u) << json;
  EXPECT_NE(json.find(R"({"run":1,"maps":[{"module":"encoder_self","layers":[0],"heads":2,"queries":2,"keys":1)"),
            std::string::npos);
  EXPECT_NE(json.find(R"("translations":[{"run":0,"rows":[{"source":"src \u003ci\u003e")"), std::string::npos);
  // Nothing taken from the runs reaches the page unescaped.
  for (const char* raw : {"</script>", "<b>", "<i>", "& "}) EXPECT_EQ(json.find(raw), std::string::npos) << raw;
}

TEST(ReportModel, GroupsAddTheGroupedTables) {
  auto in = two_runs();
  in.runs[1].status = "completed";
  in.group_by = {"model.norm"};
  const auto json = page_data(in);
  EXPECT_NE(json.find(R"("id":"groups")"), std::string::npos);
  EXPECT_NE(json.find(R"("id":"grouped")"), std::string::npos);
  EXPECT_NE(json.find(R"("group":"model.norm=first")"), std::string::npos);
  in.group_by = {"model.nrom"};
  EXPECT_THROW(
      {
        try {
          page_data(in);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("did you mean 'model.norm'"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
}

TEST(ReportPage, HtmlEmbedsDataVegaAndScriptWithOneScriptEndEach) {
  const auto in = two_runs();
  const auto html = page_html("report <of> \"runs\" & more", page_data(in));
  EXPECT_NE(html.find("<title>report &lt;of&gt; &quot;runs&quot; &amp; more</title>"), std::string::npos);
  // Three script elements (data, Vega, the page's script) and no other "</script": the tokens
  // "</script>" of the runs are escaped.
  EXPECT_EQ(count(html, "</script"), 3u);
  EXPECT_EQ(count(html, "<script"), 3u);
  EXPECT_NE(html.find("<script type=\"application/json\" id=\"attnlab-data\">{"), std::string::npos);
  EXPECT_NE(html.find("Vega 5.22"), std::string::npos);  // the licence notice of the bundle
  EXPECT_NE(html.find("BSD-3-Clause"), std::string::npos);
  EXPECT_NE(html.find("window.vega = vega"), std::string::npos);
  EXPECT_NE(html.find("attnlabReport"), std::string::npos);  // page.js
  // Self-contained: nothing is fetched (no src= or href= to another file or the network).
  EXPECT_EQ(html.find(" src="), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html_escape("a'b"), "a&#39;b");
}

TEST(ReportPage, WritesAtomicallyAndNamesBadOutputs) {
  const auto dir = testutil::temp_dir("attnlab-report-unit");
  const auto path = dir + "/page.html";
  EXPECT_EQ(output_problem(path), "");
  write_atomically(path, "one");
  write_atomically(path, "two");
  EXPECT_EQ(testutil::read_file(path), "two");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);  // no temporary left
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::others_write, fs::perms::none);
  EXPECT_NE(fs::status(path).permissions() & fs::perms::owner_read, fs::perms::none);
  EXPECT_NE(output_problem(dir), "");                         // a folder
  EXPECT_NE(output_problem(dir + "/missing/page.html"), "");  // no such folder
  EXPECT_THROW(write_atomically(dir + "/missing/page.html", "x"), Error);
  EXPECT_NE(output_problem(""), "");
  const auto h5 = dir + "/run.h5";  // an HDF5 file is never replaced by a page
  { std::ofstream(h5, std::ios::binary) << std::string("\x89HDF\r\n\x1a\n", 8) << "rest"; }
  EXPECT_NE(output_problem(h5).find("it is an HDF5 file"), std::string::npos) << output_problem(h5);
  EXPECT_EQ(testutil::read_file(h5).size(), 12u);
}

/// A process killed while writing the page leaves the old page and nothing else: the new page is
/// an unnamed file until it is complete.
TEST(ReportPage, AWriteKilledHalfwayLeavesNoTemporary) {
  const auto dir = testutil::temp_dir("attnlab-report-kill");
  const auto path = dir + "/page.html";
  write_atomically(path, "old");
  const std::string big(size_t{256} << 20, 'x');  // long enough to be killed while writing it
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      write_atomically(path, big);
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(0);
  }
  // Wait until the child holds a file in `dir` open (it is writing), then kill it.
  bool writing = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!writing && std::chrono::steady_clock::now() < until) {
    std::error_code ec;
    for (fs::directory_iterator it(fmt::format("/proc/{}/fd", child), ec), end; !ec && it != end; it.increment(ec)) {
      const auto target = fs::read_symlink(it->path(), ec);
      if (!ec && target.string().rfind(dir + "/", 0) == 0) writing = true;
    }
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(writing) << "the child never opened a file in " << dir;
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child finished before it was killed; the test proves nothing";
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"page.html"});
  EXPECT_EQ(testutil::read_file(path), "old");
}

}  // namespace
