// `runner compare` on two small real corner runs that differ only in model.norm, plus files of
// runs still going, failed runs, and files that are not results files.
#include <attnlab/results/tensor.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/results/results.hpp>

#include "testing/png.hpp"
#include "testing/runner.hpp"
#include "testing/testing.hpp"

#include <cairo.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace {
using namespace attnlab;
namespace fs = std::filesystem;
using Rows = std::vector<std::vector<std::string>>;

/// RFC 4180 CSV -> rows of cells.
Rows parse_csv(const std::string& text) {
  Rows rows(1);
  std::string cell;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cell += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().push_back(cell);
      cell.clear();
    } else if (c == '\n') {
      rows.back().push_back(cell);
      cell.clear();
      rows.emplace_back();
    } else {
      cell += c;
    }
  }
  if (rows.back().empty()) rows.pop_back();
  return rows;
}

/// The markdown table that follows `heading`: rows of trimmed cells (header first, separator dropped).
Rows markdown_table(const std::string& text, const std::string& heading) {
  std::istringstream in(text.substr(text.find(heading)));
  std::string line;
  Rows rows;
  while (std::getline(in, line)) {
    if (line.rfind("|", 0) != 0) {
      if (!rows.empty()) break;
      continue;
    }
    std::vector<std::string> cells;
    std::string cell;
    for (size_t i = 1; i < line.size(); ++i) {
      if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '|') {
        cell += '|';
        ++i;
      } else if (line[i] == '|') {
        const auto first = cell.find_first_not_of(' ');
        cells.push_back(first == std::string::npos ? "" : cell.substr(first, cell.find_last_not_of(' ') - first + 1));
        cell.clear();
      } else {
        cell += line[i];
      }
    }
    if (line.find("---") == std::string::npos) rows.push_back(cells);
  }
  return rows;
}

size_t column(const std::vector<std::string>& header, const std::string& name) {
  auto it = std::find(header.begin(), header.end(), name);
  return it == header.end() ? header.size() : static_cast<size_t>(it - header.begin());
}

using testutil::png_size;

class Compare : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    runner_ = testutil::env_or("ATTNLAB_RUNNER", "");
    source_ = testutil::env_or("ATTNLAB_SOURCE_DIR", "");
    if (runner_.empty() || source_.empty()) return;
    tmp_ = testutil::temp_dir("attnlab-compare");
    first_ = tmp_ + "/first.h5";
    last_ = tmp_ + "/last.h5";
    setup_ = testutil::train_norm_pair(runner_, source_, tmp_, first_, last_);
  }
  void SetUp() override {
    ATTNLAB_REQUIRE(!runner_.empty(), "ATTNLAB_RUNNER is not set (run through ctest)");
    ASSERT_EQ(setup_.exit_code, 0) << setup_.out << setup_.err;
  }
  testutil::ProcessResult compare(std::vector<std::string> args) {
    args.insert(args.begin(), "compare");
    return testutil::run_process(runner_, args, source_, tmp_);
  }
  static inline std::string runner_, source_, tmp_, first_, last_;
  static inline testutil::ProcessResult setup_;
};

