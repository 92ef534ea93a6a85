// Internal to the schema 2 root reader (src/format/manifest_v2*.cpp): the
// strict field readers and rules shared by the root's parser and the
// parsers of its newer members (request_defaults, publisher_metadata,
// publisher_defaults: manifest_v2_defaults.cpp).
#pragma once

#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "format/manifest_json.h"
#include "skippy/manifest_v2.h"

namespace skippy::manifest_v2_detail {

using manifest_detail::FieldReader;
using json = nlohmann::json;

// serde's deny_unknown_fields; `why` explains particular refusals.
void v2_refuse_unknown(const json& obj, std::string_view path, std::initializer_list<std::string_view> known,
                       const FieldReader& r,
                       std::initializer_list<std::pair<std::string_view, std::string_view>> why = {});
const json& v2_object_member(const json& obj, std::string_view key, std::string_view parent, const FieldReader& r);
std::string v2_str(const json& obj, std::string_view key, std::string_view parent, const FieldReader& r);
std::optional<std::string> v2_opt_str(const json& obj, std::string_view key, std::string_view parent,
                                      const FieldReader& r);
uint32_t v2_u32(const json& obj, std::string_view key, std::string_view parent, const FieldReader& r);
std::optional<uint32_t> v2_opt_u32(const json& obj, std::string_view key, std::string_view parent,
                                   const FieldReader& r);

bool v2_blank(std::string_view s);
bool v2_artifact_identifier(std::string_view s);  // [A-Za-z0-9._-]+
void v2_require_not_blank(const FieldReader& r, std::string_view path, std::string_view v);
void v2_require_no_controls(const FieldReader& r, std::string_view path, std::string_view v);
void v2_require_path(const FieldReader& r, std::string_view path, std::string_view v);

// generation.request_defaults at `path` (manifest_v2_defaults.cpp).
V2RequestDefaults parse_v2_request_defaults(const json& j, std::string_view path, const FieldReader& r);
void validate_v2_request_defaults(const V2RequestDefaults& d, const FieldReader& r);
// The root's publisher_metadata and publisher_defaults members into `m`, and
// their rules (the reference's validate_publisher_metadata / _defaults).
void parse_v2_publisher(const json& root, PackageRootV2& m, const FieldReader& r);
void validate_v2_publisher(const PackageRootV2& m, const FieldReader& r);

}  // namespace skippy::manifest_v2_detail
