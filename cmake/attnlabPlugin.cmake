# attnlab_add_plugin(<name> [KIND <kind>] SOURCES <files...> [LIBS <libs...>] [TESTS <files...>])
#   (the name may also follow a NAME keyword, as attnlab's own plugins/ write it:
#    attnlab_add_plugin(NAME <name> KIND <kind> SOURCES ...))
#
# Builds a plugin: the CMake target plugin_<kind>_<name> (plugin_<name> without KIND), a MODULE
# library libattnlab_<kind>_<name>.so (libattnlab_<name>.so) in ATTNLAB_PLUGIN_DIR (default:
# <build>/plugins), which the runner searches with --plugin-path or ATTNLAB_PLUGIN_PATH. Symbols
# hidden but the descriptor; linked with -Wl,--no-undefined, so a symbol that no library provides
# fails the link, not a run.
# TESTS: GoogleTest sources, each built into an executable named after the file (tests/foo_test.cpp
# -> foo_test), linked against an object library of the plugin's sources (so tests can use its
# classes; the plugin's folder is on their include path) with ATTNLAB_PLUGIN_FILE defined as the
# built plugin's path (so tests can load it as the runner does); registered with ctest (out of the
# tree each test case, by gtest_discover_tests; find_package(attnlab) enables testing). In attnlab's
# own tree they also get its test helpers (tests/testing) and environment (cmake/attnlabTesting.cmake).
# `cmake --install` puts the plugin in <prefix>/lib/attnlab/plugins, where an installed runner
# looks. Used by attnlab's own tree and installed with the SDK (find_package(attnlab)).
function(attnlab_add_plugin)
  include(GNUInstallDirs)  # here, not where this file is included: that may be a function's scope
  cmake_parse_arguments(P "" "NAME;KIND" "SOURCES;LIBS;TESTS" ${ARGN})
  if(NOT P_NAME)
    list(POP_FRONT P_UNPARSED_ARGUMENTS P_NAME)
  endif()
  if(NOT P_NAME OR NOT P_SOURCES OR P_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "usage: attnlab_add_plugin(<name> [KIND <kind>] SOURCES <files...> [LIBS <libs...>] "
                        "[TESTS <files...>]); got: ${ARGN}")
  endif()
  if(P_KIND)
    set(stem ${P_KIND}_${P_NAME})
  else()
    set(stem ${P_NAME})
  endif()
  set(target plugin_${stem})
  if(NOT DEFINED ATTNLAB_PLUGIN_DIR)
    set(ATTNLAB_PLUGIN_DIR ${CMAKE_BINARY_DIR}/plugins)
  endif()

  if(P_TESTS)
    set(code ${target}_objects)
    add_library(${code} OBJECT ${P_SOURCES})
    add_library(${target} MODULE)
    target_link_libraries(${target} PRIVATE ${code})
    set(code_scope PUBLIC)
  else()
    set(code ${target})
    add_library(${target} MODULE ${P_SOURCES})
    set(code_scope PRIVATE)
  endif()
  target_link_libraries(${code} ${code_scope} attnlab::framework ${P_LIBS})
  target_compile_features(${code} ${code_scope} cxx_std_20)
  if(NOT ATTNLAB_SDK_HASH)  # find_package(attnlab) was called in a function: its variables stayed there
    get_property(ATTNLAB_SDK_HASH GLOBAL PROPERTY ATTNLAB_SDK_HASH)
  endif()
  if(NOT ATTNLAB_SDK_HASH)
    message(FATAL_ERROR "attnlab_add_plugin: ATTNLAB_SDK_HASH is not set (use find_package(attnlab))")
  endif()
  target_compile_definitions(${code} PRIVATE ATTNLAB_SDK_HASH="${ATTNLAB_SDK_HASH}")
  set_target_properties(${code} PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
                                           POSITION_INDEPENDENT_CODE ON)
  set_target_properties(${target} PROPERTIES OUTPUT_NAME attnlab_${stem} LIBRARY_OUTPUT_DIRECTORY ${ATTNLAB_PLUGIN_DIR}
    INSTALL_RPATH "$ORIGIN/../.." INSTALL_RPATH_USE_LINK_PATH ON)
  set_property(GLOBAL APPEND PROPERTY ATTNLAB_PLUGIN_TARGETS ${target})
  # Installed beside libattnlab.so, where the installed runner looks: <prefix>/lib/attnlab/plugins.
  install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/attnlab/plugins)
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux" AND NOT ATTNLAB_SANITIZE)
    target_link_options(${target} PRIVATE -Wl,--no-undefined)
  endif()
  if(COMMAND attnlab_defaults)  # attnlab's own tree: its warnings and shared PCH
    attnlab_defaults(${code})
  else()
    target_compile_options(${code} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  endif()

  if(P_TESTS)
    # The plugin's own headers (its folder) for the tests.
    target_include_directories(${code} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
    find_package(GTest REQUIRED)
    include(GoogleTest)
    foreach(src ${P_TESTS})
      get_filename_component(test ${src} NAME_WE)
      if(TARGET ${test})
        message(FATAL_ERROR "attnlab_add_plugin(${P_NAME}): test ${src} would be the executable '${test}', "
                            "which another target already is; name test files after their plugin")
      endif()
      add_executable(${test} ${src})
      target_link_libraries(${test} PRIVATE ${code})
      target_compile_definitions(${test} PRIVATE ATTNLAB_PLUGIN_FILE="$<TARGET_FILE:${target}>")
      add_dependencies(${test} ${target})
      if(COMMAND attnlab_add_test)  # attnlab's own tree: its test helpers, environment, warnings and PCH
        attnlab_add_test(${test})
        set_property(GLOBAL APPEND PROPERTY ATTNLAB_PLUGIN_TEST_TARGETS ${test})
      else()
        target_link_libraries(${test} PRIVATE GTest::gtest_main)
        gtest_discover_tests(${test} DISCOVERY_TIMEOUT 60)
      endif()
    endforeach()
  endif()
endfunction()
