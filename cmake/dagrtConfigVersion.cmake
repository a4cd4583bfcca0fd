# dagrt package version file for the BUILD TREE (find_package with HINTS <repo>/cmake or
# dagrt_DIR=<repo>/cmake). The version has one source: the [package] version in Cargo.toml.
# The compatibility rule (SameMinorVersion) lives in dagrtConfigVersion.cmake.in, shared with
# the installed package.

if(CMAKE_VERSION VERSION_LESS 3.18)
  set(PACKAGE_VERSION "unknown (dagrt needs CMake >= 3.18)")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
  return()
endif()

get_filename_component(_dagrt_cv_root "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(DAGRT_PKG_VERSION "")
file(STRINGS "${_dagrt_cv_root}/Cargo.toml" _dagrt_cv_lines REGEX "^[ \t]*(\\[|version[ \t]*=)")
set(_dagrt_cv_section "")
foreach(_dagrt_cv_line IN LISTS _dagrt_cv_lines)
  if(_dagrt_cv_line MATCHES "^[ \t]*\\[([^]]*)\\]")
    set(_dagrt_cv_section "${CMAKE_MATCH_1}")
  elseif(_dagrt_cv_section STREQUAL "package"
         AND _dagrt_cv_line MATCHES "^[ \t]*version[ \t]*=[ \t]*\"([0-9]+\\.[0-9]+\\.[0-9]+[^\"]*)\"")
    set(DAGRT_PKG_VERSION "${CMAKE_MATCH_1}")
    break()
  endif()
endforeach()

if(DAGRT_PKG_VERSION STREQUAL "")
  set(PACKAGE_VERSION "unknown (no [package] version in ${_dagrt_cv_root}/Cargo.toml)")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
  return()
endif()

set(DAGRT_PKG_SIZEOF_VOID_P "")  # the build tree matches the host; no pointer-size check
file(READ "${CMAKE_CURRENT_LIST_DIR}/dagrtConfigVersion.cmake.in" _dagrt_cv_template)
string(CONFIGURE "${_dagrt_cv_template}" _dagrt_cv_code @ONLY)
cmake_language(EVAL CODE "${_dagrt_cv_code}")
