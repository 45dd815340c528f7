// What runner ablate (/ablation), runner prune (/pruning) and runner rollout --write (/rollout)
// store, as runner compare, plot and report show it. The files are written here as those commands
// lay them out (docs/RESULTS.md), with numbers whose summaries are known: a run with all three
// and a plain run with none of them (whose compare output must not change).
#include <attnlab/results/reader.hpp>
#include <attnlab/results/results.hpp>
#include <attnlab/results/tensor.hpp>

#include "tools/head_views.hpp"

#include "testing/chromium.hpp"
#include "testing/png.hpp"
#include "testing/runner.hpp"
#include "testing/testing.hpp"

#include <cmath>
#include <filesystem>
#include <limits>
#include <regex>
#include <string>
#include <vector>

namespace {
using namespace attnlab;
namespace fs = std::filesystem;
using testutil::contains;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

results::FloatArray floats(std::vector<float> v, std::vector<int64_t> shape = {}) {
  results::FloatArray a;
  a.shape = shape.empty() ? std::vector<int64_t>{static_cast<int64_t>(v.size())} : shape;
  a.values = std::move(v);
  return a;
}
results::IntArray ints(std::vector<int64_t> v, std::vector<int64_t> shape = {}) {
  results::IntArray a;
  a.shape = shape.empty() ? std::vector<int64_t>{static_cast<int64_t>(v.size())} : shape;
  a.values = std::move(v);
  return a;
}

/// /ablation/val: encoder_self 2 layers x 2 heads (layer 2 head 1 off in training), decoder_cross
/// 1 layer x 2 heads; base loss 2.5, base BLEU 30.
void write_ablation(results::Results& w) {
  const std::string at = "ablation/val";
  w.write_strings(at + "/module",
                  {"encoder_self", "encoder_self", "encoder_self", "encoder_self", "decoder_cross", "decoder_cross"});
  w.write_array(at + "/layer", ints({1, 1, 2, 2, 1, 1}));
  w.write_array(at + "/head", ints({1, 2, 1, 2, 1, 2}));
  const std::vector<float> dl{0.05f, 0.01f, kNaN, -0.002f, 0.2f, 0.03f}, db{-1.2f, 0.1f, kNaN, 0.7f, -3.5f, -0.3f};
  std::vector<float> loss, bleu;
  for (size_t i = 0; i < dl.size(); ++i) {
    loss.push_back(2.5f + dl[i]);
    bleu.push_back(30.0f + db[i]);
  }
  w.write_array(at + "/loss", floats(loss));
  w.write_array(at + "/delta_loss", floats(dl));
  w.write_array(at + "/bleu", floats(bleu));
  w.write_array(at + "/delta_bleu", floats(db));
  w.write_array(at + "/importance", floats({0.08f, 0.06f, kNaN, 0.1f, 0.09f, 0.043f}));
  w.write_array(at + "/importance_normalized", floats({0.8f, 0.6f, kNaN, 1.0f, 0.9f, 0.43f}));
  w.set_attr_at(at, "split", std::string("val"));
  w.set_attr_at(at, "checkpoint", std::string("best.pt"));
  w.set_attr_at(at, "method", std::string("both"));
  w.set_attr_at(at, "base_loss", 2.5);
  w.set_attr_at(at, "base_bleu", 30.0);
  w.set_attr_at(at, "trained_head_mask", std::string("encoder_self:2:1"));
  w.set_attr_at(at, "heads", int64_t{6});
}

/// /pruning/importance_val (one order) and /pruning/random_val (three), 6 heads, 4 points.
void write_pruning(results::Results& w) {
  const std::vector<std::vector<float>> bleu{{30.0f, 29.8f, 28.0f, 1.0f},
                                             {30.0f, 29.0f, 25.0f, 1.0f},
                                             {30.0f, 29.6f, 27.0f, 2.0f},
                                             {30.0f, 29.3f, 26.0f, 0.5f}};
  for (const bool random : {false, true}) {
    const std::string at = random ? "pruning/random_val" : "pruning/importance_val";
    const int64_t repeats = random ? 3 : 1;
    w.write_strings(at + "/module",
                    {"encoder_self", "encoder_self", "encoder_self", "encoder_self", "decoder_cross", "decoder_cross"});
    w.write_array(at + "/layer", ints({1, 1, 2, 2, 1, 1}));
    w.write_array(at + "/head", ints({1, 2, 1, 2, 1, 2}));
    std::vector<int64_t> order;
    std::vector<float> b, l;
    for (int64_t r = 0; r < repeats; ++r) {
      for (int64_t h : {3, 1, 5, 0, 4, 2}) order.push_back(h);
      for (float v : bleu[static_cast<size_t>(random ? r + 1 : 0)]) {
        b.push_back(v);
        l.push_back(2.5f + (30.0f - v) / 10);
      }
    }
    w.write_array(at + "/order", ints(order, {repeats, 6}));
    w.write_array(at + "/heads_off", ints({0, 2, 4, 6}));
    w.write_array(at + "/fraction", floats({0.0f, 1.0f / 3, 2.0f / 3, 1.0f}));
    w.write_array(at + "/bleu", floats(b, {repeats, 4}));
    w.write_array(at + "/loss", floats(l, {repeats, 4}));
    w.set_attr_at(at, "split", std::string("val"));
    w.set_attr_at(at, "order", std::string(random ? "random" : "importance"));
    w.set_attr_at(at, "reestimate", int64_t{0});
    w.set_attr_at(at, "repeats", repeats);
    w.set_attr_at(at, "heads_total", int64_t{6});
    w.set_attr_at(at, "base_loss", 2.5);
    w.set_attr_at(at, "base_bleu", 30.0);
  }
}

void write_rollout(results::Results& w) {
  const std::string at = "rollout/ein hund";
  w.set_attr_at(at, "text", std::string("ein hund"));
  w.write_array(at + "/encoder_self_rollout", floats({0.5f, 0.25f, 0.25f, 0.125f, 0.75f, 0.125f, 0, 0, 1}, {3, 3}));
  w.set_attr_at(at + "/encoder_self_rollout", "method", std::string("rollout"));
  w.set_attr_at(at + "/encoder_self_rollout", "module", std::string("encoder_self"));
  w.set_attr_at(at + "/encoder_self_rollout", "query_tokens", std::vector<std::string>{"ein", "hund", "<eos>"});
  w.set_attr_at(at + "/encoder_self_rollout", "key_tokens", std::vector<std::string>{"ein", "hund", "<eos>"});
}

/// A recorded sentence (encoder_self, 2 layers x 2 heads) and the run's trained mask: encoder_self
/// layer 2 head 1 off, as the ablation's trained_head_mask says.
void write_masked_attention(results::Results& w) {
  results::Attention a;
  a.weights = results::to_float_array(torch::full({2, 2, 3, 3}, 1.0 / 3));
  a.query_tokens = {"ein", "hund", "<eos>"};
  a.key_tokens = a.query_tokens;
  w.write_attention("ein hund", "encoder_self", a);
  w.write_array("interventions/head_mask/encoder_self", floats({1.0f, 1.0f, 0.0f, 1.0f}, {2, 2}));
  w.write_array("interventions/head_mask/decoder_cross", floats({1.0f, 1.0f}, {1, 2}));
  w.set_attr_at("interventions/head_mask", "text", std::string("encoder_self:2:1"));
}

class Heads : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    runner_ = testutil::env_or("ATTNLAB_RUNNER", "");
    source_ = testutil::env_or("ATTNLAB_SOURCE_DIR", "");
    tmp_ = testutil::temp_dir("attnlab-heads");
    heads_ = tmp_ + "/heads.h5";
    plain_ = tmp_ + "/plain.h5";
    for (const auto& f : {heads_, plain_}) {
      results::Results w(f, "heads");
      w.write_config(f == heads_ ? "model:\n  norm: first\n" : "model:\n  norm: last\n");
      for (double v : {2.0, 1.5}) w.append_metric("train", "loss", v);
      if (f == heads_) {
        write_ablation(w);
        write_pruning(w);
        write_rollout(w);
        write_masked_attention(w);
      }
      w.set_status(results::Status::Completed);
    }
  }
  void SetUp() override { ATTNLAB_REQUIRE(!runner_.empty(), "ATTNLAB_RUNNER is not set (run through ctest)"); }
  testutil::ProcessResult runner(std::vector<std::string> args) {
    return testutil::run_process(runner_, args, source_, tmp_);
  }
  static inline std::string runner_, source_, tmp_, heads_, plain_;
};

