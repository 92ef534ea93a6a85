// convert-package: schema 1 <-> schema 2 (skippy/package_convert.h).
#include <iostream>

#include "cli.h"
#include "progress.h"
#include "skippy/stage.h"
#include "skippy/error.h"
#include "skippy/manifest.h"
#include "skippy/package_convert.h"
#include "util/parallel.h"

namespace skippy::cli {

namespace {

// convert-package --to 2's report: the package, each artifact and where it came from, the certification.
void print_to_v2(const ConvertToV2Result& r, unsigned threads, bool json) {
  if (json) {
    nlohmann::json arts = nlohmann::json::array();
    for (const auto& x : r.artifacts) {
      arts.push_back({{"id", x.id}, {"path", x.path}, {"from", x.from}, {"bytes", x.bytes},
                      {"sha256", x.sha256}, {"how", x.how}});
    }
    print_json({{"package_dir", r.package_dir.string()},
                {"schema_version", 2},
                {"package_id", r.package_id},
                {"manifest_sha256", r.manifest_sha256},
                {"native_abi_version", r.root.native_abi_version},
                {"certified", r.certified},
                {"threads", threads},
                {"certification", r.certification},
                {"tensors_certified", r.tensors_certified},
                {"bytes_compared", r.bytes_compared},
                {"payload_bytes", r.payload_bytes},
                {"linked_bytes", r.linked_bytes},
                {"carrier_root_seconds", r.carrier_root_seconds},
                {"certify_seconds", r.certify_seconds},
                {"artifacts", arts},
                {"dropped", r.dropped}});
  } else {
    std::cout << "wrote " << r.package_dir.string() << " (schema 2): " << r.artifacts.size()
              << " artifacts, " << human_bytes(r.payload_bytes) << " of payload placed unchanged ("
              << human_bytes(r.linked_bytes) << " hard-linked)\n"
              << "package_id " << r.package_id << "\n"
              << "native ABI " << r.root.native_abi_version
              << " (exact-rule runtimes admit it only at that ABI; provenance-rule ones at any)\n"
              << (r.certified ? "certified: " : "") << r.certification << "\n";
    for (const auto& d : r.dropped) std::cout << "dropped: " << d << "\n";
  }
}

// convert-package --to 1's report.
void print_to_v1(const ConvertToV1Result& r, unsigned threads, bool json) {
  if (json) {
    print_json({{"package_dir", r.package_dir.string()},
                {"schema_version", 1},
                {"manifest_sha256", r.manifest_sha256},
                {"artifact_count", r.artifact_count},
                {"bytes_written", r.bytes_written},
                {"threads", threads},
                {"dropped", r.dropped},
                {"notes", r.notes}});
  } else {
    std::cout << "wrote " << r.package_dir.string() << " (schema 1): " << r.artifact_count << " artifacts, "
              << human_bytes(r.bytes_written) << "\nmanifest sha256 " << r.manifest_sha256 << "\n";
    for (const auto& d : r.dropped) std::cout << "dropped: " << d << "\n";
    for (const auto& n : r.notes) std::cout << "note: " << n << "\n";
  }
}

}  // namespace

// convert-package's --help after its options: examples, then what it does.
constexpr const char* kConvertPackageHelp =
    "Examples:\n"
    "  skippy-model-package convert-package pkg-schema1/ --to 2 --out-dir pkg-schema2/ --source model.gguf\n"
    "  skippy-model-package convert-package pkg-schema1/ --to 2 --out-dir pkg-schema2/ --uncertified\n"
    "  skippy-model-package convert-package pkg-schema1/ --to 2 --out-dir pkg-schema2/ --source model.gguf --native-abi-version 0.1.64\n"
    "  skippy-model-package convert-package pkg-schema2/ --to 1 --out-dir pkg-schema1/\n"
    "--to 2 copies no payload byte: every schema 1 fragment with tensors becomes a schema 2 payload part\n"
    "unchanged (a hard link on the same filesystem, else copy_file_range); only shared/metadata.gguf (the\n"
    "carrier: the source's KVs, the whole tensor directory and each tensor's locator) and model-package.json\n"
    "are new. The metadata fragment's tensors move to shared/common.gguf (same bytes). Schema 2 says the\n"
    "package holds every source tensor exactly once; that is certified only against the original source\n"
    "(--source: every tensor's type, dims and bytes compared, the source files and every part hashed).\n"
    "Without --source the conversion refuses, unless --uncertified writes it without that check.\n"
    "What schema 1 held and schema 2 has no place for (generation.policy, thresholds, fragments without\n"
    "tensors) is listed under \"dropped\".\n"
    "With --to 2 the parts keep schema 1's layout, never the reference writer's (write-package --schema 2 --layout\n"
    "reference): for parts byte-identical to mesh-llm's own, write the package from the source instead.\n"
    "--to 1 rewrites fragments: every tensor is streamed from its payload part into the schema 1 layout\n"
    "(for a runtime that reads only schema 1); payload digests are checked on the way.\n"
    "The output directory appears complete or not at all (staged beside it, renamed into place).";

Command register_convert_package(CLI::App& app) {
  auto* cmd = app.add_subcommand("convert-package", "Convert a package between schema 1 and schema 2");
  cmd->footer(kConvertPackageHelp);
  struct Args {
    std::string dir, out_dir, source, native_abi, generation_defaults;
    std::vector<std::string> publisher_metadata;
    unsigned to = 0, threads = 0;
    bool uncertified = false, force = false, json = false;
  };
  auto a = std::make_shared<Args>();
  path_option(cmd->add_option("package", a->dir, "The package directory to convert"))->required();
  cmd->add_option("--to", a->to, "Target schema: 1 or 2")->required()->check(number_in(1u, 2u));
  path_option(cmd->add_option("--out-dir", a->out_dir, "Where the converted package goes (absent or empty)"))->required();
  path_option(cmd->add_option("--source", a->source, "--to 2: the original source model (any shard) to certify coverage against"));
  cmd->add_flag("--uncertified", a->uncertified, "--to 2: write without a source, uncertified");
  add_native_abi_option(cmd, a->native_abi, "--to 2: ");
  add_generation_defaults_option(cmd, a->generation_defaults, "--to 2: ");
  add_publisher_metadata_option(cmd, a->publisher_metadata, "--to 2: ");
  cmd->add_flag("--force", a->force, "Replace a non-empty --out-dir");
  cmd->add_option("--threads", a->threads, "Worker threads (default: one per core, at most 16)")->check(number_in(1u, 64u));
  cmd->add_flag("--json", a->json, "Print one JSON document on stdout");
  return {cmd, [a]() {
            Progress progress("convert-package");
            auto on_progress = [&](uint64_t d, uint64_t t) { progress.update(d, t); };
            if (a->to == 2) {
              if (!a->source.empty() && a->uncertified) {
                throw Error(ErrorKind::kUsage, "--source certifies the conversion; --uncertified is for having none");
              }
              ConvertToV2Options o;
              o.package_dir = a->dir;
              o.out_dir = a->out_dir;
              if (!a->source.empty()) o.source = a->source;
              o.allow_uncertified = a->uncertified;
              o.native_abi_version = a->native_abi;
              o.request_defaults = read_generation_defaults(a->generation_defaults);
              o.publisher_metadata.assign(a->publisher_metadata.begin(), a->publisher_metadata.end());
              o.force = a->force;
              o.threads = detail::worker_threads(a->threads);
              o.on_progress = on_progress;
              const auto r = convert_package_to_v2(o);
              (void)warn_runtime_lines(r.package_dir, package_architecture(r.package_dir), /*content_only=*/false);
              print_to_v2(r, o.threads, a->json);
              return r.certified || a->uncertified ? kExitOk : kExitInvalid;
            }
            if (!a->source.empty() || a->uncertified || !a->native_abi.empty() || !a->generation_defaults.empty() ||
                !a->publisher_metadata.empty()) {
              throw Error(ErrorKind::kUsage,
                          "--source, --uncertified, --native-abi-version, --generation-defaults and --publisher-metadata "
                          "go with --to 2");
            }
            const auto opened = open_local_package(a->dir);
            ConvertToV1Options o;
            o.package_dir = opened.root;
            o.out_dir = a->out_dir;
            o.force = a->force;
            o.threads = detail::worker_threads(a->threads);
            o.on_progress = on_progress;
            const auto r = convert_package_to_v1(opened, o);
            (void)warn_runtime_lines(r.package_dir, package_architecture(r.package_dir), /*content_only=*/false);
            print_to_v1(r, o.threads, a->json);
            return kExitOk;
          }};
}

}  // namespace skippy::cli
