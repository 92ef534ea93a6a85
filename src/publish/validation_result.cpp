// validation.json (skippy/package_validator.h).
#include "format/json_output.h"
#include "skippy/package_layout.h"
#include "skippy/package_validator.h"

#include <ctime>
#include <nlohmann/json.hpp>

#include "format/manifest_json.h"
#include "publish/validator_internal.h"
#include "skippy/error.h"
#include "util/file.h"
#include "skippy/package_signature.h"
#include "util/sha256.h"
#include "skippy/version.h"

namespace skippy {
namespace validation_result_detail {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

constexpr int kValidationMaxJsonDepth = 16;          // it nests four levels
constexpr size_t kMaxProblems = 1000;              // a report of a wholly wrong source stays small

std::string utc_text(int64_t secs) {
  const std::time_t t = static_cast<std::time_t>(secs);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::vector<std::string> capped(const std::vector<std::string>& v) {
  if (v.size() <= kMaxProblems) return v;
  std::vector<std::string> out(v.begin(), v.begin() + kMaxProblems);
  out.push_back("... and " + std::to_string(v.size() - kMaxProblems) + " more");
  return out;
}

}  // namespace validation_result_detail

void write_validation_result(const std::filesystem::path& package_dir, const ValidationReport& report,
                             const std::string& manifest_sha256, const std::string& command,
                             std::optional<int64_t> now_unix_secs) {
  detail::write_validation_result(package_dir, report, manifest_sha256, command, now_unix_secs, nullptr);
}

void detail::write_validation_result(const std::filesystem::path& package_dir, const ValidationReport& report,
                                     const std::string& manifest_sha256, const std::string& command,
                                     std::optional<int64_t> now_unix_secs, IoEnv* env) {
  using namespace validation_result_detail;
  refuse_hf_cache_snapshot(package_dir, command);
  if (!is_sha256_hex(manifest_sha256)) throw Error(ErrorKind::kUsage, "validation.json: not a manifest SHA-256: " + manifest_sha256);
  const int64_t now = now_unix_secs.value_or(static_cast<int64_t>(std::time(nullptr)));
  ordered_json sources = ordered_json::array();
  for (const auto& f : report.source_files) {
    sources.push_back({{"name", f.name}, {"size", f.size}, {"sha256", f.sha256.empty() ? ordered_json() : ordered_json(f.sha256)}});
  }
  const ordered_json doc = {
      {"schema_version", kValidationSchemaVersion},
      {"tool", {{"name", "skippy-model-package"}, {"version", std::string(library_version())}}},
      {"command", command},
      {"manifest_sha256", manifest_sha256},
      {"source_files", sources},
      {"checks", report.checks},
      {"result", report.valid ? "valid" : "invalid"},
      {"problems", capped(report.problems)},
      {"warnings", capped(report.warnings)},
      {"artifacts_checked", report.artifacts_checked},
      {"tensors_checked", report.tensors_checked},
      {"bytes_hashed", report.bytes_hashed},
      {"validated_at_unix_secs", now},
      {"validated_at", utc_text(now)},
  };
  write_file_atomic(package_dir / std::string(kValidationFileName), json_output(doc, 2) + "\n", Durability::kDurable, env);
}

std::optional<ValidationResultInfo> read_validation_result(const std::filesystem::path& dir,
                                                           const std::string& manifest_sha256) {
  using namespace validation_result_detail;
  const fs::path file = dir / std::string(kValidationFileName);
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(file, ec))) return std::nullopt;
  ValidationResultInfo out;
  out.file = file;
  const std::string text = read_small_file(file, kValidationMaxBytes);
  out.sha256 = sha256_hex(text);
  auto unreadable_because = [&](const std::string& message) {
    ValidationResultInfo bad;
    bad.file = file;
    bad.sha256 = out.sha256;
    bad.unreadable = message;
    return bad;
  };
  auto unreadable = [&](const std::string& why) { return unreadable_because(file.string() + ": " + why); };
  // Strictly, as every JSON a stranger writes (a key twice would let two
  // readers see two verdicts in the one signed file).
  nlohmann::json doc;
  try {
    doc = manifest_detail::parse_strict_json(text, manifest_detail::FieldReader(file.string()), kValidationMaxJsonDepth);
  } catch (const Error& e) {
    return unreadable_because(e.what());
  }
  if (!doc.is_object()) return unreadable("not a JSON object");
  if (!doc.contains("schema_version") || doc["schema_version"] != kValidationSchemaVersion) {
    return unreadable("schema_version must be " + std::to_string(kValidationSchemaVersion));
  }
  auto str = [&](const nlohmann::json& j, const char* key) -> std::optional<std::string> {
    if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return std::nullopt;
    return j[key].get<std::string>();
  };
  const auto result = str(doc, "result");
  if (!result || (*result != "valid" && *result != "invalid")) return unreadable("\"result\" must be \"valid\" or \"invalid\"");
  const auto manifest = str(doc, "manifest_sha256");
  if (!manifest || !is_sha256_hex(*manifest)) return unreadable("\"manifest_sha256\" must be a SHA-256");
  out.result = *result;
  out.manifest_sha256 = *manifest;
  out.matches_manifest = sha256_equal(*manifest, manifest_sha256);
  if (doc.contains("tool")) {
    out.tool = str(doc["tool"], "name").value_or("");
    out.tool_version = str(doc["tool"], "version").value_or("");
  }
  out.command = str(doc, "command").value_or("");
  if (doc.contains("validated_at_unix_secs") && doc["validated_at_unix_secs"].is_number_integer()) {
    out.validated_at_unix_secs = doc["validated_at_unix_secs"].get<int64_t>();
  }
  auto strings = [&](const char* key) {
    std::vector<std::string> v;
    if (doc.contains(key) && doc[key].is_array()) {
      for (const auto& e : doc[key]) {
        if (e.is_string()) v.push_back(e.get<std::string>());
      }
    }
    return v;
  };
  out.checks = strings("checks");
  out.problems = strings("problems");
  if (doc.contains("source_files") && doc["source_files"].is_array()) {
    for (const auto& f : doc["source_files"]) {
      ValidationReport::SourceFile sf;
      sf.name = str(f, "name").value_or("");
      sf.sha256 = str(f, "sha256").value_or("");
      if (f.is_object() && f.contains("size") && f["size"].is_number_unsigned()) sf.size = f["size"].get<uint64_t>();
      out.source_files.push_back(std::move(sf));
    }
  }
  return out;
}

}  // namespace skippy