TEST_F(Heads, ReadBackWithTheirSummaries) {
  results::ResultsReader in(heads_);
  const auto ablations = tools::read_ablations(in);
  ASSERT_EQ(ablations.size(), 1u);
  const auto& a = ablations.front();
  EXPECT_EQ(a.name, "val");
  EXPECT_EQ(a.rows(), 6u);
  EXPECT_EQ(a.modules(), (std::vector<std::string>{"encoder_self", "decoder_cross"}));
  EXPECT_EQ(a.trained_head_mask, "encoder_self:2:1");
  EXPECT_EQ(tools::top_heads(a, 0), (std::vector<size_t>{4, 0, 5, 1, 3, 2}));  // NaN (off in training) last
  EXPECT_EQ(tools::most_harmful(a), 4u);
  EXPECT_EQ(tools::head_name(a, 4), "decoder_cross layer 1 head 1");
  const auto moves = tools::bleu_moves(a, 0.5);
  ASSERT_TRUE(moves);
  EXPECT_EQ(moves->lower, 2);
  EXPECT_EQ(moves->raise, 1);

  const auto curves = tools::read_pruning(in);
  ASSERT_EQ(curves.size(), 2u);
  EXPECT_EQ(curves[0].order, "importance");
  EXPECT_EQ(curves[1].repeats, 3);
  EXPECT_EQ(curves[1].metric(), "bleu");
  const auto band = tools::curve_band(curves[1].bleu);
  EXPECT_NEAR(band.mean[1], (29.0 + 29.6 + 29.3) / 3, 1e-5);
  EXPECT_NEAR(band.lo[2], 25.0, 1e-6);
  EXPECT_NEAR(band.hi[2], 27.0, 1e-6);
  EXPECT_NEAR(*tools::fraction_within(curves[0], 0.5), 1.0 / 3, 1e-6);  // 29.8 within, 28.0 not
  EXPECT_EQ(*tools::fraction_within(curves[1], 0.5), 0.0);             // the mean 29.3 is below 29.5
}

