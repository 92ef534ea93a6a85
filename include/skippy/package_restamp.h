// Re-stamping a package schema 2 for another runtime ABI.
//
// mesh-llm's exact-rule runtimes (upstream, its release) admit a schema 2
// package only at exactly its root's native_abi_version; the fork's takes it
// as provenance (skippy/abi.h, skippy/runtime_lines.h). The artifacts do not depend on it, so
// moving a package to another runtime ABI changes the root alone: its
// native_abi_version and, recomputed, its package_id. Every artifact stays
// byte for byte (a Hub commit of the result uploads one small file), the
// carrier included, and the package stays verifiable.
//
// The files bound to the old root's bytes are handled, never left lying:
//   - model-package.json.sig signs the old bytes: removed, or, with
//     sign_owner_dir, replaced by a signature of the new root. Signing
//     first checks what it will vouch for: the signature the package
//     carries (if any) must verify over the root as it is, and every
//     artifact must have its declared size and SHA-256 (Error(kIntegrity)
//     otherwise, before anything is written): a root edited after it was
//     signed is never signed again;
//   - validation.json names the old manifest's SHA-256 (publish refuses it
//     against the new one): removed; validate-package SOURCE DIR --write-result
//     certifies the re-stamped package again (its artifacts are unchanged);
//   - README.md: written again when it is the model card write-package
//     writes (it names the package_id and the ABI); another README is left
//     as it is, with a note when it names the old ABI.
// The old files are removed before the new root is renamed into place: a
// crash leaves the old root unsigned, or the new one, never a signature or
// a verdict that names other bytes.
//
// Thread-safety: restamp_package writes one package directory; do not run
// two on the same directory at once. Safe to call from any thread otherwise.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "skippy/package_signature.h"

namespace skippy {

struct RestampOptions {
  std::filesystem::path package_dir;  // holds a schema 2 model-package.json
  std::string native_abi_version;     // "MAJOR.MINOR.PATCH" (required)
  // An owner identity directory (owner.key, owner.crt) to sign the new root
  // with; without it an existing signature is removed.
  std::optional<std::filesystem::path> sign_owner_dir;
};

struct RestampResult {
  std::string old_native_abi_version, native_abi_version;
  std::string old_package_id, package_id;
  std::string manifest_sha256;        // of the root as it is now
  bool changed = false;               // false: it was at that ABI already, nothing written
  std::vector<std::string> removed;   // "<file>: <why>", one per file removed
  std::vector<std::string> rewritten; // other files written again (README.md)
  std::vector<std::string> notes;     // worth telling a person (a README naming the old ABI)
  std::optional<PackageSignature> signature;  // with sign_owner_dir
};

// Throws Error(kUsage) for a malformed version, Error(kNotFound) without a
// manifest, Error(kInvalidInput) for a root that is not a valid schema 2
// root (a schema 1 manifest named as such); the root is then as it was. A
// signer's error (with sign_owner_dir) comes after the new root is in place:
// it is rethrown saying the package was re-stamped but not signed.
RestampResult restamp_package_v2(const RestampOptions& options);

}  // namespace skippy
