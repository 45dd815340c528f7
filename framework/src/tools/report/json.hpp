#pragma once
// A small JSON writer for the data `runner report` embeds in its page. Strings are escaped so the
// text can sit inside an HTML <script> element: '<', '>' and '&' become \u003c, \u003e, \u0026, so
// a value such as "</script>" or "<!--" cannot end the element or change how HTML parses it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace attnlab::tools::report {

/// `s` as a JSON string literal, quotes included (script-safe as above; U+2028/U+2029 escaped).
std::string json_string(std::string_view s);
/// A finite number in the shortest form that reads back to `v` at `digits` significant digits;
/// "null" for NaN and infinities (JSON has no such numbers).
std::string json_number(double v, int digits = 6);

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  /// The key of the next value inside an object.
  JsonWriter& key(std::string_view k);
  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(double v, int digits = 6);
  JsonWriter& value(int64_t v);
  JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(size_t v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(bool b);
  JsonWriter& null();
  /// Arrays of one kind in one call.
  JsonWriter& array(const std::vector<std::string>& v);
  JsonWriter& array(const std::vector<double>& v, int digits = 6);
  JsonWriter& array(const std::vector<int64_t>& v);
  /// The text so far; complete once every begin_ has its end_.
  const std::string& str() const { return out_; }

 private:
  void separate();
  JsonWriter& open(char bracket);
  JsonWriter& close(char bracket);
  std::string out_;
  std::vector<bool> first_;  // per open object/array: no element written yet
  bool after_key_ = false;
};

}  // namespace attnlab::tools::report
