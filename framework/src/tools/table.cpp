#include "tools/table.hpp"

#include <attnlab/error.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace attnlab::tools {
namespace {

/// Display width of UTF-8 text (code points; enough for the labels we print).
size_t width(const std::string& s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string pad(const std::string& s, size_t w, bool right) {
  const std::string fill(w > width(s) ? w - width(s) : 0, ' ');
  return right ? fill + s : s + fill;
}

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string md_cell(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : c == '\n' ? std::string(" ") : std::string(1, c);
  return out.empty() ? " " : out;
}

}  // namespace

TableFormat parse_table_format(const std::string& name) {
  if (name == "table" || name == "text") return TableFormat::Text;
  if (name == "markdown" || name == "md") return TableFormat::Markdown;
  if (name == "csv") return TableFormat::Csv;
  throw Error(fmt::format("--format: expected table, markdown or csv, found '{}'", name));
}

std::string render(const Table& t, TableFormat format) {
  const size_t n = t.header.size();
  auto right = [&](size_t c) { return c < t.numeric.size() && t.numeric[c]; };
  auto cell = [](const std::vector<std::string>& row, size_t c) { return c < row.size() ? row[c] : std::string(); };
  std::string out;
  if (format == TableFormat::Csv) {
    auto line = [&](const std::vector<std::string>& row) {
      for (size_t c = 0; c < n; ++c) out += (c ? "," : "") + csv_cell(cell(row, c));
      out += "\n";
    };
    line(t.header);
    for (const auto& r : t.rows) line(r);
    return out;
  }
  if (format == TableFormat::Markdown) {
    auto line = [&](const std::vector<std::string>& row) {
      out += "|";
      for (size_t c = 0; c < n; ++c) out += " " + md_cell(cell(row, c)) + " |";
      out += "\n";
    };
    line(t.header);
    out += "|";
    for (size_t c = 0; c < n; ++c) out += right(c) ? "---:|" : "---|";
    out += "\n";
    for (const auto& r : t.rows) line(r);
    return out;
  }
  std::vector<size_t> w(n, 0);
  for (size_t c = 0; c < n; ++c) {
    w[c] = width(t.header[c]);
    for (const auto& r : t.rows) w[c] = std::max(w[c], width(cell(r, c)));
  }
  auto line = [&](const std::vector<std::string>& row) {
    std::string s;
    for (size_t c = 0; c < n; ++c) s += (c ? "  " : "") + pad(cell(row, c), w[c], right(c));
    while (!s.empty() && s.back() == ' ') s.pop_back();
    out += s + "\n";
  };
  line(t.header);
  std::string rule;
  for (size_t c = 0; c < n; ++c) rule += (c ? "  " : "") + std::string(w[c], '-');
  out += rule + "\n";
  for (const auto& r : t.rows) line(r);
  return out;
}

}  // namespace attnlab::tools
