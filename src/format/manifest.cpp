// model-package.json schema version 1: the top level, artifact entries, the
// source model, safe paths and the ABI version. Generation defaults live in
// manifest_generation.cpp.
#include "skippy/manifest.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "format/manifest_json.h"
#include "skippy/error.h"
#include "util/control_chars.h"

namespace skippy {

using manifest_detail::describe;
using manifest_detail::field_path;
using manifest_detail::FieldReader;
using manifest_detail::index_path;
using manifest_detail::is_blank;
using manifest_detail::json;
using manifest_detail::ojson;
using manifest_detail::quote;

// ---------------------------------------------------------------------- ABI

std::optional<AbiVersion> parse_abi_version(std::string_view text) noexcept {
  uint32_t parts[3] = {0, 0, 0};
  size_t part = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] != '.') continue;
    if (part == 3) return std::nullopt;
    const std::string_view digits = text.substr(start, i - start);
    if (digits.empty() || digits.size() > 10) return std::nullopt;
    if (digits.size() > 1 && digits[0] == '0') return std::nullopt;
    uint64_t v = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return std::nullopt;
      v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    if (v > UINT32_MAX) return std::nullopt;
    parts[part++] = static_cast<uint32_t>(v);
    start = i + 1;
  }
  if (part != 3) return std::nullopt;
  return AbiVersion{parts[0], parts[1], parts[2]};
}

std::string format_abi_version(AbiVersion v) {
  return std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.patch);
}

bool abi_compatible(AbiVersion package, AbiVersion runtime) noexcept {
  return package.major == runtime.major && package.minor <= runtime.minor;
}

// -------------------------------------------------------------------- paths

namespace {

constexpr size_t kMaxPathBytes = 4096;
constexpr size_t kMaxComponentBytes = 255;

// Why `p` is not a safe relative path, or nullptr when it is.
const char* unsafe_path_reason(std::string_view p) noexcept {
  if (p.empty()) return "empty";
  if (p.size() > kMaxPathBytes) return "longer than 4096 bytes";
  for (char ch : p) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == 0) return "contains a NUL byte";
    if (c == '\\') return "contains a backslash";
  }
  if (const auto why = control_character_problem(p)) {
    return why->starts_with("contains a Unicode") ? "contains a Unicode bidirectional control character"
                                                  : "contains a control character";
  }
  if (p.front() == '/') return "is absolute";
  if (p.size() >= 2 && std::isalpha(static_cast<unsigned char>(p[0])) && p[1] == ':') {
    return "starts with a drive prefix";
  }
  if (p.back() == '/') return "ends with '/'";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string_view::npos) end = p.size();
    const std::string_view comp = p.substr(start, end - start);
    if (comp.empty()) return "contains an empty component (\"//\")";
    if (comp == "..") return "escapes the package root (\"..\" component)";
    if (comp == ".") return "contains a \".\" component";
    if (comp.size() > kMaxComponentBytes) return "has a component longer than 255 bytes";
    start = end + 1;
  }
  return nullptr;
}

}  // namespace

bool is_safe_relative_path(std::string_view path) noexcept {
  return unsafe_path_reason(path) == nullptr;
}

void check_safe_relative_path(std::string_view path, std::string_view what) {
  if (const char* why = unsafe_path_reason(path)) {
    throw_invalid(std::string(what) + ": unsafe path " + quote(path) + ": " + why);
  }
}

// ------------------------------------------------------------------- parsing

namespace {

constexpr int kMaxJsonDepth = 64;

json parse_json_text(std::string_view text, const FieldReader& r) {
  if (text.size() > kManifestMaxBytes) {
    r.fail("", "manifest is " + std::to_string(text.size()) + " bytes; the limit is " +
                   std::to_string(kManifestMaxBytes) + " (16 MiB)");
  }
  return parse_strict_json(text, r, kMaxJsonDepth);
}

// "namespace/name" or "namespace/name:distribution"; parts of [A-Za-z0-9._-].
const char* model_coordinate_problem(std::string_view id) {
  auto part_ok = [](std::string_view part) {
    if (part.empty() || part == "." || part == "..") return false;
    for (char c : part) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
      if (!ok) return false;
    }
    return true;
  };
  auto ends_with_gguf = [](std::string_view part) {
    if (part.size() < 5) return false;
    std::string tail(part.substr(part.size() - 5));
    for (auto& c : tail) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return tail == ".gguf";
  };
  const size_t colon = id.find(':');
  const std::string_view repo = id.substr(0, colon);
  const size_t slash = repo.find('/');
  if (slash == std::string_view::npos || repo.find('/', slash + 1) != std::string_view::npos) {
    return "is not a model coordinate \"namespace/name[:distribution]\"";
  }
  const std::string_view ns = repo.substr(0, slash);
  const std::string_view name = repo.substr(slash + 1);
  if (!part_ok(ns) || !part_ok(name)) {
    return "is not a model coordinate \"namespace/name[:distribution]\" (parts use A-Z a-z 0-9 . _ -)";
  }
  if (colon != std::string_view::npos && !part_ok(id.substr(colon + 1))) {
    return "has an invalid distribution after ':' (use A-Z a-z 0-9 . _ -)";
  }
  if (ends_with_gguf(name) ||
      (colon != std::string_view::npos && ends_with_gguf(id.substr(colon + 1)))) {
    return "looks like a file name, not a model coordinate";
  }
  return nullptr;
}

