// `runner sweep EXPERIMENT.yaml|SWEEP.yaml [key=a,b ...] [-o DIR] [--jobs N] [--fail-fast] [--dry-run]`
// and `runner sweep DIR --resume`: expand, check every run, then launch them (sweep_local.cpp).
#include <attnlab/config/load.hpp>
#include <attnlab/error.hpp>
#include <attnlab/files.hpp>
#include <attnlab/plugin/registry.hpp>
#include <attnlab/results/reader.hpp>
#include <attnlab/run/experiment.hpp>
#include <attnlab/train/trainer.hpp>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <thread>

#include "cli/commands.hpp"
#include "cli/runner_commands.hpp"
#include "cli/sweep_local.hpp"
#include "cli/sweep_manifest.hpp"
#include "cli/sweep_slurm.hpp"
#include "cli/sweep_spec.hpp"
#include "results/lock.hpp"
#include "run/sections.hpp"
#include "run/setup.hpp"

namespace attnlab::cli {
namespace {
namespace fs = std::filesystem;
using namespace sweep;

/// What decides whether a run's plugins can be built: its dataset, model and trainer sections.
std::string build_key(const config::Node& root) {
  std::string key;
  for (const char* section : {"dataset", "model", "trainer"}) {
    const auto* n = root.find(section);
    key += fmt::format("{}:\n{}\n", section, n != nullptr ? config::to_yaml(*n) : std::string());
  }
  return key;
}

/// The dataset, model and trainer of a run built as the runner builds them (on the CPU), and the
/// trainer's check: what the plugins themselves refuse (4 heads do not divide 6 hiddens, kv_heads,
/// a scorer that cannot serve cross-attention, a model the dataset cannot feed).
void build_run(config::Node root, const std::vector<std::string>& plugin_dirs) {
  // On the CPU: the sweep process stays off the GPU its runs use (a run checks its device itself).
  root.set("device", config::Node::scalar("cpu"));
  config::Options top(root, run::experiment_schema(), "the experiment", {});
  run::Setup setup = run::build_setup(top, plugin_dirs);
  const auto e = run::experiment_config(top);
  auto trainer = setup.registry->create<train::Trainer>(e.trainer, setup.ctx);
  train::TrainContext tc;
  tc.model = setup.model;
  tc.custom = setup.custom;
  tc.build = &setup.ctx;
  tc.dataset = setup.dataset.get();
  tc.device = setup.ctx.device;
  trainer->check(tc);
}

struct RunsChecked {
  bool sets_threads = false;  // any run sets `threads` (the experiment, an axis or an override)
  bool uses_cuda = false;     // any run says `device: cuda`, or `auto` where CUDA is available
};

/// Every run's config, as the runner will load it, checked before anything starts; then each
/// distinct dataset + model + trainer built once, as the runner would build it (a plugin's own
/// refusal is found before run 1 trains, not when run 2 starts). An error names the run.
RunsChecked check_runs(const Manifest& m, const std::vector<std::string>& plugin_dirs) {
  plugin::Registry registry;
  for (const auto& d : plugin_dirs) registry.add_search_dir(d);
  registry.discover();
  RunsChecked checked;
  std::vector<std::pair<const ManifestRun*, config::Node>> roots;
  for (const auto& r : m.runs) {
    std::vector<std::string> overrides = m.spec.overrides;
    overrides.insert(overrides.end(), r.overrides.begin(), r.overrides.end());
    try {
      auto root = config::load_experiment(m.spec.experiment, overrides);
      run::validate_experiment(root, registry);
      checked.sets_threads = checked.sets_threads || root.has("threads");
      const auto* device = root.find("device");
      const std::string where = device != nullptr && device->is_scalar() ? device->str() : "cpu";
      checked.uses_cuda = checked.uses_cuda || where == "cuda" || (where == "auto" && torch::cuda::is_available());
      roots.emplace_back(&r, std::move(root));
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("sweep run '{}': {}", r.name, e.what()));
    } catch (const PluginError& e) {
      throw PluginError(fmt::format("sweep run '{}': {}", r.name, e.what()));
    }
  }
  std::set<std::string> built;
  for (const auto& [r, root] : roots) {
    if (!built.insert(build_key(root)).second) continue;
    try {
      build_run(root, plugin_dirs);
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("sweep run '{}': {}", r->name, e.what()));
    } catch (const PluginError& e) {
      throw PluginError(fmt::format("sweep run '{}': {}", r->name, e.what()));
    } catch (const DataError& e) {
      throw DataError(fmt::format("sweep run '{}': {}", r->name, e.what()));
    }
  }
  return checked;
}

