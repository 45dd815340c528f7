#include "run/op_counts.hpp"

#include <attnlab/error.hpp>

#include <ATen/record_function.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace attnlab::run {
namespace {

// What is counted, by name, and how many aten ops ran outside any other (what the model's code
// called, as opposed to what composite ops expand into).
struct Counts {
  std::mutex mutex;
  std::map<std::string, int64_t> by_name, top_level_by_name;
  int64_t aten = 0, top_level = 0, backward = 0;
};
Counts& counts() {
  static Counts c;
  return c;
}
thread_local int t_depth = 0;  // aten ops open on this thread

struct Opened : at::ObserverContext {
  bool aten = false;
};

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  const std::string name = fn.name();
  auto ctx = std::make_unique<Opened>();
  Counts& c = counts();
  std::lock_guard lock(c.mutex);
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    ++c.backward;
    ++c.by_name[name];
  } else if (name.starts_with("aten::")) {
    ctx->aten = true;
    ++c.aten;
    if (t_depth == 0) {
      ++c.top_level;
      ++c.top_level_by_name[name];
    }
    ++t_depth;
    ++c.by_name[name];
  }
  return ctx;
}

void on_end(const at::RecordFunction&, at::ObserverContext* ctx) {
  if (ctx != nullptr && static_cast<Opened*>(ctx)->aten) --t_depth;
}

}  // namespace

std::unique_ptr<OpCounter> OpCounter::from_environment() {
  const char* path = std::getenv("ATTNLAB_OP_COUNTS");
  if (path == nullptr || *path == '\0') return nullptr;
  return std::make_unique<OpCounter>(path);
}

OpCounter::OpCounter(std::string path) : path_(std::move(path)) {
  std::ofstream out(path_, std::ios::trunc);
  ATTNLAB_CHECK(out.good(), ConfigError, "ATTNLAB_OP_COUNTS: cannot write {}", path_);
  handle_ = at::addGlobalCallback(at::RecordFunctionCallback(on_start, on_end)
                                      .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
}

OpCounter::~OpCounter() { at::removeCallback(handle_); }

void OpCounter::epoch(int64_t epoch) {
  Counts& c = counts();
  std::vector<std::pair<std::string, int64_t>> top, top_level_top;
  int64_t aten = 0, top_level = 0, backward = 0;
  {
    std::lock_guard lock(c.mutex);
    top.assign(c.by_name.begin(), c.by_name.end());
    top_level_top.assign(c.top_level_by_name.begin(), c.top_level_by_name.end());
    c.top_level_by_name.clear();
    aten = std::exchange(c.aten, 0);
    top_level = std::exchange(c.top_level, 0);
    backward = std::exchange(c.backward, 0);
    c.by_name.clear();
  }
  const auto most = [](std::vector<std::pair<std::string, int64_t>>& v) {
    std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    v.resize(std::min<size_t>(v.size(), 25));
    std::string names;
    for (const auto& [name, n] : v) names += fmt::format("{}[\"{}\", {}]", names.empty() ? "" : ", ", name, n);
    return names;
  };
  const std::string names = most(top), top_level_names = most(top_level_top);
  std::ofstream out(path_, std::ios::app);
  out << fmt::format(
      "{{\"epoch\": {}, \"aten_ops\": {}, \"top_level_aten_ops\": {}, \"backward_nodes\": {}, \"top\": [{}], "
      "\"top_level_top\": [{}]}}\n",
      epoch, aten, top_level, backward, names, top_level_names);
}

}  // namespace attnlab::run
