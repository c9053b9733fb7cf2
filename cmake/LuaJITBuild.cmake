# Builds a prepared LuaJIT tree with its own Makefile (the only supported way
# to build LuaJIT) and installs the results under the build directory.
# Invariant: every variant is built with exactly LJPERF_LUAJIT_MAKEFLAGS, so
# luajit and luajit-base differ only by the patch and the emitter sources
# (a STATIC build skips the shared library and its -fPIC objects, nothing
# else: its interpreter and static library come from the same rules).

include(ProcessorCount)
ProcessorCount(LJPERF_NPROC)
if(LJPERF_NPROC EQUAL 0)
  set(LJPERF_NPROC 2)
endif()

# GCC on arm64 leaves leaf functions without a frame record unless told.
set(ljperf_fp_flags "-fno-omit-frame-pointer")
if(LJPERF_ARCH STREQUAL "arm64")
  string(APPEND ljperf_fp_flags " -mno-omit-leaf-frame-pointer")
endif()
set(LJPERF_CFLAGS "-O2 ${ljperf_fp_flags}" CACHE STRING
    "Optimisation flags for both LuaJIT builds (CCOPT)")
set(LJPERF_XCFLAGS "" CACHE STRING "Extra LuaJIT defines for both builds (XCFLAGS)")

if(LJPERF_XCFLAGS MATCHES "LUAJIT_DISABLE_GC64")
  message(FATAL_ERROR "ljperf supports only LuaJIT in GC64 mode; "
          "remove -DLUAJIT_DISABLE_GC64 from LJPERF_XCFLAGS.")
endif()

# A cross build (a toolchain file; tests/arm64/toolchain-aarch64.cmake) gives
# LuaJIT's Makefile the target compiler's prefix as CROSS and a host compiler
# for buildvm and minilua; ${CMAKE_CROSSCOMPILING_EMULATOR} runs the results.
if(CMAKE_CROSSCOMPILING)
  get_filename_component(ljperf_cc "${CMAKE_C_COMPILER}" NAME)
  if(NOT ljperf_cc MATCHES "^(.+-)gcc(-[0-9]+)?$")
    message(FATAL_ERROR "cross build: CMAKE_C_COMPILER ${CMAKE_C_COMPILER} is not a "
            "PREFIX-gcc cross compiler (LuaJIT's Makefile takes CROSS=PREFIX)")
  endif()
  get_filename_component(ljperf_ccdir "${CMAKE_C_COMPILER}" DIRECTORY)
  set(LJPERF_HOST_CC "gcc" CACHE STRING "Host C compiler for LuaJIT's build tools (cross builds)")
  set(ljperf_cc_flags "CROSS=${ljperf_ccdir}/${CMAKE_MATCH_1}" "CC=gcc${CMAKE_MATCH_2}"
      "HOST_CC=${LJPERF_HOST_CC}" "TARGET_SYS=${CMAKE_SYSTEM_NAME}")
else()
  set(ljperf_cc_flags "CC=${CMAKE_C_COMPILER}")
endif()

set(LJPERF_LUAJIT_MAKEFLAGS
    ${ljperf_cc_flags}
    "CCOPT=${LJPERF_CFLAGS}"
    "CCDEBUG=-g"
    "XCFLAGS=-DLUAJIT_ENABLE_GC64 ${LJPERF_XCFLAGS}"
    "PREFIX=${CMAKE_BINARY_DIR}"
    "Q=")

# ljperf's own sources (vm_patch/src/*.c, emitter/*.c) are compiled with -Wall -Wextra;
# LuaJIT's keep its Makefile's -Wall. A target-specific CCWARN for their
# objects does it (their _dyn.o come from the same recipe); the control
# tree has no such objects, so both variants still get the same flags.
# -DLJPERF_WERROR=ON (CI) makes their warnings errors. Trees built with
# their own CMake (tarantool/luajit) compile them with the tree's flags.
option(LJPERF_WERROR "Make warnings in ljperf's own C sources (vm_patch/src, emitter/) errors" OFF)
file(GLOB ljperf_emitter_c CONFIGURE_DEPENDS
     "${PROJECT_SOURCE_DIR}/vm_patch/src/*.c" "${PROJECT_SOURCE_DIR}/emitter/*.c")
list(TRANSFORM ljperf_emitter_c REPLACE "^.*/" "")
list(SORT ljperf_emitter_c)
list(TRANSFORM ljperf_emitter_c REPLACE "[.]c$" ".o")
list(JOIN ljperf_emitter_c " " ljperf_emitter_o)
set(LJPERF_EMITTER_WARN -Wall -Wextra)
if(LJPERF_WERROR)
  list(APPEND LJPERF_EMITTER_WARN -Werror)