TEST_F(Compare, TableNamesExactlyTheDifferingKey) {
  auto r = compare({first_, last_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("differing config keys: model.norm\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model.norm=first"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model.norm=last"), std::string::npos) << r.out;
  for (const char* want : {"train/loss", "val/loss", "val/batch_loss_train_mode", "test/loss", "best (min)",
                           "completed", "encoder_self", "decoder_cross", "1728"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
}

TEST_F(Compare, CsvParsesAndCarriesTheNumbers) {
  auto r = compare({first_, last_, "--format", "csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto rows = parse_csv(r.out);
  ASSERT_EQ(rows.size(), 3u) << r.out;
  const auto& h = rows[0];
  for (const auto& row : rows) EXPECT_EQ(row.size(), h.size());
  const auto differs = column(h, "differs");
  ASSERT_LT(differs, h.size());
  EXPECT_EQ(rows[1][differs], "model.norm=first");
  EXPECT_EQ(rows[2][differs], "model.norm=last");
  EXPECT_EQ(rows[1][column(h, "status")], "completed");
  EXPECT_EQ(rows[1][column(h, "num_parameters")], "1728");
  EXPECT_EQ(rows[2][column(h, "num_parameters")], "1704");
  // Final and best train loss match the file.
  results::ResultsReader in(first_);
  auto loss = in.metric("train", "loss");
  const auto fin = column(h, "train/loss final"), best = column(h, "train/loss best");
  ASSERT_LT(best, h.size());
  EXPECT_NEAR(std::stod(rows[1][fin]), loss.back(), 1e-7);
  EXPECT_NEAR(std::stod(rows[1][best]), *std::min_element(loss.begin(), loss.end()), 1e-7);
  EXPECT_EQ(rows[1][column(h, "train/loss final_epoch")], "3");
  EXPECT_LT(column(h, "attention encoder_self layer 1 head 1 entropy"), h.size());
}

TEST_F(Compare, MarkdownParses) {
  auto r = compare({first_, last_, "--format", "markdown"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto runs = markdown_table(r.out, "### Runs");
  ASSERT_EQ(runs.size(), 3u) << r.out;
  const auto differs = column(runs[0], "differs");
  ASSERT_LT(differs, runs[0].size());
  for (const auto& row : runs) EXPECT_EQ(row.size(), runs[0].size());
  EXPECT_EQ(runs[1][differs], "model.norm=first");
  EXPECT_EQ(runs[2][differs], "model.norm=last");
  auto metrics = markdown_table(r.out, "### Metrics");
  ASSERT_GE(metrics.size(), 3u);
  EXPECT_EQ(metrics[0], (std::vector<std::string>{"metric", "value", "A", "B"}));
}

/// `runner eval` writes /eval/<name>; compare shows each evaluation's scores per run.
/// `lowercase` < 0 writes no bleu_lowercase, as runner eval did before it stored one.
void add_eval(const std::string& path, const std::string& name, double bleu, double d2l, int64_t beam,
              double lowercase = -1) {
  results::Results out(path, results::Results::Open::Existing);
  const std::string at = "eval/" + name;
  out.write_strings(at + "/hypotheses", {"a b c"});
  out.set_attr_at(at, "bleu", bleu);
  if (lowercase >= 0) out.set_attr_at(at, "bleu_lowercase", lowercase);
  out.set_attr_at(at, "d2l_mean_bleu", d2l);
  out.set_attr_at(at, "split", std::string("test"));
  out.set_attr_at(at, "decoding", std::string(beam > 1 ? "beam" : "greedy"));
  out.set_attr_at(at, "checkpoint", std::string("best"));
  out.set_attr_at(at, "beam_size", beam);
  out.set_attr_at(at, "sentences", int64_t{1});
  out.flush();
}

TEST_F(Compare, EvaluationsAreTabledPerRun) {
  const auto a = tmp_ + "/eval_a.h5", b = tmp_ + "/eval_b.h5";
  fs::copy_file(first_, a, fs::copy_options::overwrite_existing);
  fs::copy_file(last_, b, fs::copy_options::overwrite_existing);
  add_eval(a, "test", 27.94, 0.233, 1, 28.41);
  add_eval(a, "test_beam5", 28.27, 0.237, 5, 28.8);
  add_eval(b, "test", 25.28, 0.2, 1);  // b has no beam evaluation, and a file from before -lc
  auto r = compare({a, b, "--format", "markdown", "--no-attention"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto t = markdown_table(r.out, "### Evaluations");
  ASSERT_EQ(t.size(), 3u) << r.out;
  EXPECT_EQ(t[0], (std::vector<std::string>{"evaluation", "decoding", "A sacreBLEU / lowercased (d2l)",
                                            "B sacreBLEU / lowercased (d2l)"}));
  EXPECT_EQ(t[1],
            (std::vector<std::string>{"test", "greedy, best checkpoint", "27.94 / 28.41 (0.233)", "25.28 / - (0.200)"}));
  EXPECT_EQ(t[2], (std::vector<std::string>{"test_beam5", "beam 5, best checkpoint", "28.27 / 28.80 (0.237)", "-"}));
  auto csv = parse_csv(compare({a, b, "--format", "csv"}).out);
  ASSERT_EQ(csv.size(), 3u);
  EXPECT_EQ(csv[1][column(csv[0], "eval test bleu")], "27.94");
  EXPECT_EQ(csv[1][column(csv[0], "eval test bleu_lowercase")], "28.41");
  EXPECT_EQ(csv[2][column(csv[0], "eval test bleu_lowercase")], "");
  EXPECT_EQ(csv[2][column(csv[0], "eval test_beam5 bleu")], "");
  // A beam evaluation names its length penalty when the file stores it (runner eval does).
  {
    results::Results out(a, results::Results::Open::Existing);
    out.set_attr_at("eval/test_beam5", "length_penalty", 0.6);
  }
  t = markdown_table(compare({a, b, "--format", "markdown", "--no-attention"}).out, "### Evaluations");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[2][1], "beam 5 (length penalty 0.6), best checkpoint");
  // ...and says so when `runner eval --tune-length-penalty` picked it on the val split.
  {
    results::Results out(a, results::Results::Open::Existing);
    out.set_attr_at("eval/test_beam5", "length_penalty", 2.0);
    out.set_attr_at("eval/test_beam5", "length_penalty_tuned_on_val", std::string("1: 30.10, 2: 30.50"));
  }
  t = markdown_table(compare({a, b, "--format", "markdown", "--no-attention"}).out, "### Evaluations");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[2][1], "beam 5 (length penalty 2, picked on val), best checkpoint");
  // Runs whose decodings differ (each picked its own penalty) show each run's, not the first's.
  add_eval(b, "test_beam5", 26.0, 0.21, 5);
  {
    results::Results out(b, results::Results::Open::Existing);
    out.set_attr_at("eval/test_beam5", "length_penalty", 1.0);
    out.set_attr_at("eval/test_beam5", "length_penalty_tuned_on_val", std::string("1: 30.90, 2: 30.50"));
  }
  t = markdown_table(compare({a, b, "--format", "markdown", "--no-attention"}).out, "### Evaluations");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[2][1],
            "A: beam 5 (length penalty 2, picked on val), best checkpoint; B: beam 5 (length penalty 1, picked on val), "
            "best checkpoint");
  EXPECT_EQ(t[1][1], "greedy, best checkpoint");  // agreeing runs: one decoding
  // Grouped, the lowercased score is a quantity of its own.
  auto g = compare({a, b, "--group-by", "model.norm", "--format", "csv"});
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_NE(g.out.find("sacrebleu_lowercase"), std::string::npos) << g.out;
  // Runs without evaluations print no such table.
  EXPECT_EQ(compare({first_, last_}).out.find("Evaluations"), std::string::npos);
}

TEST_F(Compare, MetricSelection) {
  auto r = compare({first_, last_, "--format", "csv", "--metric", "val/loss"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto h = parse_csv(r.out).at(0);
  EXPECT_LT(column(h, "val/loss final"), h.size());
  EXPECT_EQ(column(h, "train/loss final"), h.size());
  auto bad = compare({first_, last_, "--metric", "val/los"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("--metric 'val/los' matches none"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("val/loss"), std::string::npos) << bad.err;
}

TEST_F(Compare, NonResultsFilesAreRefusedClearly) {
  const auto text = tmp_ + "/notes.h5";
  std::ofstream(text) << "not hdf5\n";
  auto r = compare({first_, text});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("results error: not an attnlab results file: " + text + " (not an HDF5 file)"),
            std::string::npos)
      << r.err;
  auto missing = compare({first_, tmp_ + "/missing.h5"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("(no such file)"), std::string::npos) << missing.err;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos);
}

TEST_F(Compare, RunningAndFailedRunsAreShown) {
  results::ResultsReader in(first_);
  const auto running = tmp_ + "/running.h5", failed = tmp_ + "/failed.h5";
  {
    results::Results w(running, "tiny_corners");
    w.write_config(in.config());
    for (double v : {0.5, 0.4}) w.append_metric("train", "loss", v);
    for (double s : {1.5, 2.0}) w.append_metric("epoch", "seconds", s);
    w.flush();
    results::Results f(failed, "tiny_corners");
    f.write_config(in.config());
    f.append_metric("train", "loss", 0.9);
    f.set_attr("error", "boom");
    f.set_status(results::Status::Failed);
  }
  auto r = compare({first_, running, failed});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("running"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(">=3.50s"), std::string::npos) << r.out;  // unfinished: the epochs so far
  EXPECT_NE(r.out.find("differing config keys: none"), std::string::npos) << r.out;
}

// Issue 16's fixes: attention entropy over real query tokens only, per-step series counted in
// steps, many long differing keys summarised (the csv keeps them whole), wall time below 1 s.
TEST_F(Compare, PadRowsStepSeriesLongDifferencesAndShortWallTimes) {
  const auto a = tmp_ + "/unrelated_a.h5", b = tmp_ + "/unrelated_b.h5";
  for (const auto& [path, letter] : {std::pair{a, 'a'}, std::pair{b, 'b'}}) {
    results::Results w(path, "unrelated");
    std::string yaml = "experiment: unrelated\n";
    for (int k = 0; k < 12; ++k) yaml += fmt::format("key{:02}: {}\n", k, std::string(100, letter));
    w.write_config(yaml);
    for (double v : {0.5, 0.4}) w.append_metric("train", "loss", v);
    for (double e : {1.0, 2.0}) w.append_metric("epoch", "index", e);
    for (double lr : {1e-4, 2e-4, 3e-4, 4e-4, 5e-4}) w.append_metric("step", "lr", lr);
    // Rows: one-hot (entropy 0), two-way (ln 2), and a padded query, uniform (ln 3).
    const auto weights = torch::tensor({1.0, 0.0, 0.0, 0.5, 0.5, 0.0, 1 / 3.0, 1 / 3.0, 1 / 3.0}).reshape({1, 1, 3, 3});
    w.write_attention("a b", "decoder_self",
                      {results::to_float_array(weights), {"a", "b", "<pad>"}, {"a", "b", "<pad>"}, {0}, "target", "target"});
    w.set_status(results::Status::Completed);
  }
  auto r = compare({a, b});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(testutil::contains(r.out, fmt::format("{:.3f} / 1.000", std::log(2.0) / 2))) << r.out;
  EXPECT_FALSE(testutil::contains(r.out, fmt::format("{:.3f}", (std::log(2.0) + std::log(3.0)) / 3))) << r.out;
  EXPECT_TRUE(testutil::contains(r.out, "<pad> rows left out")) << r.out;
  EXPECT_TRUE(testutil::contains(r.out, "0.0005 @step 5")) << r.out;
  EXPECT_TRUE(testutil::contains(r.out, "differing config keys (12): key00, ")) << r.out;
  EXPECT_TRUE(testutil::contains(r.out, "... (all of them: --format csv)")) << r.out;
  EXPECT_TRUE(testutil::contains(r.out, "key02=" + std::string(40, 'a') + "..., +9 more")) << r.out;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) EXPECT_LT(line.size(), 400u) << line;
  // Wall time to the hundredth of a second (these files lived for milliseconds).
  const double wall = results::ResultsReader(a).attr_double("wall_seconds");
  EXPECT_GE(wall, 0.0);
  EXPECT_LT(wall, 60.0);
  EXPECT_TRUE(testutil::contains(r.out, fmt::format("{:.2f}s", wall))) << r.out;
  // The csv keeps every key and value whole.
  auto c = compare({a, b, "--format", "csv"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_TRUE(testutil::contains(c.out, "key11=" + std::string(100, 'b'))) << c.out.substr(0, 500);
}

TEST_F(Compare, AnAttentionMapWithoutItsFourAxesIsNamedAsDamaged) {
  const auto path = tmp_ + "/lost_axis.h5";
  {
    results::Results w(path, "lost_axis");
    w.write_config("experiment: lost_axis\n");
    w.append_metric("train", "loss", 0.5);
    w.append_metric("epoch", "index", 1.0);
    const auto weights = torch::full({1, 1, 2, 2}, 0.5);
    w.write_attention("good", "decoder_self",
                      {results::to_float_array(weights), {"a", "b"}, {"a", "b"}, {0}, "target", "target"});
    w.write_array("attention/lost/decoder_self", results::to_float_array(torch::full({1, 2, 2}, 0.5)));
    w.set_status(results::Status::Completed);
  }
  auto r = compare({path});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(r.err, "results error: results file " + path +
                       " is damaged: /attention/lost/decoder_self has 3 dimensions, but an attention map has 4 "
                       "(layers, heads, queries, keys)\n");
  EXPECT_FALSE(testutil::contains(r.out, "entropy / max")) << r.out;  // no table of the other samples
}

TEST_F(Compare, NanEpochIndexIsShownAsItsRow) {
  results::ResultsReader in(first_);
  const auto damaged = tmp_ + "/nan_epoch.h5";
  {
    results::Results w(damaged, "tiny_corners");
    w.write_config(in.config());
    for (double v : {0.5, 0.4}) w.append_metric("train", "loss", v);
    for (double e : {1.0, std::nan("")}) w.append_metric("epoch", "index", e);
    w.set_status(results::Status::Completed);
  }
  auto r = compare({damaged, "--metric", "train/loss"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("-9223372036854775808"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0.4 @2"), std::string::npos) << r.out;
}

TEST_F(Compare, PlotFilesHaveTheRequestedSize) {
  const auto png = tmp_ + "/compare.png", svg = tmp_ + "/compare.svg", natural = tmp_ + "/natural.png";
  auto r = compare({first_, last_, "--plot", png, "--width", "900", "--height", "600"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(fs::exists(png));
  EXPECT_GT(fs::file_size(png), 5000u);
  EXPECT_EQ(png_size(png), (std::pair{900, 600}));
  ASSERT_EQ(compare({first_, last_, "--plot", natural, "--metric", "train/loss,val/loss"}).exit_code, 0);
  // Two 430 x 300 panels side by side, 10 px margins, a legend line of 17 px per run (+ 8).
  EXPECT_EQ(png_size(natural), (std::pair{2 * 430 + 20, 300 + 20 + 2 * 17 + 8}));
  ASSERT_EQ(compare({first_, last_, "--plot", svg}).exit_code, 0);
  const auto text = testutil::read_file(svg);
  EXPECT_NE(text.find("<svg"), std::string::npos);
  EXPECT_GT(text.size(), 5000u);
  auto bad = compare({first_, last_, "--plot", tmp_ + "/x.jpg"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("expected a .png or .svg"), std::string::npos) << bad.err;
}

}  // namespace
