// `runner report` end to end: two small real corner runs (norm first / last) and a results file
// whose strings try to break out of the page, reported and opened in headless Chromium. A test
// harness script (recording errors, counting the Vega marks, hovering a token) is injected into
// a copy of each page; Chromium's --dump-dom gives back what it wrote. Chromium is required: the
// tests fail, never skip, without it.
#include <attnlab/results/figure.hpp>
#include <attnlab/results/tensor.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/results/results.hpp>

#include "testing/chromium.hpp"
#include "testing/png.hpp"
#include "testing/runner.hpp"
#include "testing/testing.hpp"

#include <cairo.h>
#include <torch/types.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

// A namespace of its own: the file shares a translation unit with its neighbours (tests/CMakeLists.txt).
namespace tools_report_page_test {

namespace {
using namespace attnlab;
namespace fs = std::filesystem;

/// Records errors, waits for the page (body[data-ready]), counts what Vega drew, hovers the second
/// query token of the first head view and sorts the attention table, then writes it all as JSON
/// into <pre id="harness">.
constexpr const char* kHarness = R"js(
  whenReady(function (start) {
    var r = { ready: start.ready, curves: count("#curves g.curve path"), charts: count("#curves .chart"),
      model: count("#attention .model-view g.mvcell path"), head: count("#attention .head-view g.cell path"),
      panels: count("#attention .att-panel"), tables: count("table.data"),
      figures: count("#predictions .chart.figure"), figureMarks: count("#predictions .chart.figure g.mark-symbol path") };
    var panels = document.querySelectorAll("#attention .att-panel");
    if (!panels.length) return done(r);  // no attention recorded: nothing to hover
    var tokens = panels[0].querySelectorAll(".head-view g.qtok text");
    r.firstToken = tokens.length ? tokens[0].textContent : null;
    r.rowBefore = panels[0].getAttribute("data-hover-row");
    var target = tokens[tokens.length > 1 ? 1 : 0];
    ["pointerover", "mouseover", "pointermove", "mousemove"].forEach(function (type) {
      target.dispatchEvent(new MouseEvent(type, { bubbles: true, cancelable: true, view: window }));
    });
    setTimeout(function () {
      r.rowAfter = panels[0].getAttribute("data-hover-row");
      r.otherRow = panels.length > 1 ? panels[1].getAttribute("data-hover-row") : null;
      r.highlighted = Array.prototype.filter.call(panels[0].querySelectorAll(".head-view g.cell path"),
        function (p) { return p.getAttribute("stroke") === "#d62728"; }).length;
      r.readout = panels[0].querySelector(".readout").textContent;
      var th = document.querySelector("table[data-table=attention] th:nth-child(4)");
      if (th) { th.click(); th.click(); r.sorted = th.className; }
      done(r);
    }, 400);
  });
)js";

using testutil::harness_field;

/// Non-background pixels and distinct colours (of a 1-in-4 sample) of a PNG.
std::pair<double, size_t> png_content(const std::string& path) {
  cairo_surface_t* s = cairo_image_surface_create_from_png(path.c_str());
  std::pair<double, size_t> out{0, 0};
  if (cairo_surface_status(s) == CAIRO_STATUS_SUCCESS) {
    const int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
    const int stride = cairo_image_surface_get_stride(s);
    const unsigned char* data = cairo_image_surface_get_data(s);
    std::set<uint32_t> colours;
    size_t ink = 0;
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        uint32_t px;
        std::memcpy(&px, data + y * stride + 4 * x, 4);
        ink += (px & 0xffffff) != 0xffffff;
        if ((x | y) % 2 == 0) colours.insert(px & 0xffffff);
      }
    }
    out = {static_cast<double>(ink) / (static_cast<double>(w) * h), colours.size()};
  }
  cairo_surface_destroy(s);
  return out;
}

class ReportRunner : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    runner_ = testutil::env_or("ATTNLAB_RUNNER", "");
    source_ = testutil::env_or("ATTNLAB_SOURCE_DIR", "");
    if (runner_.empty() || source_.empty()) return;
    tmp_ = testutil::temp_dir("attnlab-report");
    fs::create_directories(tmp_ + "/runs");
    first_ = tmp_ + "/runs/first.h5";
    last_ = tmp_ + "/runs/last.h5";
    setup_ = testutil::train_norm_pair(runner_, source_, tmp_, first_, last_);
  }
  void SetUp() override {
    ATTNLAB_REQUIRE(!runner_.empty(), "ATTNLAB_RUNNER is not set (run through ctest)");
    ASSERT_EQ(setup_.exit_code, 0) << setup_.out << setup_.err;
  }
  testutil::ProcessResult runner(std::vector<std::string> args) {
    return testutil::run_process(runner_, args, source_, tmp_);
  }
  testutil::ProcessResult chromium(std::vector<std::string> args) { return testutil::chromium(std::move(args), tmp_); }
  std::string browse(const std::string& page) { return testutil::browse(page, kHarness, tmp_); }
  static inline std::string runner_, source_, tmp_, first_, last_;
  static inline testutil::ProcessResult setup_;
};