/// One sweep per folder at a time: <dir>/sweep.yaml.lock holds the launching sweep's pid until it
/// ends. A second `runner sweep DIR --resume` beside a live sweep would retry its running runs, be
/// refused by their results files' locks and mark them failed while they complete.
std::unique_ptr<results::WriterLock> lock_sweep(const std::string& dir) {
  const auto manifest = (fs::path(dir) / kManifestName).string();
  if (const auto pid = results::WriterLock::holder(manifest)) {
    throw Error(fmt::format("sweep folder {} is in use by another runner sweep ({}): wait for it to end or stop it, "
                            "then resume with `runner sweep {} --resume`",
                            dir, results::WriterLock::who(pid), dir));
  }
  return std::make_unique<results::WriterLock>(manifest);
}

int threads_per_run(int jobs) {
  const int cores = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, jobs));
}

/// The experiment's name (for the default folder): `experiment:` after defaults, else the file stem.
std::string experiment_name(const std::string& path) {
  const auto root = config::load_experiment(path);
  const auto* n = root.find("experiment");
  return n != nullptr && n->is_scalar() ? n->str() : fs::path(path).stem().string();
}

std::string default_folder(const std::string& experiment) {
  std::string stem;
  for (unsigned char c : experiment.substr(0, 100)) stem += std::isalnum(c) || c == '-' || c == '_' ? c : '_';
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  auto path = fs::path("results") / fmt::format("sweep-{}-{:%Y%m%d-%H%M%S}", stem, fmt::gmtime(now));
  for (int i = 2; fs::exists(path); ++i) path += fmt::format("-{}", i);
  return path.string();
}

/// The status a results file records, or "" when it cannot be read.
std::string stored_status(const std::string& path) {
  try {
    return results::read_isolated(
        path, [&] { return results::ResultsReader(path, results::ReadCheck::none).attr_string("status"); });
  } catch (const std::exception&) {
    return "";
  }
}

/// Whether a rerun from scratch may replace what `results` holds: a results file (the sweep's own
/// earlier attempt at this run) or nothing. Anything else there (a file of the user's) stays, and
/// the run is refused again, naming it.
bool ours(const std::string& results, const std::string& stored) {
  std::error_code ec;
  return !stored.empty() || !fs::exists(results, ec);
}

/// What --resume runs: missing (a done run whose file is gone or says otherwise), pending, failed,
/// interrupted, running (a sweep killed outright); with --resume RUN.h5 where its checkpoint exists.
std::vector<Job> resume_jobs(const std::string& dir, Manifest& m) {
  std::vector<Job> jobs;
  std::map<std::string, int> why;
  for (size_t i = 0; i < m.runs.size(); ++i) {
    auto& r = m.runs[i];
    const auto results = (fs::path(dir) / r.results).string();
    const auto stored = stored_status(results);
    if ((r.status == "pending" || r.status == "running") && (stored == "completed" || stored == "diverged")) {
      r.status = stored;  // finished where the manifest did not see it (a Slurm task, a killed sweep)
      continue;
    }
    if (r.status == "completed" || r.status == "diverged") {
      if (stored == r.status) continue;
      ++why["missing"];
      r.status = "pending";
      jobs.push_back({i, false, ours(results, stored)});
      continue;
    }
    ++why[r.status];
    const bool resumable = !stored.empty() && r.status != "failed" && r.status != "pending" &&
                           fs::exists(results + ".ckpt/last.pt");
    jobs.push_back({i, resumable, !resumable && ours(results, stored)});
  }
  std::string reasons;
  for (const auto& [status, n] : why) reasons += fmt::format("{}{} {}", reasons.empty() ? "" : ", ", n, status);
  std::cerr << fmt::format("runner sweep: {} of {} runs to run{}\n", jobs.size(), m.runs.size(),
                           reasons.empty() ? "" : " (" + reasons + ")");
  return jobs;
}

