// restamp-package: a schema 2 package moved to another runtime ABI, only its
// root rewritten (skippy/package_convert.h).
#include <iostream>

#include "cli.h"
#include "skippy/package_convert.h"

namespace skippy::cli {

// restamp-package's --help after its options: examples, then what it does.
constexpr const char* kRestampPackageHelp =
    "Example:\n  skippy-model-package restamp-package pkg-schema2/ --native-abi-version 0.1.64 --json\n"
    "Two ABI rules are in use. Exact: mesh-llm upstream (crates/skippy-api/src/package.rs@822f7e91)\n"
    "and its release admit a schema 2 package only when the root's native_abi_version is exactly their\n"
    "own skippy ABI. Provenance: its fork's newest loader (package.rs@d39f791d) takes the declared ABI\n"
    "as a record of who wrote the package and never refuses it. Re-stamp for an exact-rule runtime.\n"
    "The artifacts do not depend on it: this rewrites model-package.json alone (its\n"
    "native_abi_version and, recomputed, its package_id); every artifact stays byte for byte, so a Hub\n"
    "commit of the result uploads one small file. model-package.json.sig (it signed the old bytes) is\n"
    "removed, or signed again with --sign OWNER_DIR, which first checks that the signature the package\n"
    "carries (if any) still verifies and that every artifact has its declared size and SHA-256, and\n"
    "refuses otherwise: a new signature vouches only for what was checked. validation.json (it judged the\n"
    "old bytes) is removed:\n"
    "validate-package SRC DIR --write-result records a verdict for the new root. Already at that\n"
    "ABI: nothing is written.";

Command register_restamp_package(CLI::App& app) {
  auto* cmd = app.add_subcommand("restamp-package",
                                 "Re-stamp a package schema 2 for another runtime ABI (only model-package.json changes)");
  cmd->footer(kRestampPackageHelp);
  struct Args {
    std::string dir, abi, sign;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  path_option(cmd->add_option("package", a->dir, "A package schema 2 directory (holding model-package.json)"))
      ->required();
  cmd->add_option("--native-abi-version", a->abi,
                  "The skippy ABI (MAJOR.MINOR.PATCH) to write as the root's native_abi_version: the runtime "
                  "the package is re-stamped for")
      ->required();
  path_option(cmd->add_option("--sign", a->sign,
                              "Sign the re-stamped root with this owner identity directory (identity init-owner)"));
  cmd->add_flag("--json", a->json, "Print one JSON document on stdout");
  return {cmd, [a]() {
            RestampOptions o;
            o.package_dir = a->dir;
            o.native_abi_version = a->abi;
            if (!a->sign.empty()) o.sign_owner_dir = a->sign;
            const auto r = restamp_package_v2(o);
            if (a->json) {
              print_json({{"package", a->dir},
                          {"changed", r.changed},
                          {"old_native_abi_version", r.old_native_abi_version},
                          {"native_abi_version", r.native_abi_version},
                          {"old_package_id", r.old_package_id},
                          {"package_id", r.package_id},
                          {"manifest_sha256", r.manifest_sha256},
                          {"removed", r.removed},
                          {"rewritten", r.rewritten},
                          {"signed_by", r.signature ? nlohmann::json(r.signature->owner_id) : nlohmann::json()},
                          {"notes", r.notes}});
            } else if (!r.changed) {
              std::cout << a->dir << " is already at native ABI " << r.native_abi_version << " (package_id "
                        << r.package_id << "): nothing written\n";
            } else {
              std::cout << "re-stamped " << a->dir << ": native ABI " << r.old_native_abi_version << " -> "
                        << r.native_abi_version << "\npackage_id " << r.package_id << " (was " << r.old_package_id
                        << ")\n";
              for (const auto& x : r.removed) std::cout << "removed " << x << "\n";
              for (const auto& x : r.rewritten) std::cout << "rewrote " << x << "\n";
              if (r.signature) std::cout << "signed as owner " << r.signature->owner_id << "\n";
            }
            for (const auto& n : r.notes) std::cerr << "note: " << n << "\n";
            return kExitOk;
          }};
}

}  // namespace skippy::cli