ArtifactEntry parse_artifact_fields(const json& j, std::string_view p, const FieldReader& r) {
  ArtifactEntry a;
  a.path = r.safe_path(r.require(j, "path", p), field_path(p, "path"));
  a.tensor_count = r.u64(r.require(j, "tensor_count", p), field_path(p, "tensor_count"));
  a.tensor_bytes = r.u64(r.require(j, "tensor_bytes", p), field_path(p, "tensor_bytes"));
  a.artifact_bytes = r.u64(r.require(j, "artifact_bytes", p), field_path(p, "artifact_bytes"));
  a.sha256 = r.sha256(r.require(j, "sha256", p), field_path(p, "sha256"));
  if (a.artifact_bytes == 0) r.fail(field_path(p, "artifact_bytes"), "must be greater than zero");
  if (a.tensor_count == 0 && a.tensor_bytes != 0) {
    r.fail(field_path(p, "tensor_bytes"),
           "must be zero when tensor_count is zero, got " + std::to_string(a.tensor_bytes));
  }
  if (a.tensor_count > 0 && a.tensor_bytes == 0) {
    r.fail(field_path(p, "tensor_bytes"), "must be greater than zero when tensor_count is " +
                                              std::to_string(a.tensor_count));
  }
  if (a.tensor_bytes > a.artifact_bytes) {
    r.fail(field_path(p, "tensor_bytes"),
           std::to_string(a.tensor_bytes) + " exceeds artifact_bytes " +
               std::to_string(a.artifact_bytes));
  }
  return a;
}

ArtifactEntry parse_artifact(const json& j, std::string_view p, const FieldReader& r) {
  r.expect_object(j, p);
  return parse_artifact_fields(j, p, r);
}

SourceModel parse_source_model(const json& j, const FieldReader& r) {
  const std::string p = "source_model";
  r.expect_object(j, p);
  SourceModel s;
  if (const json* v = FieldReader::find(j, "path")) s.path = r.identity(*v, field_path(p, "path"));
  s.sha256 = r.sha256(r.require(j, "sha256", p), field_path(p, "sha256"));
  s.repo = r.identity(r.require(j, "repo", p), field_path(p, "repo"));
  s.revision = r.identity(r.require(j, "revision", p), field_path(p, "revision"));
  s.primary_file = r.safe_path(r.require(j, "primary_file", p), field_path(p, "primary_file"));
  if (is_blank(s.primary_file)) {
    r.fail(field_path(p, "primary_file"), "must not be empty or whitespace-only, got " + quote(s.primary_file));
  }
  s.canonical_ref = r.identity(r.require(j, "canonical_ref", p), field_path(p, "canonical_ref"));
  if (const json* v = FieldReader::find(j, "distribution_id")) {
    s.distribution_id = r.identity(*v, field_path(p, "distribution_id"));
  }
  const std::string fp = field_path(p, "files");
  const json& files = r.require(j, "files", p);
  r.expect_array(files, fp);
  if (files.empty()) r.fail(fp, "must list at least one source file");
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string ep = index_path(fp, i);
    const json& f = files[i];
    r.expect_object(f, ep);
    SourceFile sf;
    sf.path = r.safe_path(r.require(f, "path", ep), field_path(ep, "path"));
    // Both are required fields; null means "not recorded" (the reference
    // writer's choice for local sources).
    auto present = [&](std::string_view key) -> const json& {
      const auto it = f.find(key);
      if (it == f.end()) r.fail(field_path(ep, key), "missing required field (null if not recorded)");
      return *it;
    };
    if (const json& v = present("size_bytes"); !v.is_null()) {
      sf.size_bytes = r.u64(v, field_path(ep, "size_bytes"));
      if (*sf.size_bytes == 0) r.fail(field_path(ep, "size_bytes"), "must be greater than zero");
    }
    if (const json& v = present("sha256"); !v.is_null()) sf.sha256 = r.sha256(v, field_path(ep, "sha256"));
    auto [it, inserted] = seen.emplace(sf.path, i);
    if (!inserted) {
      r.fail(field_path(ep, "path"),
             quote(sf.path) + " is listed twice (also " + index_path(fp, it->second) + ")");
    }
    s.files.push_back(std::move(sf));
  }
  if (!seen.contains(s.primary_file)) {
    r.fail(field_path(p, "primary_file"), quote(s.primary_file) + " is not one of source_model.files");
  }
  return s;
}

