// Declared figures (attnlab/results/figure.hpp) drawn by `runner plot` and `runner report` from
// the declaration alone: one file with a figure of every kind, written here as a plugin would,
// and the mistakes a declaration or its data can hold.
#include <attnlab/results/figure.hpp>
#include <attnlab/results/results.hpp>
#include <attnlab/results/tensor.hpp>

#include "tools/figure_data.hpp"

#include "testing/png.hpp"
#include "testing/runner.hpp"
#include "testing/testing.hpp"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace {
using namespace attnlab;
namespace fs = std::filesystem;
using testutil::png_size;

class Figures : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    runner_ = testutil::env_or("ATTNLAB_RUNNER", "");
    source_ = testutil::env_or("ATTNLAB_SOURCE_DIR", "");
    tmp_ = testutil::temp_dir("attnlab-figures");
    file_ = tmp_ + "/declared.h5";
    torch::manual_seed(0);
    results::Results w(file_, "declared_figures");
    w.append_metric("train", "loss", 1.0);
    const auto x = torch::linspace(0, 6, 60);  // [60]
    results::write_tensor(w, "mine/x", x);
    results::write_tensor(w, "mine/sin", torch::sin(x));
    results::write_tensor(w, "mine/cos", torch::cos(x));
    results::write_tensor(w, "mine/cloud_x", torch::rand({40}) * 6);
    results::write_tensor(w, "mine/cloud_y", torch::rand({40}) * 2 - 1);
    results::write_tensor(w, "mine/walks", torch::randn({7, 5, 2}).cumsum(1));  // [7 walks, 5 steps, (x, y)]
    results::write_tensor(w, "mine/ends", torch::randn({7, 2, 2}));
    results::write_tensor(w, "mine/lengths", torch::tensor({2, 1, 2, 0, 2, 2, 1}));
    results::write_tensor(w, "mine/kinds", torch::tensor({0, 1, 1, 0, 2, 0, 1}));
    results::write_tensor(w, "mine/matrix", torch::rand({4, 6}));
    w.write_strings("mine/rows", {"a", "b", "c", "d"});
    w.write_strings("mine/columns", {"p", "q", "r", "s", "t", "u"});
    w.write_strings("mine/names", {"alpha", "beta", "gamma"});
    results::write_tensor(w, "mine/scores", torch::tensor({0.5, 0.25, 1.0 / 3}));

    results::Figure curve;
    curve.name = "waves";
    curve.xlabel = "x";
    curve.layers = {{.label = "sin", .x = "mine/x", .y = "mine/sin"},
                    {.label = "cos", .x = "mine/x", .y = "mine/cos", .style = results::Style::dashed},
                    {.label = "cloud", .x = "mine/cloud_x", .y = "mine/cloud_y", .style = results::Style::points},
                    {.label = "by index", .y = "mine/sin", .marker = results::Marker::cross}};
    results::declare_figure(w, curve, "test 'curves'");
    results::Figure walks;
    walks.name = "walks";
    walks.kind = results::FigureKind::sequences;
    walks.layers = {{.label = "walk", .data = "mine/walks", .marker = results::Marker::dot},
                    {.label = "end",
                     .data = "mine/ends",
                     .lengths = "mine/lengths",
                     .continues = "walk",
                     .style = results::Style::dashed,
                     .marker = results::Marker::cross}};
    walks.panels = 6;
    walks.panel_labels = "mine/kinds";
    walks.label_names = {"left", "right"};  // 2 has no name: shown as the number
    walks.outline = {{-2, -2}, {2, 2}};
    results::declare_figure(w, walks, "test 'walks'");
    results::Figure matrix;
    matrix.name = "matrix";
    matrix.kind = results::FigureKind::heatmap;
    matrix.layers = {{.data = "mine/matrix"}};
    matrix.row_labels = "mine/rows";
    matrix.column_labels = "mine/columns";
    matrix.xlabel = "columns";
    results::declare_figure(w, matrix, "test 'matrix'");
    results::Figure table;
    table.name = "scores";
    table.kind = results::FigureKind::table;
    table.layers = {{.label = "name", .data = "mine/names"}, {.label = "score", .data = "mine/scores"}};
    results::declare_figure(w, table, "test 'table'");
    results::Figure broken;
    broken.name = "broken";
    broken.layers = {{.label = "gone", .x = "mine/x", .y = "mine/not_written"}};
    results::declare_figure(w, broken, "test 'broken'");
    w.set_status(results::Status::Completed);
  }
  void SetUp() override { ATTNLAB_REQUIRE(!runner_.empty(), "ATTNLAB_RUNNER is not set (run through ctest)"); }
  testutil::ProcessResult runner(std::vector<std::string> args) {
    return testutil::run_process(runner_, args, source_, tmp_);
  }
  static inline std::string runner_, source_, tmp_, file_;
};

