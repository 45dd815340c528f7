# attnlab's own GoogleTest setup, shared by tests/ and the plugins' tests/ folders (not installed:
# out-of-tree plugins get plain GoogleTest from attnlab_add_plugin). Included by the top-level
# CMakeLists after framework/ (for attnlab_defaults' shared PCH) and before plugins/.
find_package(GTest REQUIRED)
include(GoogleTest)

# What every test runs with: where the built plugins, the runner, the sources and the test data are.
set(ATTNLAB_TEST_ENV
  "ATTNLAB_PLUGIN_PATH=${ATTNLAB_PLUGIN_DIR}"
  "ATTNLAB_RUNNER=${CMAKE_BINARY_DIR}/bin/runner"
  "ATTNLAB_SOURCE_DIR=${PROJECT_SOURCE_DIR}"
  "ATTNLAB_TEST_PLUGIN_DIR=${CMAKE_BINARY_DIR}/test_plugins"
  "ATTNLAB_PYTHON=${ATTNLAB_PYTHON}"
  "ATTNLAB_TEST_DATA_DIR=${CMAKE_BINARY_DIR}/test-data")

# The tests' own code is built at -O0 (what they test is libattnlab and the plugins, built as
# users get them): a test file compiles in about 8 s instead of 13 s at -O1 (the floating-point
# results are the same: no -ffast-math, no FP contraction in ISO C++ mode at any level). GCC
# refuses a PCH built at another optimisation level, so the tests have their own: the shared one
# plus GoogleTest, at -O0.
function(attnlab_test_flags target)
  if(CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo|MinSizeRel)$")
    target_compile_options(${target} PRIVATE -O0)
  endif()
  set_target_properties(${target} PROPERTIES ATTNLAB_PCH attnlab_test_pch)
endfunction()
add_library(attnlab_test_pch STATIC ${PROJECT_SOURCE_DIR}/framework/pch/pch.cpp)
target_link_libraries(attnlab_test_pch PUBLIC GTest::gtest ${TORCH_LIBRARIES} fmt::fmt)
target_precompile_headers(attnlab_test_pch PUBLIC ${PROJECT_SOURCE_DIR}/framework/pch/pch.hpp <gtest/gtest.h>)
attnlab_test_flags(attnlab_test_pch)
attnlab_defaults(attnlab_test_pch)

# The test helpers (tests/testing/: seeded fixtures, golden values, corpora, HTTP server).
add_library(attnlab_testing STATIC ${PROJECT_SOURCE_DIR}/tests/testing/testing.cpp)
target_link_libraries(attnlab_testing PUBLIC GTest::gtest ${TORCH_LIBRARIES} fmt::fmt PkgConfig::LIBZIP ZLIB::ZLIB)
target_include_directories(attnlab_testing PUBLIC ${PROJECT_SOURCE_DIR}/tests ${PROJECT_SOURCE_DIR}/framework/include)
attnlab_test_flags(attnlab_testing)
attnlab_defaults(attnlab_testing)

# attnlab_add_test(<executable target>): links the helpers and gtest_main, applies attnlab's
# warnings and PCH, and registers every TEST with ctest, run in ATTNLAB_TEST_ENV.
function(attnlab_add_test name)
  target_link_libraries(${name} PRIVATE attnlab_testing GTest::gtest_main)
  attnlab_test_flags(${name})
  attnlab_defaults(${name})
  # gtest_discover_tests passes only the first ENVIRONMENT entry of a list (CMake 3.25), so the
  # environment is set by running each test through `cmake -E env`.
  set_target_properties(${name} PROPERTIES CROSSCOMPILING_EMULATOR "${CMAKE_COMMAND};-E;env;${ATTNLAB_TEST_ENV}")
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60)
endfunction()