void parse_layers(const json& j, PackageManifest& m, const FieldReader& r) {
  const std::string p = "layers";
  r.expect_array(j, p);
  std::map<uint32_t, std::vector<size_t>> positions;  // layer_index -> array positions
  m.layers.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string ep = index_path(p, i);
    r.expect_object(j[i], ep);
    LayerEntry e;
    e.layer_index = r.u32(r.require(j[i], "layer_index", ep), field_path(ep, "layer_index"));
    static_cast<ArtifactEntry&>(e) = parse_artifact_fields(j[i], ep, r);
    if (e.layer_index >= m.layer_count) {
      r.fail(field_path(ep, "layer_index"), std::to_string(e.layer_index) +
                                                " is out of range (layer_count " +
                                                std::to_string(m.layer_count) + ")");
    }
    positions[e.layer_index].push_back(i);
    m.layers.push_back(std::move(e));
  }
  if (positions.size() == m.layer_count && m.layers.size() == m.layer_count) {
    std::sort(m.layers.begin(), m.layers.end(),
              [](const LayerEntry& a, const LayerEntry& b) { return a.layer_index < b.layer_index; });
    return;
  }
  // Report duplicates and missing indices together; the walk is bounded by
  // the number of entries, never by layer_count.
  std::string problems;
  constexpr size_t kListed = 10;
  size_t dup_count = 0;
  for (const auto& [index, at] : positions) {
    if (at.size() < 2) continue;
    if (dup_count++ < kListed) {
      problems += problems.empty() ? "duplicate layer_index " : ", ";
      problems += std::to_string(index) + " (";
      for (size_t k = 0; k < at.size(); ++k) problems += (k ? ", " : "") + index_path(p, at[k]);
      problems += ")";
    }
  }
  if (dup_count > kListed) problems += " and " + std::to_string(dup_count - kListed) + " more";
  const uint64_t missing = m.layer_count - positions.size();
  if (missing > 0) {
    if (!problems.empty()) problems += "; ";
    problems += "missing layer_index ";
    size_t listed = 0;
    uint64_t expect = 0;
    auto list_until = [&](uint64_t stop) {
      for (; expect < stop && listed < kListed; ++expect, ++listed) {
        problems += (listed ? ", " : "") + std::to_string(expect);
      }
    };
    for (const auto& entry : positions) {
      list_until(entry.first);
      expect = uint64_t{entry.first} + 1;
      if (listed == kListed) break;
    }
    list_until(m.layer_count);
    if (missing > listed) problems += " and " + std::to_string(missing - listed) + " more";
  }
  r.fail(p, problems + " (layer_count " + std::to_string(m.layer_count) +
                ": exactly one entry per index 0.." + std::to_string(m.layer_count - 1) +
                " is required)");
}

}  // namespace

bool is_known_projector_kind(std::string_view kind) noexcept { return kind == kProjectorKindMmproj; }

namespace {

void parse_projectors(const json& j, PackageManifest& m, const FieldReader& r) {
  const std::string p = "projectors";
  r.expect_array(j, p);
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string ep = index_path(p, i);
    r.expect_object(j[i], ep);
    ProjectorEntry e;
    e.kind = r.string(r.require(j[i], "kind", ep), field_path(ep, "kind"));
    if (e.kind.empty()) r.fail(field_path(ep, "kind"), "must be a non-empty projector kind such as \"mmproj\"");
    static_cast<ArtifactEntry&>(e) = parse_artifact_fields(j[i], ep, r);
    m.projectors.push_back(std::move(e));
  }
}

