#pragma once
// A cairo drawing with a natural size in user units, written to PNG or SVG (by the file's
// extension) at any pixel size: the drawing is scaled uniformly and centred on a white page.
#include <cairo.h>

#include <string>
#include <utility>

namespace attnlab::tools::plot {

struct Color {
  double r = 0, g = 0, b = 0, a = 1;
  Color with_alpha(double alpha) const { return {r, g, b, alpha}; }
};
inline constexpr Color kBlack{0, 0, 0, 1};
inline constexpr Color kWhite{1, 1, 1, 1};
inline constexpr Color kGrey{0.5, 0.5, 0.5, 1};
inline constexpr Color kLightGrey{0.88, 0.88, 0.88, 1};

/// matplotlib's tab10 cycle, colour i % 10.
Color palette(int i);
/// matplotlib's "Reds" colour map (ColorBrewer, 9 anchors) at t in [0, 1] (clamped).
Color reds(double t);

enum class Format { Png, Svg };
/// ".png" or ".svg" (case-insensitive); Error naming the path otherwise.
Format format_of(const std::string& path);

enum class HAlign { Left, Center, Right };
enum class VAlign { Top, Middle, Baseline, Bottom };

struct TextStyle {
  double size = 12;
  bool bold = false;
  Color color = kBlack;
};

struct TextExtents {
  double w = 0, h = 0, ascent = 0;
};
/// Text extents in user units without a canvas (for computing a figure's natural size first).
TextExtents measure_text(const std::string& text, const TextStyle& style);

class Canvas {
 public:
  /// A drawing of natural_w x natural_h user units, written to `path` as width x height pixels
  /// (0 = the natural size, rounded up). Error when the surface cannot be created.
  Canvas(std::string path, double natural_w, double natural_h, int width = 0, int height = 0);
  ~Canvas();
  Canvas(const Canvas&) = delete;
  Canvas& operator=(const Canvas&) = delete;

  cairo_t* cr() const { return cr_; }
  int width() const { return width_; }
  int height() const { return height_; }

  /// Width and height of a text line (height = the font's ascent + descent).
  using Extents = TextExtents;
  Extents measure(const std::string& text, const TextStyle& style) const;
  /// Draws text anchored at (x, y), rotated by `degrees` counter-clockwise around the anchor.
  void text(const std::string& text, double x, double y, const TextStyle& style, HAlign h = HAlign::Left,
            VAlign v = VAlign::Baseline, double degrees = 0) const;

  void set_color(const Color& c) const { cairo_set_source_rgba(cr_, c.r, c.g, c.b, c.a); }
  void line(double x0, double y0, double x1, double y1, const Color& c, double width = 1.0, bool dashed = false) const;
  void rect(double x, double y, double w, double h, const Color& fill) const;
  void frame(double x, double y, double w, double h, const Color& stroke, double width = 1.0) const;
  void circle(double x, double y, double radius, const Color& fill) const;
  /// An "x" marker of half-size r.
  void cross(double x, double y, double r, const Color& c, double width = 1.5) const;

  /// Writes the file (PNG) or finishes it (SVG). Error naming the path on failure.
  void finish();

 private:
  std::string path_;
  Format format_;
  int width_, height_;
  cairo_surface_t* surface_ = nullptr;
  cairo_t* cr_ = nullptr;
  bool finished_ = false;
};

/// Reads a PNG's pixel size with cairo ({0, 0} when it is not a readable PNG).
std::pair<int, int> png_size(const std::string& path);

}  // namespace attnlab::tools::plot
