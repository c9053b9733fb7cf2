# OpenResty from Debian 12 source packages (-DLJPERF_OPENRESTY=ON):
#   bin/nginx          nginx + ngx_devel_kit + lua-nginx-module compiled in,
#                      on OpenResty's luajit2 with the vm_patch series
#   bin/nginx-base     the same on the unpatched luajit2 (control)
#   bin/luajit2, bin/luajit2-base   the two interpreters of those trees
#   lib/luajit2/libluajit-5.1.so.2  the patched luajit2 as a drop-in for
#                      Debian's stock nginx + libnginx-mod-http-lua
#   lib/lua/5.1/cjson.so  Debian's lua-cjson source with frame pointers
# Invariants:
# - Both nginx variants come from one nginx, ndk and lua-nginx-module source
#   and are configured with exactly LJPERF_NGINX_CONFIGURE_ARGS; they differ
#   only by the luajit2 tree they link (statically, libluajit-5.1.a).
# - The luajit2 pair lives in build/luajit2/{base,patched} and is built by
#   ljperf_build_luajit with the flags of the default pair, which it does
#   not touch (its libraries stay in build/lib).
# - nginx and everything it links keep frame pointers (-fno-omit-frame-pointer).
#
# Requires cmake/LuaJITSource.cmake and cmake/LuaJITBuild.cmake included first.

option(LJPERF_OPENRESTY "Build nginx + lua-nginx-module from Debian 12 sources on the patched (bin/nginx) and unpatched (bin/nginx-base) luajit2" OFF)
if(NOT LJPERF_OPENRESTY)
  return()
endif()
ljperf_require_packages("${PROJECT_SOURCE_DIR}/.ci/openresty-packages" "-DLJPERF_OPENRESTY=ON")

set(LJPERF_NGX_DIR "${CMAKE_BINARY_DIR}/nginx")

# --- Sources ------------------------------------------------------------------
ljperf_debian_source(luajit2 ljperf_lj2_src)
ljperf_debian_source(nginx ljperf_ngx_src)
ljperf_debian_source(libnginx-mod-http-ndk ljperf_ndk_src)
ljperf_debian_source(libnginx-mod-http-lua ljperf_lua_src)
foreach(f "${ljperf_ngx_src}/configure" "${ljperf_ndk_src}/config"
          "${ljperf_lua_src}/src/ngx_http_lua_module.c")
  if(NOT EXISTS "${f}")
    message(FATAL_ERROR "Debian source package incomplete: no ${f}")
  endif()
endforeach()
message(STATUS "OpenResty sources: ${ljperf_ngx_src}, ${ljperf_ndk_src}, ${ljperf_lua_src}, ${ljperf_lj2_src}")

# --- luajit2 pair ---------------------------------------------------------------
ljperf_prepare_trees("${ljperf_lj2_src}" "${CMAKE_BINARY_DIR}/luajit2" LJ2_BASE_TREE LJ2_PATCHED_TREE)
file(READ "${CMAKE_BINARY_DIR}/luajit2/patched.family" ljperf_lj2_family)
if(NOT ljperf_lj2_family STREQUAL "openresty")
  message(FATAL_ERROR "${ljperf_lj2_src} is not OpenResty's luajit2 (vm_patch/apply says family "
          "'${ljperf_lj2_family}')")
endif()
ljperf_build_luajit("${LJ2_BASE_TREE}" luajit2-base STATIC)
ljperf_build_luajit("${LJ2_PATCHED_TREE}" luajit2 EMITTER)

# The drop-in shared library (soname libluajit-5.1.so.2, like Debian's
# libluajit2-5.1-2 package).
set(ljperf_dropin "${CMAKE_BINARY_DIR}/lib/luajit2/libluajit-5.1.so.2")
add_custom_command(OUTPUT "${ljperf_dropin}"
  COMMAND ${CMAKE_COMMAND} -E make_directory "${CMAKE_BINARY_DIR}/lib/luajit2"
  COMMAND ${CMAKE_COMMAND} -E copy "${LJPERF_OUTDIR_luajit2}/libluajit.so" "${ljperf_dropin}"
  DEPENDS "${LJPERF_OUTDIR_luajit2}/libluajit.so"
  COMMENT "Installing the drop-in luajit2 (lib/luajit2/libluajit-5.1.so.2)" VERBATIM)
add_custom_target(luajit2-dropin ALL DEPENDS "${ljperf_dropin}")
# A target that uses another target's custom command outputs gets a copy of
# that rule: order the targets so that the copy finds the outputs up to date
# (run in parallel, the two copies would build the same tree at once).
add_dependencies(luajit2-dropin luajit2)

# --- lua-cjson ------------------------------------------------------------------
# Debian's lua-cjson source built with frame pointers: its binary package is
# built without them, so samples inside cjson would lose their Lua callers.
# The example puts lib/lua/5.1 first on its cpath; the module is the same
# source (and gives the same output) as Debian's cjson.so.
ljperf_debian_source(lua-cjson ljperf_cjson_src)
# luajit2's lauxlib.h declares luaL_setfuncs, which lua-cjson defines itself
# for Lua 5.1 (Debian builds it against lua5.1's headers): rename its copy.
file(CONFIGURE OUTPUT "${CMAKE_BINARY_DIR}/lua-cjson/lua_cjson_luajit2.c" CONTENT
     "#include <lauxlib.h>\n#define luaL_setfuncs cjson_luaL_setfuncs\n#include \"${ljperf_cjson_src}/lua_cjson.c\"\n")