// Each artifact is a distinct file, and none of them is the manifest itself.
void check_distinct_artifact_paths(const PackageManifest& m, const FieldReader& r) {
  std::map<std::string_view, std::string> used;
  auto claim = [&](const ArtifactEntry& a, const std::string& where) {
    const std::string fp = field_path(where, "path");
    if (a.path == kManifestFileName) r.fail(fp, "an artifact cannot be the manifest itself");
    auto [it, inserted] = used.emplace(a.path, where);
    if (!inserted) r.fail(fp, quote(a.path) + " is already used by " + it->second);
  };
  claim(m.shared.metadata, "shared.metadata");
  claim(m.shared.embeddings, "shared.embeddings");
  claim(m.shared.output, "shared.output");
  for (const auto& l : m.layers) {
    claim(l, "layers[layer_index " + std::to_string(l.layer_index) + "]");
  }
  for (size_t i = 0; i < m.projectors.size(); ++i) claim(m.projectors[i], index_path("projectors", i));
}

PackageManifest parse_root(const json& root, const FieldReader& r, GenerationProblems generation_problems) {
  if (!root.is_object()) r.fail("", "the manifest must be a JSON object, got " + describe(root));
  PackageManifest m;

  // Compatibility boundaries first: an unknown version or format says so,
  // whatever else in it looks different.
  const json& sv = r.require(root, "schema_version", "");
  const std::string supported = "this runtime supports schema_version " +
                                std::to_string(kManifestSchemaVersion) +
                                " only and refuses other versions rather than loading them best-effort";
  if (!sv.is_number_unsigned() || sv.get<uint64_t>() != kManifestSchemaVersion) {
    r.fail("schema_version", "unsupported schema version " + describe(sv) + "; " + supported);
  }
  m.schema_version = kManifestSchemaVersion;
  m.format = r.string(r.require(root, "format", ""), "format");
  if (m.format != kPackageFormat) {
    r.fail("format", "unsupported format " + quote(m.format) + "; this runtime reads \"layer-package\"");
  }

  m.model_id = r.identity(r.require(root, "model_id", ""), "model_id");
  if (const char* problem = model_coordinate_problem(m.model_id)) {
    r.fail("model_id", quote(m.model_id) + " " + problem);
  }
  m.source_model = parse_source_model(r.require(root, "source_model", ""), r);
  m.layer_count = r.u32(r.require(root, "layer_count", ""), "layer_count");
  if (m.layer_count == 0) r.fail("layer_count", "must be at least 1");
  m.activation_width = r.opt_u64(root, "activation_width", "");
  if (m.activation_width && *m.activation_width == 0) {
    r.fail("activation_width", "must be greater than zero when present");
  }
  if (const json* g = FieldReader::find(root, "generation")) {
    // Generation is policy, not tensor layout: a consumer sets a block that
    // breaks its rules aside (and says why) rather than refuse the package.
    try {
      m.generation = manifest_detail::parse_generation(*g, m.layer_count, r);
    } catch (const Error& e) {
      if (generation_problems == GenerationProblems::kRefuse) throw;
      m.generation_problem = e.what();
    }
  }
  const json& shared = r.require(root, "shared", "");
  r.expect_object(shared, "shared");
  m.shared.metadata = parse_artifact(r.require(shared, "metadata", "shared"), "shared.metadata", r);
  m.shared.embeddings =
      parse_artifact(r.require(shared, "embeddings", "shared"), "shared.embeddings", r);
  m.shared.output = parse_artifact(r.require(shared, "output", "shared"), "shared.output", r);
  parse_layers(r.require(root, "layers", ""), m, r);
  if (const json* pj = FieldReader::find(root, "projectors")) parse_projectors(*pj, m, r);
  m.skippy_abi_version = r.string(r.require(root, "skippy_abi_version", ""), "skippy_abi_version");
  if (!parse_abi_version(m.skippy_abi_version)) {
    r.fail("skippy_abi_version", quote(m.skippy_abi_version) + " is not \"MAJOR.MINOR.PATCH\"");
  }
  if (const json* c = FieldReader::find(root, "created_at_unix_secs")) {
    m.created_at_unix_secs = r.nonnegative_i64(*c, "created_at_unix_secs");
  }
  check_distinct_artifact_paths(m, r);
  // Totals of the declared sizes fit 64 bits (tensor_bytes <= artifact_bytes
  // per artifact, so every sum a reader takes over either is bounded by this).
  {
    uint64_t total = 0;
    auto add = [&](const ArtifactEntry& e) {
      if (__builtin_add_overflow(total, e.artifact_bytes, &total)) {
        r.fail(field_path("", "artifact_bytes"), "the artifacts' declared sizes add up past 2^64 (at " + quote(e.path) + ")");
      }
    };
    add(m.shared.metadata);
    add(m.shared.embeddings);
    add(m.shared.output);
    for (const auto& l : m.layers) add(l);
    for (const auto& p : m.projectors) add(p);
    uint64_t source = 0;
    for (size_t i = 0; i < m.source_model.files.size(); ++i) {
      const auto& f = m.source_model.files[i];
      if (f.size_bytes && __builtin_add_overflow(source, *f.size_bytes, &source)) {
        r.fail("source_model.files[" + std::to_string(i) + "].size_bytes", "the source files' sizes add up past 2^64");
      }
    }
  }
  return m;
}

