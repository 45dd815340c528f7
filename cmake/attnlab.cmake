# Shared target settings and the plugin function (also used by out-of-tree plugins).

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
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
  if(TARGET attnlab_pch AND NOT "${target}" STREQUAL "attnlab_pch")
    target_precompile_headers(${target} REUSE_FROM attnlab_pch)
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

# attnlab_add_plugin(NAME <name> KIND <kind> SOURCES <files...> [LIBS <libs...>])
# Builds target plugin_<kind>_<name>, a MODULE library libattnlab_<kind>_<name>.so in the plugin folder.
function(attnlab_add_plugin)
  cmake_parse_arguments(P "" "NAME;KIND" "SOURCES;LIBS" ${ARGN})
  set(target plugin_${P_KIND}_${P_NAME})
  add_library(${target} MODULE ${P_SOURCES})
  target_link_libraries(${target} PRIVATE attnlab::framework ${P_LIBS})
  attnlab_defaults(${target})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME attnlab_${P_KIND}_${P_NAME}
    LIBRARY_OUTPUT_DIRECTORY ${ATTNLAB_PLUGIN_DIR}
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
endfunction()
