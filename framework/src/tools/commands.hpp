#pragma once
// The runner's subcommands that read results files: they need neither LibTorch nor plugins, and
// run in bin/runner itself (framework/src/cli/front.cpp), which starts without loading LibTorch.
// Each gets argv starting at its own name, parses its own options and returns the exit code.
#include "tools/command_line.hpp"

namespace attnlab::tools {

/// `runner compare A.h5 B.h5 [...] [--metric M] [--format table|markdown|csv] [--plot out.png]`:
/// runs side by side (differing config keys, final/best metrics, attention statistics).
int cmd_compare(int argc, char** argv);

/// `runner plot RUN.h5 [--attention MODULE] [--sample S] [--losses] [--figure NAME] [-o OUT]`:
/// attention heatmaps, metric curves and the figures the run's plugins declared, as PNG or SVG.
int cmd_plot(int argc, char** argv);

/// `runner report A.h5 [B.h5 ... | DIR] -o PAGE.html [--group-by KEYS]`: one self-contained HTML
/// page: curves, compare's tables, an attention explorer, translations and declared figures.
int cmd_report(int argc, char** argv);

/// `runner rollout RUN.h5 [--sample S] [--module M] [--method rollout|flow|both] [--format F] [--write]`:
/// attention rollout, attention flow and the encoder-decoder path of one recorded sentence.
int cmd_rollout(int argc, char** argv);

}  // namespace attnlab::tools
