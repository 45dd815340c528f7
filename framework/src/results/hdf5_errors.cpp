// HDF5's errors in our words (results/hdf5.hpp): its automatic printing off, and its error stack
// said as one line without its internal function names.
#include "results/hdf5.hpp"

#include <fmt/format.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace attnlab::results::h5 {

void silence_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

namespace {

std::string message_of(hid_t id) {
  char buf[256] = {0};
  if (id < 0 || H5Eget_msg(id, nullptr, buf, sizeof buf) < 0) return {};
  return buf;
}

struct Entry {
  std::string desc;   // what the call was doing, or why it failed ("incorrect metadata checksum ...")
  std::string minor;  // HDF5's class of the failure ("Read failed", "Bad value")
};

herr_t collect(unsigned /*n*/, const H5E_error2_t* err, void* data) {
  static_cast<std::vector<Entry>*>(data)->push_back({err->desc ? err->desc : "", message_of(err->min_num)});
  return 0;
}

bool mentions(const std::vector<Entry>& stack, std::initializer_list<const char*> words) {
  for (const auto& e : stack) {
    for (const char* w : words) {
      if (e.desc.find(w) != std::string::npos || e.minor.find(w) != std::string::npos) return true;
    }
  }
  return false;
}

}  // namespace

std::string error_stack() {
  std::vector<Entry> stack;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect, &stack);
  H5Eclear2(H5E_DEFAULT);
  if (stack.empty()) return "unknown HDF5 error";
  // In words, not as HDF5's stack of internal function names: the innermost entry says why the call
  // failed; a failed checksum or signature means bytes of the file are not what HDF5 wrote.
  const std::string& why = stack.back().desc.empty() ? stack.back().minor : stack.back().desc;
  if (mentions(stack, {"checksum", "signature", "truncated", "bad object header", "past end", "addr overflow",
                       "address overflow", "bad value from load", "bad version"})) {
    return fmt::format("the file is damaged: its bytes are not what HDF5 wrote (HDF5: {})", why);
  }
  if (mentions(stack, {"unable to lock", "lock file"})) {
    return fmt::format("another process holds the file locked (HDF5: {})", why);
  }
  const std::string& what = stack.front().desc;
  return stack.size() == 1 || what == why ? fmt::format("HDF5: {}", why) : fmt::format("HDF5: {}: {}", what, why);
}

}  // namespace attnlab::results::h5
