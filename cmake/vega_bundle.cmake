# cmake -DVEGA_DIR=... -DMODULES=a,b,... -DLICENSE=... -DVERSION=... -DOUT=... -P vega_bundle.cmake
# One script of Debian's libjs-vega modules (UMD, each *.min.js) for runner report's page: each
# module is wrapped for a small AMD-style loader, then their exports are gathered into the global
# `vega` and the transforms registered, as the `vega` package's index does. The licence notice
# (the package's copyright file) comes first, as a comment.
file(READ "${LICENSE}" licence)
string(REPLACE "*/" "* /" licence "${licence}")
set(tmp "${OUT}.tmp")
file(WRITE "${tmp}" "/*! Vega ${VERSION} (Debian package libjs-vega), embedded by attnlab's runner report.\n"
                    "Its licence (BSD-3-Clause; parts ISC, Expat, BSD-2-Clause), from /usr/share/doc/libjs-vega/copyright:\n\n"
                    "${licence}\n*/\n")
file(APPEND "${tmp}" "var __attnlabVega = {};\n"
  "function __attnlabVegaModule(name, body) {\n"
  "  var define = function (deps, factory) {\n"
  "    var exported = {};\n"
  "    factory.apply(null, deps.map(function (d) {\n"
  "      return d === 'exports' ? exported : __attnlabVega[d === 'vega-selections' ? 'vega-selection' : d];\n"
  "    }));\n"
  "    __attnlabVega[name] = exported;\n"
  "  };\n"
  "  define.amd = true;\n"
  "  body(define);\n"
  "}\n")
string(REPLACE "," ";" modules "${MODULES}")
foreach(m ${modules})
  file(READ "${VEGA_DIR}/${m}.min.js" js)
  string(REGEX REPLACE "\n//# sourceMappingURL=[^\n]*" "" js "${js}")
  file(APPEND "${tmp}" "__attnlabVegaModule(\"${m}\", function (define) { var exports, module;\n${js}\n});\n")
endforeach()
file(APPEND "${tmp}" "(function () {\n"
  "  var vega = {version: '${VERSION}'};\n"
  "  ['vega-statistics', 'vega-time', 'vega-util', 'vega-loader', 'vega-scenegraph', 'vega-dataflow', 'vega-scale',\n"
  "   'vega-runtime', 'vega-expression', 'vega-event-selector', 'vega-format', 'vega-functions', 'vega-parser',\n"
  "   'vega-view'].forEach(function (m) { Object.assign(vega, __attnlabVega[m]); });\n"
  "  var transforms = __attnlabVega['vega-dataflow'].transforms;\n"
  "  ['vega-transforms', 'vega-view-transforms', 'vega-encode', 'vega-label', 'vega-regression', 'vega-hierarchy',\n"
  "   'vega-force', 'vega-crossfilter', 'vega-wordcloud'].forEach(function (m) { Object.assign(transforms, __attnlabVega[m]); });\n"
  "  vega.version = '${VERSION}';\n"
  "  window.vega = vega;\n"
  "})();\n")
file(RENAME "${tmp}" "${OUT}")
