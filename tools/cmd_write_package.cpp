#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>
#include <span>

#include "cli.h"
#include "progress.h"
#include "skippy/error.h"
#include "util/env.h"
#include "skippy/hub.h"
#include "skippy/hub_publish.h"
#include "skippy/hub_stream.h"
#include "skippy/hf_ref.h"
#include "skippy/package_signature.h"
#include "util/sha256.h"
#include "skippy/source.h"
#include "skippy/package_writer.h"
#include "util/parallel.h"

namespace skippy::cli {

nlohmann::json publish_result_json(const PublishResult& r);    // cmd_publish.cpp
void print_publish_summary(const PublishResult& r);            // cmd_publish.cpp
PublishSettings publish_settings_from_env(bool create, bool private_repo, Progress& progress);

namespace {

// #30: SIGINT or SIGTERM during the write says, in one line, what it
// interrupted and how to finish it (the directory is resumable), then exits
// 128 + the signal. The line is made before the handler is installed, so the
// handler only writes it (async-signal-safe).
char g_interrupted_line[2048];
size_t g_interrupted_len = 0;

extern "C" void on_interrupt(int sig) {
  if (g_interrupted_len) (void)!::write(STDERR_FILENO, g_interrupted_line, g_interrupted_len);
  ::_exit(128 + sig);
}

void say_how_to_finish_on_interrupt(const std::string& out_dir) {
  const std::string line = std::string(stderr_is_tty() ? "\n" : "") + "write-package interrupted: " + out_dir +
                           " is not finished; rerun the same command to finish it (or delete the directory)\n";
  g_interrupted_len = std::min(line.size(), sizeof g_interrupted_line);
  std::copy_n(line.data(), g_interrupted_len, g_interrupted_line);
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  for (const int sig : {SIGINT, SIGTERM}) ::sigaction(sig, &sa, nullptr);
}

}  // namespace

namespace {

// What to say about validation once the package is written (and maybe published).
std::string validation_advice(bool validated, bool pushed, bool deleted_as_uploaded, const std::string& source,
                              const std::string& out_dir) {
  if (validated) return "validated against the source: valid\n";
  const std::string command = "skippy-model-package validate-package " + source + " " + out_dir;
  if (!pushed) return "not validated; before publishing run: " + command + "\n";
  if (deleted_as_uploaded) {
    return "published without validation; the fragments left the disk as they were uploaded (--max-disk): --validate "
           "checks each one before its upload, or fetch the package and run validate-package " + source +
           " on its snapshot directory to check it\n";
  }
  return "published without validation; to check the package against its source run: " + command + "\n";
}

}  // namespace

Command register_write_package(CLI::App& app) {
  auto* cmd = app.add_subcommand("write-package", "Turn a GGUF model into a layer package");
  cmd->footer(
      "Examples:\n"
      "  skippy-model-package write-package ./model.gguf --out-dir model-package/ \\\n"
      "      --model-id org/repo:Q4_K_M --source-revision 0123abc --source-file model.gguf\n"
      "  skippy-model-package write-package ./model-00001-of-00003.gguf --out-dir pkg/ \\\n"
      "      --model-id org/repo:Q4_0 --source-revision 0123abc --source-file model-00001-of-00003.gguf\n"
      "  skippy-model-package write-package org/Model-GGUF:Q4_K_M --out-dir model-package/\n"
      "The second reads every shard of the split model. The third takes the Hub's GGUF file(s) whose names\n"
      "carry that tag, every shard, fetched into the Hugging Face cache; --source-revision picks a revision\n"
      "other than main; provenance comes from the Hub. In the examples, 0123abc stands for the commit of\n"
      "the model's repository the file came from: put yours.\n"
      "A local source needs its provenance (the spec's rule), all three checked before anything is written:\n"
      "  --model-id ID          the model coordinate the package is named after, org/repo:DISTRIBUTION\n"
      "                         (e.g. Qwen/Qwen3-8B-GGUF:Q4_K_M), not a file name\n"
      "  --source-revision REV  the commit of that repository the file came from\n"
      "  --source-file NAME     the file's path in that repository (the first shard of a split model)\n"
      "A Hub source takes all three from the Hub (only --source-revision may pick the revision).\n"
      "--validate runs validate-package on the result before the manifest is written and records the outcome\n"
      "in the package README; without it the README says how to validate. Rerunning into the directory of an\n"
      "interrupted run finishes the job without --force.\n"
      "Reproducible: the same source and flags give identical fragments; SOURCE_DATE_EPOCH sets created_at.\n"
      "--schema 2 writes mesh-llm's package v2 from the same single pass (shared/metadata.gguf carrier,\n"
      "shared/common.gguf, layers/layer-NNNNN[-partMM].gguf, --projector as an mmproj sidecar); --validate then\n"
      "certifies every tensor against the source:\n"
      "  skippy-model-package write-package ./model.gguf --schema 2 --out-dir pkg-v2/ --model-id org/repo:Q4_K_M \\\n"
      "      --source-revision 0123abc --source-file model.gguf --max-artifact-bytes 4G --native-abi-version 0.1.64\n"
      "  (mesh-llm upstream and its release admit a schema 2 package only at exactly its native ABI, its fork\n"
      "  takes the ABI as provenance: restamp-package moves it; a root field a runtime line does not know, such\n"
      "  as --generation-defaults' request_defaults, is warned about, naming the lines that refuse it)\n"
      "  --layout reference writes every payload part and the carrier byte for byte as mesh-llm's own writer\n"
      "  does (tensors in name order, no padding after the last), at the cost of reading each part back once\n"
      "  to hash it; the default, source, keeps the source's order and hashes as it writes. convert-package\n"
      "  keeps schema 1's fragments as they are, so its parts are never in the reference layout.\n"
      "Write and publish in one run (fragments upload while later ones are written; one commit at the end):\n"
      "  HF_TOKEN=hf_... skippy-model-package write-package org/Model-GGUF:Q4_K_M --out-dir pkg/ \\\n"
      "      --push hf://meshllm/Model-Q4_K_M-layers --create --max-disk 40G\n"
      "  With --max-disk each fragment is deleted once the Hub holds it, and the writer waits for uploads\n"
      "  whenever the next fragment would not fit: the directory never holds more than SIZE (or one fragment, if\n"
      "  larger); model-package.json and README.md stay.\n"
      "Split a Hub model without a copy of it on disk (read once over HTTP ranges as it is split):\n"
      "  HF_TOKEN=hf_... skippy-model-package write-package org/Model-GGUF:Q4_K_M --stream --out-dir pkg/ \\\n"
      "      --push hf://meshllm/Model-Q4_K_M-layers --create --max-disk 40G\n"
      "  Each shard's SHA-256 is checked against the Hub's as it ends (a mismatch stops before the commit); a\n"
      "  --max-disk the fragments open at once cannot fit is refused before anything moves. Not the default: without\n"
      "  --stream the source is kept in the Hugging Face cache (for the next package from it).\n"
      "  The repository's mmproj*.gguf files are included as projectors; --sign, --tag and\n"
      "  --hub-publisher-metadata work as above.\n"
      "  --validate checks each fragment, read back from disk, against the source's digests taken from the\n"
      "  stream, before its upload (as it does with --max-disk from a local or cached source).\n"
      "Signed packages and validation results:\n"
      "  --validate also leaves validation.json (the machine-readable result, bound to the manifest's SHA-256).\n"
      "  --sign OWNER_DIR signs the finished package (model-package.json.sig, covering validation.json too):\n"
      "    skippy-model-package write-package ./model.gguf --out-dir pkg/ --model-id org/repo:Q4_K_M \\\n"
      "        --source-revision 0123abc --source-file model.gguf --validate --sign ~/.skippy/owner\n"
      "  With --push both go up in the package's one commit; --tag NAME then tags that commit.");
  struct Args {
    std::string source, out_dir, model_id, revision, source_file;
    std::vector<std::string> projectors;
    bool force = false, json = false, validate = false, verbose = false, stream = false;
    unsigned threads = 0;
    std::string push, max_disk, message;
    bool create = false, private_repo = false;
    // ---- #25 (signed packages, immutable refs): --sign, --tag ----
    std::string sign, tag;
    // ---- package schema 2 (issue 22, write --schema 2) ----
    unsigned schema = 1;
    std::string max_artifact_bytes, layout;
    std::string native_abi, generation_defaults;
    std::vector<std::string> publisher_metadata;
    bool hub_publisher_metadata = false;
    // ---- end schema 2 ----
  };
  auto a = std::make_shared<Args>();
  path_option(cmd->add_option("source", a->source, "Source .gguf (any shard of a split model) or org/repo:distribution on the Hub"))->required();
  path_option(cmd->add_option("--out-dir", a->out_dir, "Package directory to create"))->required();
  cmd->add_option("--model-id", a->model_id, "Model coordinate, e.g. org/repo:Q4_K_M");
  cmd->add_option("--source-revision", a->revision, "Source repository commit (for a Hub source: the revision to use)");
  cmd->add_option("--source-file", a->source_file, "Source file name in its repository");
  path_option(cmd->add_option("--projector", a->projectors, "Multimodal projector GGUF to include (repeatable)"));
  cmd->add_flag("--force", a->force, "Replace the package in a non-empty --out-dir");
  cmd->add_flag("--validate", a->validate, "Validate the package against the source before committing its manifest");
  cmd->add_flag("--verbose", a->verbose, "Also say why nothing was declared (generation defaults)");
  cmd->add_option("--threads", a->threads, "Worker threads (default: one per core, at most 16)")->check(number_in(1u, 64u));
  cmd->add_flag("--json", a->json, "Print one JSON document on stdout");
  cmd->add_option("--push", a->push, "Publish to hf://ns/repo[@branch] while writing, in one commit");
  cmd->add_flag("--create", a->create, "With --push: create the repository when it does not exist");
  cmd->add_flag("--private", a->private_repo, "With --push --create: make it private");
  cmd->add_option("--max-disk", a->max_disk, "With --push: the most the output directory may hold (K/M/G/T suffixes)");
  cmd->add_option("--message", a->message, "With --push: the commit summary");
  cmd->add_flag("--stream", a->stream,
                "With an org/repo:DIST source: read it once over HTTP as it is split, never storing it (no cache copy)");
  // ---- #25 (signed packages, immutable refs) ----
  path_option(cmd->add_option("--sign", a->sign,
                  "Sign the finished package with this owner directory (owner.key, owner.crt): model-package.json.sig"));
  cmd->add_option("--tag", a->tag, "With --push: tag the commit NAME on the Hub (hf://ns/repo@NAME)");
  // ---- end #25 ----
  // ---- package schema 2 (issue 22, write --schema 2) ----
  cmd->add_option("--schema", a->schema, "Package schema: 1 (default, the spec's) or 2 (mesh-llm's package v2)")
      ->check(number_in(1u, 2u));
  cmd->add_option("--max-artifact-bytes", a->max_artifact_bytes,
                  "With --schema 2: most payload bytes per part (default 8G); bigger layers become -partMM parts");
  cmd->add_option("--layout", a->layout,
                  "With --schema 2: payload part layout: source (default: source order, hashed as written) or "
                  "reference (mesh-llm's writer byte for byte, parts and carrier: name order, no trailing padding; "
                  "each part read back once to hash it)")
      ->check(CLI::IsMember({"source", "reference"}));
  add_native_abi_option(cmd, a->native_abi, "With --schema 2: ");
  add_generation_defaults_option(cmd, a->generation_defaults, "With --schema 2: ");
  add_publisher_metadata_option(cmd, a->publisher_metadata, "With --schema 2: ");
  cmd->add_flag("--hub-publisher-metadata", a->hub_publisher_metadata,
                "With --schema 2 and an org/repo:DIST source: attach the repository's publisher files found at its top "
                "level at the same commit, as --publisher-metadata does");
  // ---- end schema 2 ----
  return {cmd, [a]() {
            if (a->push.empty() && (a->create || a->private_repo || !a->max_disk.empty() || !a->message.empty())) {
              throw Error(ErrorKind::kUsage, "--create, --private, --max-disk and --message go with --push");
            }
            if (a->private_repo && !a->create) throw Error(ErrorKind::kUsage, "--private needs --create");
            // ---- #25: --sign and --tag are checked before anything is written ----
            if (!a->tag.empty() && a->push.empty()) throw Error(ErrorKind::kUsage, "--tag goes with --push");
            if (!a->tag.empty()) check_tag_name(a->tag);
            if (!a->sign.empty()) {
              for (const char* f : {"owner.key", "owner.crt"}) {
                if (!std::filesystem::exists(std::filesystem::path(a->sign) / f)) {
                  throw Error(ErrorKind::kNotFound, (std::filesystem::path(a->sign) / f).string() +
                                                        ": missing (--sign takes an owner directory from identity init-owner)");
                }
              }
            }
            // ---- end #25 ----
            WritePackageOptions o;
            o.out_dir = a->out_dir;
            // ---- package schema 2 (issue 22, write --schema 2) ----
            o.schema = a->schema;
            if (!a->max_artifact_bytes.empty()) {
              if (a->schema != 2) throw Error(ErrorKind::kUsage, "--max-artifact-bytes goes with --schema 2");
              o.max_artifact_bytes = size_flag("--max-artifact-bytes", a->max_artifact_bytes, 1);
            }
            if (!a->layout.empty()) {
              if (a->schema != 2) throw Error(ErrorKind::kUsage, "--layout goes with --schema 2");
              o.layout = a->layout == "reference" ? V2PartLayout::kReference : V2PartLayout::kSource;
            }
            if (!a->native_abi.empty()) {
              if (a->schema != 2) throw Error(ErrorKind::kUsage, "--native-abi-version goes with --schema 2");
              o.native_abi_version = a->native_abi;
            }
            if (!a->generation_defaults.empty()) {
              if (a->schema != 2) throw Error(ErrorKind::kUsage, "--generation-defaults goes with --schema 2");
              o.request_defaults = read_generation_defaults(a->generation_defaults);
            }
            if (!a->publisher_metadata.empty()) {
              if (a->schema != 2) throw Error(ErrorKind::kUsage, "--publisher-metadata goes with --schema 2");
              o.publisher_metadata.assign(a->publisher_metadata.begin(), a->publisher_metadata.end());
            }
            // ---- end schema 2 ----
            std::optional<PushTarget> target;
            if (!a->push.empty()) target = parse_push_target(a->push);
            const uint64_t max_disk = a->max_disk.empty() ? 0 : size_flag("--max-disk", a->max_disk, 1);
            Progress download("download");
            if (a->hub_publisher_metadata && a->schema != 2) {
              throw Error(ErrorKind::kUsage, "--hub-publisher-metadata goes with --schema 2");
            }
            std::unique_ptr<StreamedHubSource> streamed;
            std::unique_ptr<StreamProgress> stream_progress;
            std::vector<std::filesystem::path> hub_projectors;
            if (a->stream) {
              std::error_code ec;
              if (std::filesystem::exists(a->source, ec) || !looks_like_model_coordinate(a->source)) {
                throw Error(ErrorKind::kUsage, "--stream reads a Hub source, ORG/REPO:DIST (" + a->source +
                                                   " is not one); a local file is read in place already");
              }
              if (!a->model_id.empty() || !a->source_file.empty()) {
                throw Error(ErrorKind::kUsage, "--model-id and --source-file are for local sources; a Hub source (" +
                                                   a->source + ") takes them from the Hub");
              }
              if (env::hf_hub_offline()) {
                throw Error(ErrorKind::kOffline, "--stream reads the source from the Hub, and HF_HUB_OFFLINE=1 is set");
              }
              StreamSourceOptions so;
              so.revision = a->revision;
              const std::filesystem::path out(a->out_dir);
              // Beside the package directory (its own leftovers are never touched there).
              so.header_dir = out.parent_path() / ("." + out.filename().string() + ".stream-headers");
              streamed = std::make_unique<StreamedHubSource>(a->source, HubConfig::from_env(), so);
              stream_progress = std::make_unique<StreamProgress>(streamed->total_bytes());
              o.source = streamed->local();
              o.provenance = streamed->provenance();
              // The repository's mmproj*.gguf go in as projectors (mesh-llm's jobs do the same), unless a
              // --projector of the same name was given.
              for (const auto& p : streamed->fetch_projectors()) {
                const bool named = std::any_of(a->projectors.begin(), a->projectors.end(), [&](const std::string& q) {
                  return std::filesystem::path(q).filename() == p.filename();
                });
                if (!named) hub_projectors.push_back(p);
              }
              // The repository's publisher files, over the same transport (small: whole, beside the headers).
              if (a->hub_publisher_metadata) {
                for (const auto& f : streamed->fetch_publisher_files()) o.publisher_metadata.push_back(f);
              }
              o.stream_read = [s = streamed.get(), p = stream_progress.get()](size_t shard, uint64_t offset,
                                                                              std::span<uint8_t> into) {
                s->read(shard, offset, into);
                p->downloaded(into.size());
              };
            } else {
              ModelSourceRequest request{a->source, a->model_id, a->revision, a->source_file};
              request.publisher_files = a->hub_publisher_metadata;
              const auto src = open_model_source(request, default_sources(),
                                                 [&](uint64_t d, uint64_t t) { download.update(d, t); });
              if (a->hub_publisher_metadata && !src.from_hub) {
                throw Error(ErrorKind::kUsage, "--hub-publisher-metadata needs an org/repo:DIST source (for a local "
                                               "source, name the files with --publisher-metadata)");
              }
              for (const auto& w : src.warnings) std::cerr << "warning: " << w << "\n";
              for (const auto& f : src.publisher_files) o.publisher_metadata.push_back(f);
              o.source = src.local;
              o.provenance = src.provenance;
            }
            for (const auto& p : a->projectors) o.projectors.emplace_back(p);
            for (const auto& p : hub_projectors) o.projectors.push_back(p);
            o.force = a->force;
            o.threads = detail::worker_threads(a->threads);
            o.validate = a->validate;
            Progress progress("write-package");
            // A streamed run has one line of its own (downloaded, uploaded, disk).
            if (!stream_progress) o.on_progress = [&](uint64_t d, uint64_t t) { progress.update(d, t); };
            Progress upload("upload");
            std::unique_ptr<HubPublisher> pub;
            if (target) {
              if (max_disk) o.disk_budget = std::make_shared<DiskBudget>(max_disk);
              auto budget = o.disk_budget;
              if (budget && streamed) {
                // The placeholders' headers (and the repository's projectors and publisher files, downloaded)
                // are on disk too.
                const uint64_t headers = streamed->placeholder_disk_bytes() + streamed->projector_bytes() +
                                         (a->hub_publisher_metadata ? streamed->publisher_bytes() : 0);
                if (headers > max_disk) {
                  throw Error(ErrorKind::kUsage, "--max-disk " + a->max_disk + " cannot hold even the source's GGUF headers "
                                                 "and projectors (" + std::to_string(headers) + " bytes)");
                }
                budget->acquire(headers);
              }
              // The token, the repository and the branch are checked before anything is written.
              auto settings = publish_settings_from_env(a->create, a->private_repo, upload);
              if (stream_progress) {
                settings.on_progress = [p = stream_progress.get()](uint64_t d, uint64_t t) { p->uploaded(d, t); };
                if (budget) stream_progress->set_disk(budget->limit(), [budget] { return budget->used(); });
              }
              settings.tag = a->tag;  // #25
              if (budget) {
                // A failed upload never frees its bytes: wake a writer waiting for room.
                settings.on_failure = [budget](const Error&) {
                  budget->cancel("an upload failed, so the disk budget cannot be freed");
                };
              }
              pub = std::make_unique<HubPublisher>(HubConfig::from_env(), *target, settings);
              pub->begin();
              o.on_artifact = [&pub, budget](const WrittenArtifact& w) {
                if (pub->failed()) throw Error(ErrorKind::kTransport, "an upload failed; stopping the write");
                std::function<void()> done;
                if (budget) {
                  done = [budget, w] {
                    std::error_code ec;
                    std::filesystem::remove(w.path, ec);  // the Hub holds it now
                    budget->release(w.size);
                  };
                }
                pub->add(w.rel_path, w.path, w.size, w.sha256, std::move(done));
              };
            }
            std::optional<WritePackageResult> written;
            say_how_to_finish_on_interrupt(a->out_dir);
            try {
              written = write_package(o);
            } catch (const Error&) {
              // When an upload failed first, that failure is the story: commit() reports it.
              if (pub && pub->failed()) (void)pub->commit("unused");
              throw;
            }
            const auto& r = *written;
            // Which mesh-llm lines refuse what was written (its root fields), and which do not split its architecture.
            (void)warn_runtime_lines(r.package_dir, r.architecture, /*content_only=*/true);
            // ---- #25: sign the finished package (the sidecar covers validation.json too) ----
            std::optional<PackageSignature> signature;
            if (!a->sign.empty()) signature = sign_package(r.package_dir, a->sign);
            // ---- end #25 ----
            std::optional<PublishResult> pushed;
            if (pub) {
              // README.md, model-package.json, and validation.json and the sidecar when present (#25).
              const auto meta = add_package_metadata(*pub, r.package_dir, r.manifest_sha256);
              const std::string summary = a->message.empty() ? "Publish layer package " + r.manifest.model_id + " (" +
                                                                   std::to_string(r.manifest.layer_count) + " layers)"
                                                             : a->message;
              pushed = pub->commit(summary, "model-package.json sha256 " + r.manifest_sha256 +
                                                ", written and published by skippy-model-package write-package --push");
              pushed->signed_by = meta.signed_by;
              pushed->validation_result = meta.validation_result;
            }
            if (a->json) {
              nlohmann::json doc = {{"package_dir", r.package_dir.string()},
                                    {"manifest_sha256", r.manifest_sha256},
                                    {"layer_count", r.manifest.layer_count},
                                    {"artifact_count", r.artifact_count},
                                    {"model_id", r.manifest.model_id},
                                    {"validated", r.validated},
                                    {"source_bytes_hashed", r.source_bytes_hashed},
                                    {"threads", o.threads},
                                    {"notes", r.notes},
                                    {"details", r.details}};
              if (pushed) doc["publish"] = publish_result_json(*pushed);
              // #25
              const auto vfile = r.package_dir / std::string(kValidationFileName);
              doc["validation_json"] = std::filesystem::exists(vfile) ? nlohmann::json(vfile.string()) : nlohmann::json();
              doc["signed_by"] = signature ? nlohmann::json(signature->owner_id) : nlohmann::json();
              if (o.disk_budget) {
                doc["max_disk"] = o.disk_budget->limit();
                doc["disk_peak"] = o.disk_budget->peak();  // with --stream, the source headers included
              }
              if (stream_progress) {
                const double secs = stream_progress->seconds();
                const uint64_t up = pushed ? pushed->bytes_uploaded : 0;
                doc["stream"] = {{"source_bytes", streamed->total_bytes()},
                                 {"downloaded_bytes", stream_progress->downloaded_bytes()},
                                 {"seconds", secs},
                                 {"download_bytes_per_sec", stream_progress->download_rate()},
                                 {"uploaded_bytes", up},
                                 {"upload_bytes_per_sec", secs > 0 ? static_cast<double>(up) / secs : 0.0},
                                 {"projectors_from_source", streamed->projector_paths()}};
              }
              // ---- package schema 2 (issue 22, write --schema 2) ----
              doc["schema_version"] = r.schema;
              if (r.schema == 2) doc["package_id"] = r.package_id;
              if (r.schema == 2) doc["native_abi_version"] = r.root_v2->native_abi_version;
              // ---- end schema 2 ----
              print_json(doc);
            } else {
              std::cout << "wrote " << r.package_dir.string() << ": " << r.manifest.layer_count << " layers, "
                        << r.artifact_count << " artifacts\n"
                        << "manifest sha256 " << r.manifest_sha256 << "\n"
                        << (r.schema == 2 ? "schema 2, package_id " + r.package_id + ", native ABI " +
                                                r.root_v2->native_abi_version + "\n"
                                          : std::string())
                        << validation_advice(r.validated, pushed.has_value(), o.disk_budget != nullptr, a->source, a->out_dir);
              if (r.validated) std::cout << "validation result in " << (r.package_dir / std::string(kValidationFileName)).string() << "\n";
              if (signature) std::cout << "signed as owner " << signature->owner_id << " (" << std::string(kSignatureFileName) << ")\n";
              for (const auto& n : r.notes) std::cout << "note: " << n << "\n";
              if (a->verbose) {
                for (const auto& n : r.details) std::cout << "note: " << n << "\n";
              }
              if (pushed) print_publish_summary(*pushed);
            }
            return kExitOk;
          }};
}

}  // namespace skippy::cli
