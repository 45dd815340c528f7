# attnlab_sdk_hash(<var> <include dir> [NO_DEPENDS]): the SDK's identity, the SHA-256 (first 16 hex
# digits) of every header under <include dir>/attnlab, names and contents, in sorted order (the
# installed SDK's shim/ of symlinks to fmt and spdlog left out). Every plugin is compiled with it
# (ATTNLAB_SDK_HASH) and the registry refuses one whose hash differs, so any change to an interface
# refuses plugins built against the old headers. Editing a header re-runs CMake, which recomputes it.
# One function for both sides: attnlab's own build hashes framework/include (its registry's hash),
# and the installed SDK (attnlabConfig.cmake) hashes <prefix>/include at the plugin's configure, so
# a plugin carries the hash of the headers it is actually compiled against.
function(attnlab_sdk_hash var dir)
  cmake_parse_arguments(H "NO_DEPENDS" "" "" ${ARGN})
  file(GLOB_RECURSE headers RELATIVE ${dir} CONFIGURE_DEPENDS ${dir}/attnlab/*.hpp)
  list(FILTER headers EXCLUDE REGEX "^attnlab/shim/")
  if(NOT headers)
    message(FATAL_ERROR "attnlab_sdk_hash: no attnlab headers under ${dir}/attnlab")
  endif()
  list(SORT headers)
  set(all "")
  foreach(h ${headers})
    file(SHA256 ${dir}/${h} sum)
    string(APPEND all "${h} ${sum}\n")
    if(NOT H_NO_DEPENDS)
      set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${dir}/${h})
    endif()
  endforeach()
  string(SHA256 hash "${all}")
  string(SUBSTRING ${hash} 0 16 hash)
  set(${var} ${hash} PARENT_SCOPE)
endfunction()
