# Tarantool (2.6 through 3.x; default: Debian 12's 2.6.0) built twice with
# its bundled LuaJIT in GC64 mode:
#   bin/tarantool       third_party/luajit patched (vm_patch series, which
#                       also copies vm_patch/src and emitter/ into it)
#   bin/tarantool-base  the same source unpatched (control)
# Invariants:
# - Both variants come from one Tarantool source and are configured with
#   exactly LJPERF_TARANTOOL_CMAKE_ARGS, so they differ only by the LuaJIT
#   patch and the emitter files.
# - The patched tree's third_party/luajit always equals pristine + patch +
#   emitter files. Tarantool copies third_party/luajit into its build tree
#   once and never looks at the source copy again, so whenever that content
#   changes, the copy in the build tree is removed; Tarantool's own rules
#   then copy, rebuild and relink it.
# - Both binaries run LuaJIT in GC64 mode (checked after every build).
# - The patched binary's C and C++ code (Tarantool's own and LuaJIT's) is
#   compiled with frame pointers (checked after every build, from the
#   compiler switches gcc records in each compile unit's debug info).
# - The copies are given the source's version as a VERSION file when the
#   source has none (a git checkout): Tarantool reads its version from
#   VERSION or from git, and the copies have no .git.
#
# Requires cmake/LuaJITSource.cmake (ljperf_debian_source,
# ljperf_apply_patch, LJPERF_PATCH_FILES, LJPERF_PATCH_HASH) to be included first.

option(LJPERF_TARANTOOL "Build Tarantool (2.6 through 3.x) with the ljperf LuaJIT patch (bin/tarantool) and without (bin/tarantool-base)" OFF)
if(NOT LJPERF_TARANTOOL)
  return()
endif()
if(NOT COMMAND ljperf_apply_patch OR NOT COMMAND ljperf_debian_source)
  message(FATAL_ERROR "cmake/Tarantool.cmake needs cmake/LuaJITSource.cmake included before it.")
endif()
ljperf_require_packages("${PROJECT_SOURCE_DIR}/.ci/tarantool-packages" "-DLJPERF_TARANTOOL=ON")

include(ExternalProject)

set(LJPERF_TARANTOOL_SOURCE "" CACHE PATH
    "Tarantool source tree to use, 2.6 through 3.x with its submodules (default: Debian 12's tarantool 2.6.0 source package)")
set(LJPERF_TARANTOOL_EXTRA_ARGS "" CACHE STRING
    "Extra CMake arguments for both Tarantool builds (;-separated)")
set(LJPERF_TARANTOOL_FLAGS "-fno-omit-frame-pointer -g" CACHE STRING
    "C/C++ flags for both Tarantool builds; Tarantool passes CMAKE_C_FLAGS on to LuaJIT's Makefile (TARGET_CFLAGS)")

set(LJPERF_EMITTER_DIR "${PROJECT_SOURCE_DIR}/emitter")
set(LJPERF_TNT_DIR "${CMAKE_BINARY_DIR}/tarantool")

# --- Source -----------------------------------------------------------------
if(LJPERF_TARANTOOL_SOURCE)
  get_filename_component(ljperf_tnt_src "${LJPERF_TARANTOOL_SOURCE}" ABSOLUTE)
else()
  ljperf_debian_source(tarantool ljperf_tnt_src)
endif()
if(NOT EXISTS "${ljperf_tnt_src}/CMakeLists.txt"
   OR NOT EXISTS "${ljperf_tnt_src}/third_party/luajit/src/vm_x64.dasc")
  message(FATAL_ERROR "'${ljperf_tnt_src}' is not a Tarantool source tree with a bundled "
          "LuaJIT (no CMakeLists.txt or third_party/luajit/src/vm_x64.dasc; a git checkout "
          "needs `git submodule update --init --recursive`).")
