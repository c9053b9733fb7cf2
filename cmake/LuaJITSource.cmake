# Obtains LuaJIT source and prepares two trees under the build directory:
#   ${LJPERF_TREE_BASE}    pristine copy (control build)
#   ${LJPERF_TREE_PATCHED} copy with the vm_patch series applied (vm_patch/apply)
# Invariant: both trees are always derived from the same source, and the
# patched tree is rebuilt from a pristine copy whenever the series changes.

set(LJPERF_LUAJIT_SOURCE "" CACHE PATH
    "LuaJIT source tree to use (default: the Debian 12 source package LJPERF_LUAJIT names)")
set(LJPERF_LUAJIT "debian" CACHE STRING
    "Debian 12 LuaJIT source package without LJPERF_LUAJIT_SOURCE: debian (luajit) or openresty (luajit2)")
set_property(CACHE LJPERF_LUAJIT PROPERTY STRINGS debian openresty)

# The series: every file under vm_patch/ (a change re-runs configure, which
# re-applies it to fresh copies of the trees).
file(GLOB_RECURSE LJPERF_PATCH_FILES CONFIGURE_DEPENDS
     "${PROJECT_SOURCE_DIR}/vm_patch/*")
list(SORT LJPERF_PATCH_FILES)
# (The glob re-runs configure when files come or go; this, when one changes.)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${LJPERF_PATCH_FILES})
set(LJPERF_PATCH_HASH "")
foreach(f IN LISTS LJPERF_PATCH_FILES)
  file(SHA256 "${f}" h)
  string(APPEND LJPERF_PATCH_HASH "${f} ${h}\n")
endforeach()
string(SHA256 LJPERF_PATCH_HASH "${LJPERF_PATCH_HASH}")

# The target: x86-64 (the whole series) or aarch64 (0008 on the trees whose
# arm64 VM it patches, docs/arm64.md; vm_patch/apply names a tree it cannot).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(LJPERF_ARCH x64)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
  set(LJPERF_ARCH arm64)
else()
  message(FATAL_ERROR "ljperf supports LuaJIT in GC64 mode on x86-64 and aarch64; "
          "this target is ${CMAKE_SYSTEM_PROCESSOR}.")
endif()

# Returns (in OUT) the directory of a Debian source package, downloading it
# into ${CMAKE_BINARY_DIR}/_src once and reusing it on re-configure.
function(ljperf_debian_source PKG OUT)
  set(stamp "${CMAKE_BINARY_DIR}/_src/${PKG}.dir")
  if(EXISTS "${stamp}")
    file(READ "${stamp}" dir)
    string(STRIP "${dir}" dir)
    if(IS_DIRECTORY "${dir}")
      set(${OUT} "${dir}" PARENT_SCOPE)
      return()
    endif()
  endif()
  message(STATUS "Downloading Debian source package '${PKG}'")
  execute_process(
    COMMAND "${PROJECT_SOURCE_DIR}/cmake/debian-source" "${PKG}"
            "${CMAKE_BINARY_DIR}/_src/${PKG}"
    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(STRIP "${err}" err)
    message(FATAL_ERROR "Cannot obtain the Debian '${PKG}' source package: ${err}\n"
            "Point -DLJPERF_LUAJIT_SOURCE=/path at a LuaJIT tree instead.")
  endif()
  string(STRIP "${out}" out)
  string(REGEX REPLACE ".*\n" "" dir "${out}")
  file(WRITE "${stamp}" "${dir}\n")
  set(${OUT} "${dir}" PARENT_SCOPE)
endfunction()

# Fails at configure time, naming them, if Debian packages listed in LIST
# (a .ci/*-packages file: one per line, # comments) are not installed. Not
# on a system without dpkg: there the build's own checks must do.
function(ljperf_require_packages LIST WHAT)
  find_program(LJPERF_DPKG_QUERY dpkg-query)
  if(NOT LJPERF_DPKG_QUERY)
    return()
  endif()
  file(STRINGS "${LIST}" pkgs REGEX "^[a-z0-9]")
  set(missing "")
  foreach(p IN LISTS pkgs)
    execute_process(COMMAND "${LJPERF_DPKG_QUERY}" -W "-f=\${Status}" "${p}"
                    OUTPUT_VARIABLE st ERROR_QUIET)
    if(NOT st MATCHES "install ok installed")
      list(APPEND missing "${p}")
    endif()
  endforeach()
  if(missing)
    list(JOIN missing " " m)
    file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${LIST}")
    message(FATAL_ERROR "${WHAT} needs Debian packages that are not installed: ${m}\n"
            "Install them with: apt-get install ${m}   (list: ${rel})")
  endif()
endfunction()

# Applies the vm_patch series to the tree DEST in place (vm_patch/apply);
# fails naming the tree family, patch, file and hunk. Sets FAMILY_OUT.
function(ljperf_apply_patch DEST FAMILY_OUT)
  execute_process(COMMAND sh "${PROJECT_SOURCE_DIR}/vm_patch/apply" "${DEST}"
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(STRIP "${err}" err)
    message(FATAL_ERROR "${err}")
  endif()
  string(STRIP "${out}" out)
  set(${FAMILY_OUT} "${out}" PARENT_SCOPE)
endfunction()

# Prepares a pristine and a patched copy of SRC under DESTBASE; re-creates a
# copy when its input (source path or patch contents) changed.
function(ljperf_prepare_trees SRC DESTBASE BASE_OUT PATCHED_OUT)
  if(NOT EXISTS "${SRC}/src/vm_x64.dasc")
    message(FATAL_ERROR "'${SRC}' is not a LuaJIT 2.1 tree (no src/vm_x64.dasc).")
  endif()
  foreach(kind base patched)
    set(dest "${DESTBASE}/${kind}")
    set(key "${SRC}")
    if(kind STREQUAL "patched")
      set(key "${SRC} ${LJPERF_PATCH_HASH}")
    endif()
    set(stamp "${dest}.stamp")
    set(old "")
    if(EXISTS "${stamp}")
      file(READ "${stamp}" old)
    endif()
    if(NOT old STREQUAL key OR NOT EXISTS "${dest}/src/vm_x64.dasc")
      file(REMOVE_RECURSE "${dest}")
      file(COPY "${SRC}/" DESTINATION "${dest}" PATTERN ".git" EXCLUDE)
      if(kind STREQUAL "patched")
        ljperf_apply_patch("${dest}" family)
        file(WRITE "${dest}.family" "${family}")
      endif()
      file(WRITE "${stamp}" "${key}")
    endif()
  endforeach()
  file(READ "${DESTBASE}/patched.family" family)
  message(STATUS "LuaJIT tree family: ${family} (vm_patch/apply)")
  # On arm64 the series needs the tree's arm64 VM to be one it patches.
  if(LJPERF_ARCH STREQUAL "arm64")
    file(STRINGS "${DESTBASE}/patched/src/lj_arch.h" fpwin_vm REGEX "^#define LJ_FPWIN_VM")
    if(NOT fpwin_vm)
      message(FATAL_ERROR "'${SRC}': its arm64 VM (src/vm_arm64.dasc) is older than "
              "any ljperf patches for arm64 (docs/arm64.md); use LuaJIT 2.1 from 2020 on")
    endif()
  endif()
  set(${BASE_OUT} "${DESTBASE}/base" PARENT_SCOPE)
  set(${PATCHED_OUT} "${DESTBASE}/patched" PARENT_SCOPE)
endfunction()