endif()
list(JOIN LJPERF_EMITTER_WARN " " ljperf_emitter_warn)
list(APPEND LJPERF_LUAJIT_MAKEFLAGS "--eval=${ljperf_emitter_o}: CCWARN = ${ljperf_emitter_warn}")

# The files the series adds to the VM (vm_patch/src, emitter/), compiled into
# the patched VM (the series names them in LuaJIT's build files).
file(GLOB LJPERF_EMITTER_SOURCES CONFIGURE_DEPENDS
     "${PROJECT_SOURCE_DIR}/vm_patch/src/*.c" "${PROJECT_SOURCE_DIR}/vm_patch/src/*.h"
     "${PROJECT_SOURCE_DIR}/emitter/*.c" "${PROJECT_SOURCE_DIR}/emitter/*.h")

# ljperf_build_luajit(TREE NAME [EMITTER] [INSTALL_LIBS] [STATIC])
# Builds TREE and installs its interpreter as bin/NAME. EMITTER copies the
# emitter sources into the tree first. STATIC builds no shared library (the
# controls: nothing links theirs). With INSTALL_LIBS the libraries,
# headers, pkg-config file and jit.* modules are installed too. A tree with
# src/Makefile is built by it; a CMake-only tree (tarantool/luajit) by its
# own CMake, in TREE/build, with the same flags.
function(ljperf_build_luajit TREE NAME)
  cmake_parse_arguments(ARG "INSTALL_LIBS;EMITTER;STATIC" "" "" ${ARGN})
  if(ARG_STATIC AND ARG_INSTALL_LIBS)
    message(FATAL_ERROR "ljperf_build_luajit(${NAME}): INSTALL_LIBS needs the shared library")
  endif()
  set(buildmode mixed)
  if(ARG_STATIC)
    set(buildmode static)
  endif()
  set(src "${TREE}/src")
  file(GLOB_RECURSE tree_sources CONFIGURE_DEPENDS
       "${src}/*.c" "${src}/*.h" "${src}/*.dasc" "${src}/Makefile" "${src}/CMakeLists.txt")
  if(EXISTS "${src}/Makefile")
    set(out "${src}")
    set(pc "${TREE}/etc/luajit.pc")
    set(verfile "${TREE}/Makefile")
    set(build COMMAND "${PROJECT_SOURCE_DIR}/cmake/make-logged" "${TREE}.build.log"
              -C "${src}" -j${LJPERF_NPROC} ${LJPERF_LUAJIT_MAKEFLAGS} "BUILDMODE=${buildmode}")
  elseif(EXISTS "${TREE}/CMakeLists.txt")
    if(CMAKE_CROSSCOMPILING)
      message(FATAL_ERROR "${TREE}: cross-building a CMake-built LuaJIT tree "
              "(tarantool/luajit) is not supported; build on the target")
    endif()
    set(out "${TREE}/build/src")
    set(pc "${TREE}/build/etc/luajit.pc")
    set(verfile "${TREE}/Makefile.original")
    # A build type of our own: its flags come after the tree's CMAKE_C_FLAGS
    # (which add -fomit-frame-pointer), so both variants keep frame pointers.
    set(build
      COMMAND ${CMAKE_COMMAND} -S "${TREE}" -B "${TREE}/build"
              "-DCMAKE_C_COMPILER=${CMAKE_C_COMPILER}" -DCMAKE_BUILD_TYPE=LJPerf
              "-DCMAKE_C_FLAGS_LJPERF=${LJPERF_CFLAGS} -g ${LJPERF_XCFLAGS}"
              -DLUAJIT_ENABLE_GC64=ON -DBUILDMODE=${buildmode}
              "-DCMAKE_INSTALL_PREFIX=${CMAKE_BINARY_DIR}" >"${TREE}.configure.log"
      COMMAND "${PROJECT_SOURCE_DIR}/cmake/make-logged" "${TREE}.build.log"
              -C "${TREE}/build" -j${LJPERF_NPROC})
  else()
    message(FATAL_ERROR "${TREE}: neither src/Makefile nor CMakeLists.txt: cannot build it")
  endif()
  set(outs "${out}/luajit" "${out}/libluajit.a")
  if(NOT ARG_STATIC)
    list(APPEND outs "${out}/libluajit.so")
  endif()
  set(vmdef "")		# jit/vmdef.lua: generated into the build tree?
  if(NOT out STREQUAL src)
    set(vmdef "'${out}/jit/vmdef.lua'")
  endif()
  set(copy "")
  set(deps ${tree_sources})
  if(ARG_EMITTER)
    # copy_if_different keeps timestamps of unchanged files: no needless rebuilds.
    set(copy COMMAND ${CMAKE_COMMAND} -E copy_if_different
             ${LJPERF_EMITTER_SOURCES} "${src}/")
    list(APPEND deps ${LJPERF_EMITTER_SOURCES})
  endif()
  add_custom_command(
    OUTPUT ${outs}
    ${copy}
    ${build}
    DEPENDS ${deps}
    COMMENT "Building LuaJIT (${NAME}) in ${TREE}"
    VERBATIM)
  set(bin "${CMAKE_BINARY_DIR}/bin/${NAME}")
  set(installed "${bin}")
  # The VM must run in GC64 mode (the only mode the patch supports). A
  # bytecode dump's flags have FR2 (8) set exactly then on x64 and arm64; unlike
  # ffi.abi this also works in a build with LUAJIT_DISABLE_FFI.
  set(cmds
    COMMAND ${CMAKE_CROSSCOMPILING_EMULATOR} "${out}/luajit" -e "if string.dump(function() end, true):byte(5) % 16 < 8 then io.stderr:write('${NAME} was not built in GC64 mode: ljperf supports only GC64\\n') os.exit(1) end"
    COMMAND ${CMAKE_COMMAND} -E copy "${out}/luajit" "${bin}")
  if(ARG_INSTALL_LIBS)
    set(lib "${CMAKE_BINARY_DIR}/lib")
    set(inc "${CMAKE_BINARY_DIR}/include/luajit-2.1")
    # Where the VM looks for jit.* (the Makefile's INSTALL_LJLIBD):
    # luajit-MAJ.MIN for the rolling release, else luajit-MAJ.MIN.REL+PREREL.
    file(STRINGS "${verfile}" ver REGEX "^(MAJVER|MINVER|RELVER|PREREL)=")
    set(major "")
    set(minor "")
    set(rel "")
    set(prerel "")
    foreach(line IN LISTS ver)
      string(REGEX MATCH "^([A-Z]+)= *(.*)$" _ "${line}")
      if(CMAKE_MATCH_1 STREQUAL "MAJVER")
        set(major "${CMAKE_MATCH_2}")
      elseif(CMAKE_MATCH_1 STREQUAL "MINVER")
        set(minor "${CMAKE_MATCH_2}")
      elseif(CMAKE_MATCH_1 STREQUAL "RELVER")
        set(rel "${CMAKE_MATCH_2}")
      elseif(CMAKE_MATCH_1 STREQUAL "PREREL")
        set(prerel "${CMAKE_MATCH_2}")
      endif()
    endforeach()
    if(major STREQUAL "" OR minor STREQUAL "")
      message(FATAL_ERROR "${verfile}: no MAJVER/MINVER lines: cannot tell LuaJIT's version")
    endif()
    file(STRINGS "${verfile}" mmdir REGEX "^(export )?INSTALL_LJLIBD=.*luajit-[$][(]MMVERSION[)]")
    if(mmdir OR NOT rel MATCHES "^[0-9]+$")
      set(jitdir "${CMAKE_BINARY_DIR}/share/luajit-${major}.${minor}/jit")
    else()
      set(jitdir "${CMAKE_BINARY_DIR}/share/luajit-${major}.${minor}.${rel}${prerel}/jit")
    endif()
    list(APPEND installed "${lib}/libluajit-5.1.a" "${lib}/libluajit-5.1.so.2"
                          "${inc}/luajit.h" "${jitdir}/vmdef.lua")
    list(APPEND cmds
      COMMAND ${CMAKE_COMMAND} -E make_directory "${lib}" "${inc}" "${jitdir}" "${lib}/pkgconfig"
      COMMAND ${CMAKE_COMMAND} -E copy "${out}/libluajit.a" "${lib}/libluajit-5.1.a"
      COMMAND ${CMAKE_COMMAND} -E copy "${out}/libluajit.so" "${lib}/libluajit-5.1.so.2"
      COMMAND ${CMAKE_COMMAND} -E create_symlink libluajit-5.1.so.2 "${lib}/libluajit-5.1.so"
      COMMAND ${CMAKE_COMMAND} -E copy "${src}/lua.h" "${src}/lualib.h" "${src}/lauxlib.h"
              "${src}/luaconf.h" "${src}/lua.hpp" "${src}/luajit.h" "${inc}"
      COMMAND sh -c "cp '${src}'/jit/*.lua ${vmdef} '${jitdir}'"
      COMMAND sh -c "sed -e 's|^prefix=.*|prefix=${CMAKE_BINARY_DIR}|' -e 's|^multilib=.*|multilib=lib|' '${pc}' > '${lib}/pkgconfig/luajit.pc'")
  endif()
  add_custom_command(OUTPUT ${installed} ${cmds}
                     DEPENDS ${outs}
                     COMMENT "Installing ${NAME}" VERBATIM)
  add_custom_target(${NAME} ALL DEPENDS ${installed})
  # Where the tree's build leaves luajit, libluajit.a (and, for CMake trees,
  # generated headers): for tests that link the control library.
  set(LJPERF_OUTDIR_${NAME} "${out}" PARENT_SCOPE)
endfunction()
