# Obtains LuaJIT source and prepares two trees under the build directory:
#   ${LJPERF_TREE_BASE}    pristine copy (control build)
#   ${LJPERF_TREE_PATCHED} copy with vm_patch/fp_x64.patch applied
# Invariant: both trees are always derived from the same source, and the
# patched tree is rebuilt from a pristine copy whenever the patch changes.

set(LJPERF_LUAJIT_SOURCE "" CACHE PATH
    "LuaJIT source tree to use (default: Debian 12's luajit source package)")

set(LJPERF_PATCH "${PROJECT_SOURCE_DIR}/vm_patch/fp_x64.patch")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${LJPERF_PATCH}")

if(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  message(FATAL_ERROR "ljperf supports only x86-64 LuaJIT in GC64 mode; "
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

# Copies SRC to DEST and applies the ljperf patch; fails naming file and hunk.
function(ljperf_apply_patch DEST)
  execute_process(COMMAND patch -p1 --forward --batch --dry-run -i "${LJPERF_PATCH}"
                  WORKING_DIRECTORY "${DEST}"
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    # patch prints "checking file F" (dry run) before the hunks of F.
    set(file "?")
    set(why "${out}${err}")
    string(REPLACE "\n" ";" lines "${out}${err}")
    foreach(line IN LISTS lines)
      if(line MATCHES "^(checking|patching) file (.*)$")
        set(file "${CMAKE_MATCH_2}")
      elseif(line MATCHES "^(Hunk #[0-9]+ FAILED.*)$")
        set(why "${CMAKE_MATCH_1}")
        break()
      elseif(line MATCHES "can't find file")
        set(why "file to patch not found")
        break()
      endif()
    endforeach()
    message(FATAL_ERROR "vm_patch/fp_x64.patch does not apply to ${DEST}: "
            "file ${file}: ${why}")
  endif()
  execute_process(COMMAND patch -p1 --forward --batch --quiet -i "${LJPERF_PATCH}"
                  WORKING_DIRECTORY "${DEST}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "applying vm_patch/fp_x64.patch to ${DEST} failed")
  endif()
endfunction()

# Prepares a pristine and a patched copy of SRC under DESTBASE; re-creates a
# copy when its input (source path or patch contents) changed.
function(ljperf_prepare_trees SRC DESTBASE BASE_OUT PATCHED_OUT)
  if(NOT EXISTS "${SRC}/src/vm_x64.dasc")
    message(FATAL_ERROR "'${SRC}' is not a LuaJIT 2.1 tree (no src/vm_x64.dasc).")
  endif()
  file(SHA256 "${LJPERF_PATCH}" patch_hash)
  foreach(kind base patched)
    set(dest "${DESTBASE}/${kind}")
    set(key "${SRC}")
    if(kind STREQUAL "patched")
      set(key "${SRC} ${patch_hash}")
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
        ljperf_apply_patch("${dest}")
      endif()
      file(WRITE "${stamp}" "${key}")
    endif()
  endforeach()
  set(${BASE_OUT} "${DESTBASE}/base" PARENT_SCOPE)
  set(${PATCHED_OUT} "${DESTBASE}/patched" PARENT_SCOPE)
endfunction()
