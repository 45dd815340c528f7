// `runner plot RUN.h5`: attention heatmaps, metric curves and the figures the run's plugins
// declared (attnlab/results/figure.hpp) from one results file, as PNG or SVG.
#include "tools/commands.hpp"
#include "tools/figure_data.hpp"
#include "tools/head_views.hpp"
#include "tools/plot/canvas.hpp"
#include "tools/plot/declared.hpp"
#include "tools/plot/figures.hpp"
#include "tools/plot/head_figures.hpp"

#include <attnlab/error.hpp>
#include <attnlab/files.hpp>
#include <attnlab/results/figure.hpp>
#include <attnlab/results/reader.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <utility>

namespace attnlab::tools {
namespace {
namespace fs = std::filesystem;

struct Figure {
  std::string name;                              // file stem: "losses", "attention_encoder_self", ...
  std::function<void(const std::string&)> draw;  // draws into the given path
};

std::string safe(const std::string& s) {
  std::string out;
  for (unsigned char ch : s) out += std::isalnum(ch) || ch == '-' ? static_cast<char>(ch) : '_';
  return out;
}

/// --sample: a recorded sample's text, or its index in the sorted list.
std::string resolve_sample(const results::ResultsReader& in, const std::string& wanted) {
  const auto samples = in.attention_samples();
  ATTNLAB_CHECK(!samples.empty(), Error, "plot: {} has no recorded attention (/attention is empty)", in.path());
  if (wanted.empty()) return samples.front();
  if (std::find(samples.begin(), samples.end(), wanted) != samples.end()) return wanted;
  if (wanted.size() < 7 &&
      std::all_of(wanted.begin(), wanted.end(), [](unsigned char ch) { return std::isdigit(ch) != 0; })) {
    const auto i = std::stoul(wanted);
    if (i < samples.size()) return samples[i];
  }
  throw Error(fmt::format("plot: --sample '{}' is not a recorded sample of {}; recorded (text or index): {}", wanted,
                          in.path(), fmt::join(samples, " | ")));
}

/// A folder of its own under the temporary folder, removed with everything in it.
struct ScratchDir {
  ScratchDir() : path((fs::temp_directory_path() / "attnlab-plot-XXXXXX").string()) {
    ATTNLAB_CHECK(::mkdtemp(path.data()) != nullptr, Error, "plot: cannot make a scratch folder {}: {}", path,
                  std::strerror(errno));
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string path;
};

/// An error of the rehearsal, its kind kept, naming where -o draws instead of the scratch folder.
[[noreturn]] void rethrow_naming(const std::exception& e, const std::string& scratch_file, const std::string& file,
                                 const std::string& scratch_dir, const std::string& dir) {
  std::string m = e.what();
  for (const auto& [from, to] : {std::pair{scratch_file, file}, std::pair{scratch_dir, dir}}) {
    for (size_t at = m.find(from); !from.empty() && at != std::string::npos; at = m.find(from, at + to.size())) {
      m.replace(at, from.size(), to);
    }
  }
  if (dynamic_cast<const ConfigError*>(&e) != nullptr) throw ConfigError(m);
  if (dynamic_cast<const DataError*>(&e) != nullptr) throw DataError(m);
  if (dynamic_cast<const PluginError*>(&e) != nullptr) throw PluginError(m);
  if (dynamic_cast<const ResultsError*>(&e) != nullptr) throw ResultsError(m);
  throw Error(m);
}

}  // namespace

int cmd_plot(int argc, char** argv) {
  CLI::App app{"Draw a run's attention heatmaps, metric curves and the figures its plugins declared (PNG or SVG)"};
  std::string file, out, sample, format = "png";
  std::vector<std::string> modules, wanted;
  bool losses = false, every_figure = false, linear = false, heads = false;
  plot::PixelSize size;
  int count = 0;
  app.add_option("run", file, "results file (.h5)")->required();
  app.add_option("-o,--out", out,
                 "output: a .png/.svg file when one figure is chosen, else a folder (default: <run>_plots/)");
  app.add_option("--attention", modules, "attention module(s) to draw: encoder_self, decoder_self, decoder_cross, ...")
      ->delimiter(',');
  app.add_option("--sample", sample, "attention sample: its text or its index (default: the first)");
  app.add_flag("--losses", losses, "the loss curves (every metric series)");
  app.add_option("--figure", wanted,
                 "declared figure(s) to draw, by name (the run's trainer and dataset declare them; a wrong name "
                 "lists the run's)")
      ->delimiter(',');
  app.add_flag("--figures,--predictions", every_figure, "every figure the run's plugins declared");
  app.add_flag("--heads", heads,
               "what runner ablate and runner prune stored: each /ablation's head grid (ablation_<name>) and each "
               "split's pruning curves (pruning_<split>)");
  app.add_option("--format", format, "file type inside an output folder")->check(CLI::IsMember({"png", "svg"}));
  app.add_option("--width", size.width, "width in pixels (default: the figure's natural size)");
  app.add_option("--height", size.height, "height in pixels (default: the figure's natural size)");
  app.add_option("--count", count, "panels of a sequences figure (default: as many as it declares)")
      ->check(CLI::Range(1, 100));
  app.add_flag("--linear", linear, "linear y axis for losses (default: log)");
  app.footer(
      "Examples:\n  runner plot results/first.h5                  # every figure -> results/first_plots/\n"
      "  runner plot RUN.h5 --figures -o figures/          # what the run's plugins declared\n"
      "  runner plot RUN.h5 --attention encoder_self --sample 0 -o enc.png\n"
      "  runner plot RUN.h5 --losses -o losses.svg\n"
      "  runner plot RUN.h5 --heads -o heads/           # head importance grids and pruning curves");
  if (auto code = parse_command_line(app, argc, argv, "runner plot")) return *code;
  // Drawing reads the file as it goes: the whole of it is rehearsed in a copy of this process
  // (results::rehearse_read), drawing into a scratch folder, before it is done here.
  // `out`: where to draw (a scratch folder in the rehearsal below); messages name what -o asked for.
  const std::string asked = out;
  const std::string default_dir = fs::path(file).replace_extension("").string() + "_plots";
  const auto draw = [&](const std::string& out) -> std::vector<std::string> {
    results::ResultsReader in(file, results::ReadCheck::none);  // checked by the rehearsal below
    const bool all = modules.empty() && !losses && !every_figure && wanted.empty() && !heads;

    std::vector<Figure> figures;
    if (all || losses) {
      if (!in.metric_groups().empty() || losses) {
        figures.push_back({"losses", [&](const std::string& p) {
                             if (plot::losses_figure(in, p, size, !linear)) return;
                             // A run still in its first epoch has written no series yet: say so.
                             const bool live = in.has_attr("status") && in.attr_string("status") == "running";
                             throw Error(live ? fmt::format("plot: {} has no metric series yet: its run is still in "
                                                            "its first epoch (the file says running); plot it once "
                                                            "an epoch has ended",
                                                            file)
                                              : fmt::format("plot: {} has no metric series", file));
                           }});
      }
    }
    if (!modules.empty() || (all && !in.attention_samples().empty())) {
      const auto s = resolve_sample(in, sample);
      const auto recorded = in.attention_modules(s);
      if (modules.empty()) modules = recorded;
      for (const auto& m : modules) {
        ATTNLAB_CHECK(std::find(recorded.begin(), recorded.end(), m) != recorded.end(), Error,
                      "plot: --attention '{}' was not recorded for sample '{}' in {}; recorded: {}", m, s, file,
                      fmt::join(recorded, ", "));
        figures.push_back(
            {"attention_" + safe(m), [&, m, s](const std::string& p) { plot::attention_figure(in, s, m, p, size); }});
      }
    }
    if (all || every_figure || !wanted.empty()) {
      const auto declared = results::declared_figures(in);
      for (const auto& name : wanted) {
        const bool known = std::any_of(declared.begin(), declared.end(), [&](const auto& f) { return f.name == name; });
        if (!known) {
          std::vector<std::string> names;
          for (const auto& f : declared) names.push_back(f.name);
          throw Error(fmt::format("plot: --figure '{}' is not a figure of {}; declared: {}", name, file,
                                  names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
        }
      }
      ATTNLAB_CHECK(!every_figure || !declared.empty(), Error,
                    "plot: {} declares no figures (a trainer or dataset declares the figures of the data it writes)",
                    file);
      for (auto f : declared) {
        if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), f.name) == wanted.end()) continue;
        if (count > 0) f.panels = count;
        figures.push_back({safe(f.name), [&in, f, &size](const std::string& p) {
                             plot::declared_figure(read_figure_data(in, f), p, size);
                           }});
      }
    }
    if (all || heads) {
      const auto ablations = read_ablations(in);
      const auto pruning = read_pruning(in);
      ATTNLAB_CHECK(!heads || !ablations.empty() || !pruning.empty(), Error,
                    "plot: --heads: {} holds neither /ablation (runner ablate) nor /pruning (runner prune)", file);
      for (const auto& a : ablations) {
        figures.push_back({"ablation_" + safe(a.name), [a, file, &size](const std::string& p) {
                             plot::ablation_figure(a, fmt::format("{}: ablation '{}' (split {})", fs::path(file).filename().string(), a.name, a.split),
                                                   p, size);
                           }});
      }
      std::vector<std::string> splits;  // one figure per split: importance and random order together
      for (const auto& c : pruning) {
        if (std::find(splits.begin(), splits.end(), c.split) == splits.end()) splits.push_back(c.split);
      }
      for (const auto& split : splits) {
        std::vector<PruningCurve> curves;
        for (const auto& c : pruning) {
          if (c.split == split) curves.push_back(c);
        }
        figures.push_back({"pruning_" + safe(split), [curves, split, file, &size](const std::string& p) {
                             std::vector<const PruningCurve*> ptrs;
                             for (const auto& c : curves) ptrs.push_back(&c);
                             plot::pruning_figure(ptrs, fmt::format("{}: pruning on {}", fs::path(file).filename().string(), split), p, size);
                           }});
      }
    }
    ATTNLAB_CHECK(!figures.empty(), Error, "plot: nothing to draw in {} (no metrics, attention or figures)", file);

    const auto ext = fs::path(out).extension().string();
    const bool single_file = !out.empty() && (ext == ".png" || ext == ".svg" || ext == ".PNG" || ext == ".SVG");
    // "-o l.jpg" made a folder named l.jpg: a name with another extension is refused, unless it is
    // a folder that exists. A symlink loop, a FIFO or a file where a folder goes is named.
    if (!out.empty() && !single_file) {
      const auto why = files::problem(out, ext.empty() ? files::Want::DirectoryToMake : files::Want::Directory);
      ATTNLAB_CHECK(ext.empty() || why != "no such directory", Error,
                    "plot: -o {}: cannot write '{}' files; name a .png or .svg file, or a folder", out, ext);
      ATTNLAB_CHECK(why.empty(), Error, "plot: -o {}: {}", out, why);
    }
    if (single_file) {
      ATTNLAB_CHECK(figures.size() == 1, Error,
                    "plot: {} figures were chosen but -o names one file ({}); give a folder, or choose one figure "
                    "with --attention MODULE, --losses or --figure NAME",
                    figures.size(), asked);
      figures.front().draw(out);
      return {out};
    }
    const fs::path dir = out.empty() ? fs::path(default_dir) : fs::path(out);
    std::vector<std::string> drawn;
    for (const auto& f : figures) {
      drawn.push_back((dir / (f.name + "." + format)).string());
      f.draw(drawn.back());
    }
    return drawn;
  };
  const auto ext = fs::path(out).extension().string();
  const bool one_file = ext == ".png" || ext == ".svg" || ext == ".PNG" || ext == ".SVG";
  {
    const ScratchDir scratch;
    const std::string scratch_file = scratch.path + "/figure" + ext;
    try {
      results::rehearse_read(file, [&] { draw(one_file ? scratch_file : scratch.path); });
    } catch (const std::exception& e) {
      rethrow_naming(e, scratch_file, out, scratch.path, out.empty() ? default_dir : out);
    }
  }
  for (const auto& path : draw(out)) std::cout << path << "\n";
  return 0;
}

}  // namespace attnlab::tools