endif()
# Version: the VERSION file of a release tarball, else `git describe --long`
# of a checkout (what Tarantool's own CMakeLists.txt does).
set(ljperf_tnt_version "")
set(ljperf_tnt_version_file "")
if(EXISTS "${ljperf_tnt_src}/VERSION")
  file(STRINGS "${ljperf_tnt_src}/VERSION" ljperf_tnt_version LIMIT_COUNT 1)
elseif(EXISTS "${ljperf_tnt_src}/.git")
  find_package(Git QUIET)
  if(GIT_FOUND)
    execute_process(COMMAND "${GIT_EXECUTABLE}" describe --long HEAD
                    WORKING_DIRECTORY "${ljperf_tnt_src}"
                    OUTPUT_VARIABLE ljperf_tnt_version OUTPUT_STRIP_TRAILING_WHITESPACE
                    ERROR_QUIET)
  endif()
  set(ljperf_tnt_version_file "${ljperf_tnt_version}")
endif()
if(NOT ljperf_tnt_version MATCHES "^[0-9]+\\.[0-9]+\\.[0-9]+-[0-9]+-g[0-9a-f]+")
  message(FATAL_ERROR "Cannot tell the version of the Tarantool source ${ljperf_tnt_src} "
          "('${ljperf_tnt_version}'): it needs a VERSION file holding `git describe --long` "
          "output (e.g. 3.8.0-0-gdce7be8a79, as in a release tarball) or a git checkout "
          "with tags.")
endif()
if(NOT ljperf_tnt_version MATCHES "^(2\\.([6-9]|[1-9][0-9])|3\\.[0-9]+)\\.")
  message(WARNING "Tarantool source ${ljperf_tnt_src} is version ${ljperf_tnt_version}; "
          "ljperf supports 2.6 through 3.x (tested: 2.6.0, 3.8.0). Trying anyway.")
endif()
message(STATUS "Tarantool source: ${ljperf_tnt_src} (${ljperf_tnt_version})")

# --- GC64 is mandatory --------------------------------------------------------
# Both builds get -DLUAJIT_ENABLE_GC64=ON last, but arguments that ask for
# the other mode are refused rather than silently overridden.
string(CONCAT ljperf_tnt_gc64_msg "ljperf patches only the x64 GC64 VM (LuaJIT's "
       "vm_x64.dasc): Tarantool must be built with -DLUAJIT_ENABLE_GC64=ON")
foreach(arg IN LISTS LJPERF_TARANTOOL_EXTRA_ARGS LJPERF_TARANTOOL_FLAGS)
  set(gc64_off FALSE)
  if(arg MATCHES "^-DLUAJIT_ENABLE_GC64(:[A-Za-z]+)?=(.*)$")
    set(value "${CMAKE_MATCH_2}")
    if(NOT value)
      set(gc64_off TRUE)
    endif()
  elseif(arg MATCHES "LUAJIT_DISABLE_GC64")
    set(gc64_off TRUE)
  endif()
  if(gc64_off)
    message(FATAL_ERROR "LJPERF_TARANTOOL_EXTRA_ARGS/LJPERF_TARANTOOL_FLAGS turn GC64 off "
            "(${arg}); ${ljperf_tnt_gc64_msg}.")
  endif()
endforeach()

# --- Emitter files (a new, removed or edited file re-runs configure) ----------
file(GLOB ljperf_emitter_files CONFIGURE_DEPENDS
     "${LJPERF_EMITTER_DIR}/*.c" "${LJPERF_EMITTER_DIR}/*.h"
     "${PROJECT_SOURCE_DIR}/vm_patch/src/*.c" "${PROJECT_SOURCE_DIR}/vm_patch/src/*.h")
list(SORT ljperf_emitter_files)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${LJPERF_PATCH_FILES} ${ljperf_emitter_files})

