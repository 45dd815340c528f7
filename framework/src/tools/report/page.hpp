#pragma once
// The HTML of a `runner report` page and how it is written.
#include <string>

namespace attnlab::tools::report {

/// Text for HTML: & < > " ' as character references.
std::string html_escape(const std::string& s);

/// The whole page: `title` (escaped), the page's JSON `data` (from page_data: script-safe) in a
/// <script type="application/json" id="attnlab-data">, the Vega bundle, the page's script and style.
std::string page_html(const std::string& title, const std::string& data);

/// Why `path` cannot take the page ("" when it can): its folder missing or not writable, or the
/// path a folder. Checked before the runs are read.
std::string output_problem(const std::string& path);

/// Writes `text` to an unnamed file in `path`'s folder (O_TMPFILE; a named temporary where the
/// filesystem lacks it), then renames it over `path`: a reader sees the old file or the whole new
/// one, never a part, and a process killed while writing leaves no temporary file behind. Error
/// naming the path on failure (any temporary removed).
void write_atomically(const std::string& path, const std::string& text);

}  // namespace attnlab::tools::report