/// What the page must draw for sample 0, module `module` of each file: layers * heads * Q * K cells
/// in the model views, Q * K in each head view; one curve per run and metric (bookkeeping left out).
struct Expected {
  long model = 0, head = 0, curves = 0;
};
Expected expected(const std::vector<std::string>& files, const std::string& module) {
  Expected e;
  for (const auto& f : files) {
    results::ResultsReader in(f);
    const auto w = in.attention(in.attention_samples().front(), module).weights;  // [layers, heads, Q, K]
    e.model += w.numel();
    e.head += w.size(2) * w.size(3);
    for (const auto& g : in.metric_groups()) {
      for (const auto& n : in.metric_names(g)) e.curves += g != "epoch" && n != "seconds";
    }
  }
  return e;
}

TEST_F(ReportRunner, TwoRunsDrawEveryCurveAndHeatmapAndHoverHighlightsARow) {
  const auto page = tmp_ + "/cmp.html";
  auto r = runner({"report", first_, last_, "-o", page});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("wrote " + page), std::string::npos) << r.err;
  const auto json = browse(page);
  ASSERT_FALSE(json.empty());
  EXPECT_NE(json.find("\"ready\":\"1\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"errors\":[]"), std::string::npos) << json;
  const auto want = expected({first_, last_}, "encoder_self");  // the explorer opens on encoder self-attention
  EXPECT_EQ(harness_field(json, "curves"), want.curves) << json;
  EXPECT_EQ(harness_field(json, "model"), want.model) << json;
  EXPECT_EQ(harness_field(json, "head"), want.head) << json;
  EXPECT_EQ(harness_field(json, "panels"), 2) << json;  // norm first beside norm last
  EXPECT_GE(harness_field(json, "tables"), 3) << json;  // runs, metrics, attention
  // Each run's regression trainer declared its predictions figure: drawn from the declaration.
  EXPECT_EQ(harness_field(json, "figures"), 2) << json;
  EXPECT_GT(harness_field(json, "figureMarks"), 20) << json;
  // Hovering the second query token highlights row 1, here and in the other run's panel.
  EXPECT_EQ(harness_field(json, "rowBefore"), -1) << json;
  EXPECT_EQ(harness_field(json, "rowAfter"), 1) << json;
  EXPECT_EQ(harness_field(json, "otherRow"), 1) << json;
  EXPECT_GT(harness_field(json, "highlighted"), 0) << json;
  EXPECT_NE(json.find("attends to: "), std::string::npos) << json;
  EXPECT_NE(json.find("\"sorted\":\"sorted-desc\""), std::string::npos) << json;
}

TEST_F(ReportRunner, ScreenshotAt1280x800IsNotBlank) {
  const auto page = tmp_ + "/shot.html", png = tmp_ + "/shot.png";
  ASSERT_EQ(runner({"report", first_, last_, "-o", page}).exit_code, 0);
  chromium({"--screenshot=" + png, "--window-size=1280,800", "file://" + page});
  ASSERT_EQ(testutil::png_size(png), (std::pair<int, int>{1280, 800})) << png;
  const auto [ink, colours] = png_content(png);
  EXPECT_GT(ink, 0.03) << "share of non-white pixels in " << png;
  EXPECT_GT(colours, 40u) << "distinct colours in " << png;
}

TEST_F(ReportRunner, StringsFromTheFileCannotBreakThePage) {
  const auto file = tmp_ + "/hostile.h5", page = tmp_ + "/hostile.html";
  const std::string evil = "</script><script>window.__pwned=1</script>";
  {
    results::Results out(file, "exp " + evil);
    out.write_config("experiment: \"" + evil + "\"\nnote: \"<!-- & ' \\\" <img src=x onerror=window.__pwned=1>\"\n");
    out.append_metric("train", "loss", 1.0);
    out.append_metric("train", "loss", 0.5);
    results::Attention a;
    a.weights = results::to_float_array(torch::softmax(torch::rand({1, 2, 3, 3}), -1));
    a.query_tokens = {"</script>", "<img src=x onerror=window.__pwned=1>", "&amp; \"'"};
    a.key_tokens = a.query_tokens;
    out.write_attention(evil, "encoder_self", a);
    out.write_samples({{evil, "<b>ref</b>", "&lt;", 1.0}});
    out.set_status(results::Status::Completed);
  }
  auto r = runner({"report", file, "-o", page});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto json = browse(page);
  EXPECT_NE(json.find("\"ready\":\"1\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"errors\":[]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"pwned\":false"), std::string::npos) << json;
  // The token reaches the page as text: dump-dom escapes it again in the harness's <pre>.
  EXPECT_NE(json.find("\"firstToken\":\"&lt;/script&gt;\""), std::string::npos) << json;
  EXPECT_EQ(harness_field(json, "head"), 9) << json;
}