# Makes DEST's files equal to STAGE's. Only files whose content differs are
# written (they get a fresh mtime, so make sees exactly those as changed);
# files absent from STAGE are removed. Sets CHANGED_OUT to TRUE if anything
# was written or removed.
function(ljperf_tnt_sync STAGE DEST CHANGED_OUT)
  set(changed FALSE)
  file(GLOB_RECURSE staged RELATIVE "${STAGE}" LIST_DIRECTORIES false "${STAGE}/*")
  file(GLOB_RECURSE present RELATIVE "${DEST}" LIST_DIRECTORIES false "${DEST}/*")
  foreach(f IN LISTS staged)
    set(differs TRUE)
    if(EXISTS "${DEST}/${f}")
      file(SHA256 "${STAGE}/${f}" a)
      file(SHA256 "${DEST}/${f}" b)
      if(a STREQUAL b)
        set(differs FALSE)
      endif()
    endif()
    if(differs)
      get_filename_component(d "${DEST}/${f}" DIRECTORY)
      file(MAKE_DIRECTORY "${d}")
      file(COPY_FILE "${STAGE}/${f}" "${DEST}/${f}")
      set(changed TRUE)
    endif()
  endforeach()
  foreach(f IN LISTS present)
    if(NOT EXISTS "${STAGE}/${f}")
      file(REMOVE "${DEST}/${f}")
      set(changed TRUE)
    endif()
  endforeach()
  set(${CHANGED_OUT} ${changed} PARENT_SCOPE)
endfunction()

# Prepares the source tree of one variant (KIND: base or patched) and
# removes the stale parts of its build tree BUILD.
function(ljperf_tnt_prepare SRC KIND TREE BUILD)
  # Whole tree: re-copied only when the source itself changes.
  set(stamp "${TREE}.stamp")
  set(old "")
  if(EXISTS "${stamp}")
    file(READ "${stamp}" old)
  endif()
  if(NOT old STREQUAL SRC OR NOT EXISTS "${TREE}/CMakeLists.txt")
    message(STATUS "Preparing Tarantool tree ${TREE}")
    # A new source invalidates the build tree and ExternalProject's stamps.
    file(REMOVE_RECURSE "${TREE}" "${BUILD}" "${TREE}.luajit.stamp"
         "${LJPERF_TNT_DIR}/ep-${KIND}")
    file(COPY "${SRC}/" DESTINATION "${TREE}" PATTERN ".git" EXCLUDE)
    file(WRITE "${stamp}" "${SRC}")
  endif()
  if(ljperf_tnt_version_file)
    # A git checkout: the copy has no .git, so it gets the version as a file.
    set(v "")
    if(EXISTS "${TREE}/VERSION")
      file(READ "${TREE}/VERSION" v)
    endif()
    if(NOT v STREQUAL "${ljperf_tnt_version_file}\n")
      file(WRITE "${TREE}/VERSION" "${ljperf_tnt_version_file}\n")
    endif()
  endif()
  if(NOT KIND STREQUAL "patched")
    return()
  endif()

  # third_party/luajit: pristine + patch + emitter files.
  set(key "patch ${LJPERF_PATCH_HASH}")
  foreach(f IN LISTS ljperf_emitter_files)
    file(SHA256 "${f}" h)
    get_filename_component(n "${f}" NAME)
    string(APPEND key "\n${n} ${h}")
  endforeach()
  set(lstamp "${TREE}.luajit.stamp")
  set(old "")
  if(EXISTS "${lstamp}")
    file(READ "${lstamp}" old)
  endif()
  if(old STREQUAL key)
    return()
  endif()
  message(STATUS "Preparing patched LuaJIT in ${TREE}/third_party/luajit")
  # Patched in a staging copy: on failure the tree and build stay as they were.
  set(stage "${LJPERF_TNT_DIR}/tarantool-third_party-luajit.patching")
  file(REMOVE_RECURSE "${stage}")
  file(COPY "${SRC}/third_party/luajit/" DESTINATION "${stage}" PATTERN ".git" EXCLUDE)
  ljperf_apply_patch("${stage}" family)  # FATAL_ERROR naming family, file, hunk
  message(STATUS "Patched Tarantool's third_party/luajit (family ${family})")
  ljperf_tnt_sync("${stage}" "${TREE}/third_party/luajit" changed)
  file(REMOVE_RECURSE "${stage}")
  if(changed)
    # Tarantool's copy of third_party/luajit in its build tree is stale:
    # removing it makes Tarantool's Makefile copy and rebuild LuaJIT.
    file(REMOVE_RECURSE "${BUILD}/third_party/luajit")
  endif()
  file(WRITE "${lstamp}" "${key}")
