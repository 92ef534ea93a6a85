// The verification cache's keys and records (see include/skippy/verify.h for
// the rules). Internal to the library.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace skippy {
// env::skippy_cache_dir() / "verified" (also declared in skippy/verify.h).
std::filesystem::path default_verification_cache_dir();
}  // namespace skippy

namespace skippy::detail {

// What identifies one state of a file on disk, from stat(2).
struct FileIdentity {
  uint64_t dev = 0;
  uint64_t ino = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};
FileIdentity identity_of(const struct stat& st) noexcept;

// Lowercase hex SHA-256 of a canonical, length-prefixed string of the
// manifest and artifact identity plus the file identity.
std::string verification_key(std::string_view manifest_sha256, std::string_view rel_path,
                             std::string_view declared_sha256, uint64_t declared_bytes, const FileIdentity& id);

// Records under one directory, named by their key. Thread-safe.
class VerificationCache {
 public:
  explicit VerificationCache(std::filesystem::path dir);

  // True when a record for `key` exists and vouches for exactly this digest
  // and size. Any unreadable or malformed record is a miss.
  bool lookup(const std::string& key, std::string_view declared_sha256, uint64_t declared_bytes) const;
  // Writes the record atomically (creating the directory on first use). A
  // failure disables further writes and leaves one note.
  void store(const std::string& key, std::string_view sha256, uint64_t bytes);
  // Why records could not be written, if they could not.
  std::optional<std::string> note() const;

 private:
  std::filesystem::path dir_;
  mutable std::mutex mu_;
  bool dir_ready_ = false;
  bool disabled_ = false;
  std::optional<std::string> note_;
};

// SHA-256 of the file at `path` (lowercase hex), unless the default
// verification cache (skippy/verify.h's rules: `scope` is the manifest's
// SHA-256) vouches that this file, as it is now, was hashed before and
// matched `declared_sha256`: then the declared digest, without reading the
// file. A digest that matches, of a file that did not change while read and
// is outside the racy window, is recorded (no waiting). Used for a schema 2
// package's metadata carrier, hashed on every open (package_id commits to
// its digest): a repeat open of a ~3.5 MB carrier costs a stat and a small
// read instead of ~2 ms of hashing. Throws as sha256_file does.
std::string sha256_file_cached(std::string_view scope, const std::filesystem::path& path, std::string_view rel_path,
                               std::string_view declared_sha256, uint64_t declared_bytes);

}  // namespace skippy::detail
