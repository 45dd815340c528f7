#include "tools/plot/canvas.hpp"

#include <attnlab/error.hpp>
#include <attnlab/files.hpp>

#include "core/utf8.hpp"

#include <cairo-svg.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <numbers>

namespace attnlab::tools::plot {

Color palette(int i) {
  static constexpr std::array<unsigned, 10> tab10 = {0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd,
                                                     0x8c564b, 0xe377c2, 0x7f7f7f, 0xbcbd22, 0x17becf};
  const unsigned c = tab10[static_cast<size_t>(((i % 10) + 10) % 10)];
  return {((c >> 16) & 0xff) / 255.0, ((c >> 8) & 0xff) / 255.0, (c & 0xff) / 255.0, 1.0};
}

Color reds(double t) {
  static constexpr std::array<unsigned, 9> anchors = {0xfff5f0, 0xfee0d2, 0xfcbba1, 0xfc9272, 0xfb6a4a,
                                                      0xef3b2c, 0xcb181d, 0xa50f15, 0x67000d};
  if (!std::isfinite(t)) t = 0;
  t = std::clamp(t, 0.0, 1.0) * (anchors.size() - 1);
  const auto i = std::min(static_cast<size_t>(t), anchors.size() - 2);
  const double f = t - static_cast<double>(i);
  auto channel = [&](int shift) {
    const double a = ((anchors[i] >> shift) & 0xff) / 255.0, b = ((anchors[i + 1] >> shift) & 0xff) / 255.0;
    return a + (b - a) * f;
  };
  return {channel(16), channel(8), channel(0), 1.0};
}

Format format_of(const std::string& path) {
  auto ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext == ".png") return Format::Png;
  if (ext == ".svg") return Format::Svg;
  throw Error(fmt::format("plot file {}: expected a .png or .svg file name, found extension '{}'", path, ext));
}

Canvas::Canvas(std::string path, double natural_w, double natural_h, int width, int height)
    : path_(std::move(path)), format_(format_of(path_)) {
  width_ = width > 0 ? width : static_cast<int>(std::ceil(natural_w));
  height_ = height > 0 ? height : static_cast<int>(std::ceil(natural_h));
  ATTNLAB_CHECK(width_ > 0 && height_ > 0 && width_ <= 20000 && height_ <= 20000, Error,
                "plot file {}: size {}x{} pixels is outside 1..20000", path_, width_, height_);
  // A symlink loop, a directory or a FIFO in the way is named here, not as cairo's "error while
  // writing to output stream" after the drawing.
  if (auto parent = std::filesystem::path(path_).parent_path(); !parent.empty()) {
    const auto why = files::problem(parent.string(), files::Want::DirectoryToMake);
    ATTNLAB_CHECK(why.empty(), Error, "plot file {}: cannot make its folder {}: {}", path_, parent.string(), why);
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    ATTNLAB_CHECK(!ec, Error, "plot file {}: cannot make its folder {}: {}", path_, parent.string(), ec.message());
  }
  const auto why = files::problem(path_, files::Want::FileToWrite);
  ATTNLAB_CHECK(why.empty(), Error, "plot file {}: {}", path_, why);
  surface_ = format_ == Format::Png ? cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width_, height_)
                                    : cairo_svg_surface_create(path_.c_str(), width_, height_);
  if (cairo_surface_status(surface_) != CAIRO_STATUS_SUCCESS) {
    const std::string why = cairo_status_to_string(cairo_surface_status(surface_));
    cairo_surface_destroy(surface_);
    throw Error(fmt::format("plot file {}: cairo cannot create the surface: {}", path_, why));
  }
  cr_ = cairo_create(surface_);
  cairo_set_source_rgb(cr_, 1, 1, 1);  // white page
  cairo_paint(cr_);
  const double s = std::min(width_ / natural_w, height_ / natural_h);
  cairo_translate(cr_, (width_ - natural_w * s) / 2, (height_ - natural_h * s) / 2);
  cairo_scale(cr_, s, s);
  cairo_set_line_join(cr_, CAIRO_LINE_JOIN_ROUND);
  cairo_set_line_cap(cr_, CAIRO_LINE_CAP_ROUND);
}

Canvas::~Canvas() {
  if (cr_) cairo_destroy(cr_);
  if (surface_) cairo_surface_destroy(surface_);
}

namespace {
void select_font(cairo_t* cr, const TextStyle& style) {
  cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL,
                         style.bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, style.size);
}
}  // namespace

