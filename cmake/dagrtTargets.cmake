# Defines the IMPORTED targets of the dagrt package. Included by dagrtConfig.cmake (build tree)
# and by the installed lib/cmake/dagrt/dagrtConfig.cmake, which set these inputs first:
#   _dagrt_include_dir   directory holding dagrt.h
#   _dagrt_shared        the shared library file (IMPORTED_LOCATION of dagrt::dagrt)
#   _dagrt_soname        its SONAME (libdagrt.so.<abi>: see build.rs)
#   _dagrt_static        libdagrt.a
#   _dagrt_native_libs   CMake list of the native libraries a static link needs
# Threads::Threads must exist (the callers run find_dependency(Threads)).
# Sets _dagrt_missing_component to a required component the caller asked for: dagrt has
# none, and CMake's contract is that a config file reports a missing required one not found.

unset(_dagrt_missing_component)
foreach(_dagrt_c IN LISTS dagrt_FIND_COMPONENTS)
  if(dagrt_FIND_REQUIRED_${_dagrt_c})
    set(_dagrt_missing_component "${_dagrt_c}")
    break()
  endif()
endforeach()

if(NOT TARGET dagrt::dagrt)
  add_library(dagrt::dagrt SHARED IMPORTED)
  set_target_properties(dagrt::dagrt PROPERTIES
    IMPORTED_LOCATION "${_dagrt_shared}"
    IMPORTED_SONAME "${_dagrt_soname}"
    INTERFACE_INCLUDE_DIRECTORIES "${_dagrt_include_dir}")
endif()

if(NOT TARGET dagrt::dagrt_static)
  # Link one Rust staticlib per final binary: two of them define the same std symbols.
  add_library(dagrt::dagrt_static STATIC IMPORTED)
  set_target_properties(dagrt::dagrt_static PROPERTIES
    IMPORTED_LOCATION "${_dagrt_static}"
    IMPORTED_LINK_INTERFACE_LANGUAGES "C"
    INTERFACE_INCLUDE_DIRECTORIES "${_dagrt_include_dir}"
    INTERFACE_LINK_LIBRARIES "Threads::Threads;${_dagrt_native_libs}")
endif()

# Informational variables for consumers.
set(dagrt_INCLUDE_DIR "${_dagrt_include_dir}")
set(dagrt_LIBRARY "${_dagrt_shared}")
set(dagrt_STATIC_LIBRARY "${_dagrt_static}")
set(dagrt_NATIVE_STATIC_LIBS "${_dagrt_native_libs}")
