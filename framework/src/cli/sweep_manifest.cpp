#include "cli/sweep_manifest.hpp"

#include <attnlab/config/node.hpp>
#include <attnlab/error.hpp>
#include <attnlab/files.hpp>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/json.hpp"

namespace attnlab::cli::sweep {
namespace {
namespace fs = std::filesystem;

void emit_strings(YAML::Emitter& e, const std::vector<std::string>& v) {
  e << YAML::Flow << YAML::BeginSeq;
  for (const auto& s : v) e << s;
  e << YAML::EndSeq;
}

void emit_optional(YAML::Emitter& e, const std::optional<int>& v) {
  if (v) {
    e << *v;
  } else {
    e << YAML::Null;
  }
}

std::string emit(const Manifest& m) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  e << YAML::Key << "sweep" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "experiment" << YAML::Value << m.spec.experiment;
  e << YAML::Key << "axes" << YAML::Value << YAML::BeginMap;
  for (const auto& axis : m.spec.axes) {
    e << YAML::Key << axis.key << YAML::Value;
    emit_strings(e, axis.values);
  }
  e << YAML::EndMap;
  e << YAML::Key << "overrides" << YAML::Value;
  emit_strings(e, m.spec.overrides);
  e << YAML::EndMap;
  e << YAML::Key << "command_line" << YAML::Value << m.command_line;
  e << YAML::Key << "created" << YAML::Value << m.created;
  e << YAML::Key << "jobs" << YAML::Value << m.jobs;
  e << YAML::Key << "launcher" << YAML::Value << m.launcher;
  e << YAML::Key << "slurm_job" << YAML::Value << m.slurm_job;
  e << YAML::Key << "threads" << YAML::Value;
  emit_optional(e, m.threads);
  e << YAML::Key << "plugin_path" << YAML::Value;
  emit_strings(e, m.plugin_dirs);
  e << YAML::Key << "runs" << YAML::Value << YAML::BeginSeq;
  for (const auto& r : m.runs) {
    e << YAML::BeginMap;
    e << YAML::Key << "name" << YAML::Value << r.name;
    e << YAML::Key << "overrides" << YAML::Value;
    emit_strings(e, r.overrides);
    e << YAML::Key << "results" << YAML::Value << r.results;
    e << YAML::Key << "log" << YAML::Value << r.log;
    e << YAML::Key << "status" << YAML::Value << r.status;
    e << YAML::Key << "exit_code" << YAML::Value;
    emit_optional(e, r.exit_code);
    e << YAML::Key << "started" << YAML::Value << r.started;
    e << YAML::Key << "finished" << YAML::Value << r.finished;
    e << YAML::Key << "seconds" << YAML::Value << fmt::format("{:.3f}", r.seconds);
    e << YAML::Key << "attempts" << YAML::Value << r.attempts;
    e << YAML::EndMap;
  }
  e << YAML::EndSeq << YAML::EndMap;
  return fmt::format("# runner sweep: the sweep, its runs and their status (rewritten on every change).\n"
                     "# Resume with: runner sweep <this folder> --resume\n{}\n",
                     e.c_str());
}

/// The manifest as JSON (sweep.json), written from the struct (a parse of the YAML would meet the
/// config tree's size limit in a sweep of thousands of runs); each value typed as a YAML 1.2 reader
/// of sweep.yaml types it (config/json.hpp).
std::string emit_json(const Manifest& m) {
  using config::json_scalar;
  using config::json_string;
  const auto list = [](const std::vector<std::string>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i > 0 ? ", " : "") + json_scalar(v[i]);
    return s + "]";
  };
  const auto optional = [](const std::optional<int>& v) { return v ? std::to_string(*v) : std::string("null"); };
  std::string axes;
  for (const auto& axis : m.spec.axes) axes += (axes.empty() ? "" : ", ") + json_string(axis.key) + ": " + list(axis.values);
  std::string s = fmt::format(
      R"({{"sweep": {{"experiment": {}, "axes": {{{}}}, "overrides": {}}}, "command_line": {}, "created": {}, )"
      R"("jobs": {}, "launcher": {}, "slurm_job": {}, "threads": {}, "plugin_path": {}, "runs": [)",
      json_scalar(m.spec.experiment), axes, list(m.spec.overrides), json_scalar(m.command_line), json_scalar(m.created),
      m.jobs, json_scalar(m.launcher), json_scalar(m.slurm_job), optional(m.threads), list(m.plugin_dirs));
  for (size_t i = 0; i < m.runs.size(); ++i) {
    const auto& r = m.runs[i];
    s += fmt::format(
        R"({}{{"name": {}, "overrides": {}, "results": {}, "log": {}, "status": {}, "exit_code": {}, "started": {}, )"
        R"("finished": {}, "seconds": {}, "attempts": {}}})",
        i > 0 ? ", " : "", json_scalar(r.name), list(r.overrides), json_scalar(r.results), json_scalar(r.log),
        json_scalar(r.status), optional(r.exit_code), json_scalar(r.started), json_scalar(r.finished),
        json_scalar(fmt::format("{:.3f}", r.seconds)), r.attempts);
  }
  return s + "]}\n";
}

