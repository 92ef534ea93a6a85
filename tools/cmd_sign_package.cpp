// sign-package: the signature sidecar model-package.json.sig (skippy/package_signature.h).
#include <iostream>

#include "cli.h"
#include "skippy/package_signature.h"

namespace skippy::cli {

nlohmann::json signature_result_json(const std::filesystem::path& dir, const PackageSignature& s) {
  return {{"package", dir.string()},
          {"sidecar", (dir / std::string(kSignatureFileName)).string()},
          {"owner_id", s.owner_id},
          {"manifest_sha256", s.manifest_sha256},
          {"validation_sha256", s.validation_sha256 ? nlohmann::json(*s.validation_sha256) : nlohmann::json()},
          {"signed_at_unix_secs", s.signed_at_unix_secs},
          {"certificate_not_after", s.not_after},
          {"replaced_invalid_signature", s.replaced_invalid ? nlohmann::json(*s.replaced_invalid) : nlohmann::json()}};
}

// sign-package's --help after its options: examples, then what it does.
constexpr const char* kSignPackageHelp =
    "Example:\n  skippy-model-package sign-package ./model-package --owner ~/.skippy/owner\n"
    "Writes model-package.json.sig beside the manifest: the owner's certificate and the Ed25519\n"
    "signature of model-package.json's exact bytes (and of validation.json's, when present). The\n"
    "manifest pins every artifact by SHA-256, so the signature covers the whole package. Consumers\n"
    "given --trust-signer owner.crt (or SKIPPY_TRUSTED_SIGNERS) refuse packages it does not cover.";

Command register_sign_package(CLI::App& app) {
  auto* cmd = app.add_subcommand("sign-package", "Sign a package's manifest with an owner key (model-package.json.sig)");
  cmd->footer(kSignPackageHelp);
  struct Args {
    std::string dir, owner;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  path_option(cmd->add_option("package", a->dir, "Package directory (holding model-package.json)"))->required();
  path_option(cmd->add_option("--owner", a->owner, "Owner identity directory (owner.key, owner.crt: `identity init-owner`)"))->required();
  cmd->add_flag("--json", a->json, "Print one JSON document on stdout");
  return {cmd, [a]() {
            const auto sig = sign_package(a->dir, a->owner);
            if (sig.replaced_invalid) {
              std::cerr << "warning: replaced a signature that did not verify (" << *sig.replaced_invalid
                        << "); the new one vouches for the package as it is now\n";
            }
            if (a->json) {
              print_json(signature_result_json(a->dir, sig));
            } else {
              std::cerr << "signed " << a->dir << " as owner " << sig.owner_id << " (manifest SHA-256 "
                        << sig.manifest_sha256 << (sig.validation_sha256 ? ", validation.json too" : "") << ")\n";
              std::cout << (std::filesystem::path(a->dir) / std::string(kSignatureFileName)).string() << "\n";
            }
            return kExitOk;
          }};
}

}  // namespace skippy::cli
