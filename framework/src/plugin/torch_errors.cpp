// message_without_backtrace (attnlab/error.hpp): the one place where the host reads LibTorch's
// errors, in libattnlab beside the plugin seam; core/ (and so the tools) stays without LibTorch.
#include <attnlab/error.hpp>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <cstdlib>
#include <string>

namespace attnlab {
namespace {

/// LibTorch's words as a user needs them: the "[enforce fail at alloc_cpu.cpp:127] err == 0. "
/// prefix (a source place of LibTorch's, not the user's) is dropped, and the CPU allocator's
/// "DefaultCPUAllocator: can't allocate memory: you tried to allocate 14745600000 bytes. Error
/// code 12 (Cannot allocate memory)" says the size in GiB: "out of memory: can't allocate memory
/// for one tensor of 13.7 GiB (Cannot allocate memory)".
std::string in_our_words(std::string what) {
  if (what.rfind("[enforce fail at ", 0) == 0) {
    if (const auto end = what.find("] "); end != std::string::npos) what.erase(0, end + 2);
    if (what.rfind("err == 0. ", 0) == 0) what.erase(0, 10);
  }
  const std::string tried = "DefaultCPUAllocator: can't allocate memory: you tried to allocate ";
  if (const auto at = what.find(tried); at != std::string::npos) {
    const double bytes = std::strtod(what.c_str() + at + tried.size(), nullptr);
    std::string why;
    if (const auto open = what.find('(', at), close = what.rfind(')');
        open != std::string::npos && close != std::string::npos && close > open) {
      why = fmt::format(" ({})", what.substr(open + 1, close - open - 1));
    }
    return fmt::format("out of memory: can't allocate memory for one tensor of {:.1f} GiB{}", bytes / (1 << 30), why);
  }
  while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) what.pop_back();
  return what;
}

}  // namespace

std::string message_without_backtrace(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) return in_our_words(c10->what_without_backtrace());
  return e.what();
}

}  // namespace attnlab
