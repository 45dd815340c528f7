#include "plugin/elf.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <system_error>

namespace attnlab::plugin {
namespace fs = std::filesystem;

std::vector<std::string> split_path_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(':', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string elf_problem(const fs::path& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return fmt::format("cannot read its size: {}", ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) return fmt::format("cannot open it: {}", std::strerror(errno));
  Elf64_Ehdr eh{};
  if (size < sizeof eh || !in.read(reinterpret_cast<char*>(&eh), sizeof eh)) {
    return fmt::format("not a shared library (only {} bytes)", size);
  }
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return "not a shared library (no ELF header)";
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return "not a 64-bit ELF file";
#if defined(__x86_64__)
  constexpr int kMachine = EM_X86_64;
#elif defined(__aarch64__)
  constexpr int kMachine = EM_AARCH64;
#else
  constexpr int kMachine = -1;
#endif
  if (kMachine >= 0 && eh.e_machine != kMachine) {
    return fmt::format("built for another processor (ELF machine {}, this one is {})", eh.e_machine, kMachine);
  }
  if (eh.e_type != ET_DYN) return "an ELF file but not a shared library";
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff + uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr) > size) {
    return fmt::format("truncated or corrupt: its program headers end past the file's {} bytes", size);
  }
  in.seekg(static_cast<std::streamoff>(eh.e_phoff));
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph{};
    if (!in.read(reinterpret_cast<char*>(&ph), sizeof ph)) return "truncated: cannot read its program headers";
    if (ph.p_type == PT_LOAD && ph.p_offset + ph.p_filesz > size) {
      return fmt::format("truncated: a loadable segment ends at byte {} but the file has {} bytes",
                         ph.p_offset + ph.p_filesz, size);
    }
  }
  if (eh.e_shoff != 0 && eh.e_shoff + uint64_t{eh.e_shnum} * eh.e_shentsize > size) {
    return fmt::format("truncated: its section headers end past the file's {} bytes", size);
  }
  return {};
}

namespace {

/// The DT_NEEDED sonames and the DT_RUNPATH/DT_RPATH folders of an ELF shared object (already
/// checked by elf_problem), read from its dynamic segment; empty when it cannot be read.
struct DynamicInfo {
  std::vector<std::string> needed, runpath;
};

DynamicInfo read_dynamic(const fs::path& path) {
  DynamicInfo out;
  std::ifstream in(path, std::ios::binary);
  Elf64_Ehdr eh{};
  if (!in.read(reinterpret_cast<char*>(&eh), sizeof eh)) return out;
  std::vector<Elf64_Phdr> phdrs(eh.e_phnum);
  in.seekg(static_cast<std::streamoff>(eh.e_phoff));
  if (!in.read(reinterpret_cast<char*>(phdrs.data()), static_cast<std::streamsize>(phdrs.size() * sizeof(Elf64_Phdr)))) {
    return out;
  }
  // Virtual address -> file offset, through the loadable segment that holds it.
  auto file_offset = [&](uint64_t vaddr) -> std::optional<uint64_t> {
    for (const auto& ph : phdrs) {
      if (ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz) {
        return vaddr - ph.p_vaddr + ph.p_offset;
      }
    }
    return std::nullopt;
  };
  const auto dyn = std::find_if(phdrs.begin(), phdrs.end(), [](const auto& ph) { return ph.p_type == PT_DYNAMIC; });
  if (dyn == phdrs.end()) return out;
  std::vector<Elf64_Dyn> entries(dyn->p_filesz / sizeof(Elf64_Dyn));
  in.seekg(static_cast<std::streamoff>(dyn->p_offset));
  if (!in.read(reinterpret_cast<char*>(entries.data()), static_cast<std::streamsize>(entries.size() * sizeof(Elf64_Dyn)))) {
    return out;
  }
  uint64_t strtab = 0, strsz = 0;
  for (const auto& d : entries) {
    if (d.d_tag == DT_STRTAB) strtab = d.d_un.d_ptr;
    if (d.d_tag == DT_STRSZ) strsz = d.d_un.d_val;
  }
  const auto str_off = file_offset(strtab);
  if (!str_off || strsz == 0 || strsz > (64U << 20)) return out;
  std::string strings(strsz, '\0');
  in.seekg(static_cast<std::streamoff>(*str_off));
  if (!in.read(strings.data(), static_cast<std::streamsize>(strsz))) return out;
  auto at = [&](uint64_t i) { return i < strsz ? std::string(strings.c_str() + i) : std::string(); };
  for (const auto& d : entries) {
    if (d.d_tag == DT_NULL) break;
    if (d.d_tag == DT_NEEDED) out.needed.push_back(at(d.d_un.d_val));
    if (d.d_tag == DT_RUNPATH || d.d_tag == DT_RPATH) {
      for (auto dir : split_path_list(at(d.d_un.d_val))) {
        if (auto o = dir.find("$ORIGIN"); o != std::string::npos) dir.replace(o, 7, path.parent_path().string());
        out.runpath.push_back(dir);
      }
    }
  }
  return out;
}

/// A library that is part of attnlab or LibTorch (loaded with the runner, bound globally).
bool is_framework_library(const std::string& soname) {
  for (const char* prefix : {"libattnlab", "libtorch", "libc10", "libgomp", "libcudart", "libnvrtc", "libcuda"}) {
    if (soname.starts_with(prefix)) return true;
  }
  return false;
}

}  // namespace

/// Loads the third-party libraries a plugin needs (those not yet in the process) self-bound
/// (RTLD_DEEPBIND) before the plugin itself. A library that defines a global with the same name
/// as one of LibTorch's would otherwise bind to LibTorch's and construct its own object over it:
/// Debian's libsentencepiece defines an abseil `FLAGS_minloglevel` (32 bytes) that landed on
/// libc10's 4-byte one and set the byte after it, `FLAGS_caffe2_use_fatal_for_enforce`, so every
/// failed allocation aborted the process instead of throwing. Only self-contained libraries are
/// treated so (none of their own dependencies is attnlab or LibTorch): for them a private scope
/// is safe. Anything that cannot be found here is left to the plugin's own dlopen to report.
void preload_self_bound(const fs::path& plugin) {
  const auto dyn = read_dynamic(plugin);
  std::vector<std::string> dirs = dyn.runpath;
  if (const char* env = std::getenv("LD_LIBRARY_PATH")) {
    for (auto& d : split_path_list(env)) dirs.push_back(d);
  }
  for (const char* d : {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                        "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/local/lib"}) {
    dirs.emplace_back(d);
  }
  for (const auto& soname : dyn.needed) {
    if (is_framework_library(soname) || soname.find('/') != std::string::npos) continue;
    if (void* h = dlopen(soname.c_str(), RTLD_LAZY | RTLD_NOLOAD)) {  // already in the process
      dlclose(h);
      continue;
    }
    std::error_code ec;
    fs::path found;
    for (const auto& d : dirs) {
      if (fs::is_regular_file(fs::path(d) / soname, ec) && elf_problem(fs::path(d) / soname).empty()) {
        found = fs::path(d) / soname;
        break;
      }
    }
    if (found.empty()) continue;
    const auto deps = read_dynamic(found).needed;
    if (std::any_of(deps.begin(), deps.end(), is_framework_library)) continue;
    dlopen(found.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND | RTLD_NODELETE);
    dlerror();  // a failure here is reported by the plugin's own dlopen
  }
}

}  // namespace attnlab::plugin