void print_dry_run(const std::string& dir, const Manifest& m, const std::vector<Job>& jobs, int n_jobs) {
  std::cout << fmt::format("{} runs into {} ({} at a time, {})\n", jobs.size(), dir, n_jobs,
                           m.threads ? fmt::format("threads={} each", *m.threads) : std::string("threads as set"));
  for (const auto& job : jobs) {
    std::string line;
    for (const auto& a : run_command("runner", dir, m, job)) line += (line.empty() ? "" : " ") + shell_quote(a);
    std::cout << m.runs[job.run].name << ": " << line << "\n";
  }
}

}  // namespace

int cmd_sweep(int argc, char** argv) {
  CLI::App app{"Run an experiment over a grid of overrides (local processes), or resume a sweep folder"};
  std::vector<std::string> positional, plugin_dirs;
  std::string output, launcher;
  std::vector<std::string> sbatch_args;
  int n_jobs = 0;
  bool fail_fast = false, dry_run = false, resume = false;
  app.add_option("target", positional,
                 "experiment or sweep file, then key=a,b / key=range(0,10) axes and key=value overrides; "
                 "or a sweep folder with --resume")
      ->required();
  app.add_option("-o,--output", output, "the sweep folder (default results/sweep-<experiment>-<UTC time>)")
      ->check(not_an_option());
  app.add_option("--jobs", n_jobs, "runs at a time (default 1); each gets threads=max(1, cores/jobs) unless set")
      ->check(CLI::Range(1, 1024));
  app.add_flag("--fail-fast", fail_fast, "after the first failed run, start no other and stop the running ones");
  app.add_flag("--dry-run", dry_run, "check every run and print their command lines; run nothing");
  app.add_flag("--resume", resume, "rerun what is missing, failed or interrupted in the sweep folder");
  app.add_option("--launcher", launcher, "local (default: child processes here) or slurm (one sbatch --array job)")
      ->check(CLI::IsMember({"local", "slurm"}));
  app.add_option("--sbatch-arg", sbatch_args, "with slurm: one more '#SBATCH ARG' line, e.g. --sbatch-arg=--time=1:00:00")
      ->allow_extra_args(false);
  add_plugin_path_option(app, plugin_dirs);
  app.footer("Values: key=a,b is an axis, key=range(0,10[,step]) one of integers; quote a value holding a\n"
             "comma (key=\"'a,b'\") or write it as YAML (key=[1,2]). key=value alone applies to every run.\n"
             "Examples:\n"
             "  runner sweep experiments/corners_norm_first.yaml model.norm=first,last seed=range(0,10) --jobs 2\n"
             "  runner sweep results/sweep-corners_norm_first-20261123-200000 --resume\n"
             "  runner compare results/sweep-corners_norm_first-20261123-200000 --group-by model.norm");
  if (auto code = parse_command_line(app, argc, argv, "runner sweep")) return *code;
  const std::string target = positional[0];
  const std::vector<std::string> args(positional.begin() + 1, positional.end());
  // Before anything below loads a plugin or runs a torch op (check_runs builds every model).
  auto server = dry_run || launcher == "slurm" ? nullptr : ForkServer::start(runner_main);

  Manifest m;
  // Runs on a GPU are exec'd, as before the server: it has not been tried with CUDA yet.
  const auto check = [&](const std::vector<std::string>& dirs) {
    const auto checked = check_runs(m, dirs);
    if (checked.uses_cuda) server.reset();
    return checked;
  };
  std::string dir;
  std::vector<Job> jobs;
  std::unique_ptr<results::WriterLock> lock;  // held until the sweep ends (not for --dry-run)
  if (resume) {
    ATTNLAB_CHECK(args.empty() && output.empty(), Error,
                  "runner sweep --resume takes the sweep folder alone (its manifest holds the axes and overrides)");
    dir = target;
    m = read_manifest(dir);  // names what is wrong with the folder before a lock is made in it
    if (!dry_run) {
      lock = lock_sweep(dir);
      m = read_manifest(dir);  // as the sweep that held the lock last left it
    }
    if (!plugin_dirs.empty()) m.plugin_dirs = plugin_dirs;
    if (!launcher.empty()) m.launcher = launcher;
    if (n_jobs > 0) {
      m.jobs = n_jobs;
      if (m.threads) m.threads = threads_per_run(n_jobs);
    }
    check(m.plugin_dirs);
    jobs = resume_jobs(dir, m);
  } else {
    // POSIX checks (files::problem), never std::filesystem's throwing ones: a symlink loop is named.
    ATTNLAB_CHECK(!files::problem(target, files::Want::Directory).empty(), Error, "{} is a folder: {}", target,
                  files::problem((fs::path(target) / kManifestName).string(), files::Want::File).empty()
                      ? "resume its sweep with --resume"
                      : "expected an experiment or sweep file");
    if (const auto why = files::problem(target, files::Want::File); !why.empty()) {
      throw ConfigError(fmt::format("sweep: experiment or sweep file '{}': {}", target, why));
    }
    if (is_sweep_file(target)) {
      m.spec = read_sweep_file(target);
    } else {
      m.spec.experiment = target;
    }
    add_arguments(m.spec, args);
    if (const auto why = files::problem(m.spec.experiment, files::Want::File); !why.empty()) {
      throw ConfigError(fmt::format("sweep: experiment file '{}': {}", m.spec.experiment, why));
    }
    m.spec.experiment = fs::absolute(m.spec.experiment).lexically_normal().string();
    m.jobs = std::max(1, n_jobs);
    m.plugin_dirs = plugin_dirs;
    m.command_line = "runner sweep";
    for (int i = 1; i < argc; ++i) m.command_line += " " + shell_quote(argv[i]);
    for (const auto& r : expand(m.spec)) {
      ManifestRun run;
      run.name = r.name;
      run.overrides = r.overrides;
      run.results = r.name + ".h5";
      run.log = r.name + ".log";
      m.runs.push_back(std::move(run));
    }
    m.launcher = launcher.empty() ? "local" : launcher;
    // A Slurm task gets its cores from Slurm (--sbatch-arg=--cpus-per-task=N), not from --jobs.
    if (!check(plugin_dirs).sets_threads && m.launcher == "local") m.threads = threads_per_run(m.jobs);
    dir = !output.empty() ? output : !m.spec.output.empty() ? m.spec.output : default_folder(experiment_name(m.spec.experiment));
    const auto manifest = (fs::path(dir) / kManifestName).string();
    const auto manifest_why = files::problem(manifest, files::Want::File);
    ATTNLAB_CHECK(manifest_why.empty() || manifest_why == "no such file", Error, "sweep folder {}: {}: {}", dir, manifest,
                  manifest_why);
    ATTNLAB_CHECK(!manifest_why.empty(), Error,
                  "{} holds a sweep already ({}): resume it with `runner sweep {} --resume`, or choose another -o", dir,
                  kManifestName, dir);
    for (size_t i = 0; i < m.runs.size(); ++i) jobs.push_back({i, false});
  }
  dir = fs::absolute(dir).lexically_normal().string();
  const std::string runner = runner_path();
  if (dry_run) {
    if (m.launcher == "slurm") {
      std::cout << (jobs.empty() ? std::string("# nothing to submit\n") : slurm_script(runner, dir, m, jobs, sbatch_args));
    } else {
      print_dry_run(dir, m, jobs, m.jobs);
    }
    return 0;
  }
  if (!resume) {
    fs::create_directories(dir);
    lock = lock_sweep(dir);
    ATTNLAB_CHECK(!fs::exists(fs::path(dir) / kManifestName), Error,
                  "{} holds a sweep already ({}): resume it with `runner sweep {} --resume`, or choose another -o", dir,
                  kManifestName, dir);
    m.created = utc_now();
    write_manifest(dir, m);
  }
  if (m.launcher == "slurm") {
    write_manifest(dir, m);  // the statuses --resume found
    if (jobs.empty()) return 0;
    const auto script = (fs::path(dir) / "sweep.sbatch").string();
    {
      std::ofstream out(script);
      out << slurm_script(runner, dir, m, jobs, sbatch_args);
      ATTNLAB_CHECK(out.good(), ResultsError, "cannot write {}", script);
    }
    m.slurm_job = submit_slurm(script);
    write_manifest(dir, m);
    std::cerr << fmt::format("runner sweep: submitted Slurm job {} ({} runs, {} at a time; script {}). When it has "
                             "finished: runner sweep {} --resume --dry-run shows what is left.\n",
                             m.slurm_job, jobs.size(), m.jobs, script, dir);
    return 0;
  }
  std::cerr << fmt::format("runner sweep: {} runs in {} ({} at a time)\n", jobs.size(), dir, m.jobs);
  return run_local(dir, m, jobs, {m.jobs, fail_fast, server.get()});
}

}  // namespace attnlab::cli