std::vector<std::string> strings(const config::Node& n) {
  std::vector<std::string> out;
  ATTNLAB_CHECK(n.is_seq(), ConfigError, "{}: expected a list", n.where());
  for (size_t i = 0; i < n.size(); ++i) out.push_back(n[i].str());
  return out;
}

std::string scalar_or_empty(const config::Node& map, const std::string& key) {
  const auto* n = map.find(key);
  return n != nullptr && n->is_scalar() ? n->str() : "";
}

}  // namespace

std::string utc_now() {
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}",
                     fmt::gmtime(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())));
}

void write_manifest(const std::string& dir, const Manifest& m) {
  const auto replace = [&](const char* name, const std::string& text) {
    const auto path = fs::path(dir) / name;
    const auto tmp = fs::path(dir) / (std::string(name) + ".tmp");
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << text;
      out.flush();
      ATTNLAB_CHECK(out.good(), ResultsError, "cannot write the sweep manifest {}", tmp.string());
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    ATTNLAB_CHECK(!ec, ResultsError, "cannot replace the sweep manifest {}: {}", path.string(), ec.message());
  };
  replace(kManifestName, emit(m));
  replace(kManifestJsonName, emit_json(m));
}

Manifest read_manifest(const std::string& dir) {
  const auto path = (fs::path(dir) / kManifestName).string();
  if (const auto why = files::problem(dir, files::Want::Directory); !why.empty()) {
    throw ConfigError(fmt::format("{} is not a sweep folder: {}", dir, why));
  }
  ATTNLAB_CHECK(files::problem(path, files::Want::File).empty(), ConfigError, "{} is not a sweep folder: it has no {}", dir,
                kManifestName);
  Manifest m;
  m.spec = read_sweep_file(path);
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const auto root = config::parse_yaml(ss.str(), path);
  m.command_line = scalar_or_empty(root, "command_line");
  m.created = scalar_or_empty(root, "created");
  m.slurm_job = scalar_or_empty(root, "slurm_job");
  if (const auto launcher = scalar_or_empty(root, "launcher"); !launcher.empty()) m.launcher = launcher;
  if (const auto* j = root.find("jobs"); j != nullptr && j->is_scalar()) m.jobs = static_cast<int>(j->as_int());
  if (const auto* t = root.find("threads"); t != nullptr && t->is_scalar()) m.threads = static_cast<int>(t->as_int());
  if (const auto* p = root.find("plugin_path")) m.plugin_dirs = strings(*p);
  const auto& runs = root.at("runs");
  ATTNLAB_CHECK(runs.is_seq(), ConfigError, "{}: expected a list of runs", runs.where());
  // A sweep has at least one run; an empty list is a damaged manifest, not a finished sweep.
  ATTNLAB_CHECK(runs.size() > 0, ConfigError, "{}: 'runs' is empty: a sweep manifest lists at least one run",
                runs.where());
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& n = runs[i];
    ManifestRun r;
    r.name = n.at("name").str();
    r.overrides = strings(n.at("overrides"));
    r.results = n.at("results").str();
    r.log = n.at("log").str();
    r.status = n.at("status").str();
    ATTNLAB_CHECK(std::find(std::begin(kStatuses), std::end(kStatuses), r.status) != std::end(kStatuses), ConfigError,
                  "{}: unknown status '{}'", n.at("status").where(), r.status);
    if (const auto* c = n.find("exit_code"); c != nullptr && c->is_scalar()) r.exit_code = static_cast<int>(c->as_int());
    r.started = scalar_or_empty(n, "started");
    r.finished = scalar_or_empty(n, "finished");
    if (const auto* s = n.find("seconds"); s != nullptr && s->is_scalar()) r.seconds = s->as_double();
    if (const auto* a = n.find("attempts"); a != nullptr && a->is_scalar()) r.attempts = static_cast<int>(a->as_int());
    // A file name, never a path: a manifest edited to point elsewhere must not make a run write there.
    ATTNLAB_CHECK(r.results.find('/') == std::string::npos && r.log.find('/') == std::string::npos, ConfigError,
                  "{}: run '{}': results and log are file names inside the folder", n.where(), r.name);
    m.runs.push_back(std::move(r));
  }
  return m;
}

}  // namespace attnlab::cli::sweep