TEST_F(Figures, RoundTripInTheirOrderOfDeclaration) {
  results::ResultsReader in(file_);
  const auto figures = results::declared_figures(in);
  ASSERT_EQ(figures.size(), 5u);
  EXPECT_EQ(figures[0].name, "waves");
  EXPECT_EQ(figures[1].name, "walks");
  EXPECT_EQ(figures[4].name, "broken");
  const auto& w = figures[1];
  EXPECT_EQ(w.kind, results::FigureKind::sequences);
  EXPECT_EQ(w.declared_by, "test 'walks'");
  EXPECT_EQ(w.panels, 6);
  EXPECT_EQ(w.label_names, (std::vector<std::string>{"left", "right"}));
  EXPECT_EQ(w.outline, (std::vector<std::pair<double, double>>{{-2, -2}, {2, 2}}));
  ASSERT_EQ(w.layers.size(), 2u);
  EXPECT_EQ(w.layers[1].continues, "walk");
  EXPECT_EQ(w.layers[1].lengths, "mine/lengths");
  EXPECT_EQ(w.layers[1].style, results::Style::dashed);
  EXPECT_EQ(w.layers[1].marker, results::Marker::cross);
  EXPECT_EQ(figures[0].layers[2].style, results::Style::points);
  EXPECT_EQ(figures[0].xlabel, "x");
  EXPECT_FALSE(figures[0].xlim.has_value());
}

TEST_F(Figures, PlotDrawsEveryKindFromTheDeclarations) {
  const auto dir = tmp_ + "/plots";
  auto r = runner({"plot", file_, "--figure", "waves,walks,matrix,scores", "-o", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"waves", "walks", "matrix", "scores"}) {
    const auto png = dir + "/" + std::string(name) + ".png";
    ASSERT_TRUE(fs::exists(png)) << png << "\n" << r.out;
    EXPECT_GT(fs::file_size(png), 2000u) << png;
  }
  EXPECT_EQ(png_size(dir + "/waves.png"), (std::pair{450, 320}));  // one panel
  // 6 of the 7 walks in panels of 210 (5 a row), the legend row and the note ("the first 6 of 7").
  EXPECT_EQ(png_size(dir + "/walks.png"), (std::pair{5 * 210 + 20, 2 * (210 + 22) + 30 + 18 + 20}));
  // The curve's colours: sin in tab10's blue, cos dashed in its orange, both drawn.
  EXPECT_GT(testutil::count_pixels(dir + "/waves.png", 31, 119, 180, 12), 100);
  EXPECT_GT(testutil::count_pixels(dir + "/waves.png", 255, 127, 14, 12), 50);
  // The heatmap's largest cell gets the darkest red of the scale.
  EXPECT_GT(testutil::count_pixels(dir + "/matrix.png", 103, 0, 13, 12), 100);
  // SVG as well, one file at a time.
  const auto svg = tmp_ + "/scores.svg";
  ASSERT_EQ(runner({"plot", file_, "--figure", "scores", "-o", svg}).exit_code, 0);
  const auto text = testutil::read_file(svg);
  EXPECT_NE(text.find("<svg"), std::string::npos);
}

