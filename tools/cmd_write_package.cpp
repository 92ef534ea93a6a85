#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli.h"
#include "progress.h"
#include "skippy/error.h"
#include "skippy/hub.h"
#include "skippy/hub_publish.h"
#include "skippy/package_signature.h"
#include "skippy/package_writer.h"
#include "util/parallel.h"

namespace skippy::cli {

nlohmann::json publish_result_json(const PublishResult& r);    // cmd_publish.cpp
void print_publish_summary(const PublishResult& r);            // cmd_publish.cpp
void print_xet_note(const XetUploadSummary& x);                 // cmd_publish.cpp
PublishSettings publish_settings_from_env(bool create, bool private_repo, Progress& progress);

namespace {

// SIGINT or SIGTERM during the write says, in one line, what it
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

struct WriteArgs {
  std::string source, out_dir, model_id, revision, source_file;
  std::vector<std::string> projectors;
  bool force = false, json = false, validate = false, verbose = false, stream = false;
  unsigned threads = 0;
  std::string push, max_disk, message;
  bool create = false, private_repo = false;
  std::string sign, tag;
  // Package schema 2:
  unsigned schema = 1;
  std::string max_artifact_bytes, layout;
  std::string native_abi, generation_defaults;
  std::vector<std::string> publisher_metadata;
  bool hub_publisher_metadata = false;
};

// The writer's options the flags give (the source and the push are the
// workflow's); schema 2's flags are refused without --schema 2.
WritePackageOptions write_options(const WriteArgs& a) {
  WritePackageOptions o;
  o.out_dir = a.out_dir;
  o.schema = a.schema;
  auto schema2 = [&](const std::string& value, const char* flag) {
    if (!value.empty() && a.schema != 2) throw Error(ErrorKind::kUsage, std::string(flag) + " goes with --schema 2");
    return !value.empty();
  };
  if (schema2(a.max_artifact_bytes, "--max-artifact-bytes")) {
    o.max_artifact_bytes = size_flag("--max-artifact-bytes", a.max_artifact_bytes, 1);
  }
  if (schema2(a.layout, "--layout")) o.layout = a.layout == "reference" ? V2PartLayout::kReference : V2PartLayout::kSource;
  if (schema2(a.native_abi, "--native-abi-version")) o.native_abi_version = a.native_abi;
  if (schema2(a.generation_defaults, "--generation-defaults")) o.request_defaults = read_generation_defaults(a.generation_defaults);
  if (!a.publisher_metadata.empty()) {
    if (a.schema != 2) throw Error(ErrorKind::kUsage, "--publisher-metadata goes with --schema 2");
    o.publisher_metadata.assign(a.publisher_metadata.begin(), a.publisher_metadata.end());
  }
  if (a.hub_publisher_metadata && a.schema != 2) throw Error(ErrorKind::kUsage, "--hub-publisher-metadata goes with --schema 2");
  for (const auto& p : a.projectors) o.projectors.emplace_back(p);
  o.force = a.force;
  o.threads = detail::worker_threads(a.threads);
  o.validate = a.validate;
  return o;
}

void print_write_json(const WriteAndPublishResult& run, const StreamProgress* stream) {
  const auto& r = *run.written;
  nlohmann::json doc = {{"package_dir", r.package_dir.string()},
                        {"manifest_sha256", r.manifest_sha256},
                        {"layer_count", r.manifest.layer_count},
                        {"artifact_count", r.artifact_count},
                        {"model_id", r.manifest.model_id},
                        {"validated", r.validated},
                        {"source_bytes_hashed", r.source_bytes_hashed},
                        {"threads", run.threads},
                        {"notes", r.notes},
                        {"details", r.details}};
  if (run.published) doc["publish"] = publish_result_json(*run.published);
  if (run.published) print_xet_note(run.published->xet);
  const auto vfile = r.package_dir / std::string(kValidationFileName);
  doc["validation_json"] = std::filesystem::exists(vfile) ? nlohmann::json(vfile.string()) : nlohmann::json();
  doc["signed_by"] = run.signature ? nlohmann::json(run.signature->owner_id) : nlohmann::json();
  if (run.max_disk) {
    doc["max_disk"] = run.max_disk;
    doc["disk_peak"] = run.disk_peak;  // with --stream, the source headers included
  }
  if (stream && run.streamed) {
    const double secs = stream->seconds();
    const uint64_t up = run.published ? run.published->bytes_uploaded : 0;
    doc["stream"] = {{"source_bytes", run.streamed->source_bytes},
                     {"downloaded_bytes", stream->downloaded_bytes()},
                     {"seconds", secs},
                     {"download_bytes_per_sec", stream->download_rate()},
                     {"uploaded_bytes", up},
                     {"upload_bytes_per_sec", secs > 0 ? static_cast<double>(up) / secs : 0.0},
                     {"projectors_from_source", run.streamed->projectors_from_source}};
  }
  doc["schema_version"] = r.schema;
  if (r.schema == 2) doc["package_id"] = r.package_id;
  if (r.schema == 2) doc["native_abi_version"] = r.native_abi_version;
  print_json(doc);
}

void print_write_summary(const WriteArgs& a, const WriteAndPublishResult& run) {
  const auto& r = *run.written;
  std::cout << "wrote " << r.package_dir.string() << ": " << r.manifest.layer_count << " layers, " << r.artifact_count
            << " artifacts\n"
            << "manifest sha256 " << r.manifest_sha256 << "\n"
            << (r.schema == 2 ? "schema 2, package_id " + r.package_id + ", native ABI " + r.native_abi_version + "\n"
                              : std::string())
            << validation_advice(r.validated, run.published.has_value(), run.max_disk != 0, a.source, a.out_dir);
  if (r.validated) std::cout << "validation result in " << (r.package_dir / std::string(kValidationFileName)).string() << "\n";
  if (run.signature) std::cout << "signed as owner " << run.signature->owner_id << " (" << std::string(kSignatureFileName) << ")\n";
  for (const auto& n : r.notes) std::cout << "note: " << n << "\n";
  if (a.verbose) {
    for (const auto& n : r.details) std::cout << "note: " << n << "\n";
  }
  if (run.published) print_publish_summary(*run.published);
}

// The command: flags into the workflow's options, progress lines for its
// events, its result printed.
int run_write_package(const WriteArgs& a) {
  if (a.push.empty() && (a.create || a.private_repo || !a.max_disk.empty() || !a.message.empty())) {
    throw Error(ErrorKind::kUsage, "--create, --private, --max-disk and --message go with --push");
  }
  if (a.private_repo && !a.create) throw Error(ErrorKind::kUsage, "--private needs --create");
  WriteAndPublishOptions w;
  w.write = write_options(a);
  w.source = a.source;
  w.model_id = a.model_id;
  w.revision = a.revision;
  w.source_file = a.source_file;
  w.stream = a.stream;
  w.hub_publisher_metadata = a.hub_publisher_metadata;
  if (!a.push.empty()) w.push = parse_push_target(a.push);
  w.max_disk = a.max_disk.empty() ? 0 : size_flag("--max-disk", a.max_disk, 1);
  w.message = a.message;
  w.sign_owner = a.sign;
  w.hub = HubConfig::from_env();
  Progress download("download"), progress("write-package"), upload("upload");
  // A streamed run has one line of its own (downloaded, uploaded, disk).
  std::unique_ptr<StreamProgress> stream;
  w.on_source_download = [&](uint64_t d, uint64_t t) { download.update(d, t); };
  w.on_warning = [](const std::string& text) { std::cerr << "warning: " << text << "\n"; };
  w.on_stream_open = [&](uint64_t total, const std::shared_ptr<DiskBudget>& budget) {
    stream = std::make_unique<StreamProgress>(total);
    if (budget) stream->set_disk(budget->limit(), [budget] { return budget->used(); });
  };
  w.on_stream_bytes = [&](uint64_t n) { stream->downloaded(n); };
  w.write.on_progress = [&](uint64_t d, uint64_t t) {
    if (!stream) progress.update(d, t);
  };
  if (w.push) {
    // The token, the repository and the branch are checked before anything is written.
    w.publish = publish_settings_from_env(a.create, a.private_repo, upload);
    w.publish.on_progress = [&](uint64_t d, uint64_t t) { stream ? stream->uploaded(d, t) : upload.update(d, t); };
    w.publish.tag = a.tag;
  } else if (!a.tag.empty()) {
    throw Error(ErrorKind::kUsage, "--tag goes with --push");
  }
  w.on_write_start = [&] { say_how_to_finish_on_interrupt(a.out_dir); };
  // Which mesh-llm lines refuse what was written (its root fields), and which do not split its architecture.
  w.on_written = [](const WritePackageResult& r) {
    (void)warn_runtime_lines(r.package_dir, r.architecture, /*content_only=*/true);
  };
  const auto run = write_and_publish(w);
  if (a.json) {
    print_write_json(run, stream.get());
  } else {
    print_write_summary(a, run);
  }
  return kExitOk;
}

}  // namespace

// write-package's --help after its options: examples, then what it does.
constexpr const char* kWritePackageHelp =
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
    "--schema 2 writes mesh-llm's package schema 2 from the same single pass (shared/metadata.gguf carrier,\n"
    "shared/common.gguf, layers/layer-NNNNN[-partMM].gguf, --projector as an mmproj sidecar); --validate then\n"
    "certifies every tensor against the source:\n"
    "  skippy-model-package write-package ./model.gguf --schema 2 --out-dir pkg-schema2/ --model-id org/repo:Q4_K_M \\\n"
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
    "  With --push both go up in the package's one commit; --tag NAME then tags that commit.";

Command register_write_package(CLI::App& app) {
  auto* cmd = app.add_subcommand("write-package", "Turn a GGUF model into a layer package");
  cmd->footer(kWritePackageHelp);
  auto a = std::make_shared<WriteArgs>();
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
  path_option(cmd->add_option("--sign", a->sign,
                  "Sign the finished package with this owner directory (owner.key, owner.crt): model-package.json.sig"));
  cmd->add_option("--tag", a->tag, "With --push: tag the commit NAME on the Hub (hf://ns/repo@NAME)");
  // Package schema 2:
  cmd->add_option("--schema", a->schema, "Package schema: 1 (default, the spec's) or 2 (mesh-llm's)")
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
  return {cmd, [a]() { return run_write_package(*a); }};
}

}  // namespace skippy::cli
