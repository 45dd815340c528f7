#pragma once
// What a forked checking child shares (results/read_check.cpp, plugin/probe.cpp): set up to die
// alone and quietly, and its answer read back through a pipe. Not part of the SDK.
#include <string>

#include <sys/types.h>

namespace attnlab::forked {

/// In a forked child: killed with `parent` (PR_SET_PDEATHSIG; _exit(parent_gone_exit) when it has
/// ended already), no output (stdout and stderr to /dev/null), the default action for crash,
/// alarm and interrupt signals (the parent's handlers are the parent's), no core file.
void isolate_child(pid_t parent, int parent_gone_exit);

/// What `fd` holds until end of file (a read interrupted by a signal is retried), then closed.
std::string read_to_end(int fd);

}  // namespace attnlab::forked
