// Internal to the manifest module: typed, strict reads from parsed JSON, each
// failure an Error naming "<origin>: <field path>: <problem>".
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "skippy/manifest.h"

namespace skippy::manifest_detail {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// "parent.key", or parent["key"] when the key is not a plain identifier.
std::string field_path(std::string_view parent, std::string_view key);
std::string index_path(std::string_view parent, size_t index);
// A short description of a value for messages: `1.5`, `-1`, `a string "x"`.
std::string describe(const json& j);
std::string quote(std::string_view s);

class FieldReader {
 public:
  explicit FieldReader(std::string origin) : origin_(std::move(origin)) {}
  const std::string& origin() const { return origin_; }

  [[noreturn]] void fail(std::string_view path, const std::string& problem) const;

  // A present, non-null member, or nullptr (null counts as absent).
  static const json* find(const json& obj, std::string_view key);
  const json& require(const json& obj, std::string_view key, std::string_view parent) const;

  void expect_object(const json& j, std::string_view path) const;
  void expect_array(const json& j, std::string_view path) const;

  uint64_t u64(const json& j, std::string_view path) const;
  uint32_t u32(const json& j, std::string_view path) const;
  int64_t nonnegative_i64(const json& j, std::string_view path) const;
  std::string string(const json& j, std::string_view path) const;
  // A non-empty string without control characters.
  std::string text(const json& j, std::string_view path) const;
  // text() that is not whitespace-only either (identity fields: model_id,
  // source_model.*), kept as written.
  std::string identity(const json& j, std::string_view path) const;
  std::string sha256(const json& j, std::string_view path) const;
  std::string safe_path(const json& j, std::string_view path) const;

  // Optional members of `obj` (absent or null -> nullopt).
  std::optional<uint64_t> opt_u64(const json& obj, std::string_view key,
                                  std::string_view parent) const;
  std::optional<std::string> opt_text(const json& obj, std::string_view key,
                                      std::string_view parent) const;

 private:
  std::string origin_;
};

// JSON text parsed strictly, the one rule for every JSON document a
// stranger writes (manifests of both schemas, topology files): a duplicate
// key in one object (which the DOM would silently collapse to the last
// one) and nesting deeper than `max_depth` are refused while the parser
// runs, as is text that is not UTF-8 JSON; each through r.fail.
json parse_strict_json(std::string_view text, const FieldReader& r, int max_depth = 64);
// The same, with `keep` asked about every event after the strict checks
// (nlohmann's parser callback): returning false leaves a value out of the
// document, so a caller can take a large array's elements as they are
// parsed instead of holding them twice. `keep` may throw (through r.fail).
json parse_strict_json(std::string_view text, const FieldReader& r, int max_depth,
                       const std::function<bool(int depth, json::parse_event_t event, json& parsed)>& keep);

// Empty, or only Unicode White_Space (what str::trim removes).
bool is_blank(std::string_view s);

bool is_one_of(std::string_view key, std::initializer_list<std::string_view> keys);

// Members of `obj` whose key is not in `known`, as an object (for `extra`).
json unknown_members(const json& obj, std::initializer_list<std::string_view> known);

// Appends the members of `extra` to `out` after checking that `extra` is an
// object and repeats none of `known` (a serialize-time caller error).
void append_extra(ojson& out, const json& extra, std::initializer_list<std::string_view> known,
                  const FieldReader& r, std::string_view path);

// The manifest's text style, the spec's: 2-space indent, one member per
// line, arrays of scalars on one line ("[47]"), other arrays one element per
// line; no trailing newline.
std::string pretty_json(const ojson& j);

// generation: parse (validating against the package's layer_count) and build.
GenerationDefaults parse_generation(const json& j, uint32_t layer_count, const FieldReader& r);
ojson generation_to_json(const GenerationDefaults& g, const FieldReader& r);

}  // namespace skippy::manifest_detail
