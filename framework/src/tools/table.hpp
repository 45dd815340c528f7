#pragma once
// A small table rendered as aligned text, GitHub markdown or CSV (RFC 4180).
#include <string>
#include <vector>

namespace attnlab::tools {

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // each as wide as the header
  std::vector<bool> numeric;                   // per column: right-aligned (empty = all left)
};

enum class TableFormat { Text, Markdown, Csv };
/// "table" | "markdown" | "csv"; Error otherwise.
TableFormat parse_table_format(const std::string& name);

std::string render(const Table& table, TableFormat format);

}  // namespace attnlab::tools