endfunction()

# --- Builds -------------------------------------------------------------------
# libcurl: Tarantool 3.x (and 2.11.3+) calls curl_multi_get_handles, which
# needs curl 8.4; Debian 12 has 7.88. Such a tree builds its bundled
# third_party/curl (Tarantool's own default), without the bundled c-ares and
# nghttp2 (threaded resolver, HTTP/1.1: the HTTP client is not what is
# profiled, and this keeps two more third-party builds out). Older trees use
# Debian's libcurl.
set(ljperf_tnt_curl_args -DENABLE_BUNDLED_LIBCURL=OFF)
if(EXISTS "${ljperf_tnt_src}/src/curl.c")
  file(STRINGS "${ljperf_tnt_src}/src/curl.c" ljperf_tnt_new_curl REGEX "curl_multi_get_handles")
  if(ljperf_tnt_new_curl)
    if(NOT EXISTS "${ljperf_tnt_src}/third_party/curl/CMakeLists.txt")
      message(FATAL_ERROR "Tarantool ${ljperf_tnt_version} needs libcurl >= 8.4 (Debian 12 has "
              "7.88) and its bundled copy, third_party/curl, is missing: "
              "`git submodule update --init third_party/curl` in ${ljperf_tnt_src}.")
    endif()
    set(ljperf_tnt_curl_args -DENABLE_BUNDLED_LIBCURL=ON
        -DBUNDLED_LIBCURL_USE_ARES=OFF -DBUNDLED_LIBCURL_USE_NGHTTP2=OFF)
  endif()
endif()

