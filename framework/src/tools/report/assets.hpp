#pragma once
// Files embedded into the runner at build time (framework/CMakeLists.txt, cmake/report_assets.cmake):
// the Vega bundle made from Debian's libjs-vega, and the page's own script and style sheet.
#include <string_view>

namespace attnlab::tools::report::assets {

/// Vega's modules from /usr/share/javascript/vega, each wrapped for a small loader that makes the
/// global `vega` (View, parse, ...), with the package's licence notice first.
std::string_view vega_bundle();
/// The Debian package version of libjs-vega the bundle was made from ("5.22.1+ds+~3.1.0-4").
std::string_view vega_version();
/// framework/src/tools/report/page.js and page.css.
std::string_view page_script();
/// framework/src/tools/report/heads.js: the head grids, pruning curves and rollout maps (before page.js).
std::string_view heads_script();
std::string_view page_style();

}  // namespace attnlab::tools::report::assets
