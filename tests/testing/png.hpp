#pragma once
// Reading back PNGs that `runner plot` / `runner compare --plot` wrote (tests linking cairo).
#include <cairo.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
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

/// How many pixels of a PNG are within `tolerance` (0..255 per channel) of the colour r, g, b;
/// -1 when cairo cannot read it.
inline int count_pixels(const std::string& path, int r, int g, int b, int tolerance = 2) {
  cairo_surface_t* s = cairo_image_surface_create_from_png(path.c_str());
  int n = -1;
  if (cairo_surface_status(s) == CAIRO_STATUS_SUCCESS) {
    cairo_surface_flush(s);
    n = 0;
    const int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
    const int stride = cairo_image_surface_get_stride(s);
    const unsigned char* data = cairo_image_surface_get_data(s);
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        uint32_t px;  // ARGB32 in native byte order (opaque figures: no premultiplication to undo)
        std::memcpy(&px, data + y * stride + 4 * x, 4);
        const int pr = (px >> 16) & 0xff, pg = (px >> 8) & 0xff, pb = px & 0xff;
        n += std::abs(pr - r) <= tolerance && std::abs(pg - g) <= tolerance && std::abs(pb - b) <= tolerance;
      }
    }
  }
  cairo_surface_destroy(s);
  return n;
}

}  // namespace attnlab::testutil
