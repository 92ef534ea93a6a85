// Strict typed reads from parsed manifest JSON (see manifest_json.h).
#include <cctype>
#include "format/manifest_json.h"

#include <algorithm>
#include <limits>
#include <set>
#include <vector>

#include "skippy/error.h"
#include "util/sha256.h"
#include "util/control_chars.h"

namespace skippy::manifest_detail {

namespace {

bool plain_key(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string quote(std::string_view s) {
  // JSON string escaping, so control bytes and quotes stay readable; long
  // values are cut so a hostile manifest cannot flood the message.
  constexpr size_t kMax = 80;
  const bool cut = s.size() > kMax;
  std::string shown = json(std::string(s.substr(0, kMax))).dump(-1, ' ', false,
                                                                 json::error_handler_t::replace);
  if (cut) shown.insert(shown.size() - 1, "...");
  return shown;
}

std::string field_path(std::string_view parent, std::string_view key) {
  std::string out(parent);
  if (plain_key(key)) {
    if (!out.empty()) out += '.';
    out += key;
  } else {
    out += '[';
    out += quote(key);
    out += ']';
  }
  return out;
}

std::string index_path(std::string_view parent, size_t index) {
  return std::string(parent) + "[" + std::to_string(index) + "]";
}

std::string describe(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return j.get<bool>() ? "true" : "false";
    case json::value_t::string: return "the string " + quote(j.get_ref<const std::string&>());
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::number_float:
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return j.dump();
    default: return "an unsupported value";
  }
}

void FieldReader::fail(std::string_view path, const std::string& problem) const {
  std::string msg = origin_ + ": ";
  if (!path.empty()) {
    msg += path;
    msg += ": ";
  }
  msg += problem;
  throw_invalid(msg);
}

const json* FieldReader::find(const json& obj, std::string_view key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

const json& FieldReader::require(const json& obj, std::string_view key,
                                 std::string_view parent) const {
  const json* v = find(obj, key);
  if (v == nullptr) fail(field_path(parent, key), "missing required field");
  return *v;
}

void FieldReader::expect_object(const json& j, std::string_view path) const {
  if (!j.is_object()) fail(path, "must be a JSON object, got " + describe(j));
}

void FieldReader::expect_array(const json& j, std::string_view path) const {
  if (!j.is_array()) fail(path, "must be a JSON array, got " + describe(j));
}

uint64_t FieldReader::u64(const json& j, std::string_view path) const {
  if (j.is_number_unsigned()) return j.get<uint64_t>();
  if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    if (v >= 0) return static_cast<uint64_t>(v);
  }
  if (j.is_number_float()) {
    fail(path, "must be a non-negative integer, got " + describe(j) +
                   " (a fraction, an exponent or a value beyond 2^64-1)");
  }
  fail(path, "must be a non-negative integer, got " + describe(j));
}

uint32_t FieldReader::u32(const json& j, std::string_view path) const {
  const uint64_t v = u64(j, path);
  if (v > std::numeric_limits<uint32_t>::max()) {
    fail(path, "must be at most 4294967295, got " + std::to_string(v));
  }
  return static_cast<uint32_t>(v);
}

int64_t FieldReader::nonnegative_i64(const json& j, std::string_view path) const {
  const uint64_t v = u64(j, path);
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    fail(path, "must be at most 9223372036854775807, got " + std::to_string(v));
  }
  return static_cast<int64_t>(v);
}

std::string FieldReader::string(const json& j, std::string_view path) const {
  if (!j.is_string()) fail(path, "must be a string, got " + describe(j));
  return j.get<std::string>();
}

std::string FieldReader::text(const json& j, std::string_view path) const {
  std::string s = string(j, path);
  if (s.empty()) fail(path, "must be a non-empty string");
  if (const auto why = control_character_problem(s)) fail(path, *why + ": " + quote(s));
  return s;
}

namespace {

// The length of the White_Space code point (Unicode, as Rust's str::trim
// uses) that starts `s`, or 0. Control characters never get this far.
size_t whitespace_prefix(std::string_view s) {
  if (s.empty()) return 0;
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  if (b(0) == ' ') return 1;
  if (s.size() >= 2 && b(0) == 0xC2 && (b(1) == 0x85 || b(1) == 0xA0)) return 2;  // U+0085, U+00A0
  if (s.size() >= 3 && b(0) == 0xE1 && b(1) == 0x9A && b(2) == 0x80) return 3;    // U+1680
  if (s.size() >= 3 && b(0) == 0xE2 && b(1) == 0x80 &&
      (b(2) <= 0x8A || b(2) == 0xA8 || b(2) == 0xA9 || b(2) == 0xAF)) {
    return 3;  // U+2000..U+200A, U+2028, U+2029, U+202F
  }
  if (s.size() >= 3 && b(0) == 0xE2 && b(1) == 0x81 && b(2) == 0x9F) return 3;  // U+205F
  if (s.size() >= 3 && b(0) == 0xE3 && b(1) == 0x80 && b(2) == 0x80) return 3;  // U+3000
  return 0;
}

}  // namespace

bool is_blank(std::string_view s) {
  while (!s.empty()) {
    const size_t n = whitespace_prefix(s);
    if (n == 0) return false;
    s.remove_prefix(n);
  }
  return true;
}

std::string FieldReader::identity(const json& j, std::string_view path) const {
  std::string s = text(j, path);
  // The reference runtime trims before its non-empty check; so do we (the
  // value itself is kept as written).
  if (is_blank(s)) fail(path, "must not be empty or whitespace-only, got " + quote(s));
  return s;
}

std::string FieldReader::sha256(const json& j, std::string_view path) const {
  std::string s = string(j, path);
  if (!is_sha256_hex(s)) fail(path, "not a 64-character hex digest: " + quote(s));
  // Either case is accepted (the reference runtime does); one spelling inside.
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string FieldReader::safe_path(const json& j, std::string_view path) const {
  std::string s = string(j, path);
  try {
    check_safe_relative_path(s, "path");
  } catch (const Error& e) {
    // check_safe_relative_path says "path: unsafe path ...": keep the reason.
    std::string why = e.what();
    const std::string prefix = "path: ";
    if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
    fail(path, why);
  }
  return s;
}

std::optional<uint64_t> FieldReader::opt_u64(const json& obj, std::string_view key,
                                             std::string_view parent) const {
  const json* v = find(obj, key);
  if (v == nullptr) return std::nullopt;
  return u64(*v, field_path(parent, key));
}

std::optional<std::string> FieldReader::opt_text(const json& obj, std::string_view key,
                                                 std::string_view parent) const {
  const json* v = find(obj, key);
  if (v == nullptr) return std::nullopt;
  return text(*v, field_path(parent, key));
}

namespace {

void pretty_into(std::string& out, const ojson& j, size_t indent) {
  auto newline = [&](size_t level) {
    out += '\n';
    out.append(level * 2, ' ');
  };
  if (j.is_object()) {
    if (j.empty()) {
      out += "{}";
      return;
    }
    out += '{';
    bool first = true;
    for (const auto& [k, v] : j.items()) {
      if (!first) out += ',';
      first = false;
      newline(indent + 1);
      out += ojson(k).dump();
      out += ": ";
      pretty_into(out, v, indent + 1);
    }
    newline(indent);
    out += '}';
    return;
  }
  if (j.is_array()) {
    const bool flat = std::none_of(j.begin(), j.end(), [](const ojson& e) { return e.is_structured(); });
    if (j.empty() || flat) {
      out += '[';
      for (size_t i = 0; i < j.size(); ++i) {
        if (i) out += ", ";
        out += j[i].dump();
      }
      out += ']';
      return;
    }
    out += '[';
    for (size_t i = 0; i < j.size(); ++i) {
      if (i) out += ',';
      newline(indent + 1);
      pretty_into(out, j[i], indent + 1);
    }
    newline(indent);
    out += ']';
    return;
  }
  out += j.dump();  // strict UTF-8: throws type_error 316 on invalid strings
}

}  // namespace

std::string pretty_json(const ojson& j) {
  std::string out;
  pretty_into(out, j, 0);
  return out;
}

bool is_one_of(std::string_view key, std::initializer_list<std::string_view> keys) {
  for (auto k : keys) {
    if (k == key) return true;
  }
  return false;
}

json unknown_members(const json& obj, std::initializer_list<std::string_view> known) {
  json out = json::object();
  for (const auto& [k, v] : obj.items()) {
    if (!is_one_of(k, known)) out[k] = v;
  }
  return out;
}

void append_extra(ojson& out, const json& extra, std::initializer_list<std::string_view> known,
                  const FieldReader& r, std::string_view path) {
  if (extra.is_null()) return;
  if (!extra.is_object()) r.fail(path, "extra (unknown fields) must be a JSON object");
  for (const auto& [k, v] : extra.items()) {
    if (is_one_of(k, known)) {
      r.fail(field_path(path, k), "is a known field; set the struct member, not extra");
    }
    out[k] = ojson::parse(v.dump());
  }
}


json parse_strict_json(std::string_view text, const FieldReader& r, int max_depth) {
  return parse_strict_json(text, r, max_depth, {});
}

json parse_strict_json(std::string_view text, const FieldReader& r, int max_depth,
                       const std::function<bool(int depth, json::parse_event_t event, json& parsed)>& keep) {
  std::vector<std::set<std::string>> open_objects;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= max_depth) r.fail("", "JSON nesting deeper than " + std::to_string(max_depth) + " levels");
        if (event == json::parse_event_t::object_start) open_objects.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open_objects.empty() && !open_objects.back().insert(parsed.get<std::string>()).second) {
          r.fail("", "duplicate key " + quote(parsed.get<std::string>()) + " in one JSON object");
        }
        break;
      default:
        break;
    }
    return keep ? keep(depth, event, parsed) : true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    // e.what() = "[json.exception.parse_error.101] parse error at line L, column C: ...";
    // out_of_range.406 for a number too large for any JSON number type.
    std::string why = e.what();
    const size_t pos = why.find("] ");
    if (pos != std::string::npos) why.erase(0, pos + 2);
    r.fail("", "not valid UTF-8 JSON: " + why);
  }
}

}  // namespace skippy::manifest_detail