TEST_F(Heads, CompareShowsTheSummaryAndEachRunsTopHeads) {
  auto r = runner({"compare", heads_, plain_, "--top-heads", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "Heads (runner ablate")) << r.out;
  EXPECT_TRUE(contains(r.out, "ablation/val/max_delta_loss")) << r.out;
  EXPECT_TRUE(contains(r.out, "+0.2 (decoder_cross 1.1)")) << r.out;
  EXPECT_TRUE(contains(r.out, "3 (2 lower, 1 raise)")) << r.out;
  EXPECT_TRUE(contains(r.out, "pruning/importance_val/max_fraction_within_0.5_bleu")) << r.out;
  EXPECT_TRUE(contains(r.out, "0.333")) << r.out;
  EXPECT_TRUE(contains(r.out, "Top 3 heads of A by delta loss: ablation 'val' (split val, checkpoint best.pt; base loss 2.5000, "
                              "base BLEU 30.00)"))
      << r.out;
  EXPECT_FALSE(contains(r.out, "heads of B")) << r.out;  // the plain run has no ablation
  // The top three: decoder_cross 1.1, encoder_self 1.1, decoder_cross 1.2.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(\n\s+1\s+decoder_cross\s+1\s+1\s+\+0\.2000\s+-3\.50\s+0\.9000\n)")))
      << r.out;
  EXPECT_FALSE(contains(r.out, "off in training"));  // the NaN head is ranked last, past the top 3

  auto all = runner({"compare", heads_, "--top-heads", "0"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_TRUE(contains(all.out, "All heads of A")) << all.out;
  EXPECT_TRUE(contains(all.out, "off in training")) << all.out;

  auto none = runner({"compare", heads_, "--no-heads"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_FALSE(contains(none.out, "ablation/")) << none.out;
  EXPECT_FALSE(contains(none.out, "Heads (")) << none.out;
  // A run without them prints what it printed before: nothing about heads.
  auto plain = runner({"compare", plain_});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_FALSE(contains(plain.out, "Heads")) << plain.out;
}

TEST_F(Heads, CompareCsvHasTheSummaryColumnsLast) {
  auto r = runner({"compare", heads_, plain_, "--format", "csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto header = r.out.substr(0, r.out.find('\n'));
  EXPECT_TRUE(header.ends_with("ablation/val/base_loss,ablation/val/max_delta_loss,ablation/val/base_bleu,"
                               "ablation/val/min_delta_bleu,ablation/val/heads_abs_delta_bleu_over_0.5,"
                               "pruning/importance_val/base_loss,pruning/importance_val/base_bleu,"
                               "pruning/importance_val/max_fraction_within_0.5_bleu,pruning/random_val/base_loss,"
                               "pruning/random_val/base_bleu,pruning/random_val/max_fraction_within_0.5_bleu"))
      << header;
  EXPECT_TRUE(contains(r.out, ",2.5,0.200000003,30,-3.5,3,2.5,30,0.333333343,2.5,30,0\n")) << r.out;
  auto plain = runner({"compare", plain_, "--format", "csv"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_FALSE(contains(plain.out, "ablation/")) << plain.out;
}

TEST_F(Heads, GroupedCompareHasTheSummariesAsQuantities) {
  auto r = runner({"compare", heads_, plain_, "--group-by", "model.norm"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::smatch m;
  EXPECT_TRUE(std::regex_search(r.out, m, std::regex(R"(\n\s+max_delta_loss\s+0\.2\s)"))) << r.out;
  EXPECT_TRUE(contains(r.out, "ablation val ")) << r.out;
  EXPECT_TRUE(contains(r.out, "pruning importance_val")) << r.out;
  auto none = runner({"compare", heads_, plain_, "--group-by", "model.norm", "--no-heads"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_FALSE(contains(none.out, "ablation")) << none.out;
}

TEST_F(Heads, PlotDrawsTheHeadGridAndThePruningCurves) {
  const auto dir = tmp_ + "/plots";
  auto r = runner({"plot", heads_, "--heads", "-o", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"ablation_val.png", "pruning_val.png"}) {
    const auto [w, h] = testutil::png_size(dir + "/" + name);
    EXPECT_GT(w, 300) << name;
    EXPECT_GT(h, 200) << name;
  }
  EXPECT_FALSE(fs::exists(dir + "/losses.png"));  // --heads alone
  // Without a choice, every figure: the heads' too.
  auto all = runner({"plot", heads_, "-o", tmp_ + "/all"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_TRUE(fs::exists(tmp_ + "/all/ablation_val.png"));
  EXPECT_TRUE(fs::exists(tmp_ + "/all/losses.png"));
  auto svg = runner({"plot", heads_, "--heads", "--format", "svg", "-o", tmp_ + "/svg"});
  ASSERT_EQ(svg.exit_code, 0) << svg.err;
  EXPECT_TRUE(contains(testutil::read_file(tmp_ + "/svg/ablation_val.svg"), "<svg"));

  auto plain = runner({"plot", plain_, "--heads", "-o", tmp_ + "/none"});
  EXPECT_NE(plain.exit_code, 0);
  EXPECT_TRUE(contains(plain.err, "holds neither /ablation (runner ablate) nor /pruning (runner prune)")) << plain.err;
  auto one = runner({"plot", heads_, "--heads", "-o", tmp_ + "/one.png"});
  EXPECT_NE(one.exit_code, 0);
  EXPECT_TRUE(contains(one.err, "2 figures were chosen")) << one.err;
}

TEST_F(Heads, APruningCurveWithoutBleuIsOneOfLoss) {
  const auto file = tmp_ + "/loss_only.h5";
  {
    results::Results w(file, "heads");
    const std::string at = "pruning/importance_test";
    w.write_array(at + "/heads_off", ints({0, 3, 6}));
    w.write_array(at + "/fraction", floats({0.0f, 0.5f, 1.0f}));
    w.write_array(at + "/loss", floats({2.5f, 2.75f, 4.0f}, {1, 3}));
    w.set_attr_at(at, "split", std::string("test"));
    w.set_attr_at(at, "order", std::string("importance"));
    w.set_attr_at(at, "heads_total", int64_t{6});
    w.set_attr_at(at, "base_loss", 2.5);
    w.set_status(results::Status::Completed);
  }
  results::ResultsReader in(file);
  const auto curves = tools::read_pruning(in);
  ASSERT_EQ(curves.size(), 1u);
  EXPECT_EQ(curves[0].metric(), "loss");
  EXPECT_FALSE(tools::fraction_within(curves[0]));
  auto c = runner({"compare", file});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_TRUE(contains(c.out, "pruning/importance_test/base_loss")) << c.out;
  EXPECT_FALSE(contains(c.out, "max_fraction")) << c.out;
  auto p = runner({"plot", file, "--heads", "-o", tmp_ + "/loss_only"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_GT(testutil::png_size(tmp_ + "/loss_only/pruning_test.png").first, 300);
  auto r = runner({"report", file, "-o", tmp_ + "/loss_only.html"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto html = testutil::read_file(tmp_ + "/loss_only.html");
  EXPECT_TRUE(contains(html, R"("metric":"loss","base_loss":2.5,"base_bleu":null,"within":null)")) << html.substr(html.size() - 600);
}

/// Waits for the page, counts the heads' and rollout's marks, reads the grid's tooltips from the
/// views' data, switches the first grid to delta BLEU and reads its cells' numbers again.
constexpr const char* kHarness = R"js(
  whenReady(function (start) {
    var r = { ready: start.ready, grids: count("#heads .head-grid"), cells: count("#heads .head-grid g.hcell path"),
      values: texts("#heads .head-grid g.hval text"), curves: count("#heads .pruning-curve g.pline path"),
      bands: count("#heads .pruning-curve g.pband path"), points: count("#heads .pruning-curve g.ppt path"),
      rollout: count("#rollout .rollout-map g.cell path"), nav: texts("nav a"), tables: texts("#tables h3"),
      explorerCells: count("#attention .model-view g.mvcell path"), explorerOff: count("#attention .model-view g.mvoff path"),
      explorerOffText: texts("#attention .model-view g.mvofftext text") };
    r.tips = [];
    window.attnlabReport.views.forEach(function (v) {
      ["cells", "pts"].forEach(function (name) {
        try { v.data(name).forEach(function (d) { if (d.tip) r.tips.push(d.tip); }); } catch (e) {}
      });
    });
    var pick = document.querySelector("#heads select.head-quantity");
    pick.value = "delta_bleu";
    pick.dispatchEvent(new Event("change"));
    setTimeout(function () {
      r.column = document.querySelector("#heads .head-grids").getAttribute("data-column");
      r.bleuValues = texts("#heads .head-grid g.hval text");
      done(r);
    }, 500);
  });
)js";

using testutil::harness_field;

TEST_F(Heads, ReportDrawsGridsCurvesAndRolloutInChromium) {
  const auto page = tmp_ + "/heads.html";
  auto r = runner({"report", heads_, plain_, "-o", page});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = testutil::browse(page, kHarness, tmp_);
  ASSERT_FALSE(json.empty());
  EXPECT_TRUE(contains(json, "\"errors\":[]")) << json;
  EXPECT_TRUE(contains(json, "\"ready\":\"1\"")) << json;
  EXPECT_EQ(harness_field(json, "grids"), 2) << json;  // encoder_self, decoder_cross
  EXPECT_EQ(harness_field(json, "cells"), 6) << json;
  EXPECT_EQ(harness_field(json, "curves"), 2) << json;  // importance and random order in one chart
  EXPECT_EQ(harness_field(json, "bands"), 1) << json;   // random order's min-max band
  EXPECT_EQ(harness_field(json, "points"), 8) << json;
  EXPECT_EQ(harness_field(json, "rollout"), 9) << json;
  // The explorer greys the head the run trained without (interventions.head_mask), and only it.
  EXPECT_EQ(harness_field(json, "explorerCells"), 36) << json;
  EXPECT_EQ(harness_field(json, "explorerOff"), 1) << json;
  EXPECT_TRUE(contains(json, R"("explorerOffText":["off"])")) << json;
  EXPECT_TRUE(contains(testutil::read_file(page), R"("head_mask":"encoder_self:2:1","heads_off":{"encoder_self":[[1,0]]})"));
  // The numbers in the cells, and the heads off in training.
  for (const char* v : {"\"+0.0500\"", "\"+0.2000\"", "\"-0.0020\"", "\"off\""}) EXPECT_TRUE(contains(json, v)) << v;
  for (const char* tip : {"decoder_cross layer 1 head 1: \u0394loss +0.2000, \u0394BLEU -3.50, importance (normalised) 0.9000",
                          "encoder_self layer 2 head 1: off in training",
                          "random \u00d73: 33.3% of heads off (2 of 6): BLEU 29.30 (min 29.00, max 29.60)"}) {
    EXPECT_TRUE(contains(json, tip)) << tip << "\n" << json;
  }
  EXPECT_TRUE(contains(json, "\"column\":\"delta_bleu\"")) << json;
  EXPECT_TRUE(contains(json, "\"-3.50\"")) << json;
  EXPECT_TRUE(contains(json, "\"Heads\"")) << json;  // the nav link
  EXPECT_TRUE(contains(json, "Heads (runner ablate")) << json;  // compare's summary table

  // A page of runs without them has no such section and no link to it.
  const auto plain_page = tmp_ + "/plain.html";
  auto p = runner({"report", plain_, "-o", plain_page});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const auto html = testutil::read_file(plain_page);
  EXPECT_TRUE(contains(html, "\"ablations\":[],\"pruning\":[],\"head_scores\":[],\"rollout\":[]")) << html.substr(html.size() - 400);
}

}  // namespace