// --------------------------------------------------------------- serializing

ojson artifact_to_json(const ArtifactEntry& a) {
  ojson j = ojson::object();
  j["path"] = a.path;
  j["tensor_count"] = a.tensor_count;
  j["tensor_bytes"] = a.tensor_bytes;
  j["artifact_bytes"] = a.artifact_bytes;
  j["sha256"] = a.sha256;
  return j;
}

ojson source_model_to_json(const SourceModel& s) {
  ojson j = ojson::object();
  if (!s.path.empty()) j["path"] = s.path;
  j["sha256"] = s.sha256;
  j["repo"] = s.repo;
  j["revision"] = s.revision;
  j["primary_file"] = s.primary_file;
  j["canonical_ref"] = s.canonical_ref;
  if (!s.distribution_id.empty()) j["distribution_id"] = s.distribution_id;
  ojson files = ojson::array();
  for (const auto& f : s.files) {
    ojson e = ojson::object();
    e["path"] = f.path;
    e["size_bytes"] = f.size_bytes ? ojson(*f.size_bytes) : ojson(nullptr);
    e["sha256"] = f.sha256 ? ojson(*f.sha256) : ojson(nullptr);
    files.push_back(std::move(e));
  }
  j["files"] = std::move(files);
  return j;
}

}  // namespace

PackageManifest parse_manifest(std::string_view json_text, std::string_view origin,
                               GenerationProblems generation_problems) {
  const FieldReader r{std::string(origin)};
  return parse_root(parse_json_text(json_text, r), r, generation_problems);
}

std::string serialize_manifest(const PackageManifest& m) {
  const FieldReader r{std::string(kManifestFileName)};
  if (m.generation_problem) {
    r.fail("generation", "was set aside when read (" + *m.generation_problem +
                             "); a manifest is not written without it");
  }
  ojson j = ojson::object();
  j["schema_version"] = m.schema_version;
  j["model_id"] = m.model_id;
  j["source_model"] = source_model_to_json(m.source_model);
  j["format"] = m.format;
  j["layer_count"] = m.layer_count;
  if (m.activation_width) j["activation_width"] = *m.activation_width;
  ojson shared = ojson::object();
  shared["metadata"] = artifact_to_json(m.shared.metadata);
  shared["embeddings"] = artifact_to_json(m.shared.embeddings);
  shared["output"] = artifact_to_json(m.shared.output);
  j["shared"] = std::move(shared);
  if (m.generation) j["generation"] = manifest_detail::generation_to_json(*m.generation, r);
  std::vector<const LayerEntry*> layers;
  for (const auto& l : m.layers) layers.push_back(&l);
  std::stable_sort(layers.begin(), layers.end(), [](const LayerEntry* a, const LayerEntry* b) {
    return a->layer_index < b->layer_index;
  });
  ojson lj = ojson::array();
  for (const LayerEntry* l : layers) {
    ojson e = ojson::object();
    e["layer_index"] = l->layer_index;
    const ojson fields = artifact_to_json(*l);
    for (const auto& [k, v] : fields.items()) e[k] = v;
    lj.push_back(std::move(e));
  }
  j["layers"] = std::move(lj);
  if (!m.projectors.empty()) {
    ojson pj = ojson::array();
    for (const auto& p : m.projectors) {
      ojson e = ojson::object();
      e["kind"] = p.kind;
      const ojson fields = artifact_to_json(p);
      for (const auto& [k, v] : fields.items()) e[k] = v;
      pj.push_back(std::move(e));
    }
    j["projectors"] = std::move(pj);
  }
  j["skippy_abi_version"] = m.skippy_abi_version;
  if (m.created_at_unix_secs) j["created_at_unix_secs"] = *m.created_at_unix_secs;

  std::string text;
  try {
    text = manifest_detail::pretty_json(j) + "\n";
  } catch (const ojson::type_error& e) {
    r.fail("", std::string("a string field is not valid UTF-8: ") + e.what());
  }
  // The writer must never emit what a consumer refuses: validate the exact
  // text with the parser's rules.
  parse_root(json::parse(text), r, GenerationProblems::kRefuse);
  return text;
}

std::optional<std::string> model_id_problem(std::string_view model_id) {
  if (const char* problem = model_coordinate_problem(model_id)) return std::string(problem);
  return std::nullopt;
}

}  // namespace skippy