namespace {
TextExtents extents(cairo_t* cr, const std::string& raw, const TextStyle& style) {
  const std::string text = utf8::with_replacements(raw);  // cairo stops at invalid UTF-8
  select_font(cr, style);
  cairo_text_extents_t te;
  cairo_font_extents_t fe;
  cairo_text_extents(cr, text.c_str(), &te);
  cairo_font_extents(cr, &fe);
  return {te.x_advance, fe.ascent + fe.descent, fe.ascent};
}
}  // namespace

Canvas::Extents Canvas::measure(const std::string& text, const TextStyle& style) const {
  return extents(cr_, text, style);
}

TextExtents measure_text(const std::string& text, const TextStyle& style) {
  // One 1x1 scratch surface per thread: text metrics in user units do not depend on it.
  struct Scratch {
    cairo_surface_t* surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1);
    cairo_t* cr = cairo_create(surface);
    ~Scratch() {
      cairo_destroy(cr);
      cairo_surface_destroy(surface);
    }
  };
  thread_local Scratch scratch;
  return extents(scratch.cr, text, style);
}

void Canvas::text(const std::string& s, double x, double y, const TextStyle& style, HAlign h, VAlign v,
                  double degrees) const {
  const auto e = measure(s, style);  // also selects the font
  double dx = h == HAlign::Left ? 0 : h == HAlign::Center ? -e.w / 2 : -e.w;
  double dy = 0;
  switch (v) {
    case VAlign::Top: dy = e.ascent; break;
    case VAlign::Middle: dy = e.ascent - e.h / 2; break;
    case VAlign::Baseline: dy = 0; break;
    case VAlign::Bottom: dy = e.ascent - e.h; break;
  }
  cairo_save(cr_);
  cairo_translate(cr_, x, y);
  cairo_rotate(cr_, -degrees * std::numbers::pi / 180.0);
  cairo_move_to(cr_, dx, dy);
  set_color(style.color);
  cairo_show_text(cr_, utf8::with_replacements(s).c_str());
  cairo_restore(cr_);
}

void Canvas::line(double x0, double y0, double x1, double y1, const Color& c, double width, bool dashed) const {
  cairo_save(cr_);
  if (dashed) {
    const double dash[] = {5.0, 3.5};
    cairo_set_dash(cr_, dash, 2, 0);
  }
  set_color(c);
  cairo_set_line_width(cr_, width);
  cairo_move_to(cr_, x0, y0);
  cairo_line_to(cr_, x1, y1);
  cairo_stroke(cr_);
  cairo_restore(cr_);
}

void Canvas::rect(double x, double y, double w, double h, const Color& fill) const {
  set_color(fill);
  cairo_rectangle(cr_, x, y, w, h);
  cairo_fill(cr_);
}

void Canvas::frame(double x, double y, double w, double h, const Color& stroke, double width) const {
  set_color(stroke);
  cairo_set_line_width(cr_, width);
  cairo_rectangle(cr_, x, y, w, h);
  cairo_stroke(cr_);
}

void Canvas::circle(double x, double y, double radius, const Color& fill) const {
  set_color(fill);
  cairo_new_sub_path(cr_);
  cairo_arc(cr_, x, y, radius, 0, 2 * std::numbers::pi);
  cairo_fill(cr_);
}

void Canvas::cross(double x, double y, double r, const Color& c, double width) const {
  line(x - r, y - r, x + r, y + r, c, width);
  line(x - r, y + r, x + r, y - r, c, width);
}

void Canvas::finish() {
  if (finished_) return;
  finished_ = true;
  cairo_status_t st = cairo_status(cr_);
  if (st == CAIRO_STATUS_SUCCESS) {
    if (format_ == Format::Png) {
      st = cairo_surface_write_to_png(surface_, path_.c_str());
    } else {
      cairo_surface_finish(surface_);
      st = cairo_surface_status(surface_);
    }
  }
  ATTNLAB_CHECK(st == CAIRO_STATUS_SUCCESS, Error, "plot file {}: cairo cannot write it: {}", path_,
                cairo_status_to_string(st));
}

std::pair<int, int> png_size(const std::string& path) {
  cairo_surface_t* s = cairo_image_surface_create_from_png(path.c_str());
  std::pair<int, int> size{0, 0};
  if (cairo_surface_status(s) == CAIRO_STATUS_SUCCESS) {
    size = {cairo_image_surface_get_width(s), cairo_image_surface_get_height(s)};
  }
  cairo_surface_destroy(s);
  return size;
}

}  // namespace attnlab::tools::plot
