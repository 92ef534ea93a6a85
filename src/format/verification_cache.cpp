#include "format/json_output.h"
#include "format/verification_cache.h"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <random>

#include "util/env.h"
#include "skippy/error.h"
#include "util/file.h"
#include "util/sha256.h"
// (default_verification_cache_dir is declared in skippy/verify.h, for users)

namespace skippy {

namespace fs = std::filesystem;

fs::path default_verification_cache_dir() { return env::skippy_cache_dir() / "verified"; }

namespace detail {

namespace {

constexpr uint64_t kRecordMaxBytes = 4096;
constexpr std::string_view kRecordFormat = "skippy-verified";
constexpr int kRecordVersion = 1;

int64_t ns_of(const struct timespec& t) noexcept {
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + static_cast<int64_t>(t.tv_nsec);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

void field(std::string& out, std::string_view name, std::string_view value) {
  out += name;
  out += '=';
  out += std::to_string(value.size());
  out += ':';
  out += value;
  out += '\n';
}

}  // namespace

FileIdentity identity_of(const struct stat& st) noexcept {
  FileIdentity id;
  id.dev = static_cast<uint64_t>(st.st_dev);
  id.ino = static_cast<uint64_t>(st.st_ino);
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtime_ns = ns_of(st.st_mtim);
  id.ctime_ns = ns_of(st.st_ctim);
  return id;
}

std::string verification_key(std::string_view manifest_sha256, std::string_view rel_path,
                             std::string_view declared_sha256, uint64_t declared_bytes, const FileIdentity& id) {
  std::string s = "skippy-verification-key-v1\n";
  field(s, "manifest_sha256", lower(manifest_sha256));
  field(s, "artifact_path", rel_path);
  field(s, "artifact_sha256", lower(declared_sha256));
  field(s, "artifact_bytes", std::to_string(declared_bytes));
  field(s, "st_dev", std::to_string(id.dev));
  field(s, "st_ino", std::to_string(id.ino));
  field(s, "st_size", std::to_string(id.size));
  field(s, "st_mtim_ns", std::to_string(id.mtime_ns));
  field(s, "st_ctim_ns", std::to_string(id.ctime_ns));
  return sha256_hex(s);
}

VerificationCache::VerificationCache(fs::path dir) : dir_(std::move(dir)) {}

bool VerificationCache::lookup(const std::string& key, std::string_view declared_sha256,
                               uint64_t declared_bytes) const {
  try {
    const auto text = read_small_file(dir_ / key, kRecordMaxBytes);
    const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return false;
    const auto fmt = j.find("format");
    const auto ver = j.find("version");
    const auto sha = j.find("sha256");
    const auto size = j.find("size");
    const auto k = j.find("key");
    if (fmt == j.end() || !fmt->is_string() || fmt->get<std::string>() != kRecordFormat) return false;
    if (ver == j.end() || !ver->is_number_integer() || ver->get<int64_t>() != kRecordVersion) return false;
    if (k == j.end() || !k->is_string() || k->get<std::string>() != key) return false;
    if (sha == j.end() || !sha->is_string() || !is_sha256_hex(declared_sha256) ||
        !sha256_equal(sha->get<std::string>(), declared_sha256)) {
      return false;
    }
    if (size == j.end() || !size->is_number_unsigned() || size->get<uint64_t>() != declared_bytes) return false;
    return true;
  } catch (const std::exception&) {
    return false;  // missing, unreadable or not a record: a miss
  }
}

void VerificationCache::store(const std::string& key, std::string_view sha256, uint64_t bytes) {
  {
    std::lock_guard g(mu_);
    if (disabled_) return;
    if (!dir_ready_) {
      std::error_code ec;
      fs::create_directories(dir_, ec);
      if (ec || !fs::is_directory(dir_, ec)) {
        disabled_ = true;
        note_ = "verification cache " + dir_.string() + " is not usable (" +
                (ec ? ec.message() : std::string("not a directory")) + "): verified without caching";
        return;
      }
      dir_ready_ = true;
    }
  }
  const nlohmann::json record = {{"format", kRecordFormat},
                                 {"version", kRecordVersion},
                                 {"key", key},
                                 {"sha256", lower(sha256)},
                                 {"size", bytes},
                                 {"verified_at", static_cast<int64_t>(std::time(nullptr))}};
  const std::string text = json_output(record) + "\n";
  // Atomic (temporary name, then rename) but not fsynced: a record lost or
  // torn by a crash is unreadable or incomplete JSON, which is a miss.
  std::string why;
  try {
    write_file_atomic(dir_ / key, text, Durability::kRenameOnly);
  } catch (const Error& e) {
    why = e.what();
  }
  if (!why.empty()) {
    std::lock_guard g(mu_);
    if (!disabled_) {
      disabled_ = true;
      note_ = "verification cache " + dir_.string() + " is not writable (" + why + "): verified without caching";
    }
  }
}

std::optional<std::string> VerificationCache::note() const {
  std::lock_guard g(mu_);
  return note_;
}

}  // namespace detail
}  // namespace skippy
