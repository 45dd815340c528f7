# Settings for attnlab's own targets (warnings, the shared PCH), and the plugin function.

# Where built plugins land; the runner searches it by default.
set(ATTNLAB_PLUGIN_DIR ${CMAKE_BINARY_DIR}/plugins CACHE INTERNAL "")

# One precompiled header for torch and the heavy headers, reused by every target.
function(attnlab_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # GCC 12 at -O3 reports false positives inside libstdc++'s std::string (GCC bugs 105329, 105651).
    target_compile_options(${target} PRIVATE -Wno-stringop-overflow -Wno-restrict -Wno-array-bounds)
  endif()
  if(ATTNLAB_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(ATTNLAB_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer)
    # GCC's flow analysis under ASan reports torch's inline headers (std::optional<at::Generator>
    # copies in Tensor::uniform_) as maybe-uninitialized: a known false positive of sanitized builds.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(${target} PRIVATE -Wno-maybe-uninitialized)
    endif()
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
  get_target_property(_no_pch ${target} DISABLE_PRECOMPILE_HEADERS)
  # The PCH to reuse: the target's ATTNLAB_PCH property (the tests': attnlab_test_pch), else attnlab_pch.
  get_target_property(_pch ${target} ATTNLAB_PCH)
  if(NOT _pch)
    set(_pch attnlab_pch)
  endif()
  if(TARGET ${_pch} AND NOT "${target}" MATCHES "^attnlab_(test_)?pch$" AND NOT _no_pch)
    target_precompile_headers(${target} REUSE_FROM ${_pch})
    # The shared PCH is built -fPIC; executables get -fPIE, which GCC refuses to mix with it.
    get_target_property(_type ${target} TYPE)
    if(_type STREQUAL "EXECUTABLE")
      target_compile_options(${target} PRIVATE -fPIC)
    endif()
  endif()
  get_target_property(_type ${target} TYPE)
  if(_type STREQUAL "EXECUTABLE")
    # libtorch.so exports its own (older) copies of std::filesystem functions; an executable
    # that needs libstdc++ before libtorch binds to the real ones (remove_all crashed otherwise).
    target_link_options(${target} BEFORE PRIVATE -Wl,--no-as-needed -lstdc++)
  endif()
  set_target_properties(${target} PROPERTIES DEFINE_SYMBOL "")
endfunction()

# Code whose speed no run or benchmark notices (the command line, the plugin loader, the results
# tools) at -O1 instead of the build type's -O3: the same program, built in about two thirds of
# the time (runner-torch's eval_cmd.cpp: 38 s at -O3, 26 s at -O1). What trains and decodes (nn/,
# train/, data/, metrics/, the plugins) keeps -O3; the tests' own code is built at -O0
# (cmake/attnlabTesting.cmake). Only where the build type optimises at all (Debug stays -O0).
#
# The same code is also built as unity batches (ATTNLAB_UNITY_BATCH files per translation unit):
# its files each spent most of their time on the same work, instantiating LibTorch's and CLI11's
# templates and emitting CLI11's inline code, which a batch does once (runner-torch's 18 files:
# 180 s apart, 34 s as one). A file's helpers in an anonymous namespace must not share a name with
# another file's of its target.
set(ATTNLAB_UNITY_BATCH 10 CACHE STRING "Files per unity translation unit of the cold targets (1: each file alone)")
function(attnlab_cold target)
  if(CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo|MinSizeRel)$")
    target_compile_options(${target} PRIVATE -O1)
  endif()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${ATTNLAB_UNITY_BATCH})
endfunction()

# attnlab_add_plugin() and attnlab_sdk_hash(): the same functions out-of-tree plugins get from
# find_package(attnlab).
include(${CMAKE_CURRENT_LIST_DIR}/attnlabPlugin.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/attnlabSdkHash.cmake)
