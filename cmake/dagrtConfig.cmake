# dagrt CMake package, BUILD TREE flavour: use dagrt straight from a cargo build of this repo.
#
#   cargo build --release
#   find_package(dagrt 0.1 REQUIRED HINTS <repo>/cmake)      # or -Ddagrt_DIR=<repo>/cmake
#   target_link_libraries(app PRIVATE dagrt::dagrt)          # shared, SONAME libdagrt.so.<abi>
#   target_link_libraries(app PRIVATE dagrt::dagrt_static)   # libdagrt.a + its native libs
#
# The libraries are looked up in DAGRT_LIB_DIR (cache variable; its default comes from the
# DAGRT_LIB_DIR environment variable, else $CARGO_TARGET_DIR/release, else <repo>/target/release).
# The header is <repo>/include/dagrt.h. An installed package (scripts/install.sh) ships its own
# relocatable dagrtConfig.cmake generated from dagrtConfig.cmake.in.

if(CMAKE_VERSION VERSION_LESS 3.18)
  set(dagrt_FOUND FALSE)
  set(dagrt_NOT_FOUND_MESSAGE "dagrt needs CMake >= 3.18 (found ${CMAKE_VERSION})")
  return()
endif()

get_filename_component(_dagrt_root "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)

# Where cargo put the libraries.
if(DEFINED ENV{DAGRT_LIB_DIR} AND NOT "$ENV{DAGRT_LIB_DIR}" STREQUAL "")
  set(_dagrt_default_lib_dir "$ENV{DAGRT_LIB_DIR}")
elseif(DEFINED ENV{CARGO_TARGET_DIR} AND NOT "$ENV{CARGO_TARGET_DIR}" STREQUAL "")
  get_filename_component(_dagrt_default_lib_dir "$ENV{CARGO_TARGET_DIR}/release" ABSOLUTE
                         BASE_DIR "${_dagrt_root}")
else()
  set(_dagrt_default_lib_dir "${_dagrt_root}/target/release")
endif()
set(DAGRT_LIB_DIR "${_dagrt_default_lib_dir}" CACHE PATH
    "Directory holding libdagrt.so and libdagrt.a (dagrt build-tree package)")
get_filename_component(_dagrt_lib_dir "${DAGRT_LIB_DIR}" ABSOLUTE BASE_DIR "${_dagrt_root}")

# Version (and so the SONAME): find_package set dagrt_VERSION_MAJOR and _MINOR from
# dagrtConfigVersion.cmake, which reads Cargo.toml. Fall back to reading it when this file is
# include()d directly.
if(NOT DEFINED dagrt_VERSION_MAJOR OR dagrt_VERSION_MAJOR STREQUAL "")
  include("${CMAKE_CURRENT_LIST_DIR}/dagrtConfigVersion.cmake")
  set(dagrt_VERSION "${PACKAGE_VERSION}")
  string(REGEX REPLACE "^([0-9]+).*" "\\1" dagrt_VERSION_MAJOR "${PACKAGE_VERSION}")
  string(REGEX REPLACE "^[0-9]+\\.([0-9]+).*" "\\1" dagrt_VERSION_MINOR "${PACKAGE_VERSION}")
endif()
# The ABI version in the SONAME (build.rs): the major from 1.0 on, major.minor below it.
if(dagrt_VERSION_MAJOR STREQUAL "0")
  set(_dagrt_abi "0.${dagrt_VERSION_MINOR}")
else()
  set(_dagrt_abi "${dagrt_VERSION_MAJOR}")
endif()

set(_dagrt_include_dir "${_dagrt_root}/include")
set(_dagrt_shared "${_dagrt_lib_dir}/libdagrt.so")
set(_dagrt_soname "libdagrt.so.${_dagrt_abi}")
set(_dagrt_static "${_dagrt_lib_dir}/libdagrt.a")

foreach(_dagrt_f IN ITEMS "${_dagrt_include_dir}/dagrt.h" "${_dagrt_shared}" "${_dagrt_static}")
  if(NOT EXISTS "${_dagrt_f}")
    set(dagrt_FOUND FALSE)
    string(CONCAT dagrt_NOT_FOUND_MESSAGE
           "${_dagrt_f} does not exist: run `cargo build --release` in ${_dagrt_root} first "
           "(or point DAGRT_LIB_DIR at the directory holding libdagrt.so and libdagrt.a).")
    return()
  endif()
endforeach()

# The SONAME link the runtime loader needs: binaries record libdagrt.so.<abi> (DT_NEEDED)
# and find it through their build RPATH, which points at DAGRT_LIB_DIR.
set(_dagrt_soname_link "${_dagrt_lib_dir}/${_dagrt_soname}")
if(IS_SYMLINK "${_dagrt_soname_link}" AND NOT EXISTS "${_dagrt_soname_link}")
  file(REMOVE "${_dagrt_soname_link}")  # dangling
endif()
if(NOT EXISTS "${_dagrt_soname_link}")
  file(CREATE_LINK "libdagrt.so" "${_dagrt_soname_link}" RESULT _dagrt_link_result SYMBOLIC)
  if(NOT EXISTS "${_dagrt_soname_link}")  # a concurrent configure may have won the race
    set(dagrt_FOUND FALSE)
    set(dagrt_NOT_FOUND_MESSAGE "cannot create ${_dagrt_soname_link}: ${_dagrt_link_result}")
    return()
  endif()
endif()

# Native libraries of the static library: one source, cmake/native-static-libs.txt.
file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/native-static-libs.txt" _dagrt_native_lines REGEX "^-l")
string(REPLACE " " ";" _dagrt_native_flags "${_dagrt_native_lines}")
set(_dagrt_native_libs "")
foreach(_dagrt_flag IN LISTS _dagrt_native_flags)
  if(_dagrt_flag MATCHES "^-l(.+)$")
    list(APPEND _dagrt_native_libs "${CMAKE_MATCH_1}")
  endif()
endforeach()

include(CMakeFindDependencyMacro)
find_dependency(Threads)

include("${CMAKE_CURRENT_LIST_DIR}/dagrtTargets.cmake")
if(_dagrt_missing_component)
  set(dagrt_FOUND FALSE)
  set(dagrt_NOT_FOUND_MESSAGE "dagrt has no component '${_dagrt_missing_component}'")
  return()
endif()
set(dagrt_FOUND TRUE)