TEST_F(ReportRunner, DeclaredFiguresOfEveryKindAreDrawnWithoutErrors) {
  const auto file = tmp_ + "/figures.h5", page = tmp_ + "/figures.html";
  {
    results::Results out(file, "figures");
    out.append_metric("train", "loss", 1.0);
    const auto x = torch::linspace(0, 3, 30);
    results::write_tensor(out, "d/x", x);
    results::write_tensor(out, "d/y", torch::sin(x));
    results::write_tensor(out, "d/seq", torch::rand({3, 4, 2}));
    results::write_tensor(out, "d/m", torch::rand({3, 5}));
    out.write_strings("d/names", {"a", "b", "c"});
    results::Figure curve{.name = "curve", .xlabel = "x"};
    curve.layers = {{.label = "sin", .x = "d/x", .y = "d/y", .marker = results::Marker::cross},
                    {.label = "dots", .x = "d/x", .y = "d/y", .style = results::Style::points}};
    results::declare_figure(out, curve, "test");
    results::Figure seq{.name = "seq", .kind = results::FigureKind::sequences};
    seq.layers = {{.label = "walk", .data = "d/seq", .marker = results::Marker::dot}};
    seq.outline = {{0, 0}, {1, 1}};
    results::declare_figure(out, seq, "test");
    results::Figure heat{.name = "heat", .kind = results::FigureKind::heatmap};
    heat.layers = {{.data = "d/m"}};
    heat.row_labels = "d/names";
    results::declare_figure(out, heat, "test");
    results::Figure table{.name = "table", .kind = results::FigureKind::table};
    table.layers = {{.label = "name", .data = "d/names"}};
    results::declare_figure(out, table, "test");
    out.set_status(results::Status::Completed);
  }
  ASSERT_EQ(runner({"report", file, "-o", page}).exit_code, 0);
  const auto json = browse(page);
  EXPECT_NE(json.find("\"ready\":\"1\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"errors\":[]"), std::string::npos) << json;
  EXPECT_EQ(harness_field(json, "figures"), 3) << json;  // curve, sequences and heatmap charts; the table is a table
  EXPECT_GT(harness_field(json, "figureMarks"), 30) << json;
  EXPECT_GE(harness_field(json, "tables"), 2) << json;  // the runs' table and the figure's
}

TEST_F(ReportRunner, FolderGroupedByAKey) {
  const auto page = tmp_ + "/sweep.html";
  auto r = runner({"report", tmp_ + "/runs", "--group-by", "model.norm", "-o", page});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto html = testutil::read_file(page);
  EXPECT_NE(html.find(R"("group_by":["model.norm"])"), std::string::npos);
  EXPECT_NE(html.find(R"("id":"grouped")"), std::string::npos);
  EXPECT_NE(html.find(R"("group":"model.norm=last")"), std::string::npos);
}

TEST_F(ReportRunner, BadArgumentsGiveOneErrorAndNoPage) {
  const auto page = tmp_ + "/bad.html";
  auto r = runner({"report", first_});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--out is required"), std::string::npos) << r.err;
  r = runner({"report", first_, "-o", tmp_ + "/no/such/folder/page.html"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("report: -o " + tmp_ + "/no/such/folder/page.html: "), std::string::npos) << r.err;
  r = runner({"report", first_, "-o", tmp_});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("directory"), std::string::npos) << r.err;
  r = runner({"report", first_, last_, "--group-by", "model.nrom", "-o", page});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--group-by: 'model.nrom' is in no run's config; did you mean 'model.norm'?"), std::string::npos)
      << r.err;
  // A file that is no results file: the very message compare gives.
  const auto text = tmp_ + "/notes.h5";
  std::ofstream(text) << "not hdf5\n";
  r = runner({"report", text, "-o", page});
  EXPECT_EQ(r.exit_code, 1);
  const auto c = runner({"compare", text});
  EXPECT_EQ(r.err, c.err);
  EXPECT_NE(r.err.find("not an attnlab results file"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(page));
  for (const auto& entry : fs::directory_iterator(tmp_)) {  // no temporary page left behind
    EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos) << entry.path();
  }
}

}  // namespace

}  // namespace tools_report_page_test
