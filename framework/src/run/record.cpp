// The run's results file: its path, its attributes in one call, its end (run/record.hpp).
#include "run/record.hpp"

#include <attnlab/error.hpp>
#include <attnlab/files.hpp>
#include <attnlab/train/checkpoint.hpp>
#include <attnlab/train/translate.hpp>
#include <attnlab/version.hpp>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "core/shell.hpp"
#include "results/lock.hpp"

namespace attnlab::run {
namespace fs = std::filesystem;
namespace {

/// The experiment name as a file name in results/: only ASCII letters, digits, '-', '_' and '.'
/// are kept (the rest, '/' included, become '_'), a leading '.' becomes '_', at most 100 bytes;
/// "" is "experiment". So `experiment: ../../etc/x` writes results/_._.._etc_x-<time>.h5.
std::string file_stem(const std::string& experiment) {
  std::string out;
  for (unsigned char ch : experiment.substr(0, 100)) {
    const bool keep = ch < 0x80 && (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.');
    out += keep ? static_cast<char>(ch) : '_';
  }
  if (!out.empty() && out.front() == '.') out.front() = '_';
  return out.empty() ? "experiment" : out;
}

std::string& build_commit_slot() {
  static std::string commit;
  return commit;
}

/// What `command` prints, trailing newlines removed; "" when it fails.
std::string output_of(const std::string& command) {
  std::string out;
  if (FILE* p = popen((command + " 2>/dev/null").c_str(), "r")) {
    char buf[256];
    while (fgets(buf, sizeof buf, p)) out += buf;
    if (pclose(p) != 0) out.clear();
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

/// The commit of the git checkout that holds `file` (HEAD of its folder's repository), "-dirty"
/// added when the file is not as that commit has it (changed, untracked or ignored); "" when
/// the file is in no checkout (or git is missing).
std::string file_git_commit(const std::string& file) {
  std::error_code ec;
  const fs::path path = fs::absolute(file, ec);
  if (ec || file.empty()) return {};
  const std::string dir = shell_quote(path.parent_path().string());
  const std::string head = output_of("git -C " + dir + " rev-parse --short HEAD");
  if (head.empty() || head.find_first_not_of("0123456789abcdef") != std::string::npos) return {};
  const std::string status =
      output_of("git -C " + dir + " status --porcelain --ignored -- " + shell_quote(path.filename().string()));
  return status.empty() ? head : head + "-dirty";
}

}  // namespace

void set_build_commit(std::string commit) { build_commit_slot() = std::move(commit); }

std::string default_results_path(const std::string& experiment) {
  auto now = std::chrono::system_clock::now();
  auto stamp = fmt::format("{:%Y%m%d-%H%M%S}", fmt::gmtime(std::chrono::system_clock::to_time_t(now)));
  const std::string stem = file_stem(experiment);
  auto path = fs::path("results") / fmt::format("{}-{}.h5", stem, stamp);
  std::error_code ec;  // a symlink loop at results/ is reported by name when the file is created
  for (int i = 2; fs::exists(path, ec); ++i) path = fs::path("results") / fmt::format("{}-{}-{}.h5", stem, stamp, i);
  return path.string();
}

void check_results_path(const std::string& path, bool resume, bool overwrite) {
  const auto why = files::problem(path, resume ? files::Want::File : files::Want::FileToWrite);
  ATTNLAB_CHECK(why.empty(), ResultsError, "{} {}: {}", resume ? "cannot resume" : "cannot write results file", path,
                why);
  const auto dir = train::checkpoint_dir(path);
  const auto dir_why = files::problem(dir, files::Want::DirectoryToMake);
  ATTNLAB_CHECK(dir_why.empty(), ResultsError, "checkpoint folder {} of results file {}: {}", dir, path, dir_why);
  if (resume || overwrite) return;
  // A new run never replaces an earlier one unasked (docs/COMMANDS.md, "Files the runner writes").
  std::error_code ec;
  const auto choices = fmt::format(
      "continue that run with `runner --resume {0} EXPERIMENT`, replace it with --overwrite, or name another "
      "file with --results",
      path);
  if (fs::exists(path, ec)) {
    if (const auto pid = results::WriterLock::holder(path)) throw ResultsError(results::WriterLock::busy(path, pid));
    const auto size = fs::file_size(path, ec);
    const auto when = fs::last_write_time(path, ec);
    std::string about;
    if (!ec) {
      const auto sys = std::chrono::file_clock::to_sys(when);
      about = fmt::format(" ({} bytes, written {:%Y-%m-%d %H:%M} UTC)", size,
                          fmt::gmtime(std::chrono::system_clock::to_time_t(sys)));
    }
    throw ResultsError(fmt::format("results file {} already exists{}: {}", path, about, choices));
  }
  ec.clear();
  if (fs::exists(dir, ec)) {
    throw ResultsError(fmt::format(
        "checkpoint folder {} already exists (an earlier run's checkpoints, without its results file {}): "
        "replace it with --overwrite, or name another file with --results",
        dir, path));
  }
}

RunRecord::RunRecord(const std::string& path, const std::string& experiment, bool resume, bool quiet)
    : results_(resume ? std::make_unique<results::Results>(path, results::Results::Open::Existing)
                      : std::make_unique<results::Results>(path, experiment)),
      path_(path),
      quiet_(quiet) {
  const auto checkpoints = train::checkpoint_dir(path);
  if (!resume && files::problem(checkpoints, files::Want::Directory).empty()) {
    // A new run in place of an old one: its checkpoints describe the run whose file was just
    // replaced, and evaluating its best.pt as this run's would be a lie.
    std::error_code ec;
    fs::remove_all(checkpoints, ec);
    ATTNLAB_CHECK(!ec, ResultsError, "cannot remove the previous run's checkpoints {}: {}", checkpoints, ec.message());
    if (!quiet) spdlog::info("removed the previous run's checkpoints {}", checkpoints);
  }
  if (resume) {
    results_->set_status(results::Status::Running);
    if (const auto stale = train::set_aside_evals(*results_); !stale.empty() && !quiet) {
      spdlog::warn(
          "{}: moved {} to /eval_stale: they scored checkpoints this resume replaces; score the run again "
          "with `runner eval` when it ends",
          path, fmt::join(stale, ", "));
    }
  }
}

void RunRecord::record(const RunAttributes& a) {
  auto& res = *results_;
  res.set_attr(a.resumed ? "resume_command_line" : "command_line", a.command_line);
  if (a.resumed && a.torchrun_restarts > 0) res.set_attr("torchrun_restart_count", a.torchrun_restarts);
  res.set_attr("description", a.description);
  res.set_attr("seed", a.seed);
  res.set_attr("device", a.device);
  res.set_attr("precision", a.precision);
  res.set_attr("attnlab_version", kVersion);
  res.set_attr("torch_version", kTorchVersion);
  // The commit the runner was built from (kept from the run's start; a resume adds its own), and
  // the one the experiment file lies in, when it lies in a git checkout.
  const std::string built = build_commit_slot().empty() ? std::string("unknown") : build_commit_slot();
  res.set_attr(a.resumed ? "resume_git_commit" : "git_commit", built);
  if (const std::string file_commit = file_git_commit(a.experiment_file); !file_commit.empty()) {
    res.set_attr(a.resumed ? "resume_experiment_git_commit" : "experiment_git_commit", file_commit);
  }
  res.set_attr("experiment_file", a.experiment_file);
  res.set_attr("plugins", a.plugins);
  res.set_attr("num_parameters", a.num_parameters);
  res.set_attr("threads", a.threads);
  if (!a.threads_choice.empty()) res.set_attr("threads_choice", a.threads_choice);
  res.set_attr("distributed_world_size", a.world_size);
  res.set_attr("distributed_backend", a.backend);
  res.write_config(a.config_yaml);
  res.write_strings("config_json", {a.config_json});
  res.flush();
}

int RunRecord::interrupted(const std::string& why) {
  results_->set_attr("interrupted_during", why);
  results_->set_status(results::Status::Interrupted);
  if (!quiet_) spdlog::warn("{}; partial results in {}", why, path_);
  return 130;
}

int RunRecord::diverged(const std::string& why) {
  results_->set_attr("diverged", why);
  results_->set_status(results::Status::Diverged);
  spdlog::error("training diverged ({}); results in {}", why, path_);
  return 2;
}

int RunRecord::completed() {
  results_->set_status(results::Status::Completed);
  if (!quiet_) spdlog::info("completed; results in {}", path_);
  return 0;
}

void RunRecord::failed(const std::exception& e) {
  results_->set_attr("error", message_without_backtrace(e));
  results_->set_status(results::Status::Failed);
}

}  // namespace attnlab::run
