#pragma once
// Reading back PNGs that `runner plot` / `runner compare --plot` wrote (tests linking cairo).
#include <cairo.h>

#include <string>
#include <utility>

namespace attnlab::testutil {

/// Width and height of a PNG file; {0, 0} when cairo cannot read it.
inline std::pair<int, int> png_size(const std::string& path) {
  cairo_surface_t* s = cairo_image_surface_create_from_png(path.c_str());
  std::pair<int, int> size{0, 0};
  if (cairo_surface_status(s) == CAIRO_STATUS_SUCCESS) {
    size = {cairo_image_surface_get_width(s), cairo_image_surface_get_height(s)};
  }
  cairo_surface_destroy(s);
  return size;
}

}  // namespace attnlab::testutil
