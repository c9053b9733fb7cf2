# cmake -DNM=node_modules -DOUT=file -P versions.cmake: writes the versions of
# the renderer packages ljperf inlines (shown in each flamegraph.html).
set(text "")
foreach(pkg d3-flame-graph d3)
  file(READ "${NM}/${pkg}/package.json" json)
  string(JSON version GET "${json}" version)
  string(JSON license GET "${json}" license)
  string(APPEND text "${pkg} ${version} (${license})\n")
endforeach()
file(WRITE "${OUT}" "${text}")
