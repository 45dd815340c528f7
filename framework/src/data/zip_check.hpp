#pragma once
// A zip archive read through once with its CRCs checked (libzip): LibTorch's reader does not check
// them, so a checkpoint with bytes changed after it was written (a bad disk, a partial copy over a
// good file) loaded, and the run went on with the changed weights.
#include <string>

namespace attnlab::data {

/// "" when every member of the zip archive at `path` reads whole and matches its CRC-32; else why
/// not, in words ("its member 'x/data/3' does not match its checksum: ..."). Reads the file once,
/// in 1 MiB pieces.
std::string zip_damage(const std::string& path);

}  // namespace attnlab::data
