// message_without_backtrace (attnlab/error.hpp): the one place where the host reads LibTorch's
// errors, in libattnlab beside the plugin seam; core/ (and so the tools) stays without LibTorch.
#include <attnlab/error.hpp>

#include <c10/util/Exception.h>

namespace attnlab {

std::string message_without_backtrace(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

}  // namespace attnlab