# ccache, when installed, compiles for both builds: the patched one (built
# after the control) takes every object the LuaJIT patch leaves unchanged
# from the control's. Both trees have one layout below LJPERF_TNT_DIR/KIND/
# and ccache sees paths below LJPERF_TNT_DIR relative to the directory it
# compiles in, so unchanged sources hash alike; the cache lives in the
# build tree (no home directory needed). Tarantool's bundled
# libraries and its LuaJIT get the compilers from CMake, so the wrappers
# are the compilers.
find_program(LJPERF_CCACHE ccache)
find_program(LJPERF_CXX NAMES c++ g++)
set(ljperf_tnt_cc "${CMAKE_C_COMPILER}")
set(ljperf_tnt_cxx_arg "")
if(LJPERF_CCACHE AND LJPERF_CXX)
  foreach(lang cc cxx)
    set(compiler "${CMAKE_C_COMPILER}")
    if(lang STREQUAL "cxx")
      set(compiler "${LJPERF_CXX}")
    endif()
    file(WRITE "${LJPERF_TNT_DIR}/ccache-${lang}"
         "#!/bin/sh\nCCACHE_DIR='${LJPERF_TNT_DIR}/ccache' CCACHE_BASEDIR='${LJPERF_TNT_DIR}' CCACHE_NOHASHDIR=1 exec '${LJPERF_CCACHE}' '${compiler}' \"$@\"\n")
    file(CHMOD "${LJPERF_TNT_DIR}/ccache-${lang}" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE
         GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
  endforeach()
  set(ljperf_tnt_cc "${LJPERF_TNT_DIR}/ccache-cc")
  set(ljperf_tnt_cxx_arg "-DCMAKE_CXX_COMPILER=${LJPERF_TNT_DIR}/ccache-cxx")
endif()

set(LJPERF_TARANTOOL_CMAKE_ARGS
    -DCMAKE_BUILD_TYPE=RelWithDebInfo
    -DCMAKE_C_COMPILER=${ljperf_tnt_cc}
    ${ljperf_tnt_cxx_arg}
    "-DCMAKE_C_FLAGS=${LJPERF_TARANTOOL_FLAGS}"
    "-DCMAKE_CXX_FLAGS=${LJPERF_TARANTOOL_FLAGS}"
    # 3.x builds bundled libraries (libcurl...) with DEPENDENCY_C[XX]FLAGS,
    # not CMAKE_C_FLAGS; its CMakeLists.txt appends to them.
    "-DDEPENDENCY_CFLAGS=${LJPERF_TARANTOOL_FLAGS}"
    "-DDEPENDENCY_CXXFLAGS=${LJPERF_TARANTOOL_FLAGS}"
    -DENABLE_BUNDLED_LUAJIT=ON
    -DLUAJIT_ENABLE_GC64=ON
    -DENABLE_BACKTRACE=OFF
    -DENABLE_FEEDBACK_DAEMON=OFF
    -DENABLE_DIST=OFF
    -DENABLE_WERROR=OFF
    ${ljperf_tnt_curl_args}
    -DENABLE_BUNDLED_ZSTD=OFF
    -DENABLE_BUNDLED_LIBYAML=ON
    -DWITH_SYSTEMD=OFF
    -Wno-dev
    ${LJPERF_TARANTOOL_EXTRA_ARGS}
    -DLUAJIT_ENABLE_GC64=ON)

# Run after every build: the binary must report a GC64 VM.
set(ljperf_tnt_check "${LJPERF_TNT_DIR}/check-gc64.cmake")
file(WRITE "${ljperf_tnt_check}" [=[
execute_process(COMMAND "${BIN}" -e "io.write(require('ffi').abi('gc64') and 'GC64' or 'GC32') os.exit(0)"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT out STREQUAL "GC64")
  message(FATAL_ERROR "${BIN} does not run LuaJIT in GC64 mode (got '${out}${err}', rc ${rc}): "
          "ljperf patches only the x64 GC64 VM (LuaJIT's vm_x64.dasc), build Tarantool with "
          "-DLUAJIT_ENABLE_GC64=ON.")
endif()
]=])

# Run after every build of the patched binary: every compile unit gcc made
# (Tarantool's C/C++, LuaJIT's C, the bundled libraries it links) must have
# been compiled with frame pointers: the last -f[no-]omit-frame-pointer in
# the switches gcc records (DW_AT_producer) is -fno-omit-frame-pointer, or
# none at -O0. Assembler units (LuaJIT's lj_vm.S) are the patch's business.
set(ljperf_tnt_fpcheck "${LJPERF_TNT_DIR}/check-frame-pointers.cmake")
file(WRITE "${ljperf_tnt_fpcheck}" [=[
find_program(READELF NAMES readelf)
if(NOT READELF)
  message(FATAL_ERROR "readelf (binutils) not found: cannot check ${BIN} for frame pointers")
endif()
execute_process(COMMAND "${READELF}" --debug-dump=info --dwarf-depth=1 "${BIN}"
                OUTPUT_VARIABLE out ERROR_QUIET RESULT_VARIABLE rc)
string(REPLACE ";" "," out "${out}")
string(REPLACE "Compilation Unit @" ";" units "${out}")
set(n 0)
set(bad "")
foreach(u IN LISTS units)
  if(NOT u MATCHES "DW_AT_producer[^\n]*: (GNU [^\n]*)")
    continue()
  endif()
  set(producer "${CMAKE_MATCH_1}")
  if(NOT producer MATCHES "^GNU (C|C\\+\\+)[0-9]* ")
    continue()
  endif()
  math(EXPR n "${n} + 1")
  set(name "?")
  if(u MATCHES "DW_AT_name[^\n]*: ([^\n]*)")
    set(name "${CMAKE_MATCH_1}")
  endif()
  set(last "")
  if(producer MATCHES ".*(-fomit-frame-pointer|-fno-omit-frame-pointer)")
    set(last "${CMAKE_MATCH_1}")
  endif()
  if(last STREQUAL "-fomit-frame-pointer" OR
     (last STREQUAL "" AND NOT producer MATCHES " -O0( |$)" AND producer MATCHES " -O"))
    list(APPEND bad "${name}")
  endif()
endforeach()
if(n EQUAL 0)
  message(FATAL_ERROR "${BIN}: no compile unit with gcc's switches in its debug info "
          "(readelf rc ${rc}); it must be built with -g (LJPERF_TARANTOOL_FLAGS).")
endif()
if(bad)
  list(LENGTH bad nbad)
  list(SUBLIST bad 0 10 some)
  string(REPLACE ";" "\n  " some "${some}")
  message(FATAL_ERROR "${BIN}: ${nbad} of ${n} compile units were built without frame "
          "pointers (LJPERF_TARANTOOL_FLAGS must keep -fno-omit-frame-pointer), e.g.:\n  ${some}")
endif()
]=])

if(NOT LJPERF_NPROC)
  set(LJPERF_NPROC 2)
endif()

# Runs a build quietly into a log file and shows the end of the log only
# when it fails (like cmake/make-logged, but runs the given make, so that a
# "$(MAKE)" argument keeps make's jobserver: LOG_BUILD would serialise it).
set(ljperf_tnt_logged "${LJPERF_TNT_DIR}/build-logged")
file(WRITE "${ljperf_tnt_logged}" [=[#!/bin/sh
log=$1; shift
if ! "$@" >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "Tarantool build failed; full log: $log" >&2
  exit 1
fi
]=])
file(CHMOD "${ljperf_tnt_logged}" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE
     GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)

# Only the server binary is built: no unit tests, modules or docs.
if(CMAKE_GENERATOR MATCHES "Make")
  set(ljperf_tnt_build_cmd "$(MAKE)" tarantool)
else()
  set(ljperf_tnt_build_cmd ${CMAKE_COMMAND} --build <BINARY_DIR> --target tarantool
      -j ${LJPERF_NPROC})
endif()

foreach(kind base patched)
  if(kind STREQUAL "patched")
    set(name tarantool)
  else()
    set(name tarantool-base)
  endif()
  set(tree "${LJPERF_TNT_DIR}/${kind}/src")
  set(build "${LJPERF_TNT_DIR}/${kind}/build")
  ljperf_tnt_prepare("${ljperf_tnt_src}" ${kind} "${tree}" "${build}")
  set(bin "${CMAKE_BINARY_DIR}/bin/${name}")
  set(fpcheck "")
  set(after "")
  if(kind STREQUAL "patched")
    set(after DEPENDS tarantool-base)  # ccache: the control's objects first
    set(fpcheck COMMAND ${CMAKE_COMMAND} -DBIN=${bin} -P "${ljperf_tnt_fpcheck}")
  endif()
  ExternalProject_Add(${name}
    PREFIX "${LJPERF_TNT_DIR}/ep-${kind}"
    ${after}
    SOURCE_DIR "${tree}"
    BINARY_DIR "${build}"
    CMAKE_ARGS ${LJPERF_TARANTOOL_CMAKE_ARGS}
    BUILD_COMMAND "${ljperf_tnt_logged}" "${build}.log" ${ljperf_tnt_build_cmd}
    BUILD_ALWAYS ON
    BUILD_BYPRODUCTS "${build}/src/tarantool"
    INSTALL_COMMAND ${CMAKE_COMMAND} -E make_directory "${CMAKE_BINARY_DIR}/bin"
            COMMAND ${CMAKE_COMMAND} -E copy_if_different "${build}/src/tarantool" "${bin}"
            COMMAND ${CMAKE_COMMAND} -DBIN=${bin} -P "${ljperf_tnt_check}"
            ${fpcheck}
    LOG_CONFIGURE ON
    LOG_OUTPUT_ON_FAILURE ON
    USES_TERMINAL_BUILD OFF)
endforeach()

set(LJPERF_TARANTOOL_BIN "${CMAKE_BINARY_DIR}/bin/tarantool")
set(LJPERF_TARANTOOL_BASE_BIN "${CMAKE_BINARY_DIR}/bin/tarantool-base")
set(LJPERF_TARANTOOL_SOURCE_DIR "${ljperf_tnt_src}")