TEST_F(Figures, ReportPutsEveryReadableFigureOnThePageAndNamesTheOneItCannotDraw) {
  const auto page = tmp_ + "/page.html";
  auto r = runner({"report", file_, "-o", page});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto html = testutil::read_file(page);
  for (const char* kind : {"curve", "sequences", "heatmap", "table"}) {
    EXPECT_NE(html.find(std::string("\"kind\":\"") + kind + "\""), std::string::npos) << kind;
  }
  EXPECT_NE(html.find(R"("panel_titles":["#0 Left","#1 Right","#2 Right","#3 Left","#4 2","#5 Left"])"),
            std::string::npos);
  EXPECT_NE(html.find(R"("column":["alpha","beta","gamma"])"), std::string::npos);
  EXPECT_NE(html.find(R"("column":["0.5","0.25","0.333333"])"), std::string::npos);
  // The broken figure is named with what is missing, and the others are drawn.
  EXPECT_NE(html.find("figure 'broken' of " + file_ +
                      " (declared by test 'broken'): it draws mine/not_written, which "
                      "the file does not hold"),
            std::string::npos);
}

TEST_F(Figures, ContinuedLayersStartAtTheirSourcesLastPointAndStopAtTheirLength) {
  const auto page = tmp_ + "/walks.html";
  ASSERT_EQ(runner({"report", file_, "-o", page}).exit_code, 0);
  const auto html = testutil::read_file(page);
  // Panel 3's end has length 0: only the walk's last point (where the continuation starts).
  results::ResultsReader in(file_);
  const auto walks = results::read_tensor(in, "mine/walks");  // [7, 5, 2]
  const auto layer = html.find(R"("label":"end")");
  ASSERT_NE(layer, std::string::npos);
  const auto begin = html.find(R"("sequences":)", layer), end = html.find(R"(,"cells")", layer);
  ASSERT_LT(begin, end);
  const std::string all = html.substr(begin, end - begin);
  // Every panel's end line starts where its walk ends; the fourth has nothing after it.
  const auto last = walks[3][4];
  const auto start = fmt::format("[{:.6g},{:.6g}]", last[0].item<float>(), last[1].item<float>());
  EXPECT_NE(all.find("[" + start + "]"), std::string::npos) << all.substr(0, 400);
}

TEST_F(Figures, MistakesAreClearErrors) {
  auto r = runner({"plot", file_, "--figure", "wave"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(
      r.err.find("--figure 'wave' is not a figure of " + file_ + "; declared: waves, walks, matrix, scores, broken"),
      std::string::npos)
      << r.err;
  r = runner({"plot", file_, "--figure", "broken", "-o", tmp_ + "/broken.png"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("figure 'broken' of " + file_ +
                       " (declared by test 'broken'): it draws mine/not_written, which the file does not hold"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(tmp_ + "/broken.png"));
  // A file that declares none.
  const auto bare = tmp_ + "/bare.h5";
  {
    results::Results w(bare, "bare");
    w.append_metric("train", "loss", 1.0);
  }
  r = runner({"plot", bare, "--figures"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("declares no figures"), std::string::npos) << r.err;
}

TEST(FigureDeclarations, AreCheckedWhenDeclared) {
  const auto dir = testutil::temp_dir("attnlab-figure-checks");
  auto writer = std::make_unique<results::Results>(dir + "/checks.h5", "checks");
  auto& w = *writer;
  const auto refused = [&](results::Figure f) {
    try {
      results::declare_figure(w, std::move(f), "test 'checks'");
    } catch (const ResultsError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  results::Figure ok;
  ok.name = "ok";
  ok.layers = {{.label = "a", .y = "a/y"}};
  EXPECT_EQ(refused(ok), "(accepted)");
  auto bad = ok;
  bad.name = "../x";
  EXPECT_NE(refused(bad).find("figure '../x' declared by test 'checks': the name must be 1 to 64 letters"),
            std::string::npos);
  bad = ok;
  bad.layers.clear();
  EXPECT_NE(refused(bad).find("a figure needs at least one layer"), std::string::npos);
  bad = ok;
  bad.layers = {{.label = "a", .x = "a/x"}};
  EXPECT_NE(refused(bad).find("layer 0 ('a') of a curve figure needs y"), std::string::npos);
  bad = ok;
  bad.kind = results::FigureKind::sequences;
  EXPECT_NE(refused(bad).find("needs data (an [N, T, 2] dataset of points)"), std::string::npos);
  bad = ok;
  bad.xlim = std::pair{1.0, 1.0};
  EXPECT_NE(refused(bad).find("xlim must be a finite range [low, high] with low < high, found [1, 1]"),
            std::string::npos);
  bad = ok;
  bad.layers.push_back({.label = "b", .y = "b/y", .continues = "c"});
  EXPECT_NE(refused(bad).find("layer 1 ('b') continues 'c', which is no earlier layer's label"), std::string::npos);
  bad = ok;
  bad.kind = results::FigureKind::heatmap;
  bad.layers = {{.data = "m"}, {.data = "n"}};
  EXPECT_NE(refused(bad).find("a heatmap draws one dataset, found 2 layers"), std::string::npos);
  // Declared again, a figure replaces the first declaration and comes last.
  results::Figure second = ok;
  second.name = "second";
  EXPECT_EQ(refused(second), "(accepted)");
  ok.layers.push_back({.label = "b", .y = "b/y"});
  EXPECT_EQ(refused(ok), "(accepted)");
  writer.reset();  // closed, as a finished run's file is
  results::ResultsReader in(dir + "/checks.h5");
  const auto figures = results::declared_figures(in);
  ASSERT_EQ(figures.size(), 2u);
  EXPECT_EQ(figures[0].name, "second");
  EXPECT_EQ(figures[1].name, "ok");
  EXPECT_EQ(figures[1].layers.size(), 2u);
}

TEST(FigureDeclarations, AFileWrittenBeforeDeclarationsGetsTheFiguresOfItsLayout) {
  // What the regression and nadaraya_watson trainers wrote before they declared their figures (two
  // runs' layouts in one file: the sequences under val, as a run without a test split writes them).
  const auto dir = testutil::temp_dir("attnlab-figure-layout");
  {
    results::Results w(dir + "/old.h5", "old");
    results::write_tensor(w, "predictions/val/source", torch::rand({5, 2, 2}));
    results::write_tensor(w, "predictions/val/target", torch::rand({5, 2, 2}));
    results::write_tensor(w, "predictions/val/prediction", torch::rand({5, 2, 2}));
    results::write_tensor(w, "predictions/val/directions", torch::tensor({0.0f, 1.0f, 1.0f, 0.0f, 1.0f}));
    w.set_attr("directions_values", std::vector<std::string>{"counter-clockwise", "clockwise"});
    results::write_tensor(w, "predictions/x", torch::arange(0, 5, 0.5));
    results::write_tensor(w, "predictions/truth", torch::arange(0, 5, 0.5));
    results::write_tensor(w, "predictions/test", torch::arange(0, 5, 0.5));
  }
  {
    results::ResultsReader in(dir + "/old.h5");
    const auto figures = results::declared_figures(in);
    ASSERT_EQ(figures.size(), 2u);
    EXPECT_EQ(figures[0].name, "kernel_regression");
    EXPECT_EQ(figures[0].layers.size(), 2u);  // no training points in this file
    EXPECT_EQ(figures[1].name, "predictions");
    EXPECT_EQ(figures[1].kind, results::FigureKind::sequences);
    EXPECT_EQ(figures[1].panel_labels, "predictions/val/directions");
    EXPECT_EQ(figures[1].outline.size(), 5u);  // the square
    for (const auto& f : figures)
      EXPECT_NE(f.declared_by.find("written before figures were declared"), std::string::npos);
    const auto data = tools::read_figure_data(in, figures[1]);
    EXPECT_EQ(data.panel_titles.front(), "#0 Counter-clockwise");
  }
  // A file that declares figures gets those alone.
  {
    results::Results w(dir + "/old.h5", results::Results::Open::Existing);
    results::Figure f;
    f.name = "mine";
    f.layers = {{.label = "x", .y = "predictions/x"}};
    results::declare_figure(w, f, "test");
  }
  const auto declared = results::declared_figures(results::ResultsReader(dir + "/old.h5"));
  ASSERT_EQ(declared.size(), 1u);
  EXPECT_EQ(declared[0].name, "mine");
}

}  // namespace