add_library(ljperf_cjson MODULE "${CMAKE_BINARY_DIR}/lua-cjson/lua_cjson_luajit2.c"
            "${ljperf_cjson_src}/strbuf.c" "${ljperf_cjson_src}/fpconv.c")
target_include_directories(ljperf_cjson PRIVATE "${LJ2_PATCHED_TREE}/src" "${ljperf_cjson_src}")
target_compile_options(ljperf_cjson PRIVATE -O2 -g -fno-omit-frame-pointer)
set_target_properties(ljperf_cjson PROPERTIES PREFIX "" OUTPUT_NAME cjson
                      LIBRARY_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/lib/lua/5.1")

# --- nginx ----------------------------------------------------------------------
# Debian's module is built with this default package.path (debian/rules of
# libnginx-mod-http-lua); a header, because the value's ';' and '?' do not
# survive nginx's Makefile as a -D option.
set(ljperf_ngx_pathh "${LJPERF_NGX_DIR}/lua_default_path.h")
file(MAKE_DIRECTORY "${LJPERF_NGX_DIR}")
file(CONFIGURE OUTPUT "${ljperf_ngx_pathh}"
     CONTENT "#define LUA_DEFAULT_PATH \"/usr/share/lua/5.1/?.lua;\"\n")

# Debian's flags for nginx and the module where they matter (PCRE2 for
# nginx, -lpcre for the module's ngx.re), without the modules the example
# does not need. --error-log-path=stderr: nothing is written outside -p PREFIX.
set(LJPERF_NGINX_CONFIGURE_ARGS
    --prefix=/usr/share/nginx
    --error-log-path=stderr
    --with-pcre-jit
    --with-threads
    --with-http_stub_status_module
    --with-http_realip_module
    "--with-cc-opt=${LJPERF_CFLAGS} -g -include ${ljperf_ngx_pathh}"
    "--with-ld-opt=-lpcre"
    "--add-module=${ljperf_ndk_src}"
    "--add-module=${ljperf_lua_src}")

foreach(kind base patched)
  if(kind STREQUAL "patched")
    set(name nginx)
    set(ljtarget luajit2)
    set(ljout "${LJPERF_OUTDIR_luajit2}")
    set(ljtree "${LJ2_PATCHED_TREE}")
  else()
    set(name nginx-base)
    set(ljtarget luajit2-base)
    set(ljout "${LJPERF_OUTDIR_luajit2-base}")
    set(ljtree "${LJ2_BASE_TREE}")
  endif()
  set(bd "${LJPERF_NGX_DIR}/${kind}")
  # LUAJIT_LIB holds only the static library: nginx links it statically.
  set(linkdir "${LJPERF_NGX_DIR}/luajit-${kind}")
  set(lib "${linkdir}/libluajit-5.1.a")
  add_custom_command(OUTPUT "${lib}"
    COMMAND ${CMAKE_COMMAND} -E make_directory "${linkdir}"
    COMMAND ${CMAKE_COMMAND} -E copy "${ljout}/libluajit.a" "${lib}"
    DEPENDS "${ljout}/libluajit.a" VERBATIM)
  # configure runs in the source tree (it must) with --builddir outside it;
  # the Makefile it also writes into the source tree is not used.
  add_custom_command(OUTPUT "${bd}/Makefile"
    COMMAND ${CMAKE_COMMAND} -E make_directory "${bd}"
    COMMAND sh -c "cd \"$1\" && shift && LUAJIT_LIB=\"$1\" LUAJIT_INC=\"$2\" && export LUAJIT_LIB LUAJIT_INC && shift 2 && log=\"$1\" && shift && ./configure \"$@\" >\"$log\" 2>&1 || { tail -n 30 \"$log\" >&2; echo \"nginx configure failed; full log: $log\" >&2; exit 1; }"
            sh "${ljperf_ngx_src}" "${linkdir}" "${ljtree}/src" "${bd}.configure.log"
            "--builddir=${bd}" ${LJPERF_NGINX_CONFIGURE_ARGS}
    DEPENDS "${lib}" "${CMAKE_CURRENT_LIST_FILE}"
    COMMENT "Configuring ${name} in ${bd}" VERBATIM)
  # A new libluajit-5.1.a is not a make dependency of nginx: relink always.
  add_custom_command(OUTPUT "${bd}/nginx"
    COMMAND ${CMAKE_COMMAND} -E rm -f "${bd}/nginx"
    COMMAND "${PROJECT_SOURCE_DIR}/cmake/make-logged" "${bd}.build.log"
            -C "${ljperf_ngx_src}" -f "${bd}/Makefile" -j${LJPERF_NPROC}
    DEPENDS "${bd}/Makefile" "${lib}"
    COMMENT "Building ${name} in ${bd}" VERBATIM)
  set(bin "${CMAKE_BINARY_DIR}/bin/${name}")
  add_custom_command(OUTPUT "${bin}"
    COMMAND ${CMAKE_COMMAND} -E copy "${bd}/nginx" "${bin}"
    DEPENDS "${bd}/nginx" VERBATIM)
  add_custom_target(${name} ALL DEPENDS "${bin}")
  add_dependencies(${name} ${ljtarget})   # see luajit2-dropin above
endforeach()

set(LJPERF_NGINX_BIN "${CMAKE_BINARY_DIR}/bin/nginx")
set(LJPERF_NGINX_BASE_BIN "${CMAKE_BINARY_DIR}/bin/nginx-base")
set(LJPERF_LUAJIT2_DROPIN "${ljperf_dropin}")
