#include <iostream>

#include "cli.h"
#include "progress.h"
#include "util/env.h"
#include "skippy/error.h"
#include "skippy/hub_publish.h"

namespace skippy::cli {

nlohmann::json xet_summary_json(const XetUploadSummary& x) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : x.files) {
    files.push_back({{"path", f.path},
                     {"bytes", f.bytes},
                     {"chunks", f.chunks},
                     {"deduped_in_run", f.deduped_in_run},
                     {"deduped_global", f.deduped_global},
                     {"deduped_source", f.deduped_source},
                     {"new_bytes", f.new_bytes},
                     {"bytes_read", f.bytes_read}});
  }
  return {{"used", x.used},
          {"note", x.note.empty() ? nlohmann::json() : nlohmann::json(x.note)},
          {"bytes_chunked", x.bytes_chunked},
          {"deduped_in_run", x.deduped_in_run},
          {"deduped_global", x.deduped_global},
          {"deduped_source", x.deduped_source},
          {"new_bytes", x.new_bytes},
          {"bytes_read", x.bytes_read},
          {"xorb_bytes_uploaded", x.xorb_bytes_uploaded},
          {"shard_bytes_uploaded", x.shard_bytes_uploaded},
          {"xorbs_uploaded", x.xorbs_uploaded},
          {"shards_uploaded", x.shards_uploaded},
          {"dedupe_queries", x.dedupe_queries},
          {"dedupe_hits", x.dedupe_hits},
          {"xorbs_resumed", x.xorbs_resumed},
          {"xorb_bytes_resumed", x.xorb_bytes_resumed},
          {"files", files}};
}

// One line when the files did not go through Xet (--json too: it is the user's to know).
void print_xet_note(const XetUploadSummary& x) {
  if (!x.used && !x.note.empty()) std::cerr << x.note << "\n";
}

void print_xet_summary(const XetUploadSummary& x) {
  if (!x.used) return print_xet_note(x);
  for (const auto& f : x.files) {
    std::cerr << "  xet " << f.path << ": " << human_bytes(f.bytes) << " chunked, " << human_bytes(f.deduped_in_run)
              << " deduped in this upload, " << human_bytes(f.deduped_global) << " deduped on the Hub, "
              << human_bytes(f.deduped_source) << " deduped against the source, " << human_bytes(f.new_bytes) << " new\n";
  }
  std::cerr << "xet: " << human_bytes(x.bytes_chunked) << " chunked, " << human_bytes(x.deduped_in_run)
            << " deduped in this upload, " << human_bytes(x.deduped_global) << " deduped on the Hub ("
            << x.dedupe_hits << " of " << x.dedupe_queries << " queries answered), " << human_bytes(x.deduped_source)
            << " deduped against the source, " << human_bytes(x.new_bytes) << " new; sent "
            << human_bytes(x.xorb_bytes_uploaded) << " in " << counted(x.xorbs_uploaded, "xorb") << " and "
            << human_bytes(x.shard_bytes_uploaded) << " in " << counted(x.shards_uploaded, "shard") << "; read "
            << human_bytes(x.bytes_read) << " back from disk\n";
  if (x.xorbs_resumed) {
    std::cerr << "xet: " << counted(x.xorbs_resumed, "xorb") << " (" << human_bytes(x.xorb_bytes_resumed)
              << ") stored by an earlier, failed publish: not sent again\n";
  }
  if (!x.note.empty()) std::cerr << "xet: " << x.note << "\n";
}

nlohmann::json publish_result_json(const PublishResult& r) {
  return {{"repo", r.repo},
          {"branch", r.branch},
          {"ref", "hf://" + r.repo + "@" + r.commit},
          {"commit", r.commit},
          {"parent_commit", r.parent_commit},
          {"commit_url", r.commit_url},
          {"committed", r.committed},
          {"created_repo", r.created_repo},
          {"files", r.files},
          {"lfs_files", r.lfs_files},
          {"lfs_uploaded", r.lfs_uploaded},
          {"lfs_already_on_hub", r.lfs_already_on_hub},
          {"bytes", r.bytes},
          {"bytes_uploaded", r.bytes_uploaded},
          {"deleted", r.deleted},
          // the tag made on the commit, the sidecar's signer, validation.json.
          {"tag", r.tag ? nlohmann::json(r.tag->tag) : nlohmann::json()},
          {"tag_ref", r.tag ? nlohmann::json(r.tag->ref) : nlohmann::json()},
          {"tag_created", r.tag ? nlohmann::json(r.tag->created) : nlohmann::json()},
          {"signed_by", r.signed_by.empty() ? nlohmann::json() : nlohmann::json(r.signed_by)},
          {"validation_json", r.validation_result},
          {"xet", xet_summary_json(r.xet)}};
}

void print_publish_summary(const PublishResult& r) {
  print_xet_summary(r.xet);
  if (r.committed) {
    std::cerr << "published hf://" << r.repo << "@" << r.branch << " in one commit: " << r.files << " files ("
              << human_bytes(r.bytes) << "), " << r.lfs_uploaded << " uploaded (" << human_bytes(r.bytes_uploaded) << "), "
              << r.lfs_already_on_hub << " already on the Hub"
              << (r.deleted.empty() ? "" : ", " + counted(r.deleted.size(), "stale file") + " removed") << "\n";
  } else {
    std::cerr << "hf://" << r.repo << "@" << r.branch << " already holds exactly this package; nothing to commit\n";
  }
  if (!r.signed_by.empty()) std::cerr << "signed by owner " << r.signed_by << " (model-package.json.sig in the commit)\n";
  if (r.validation_result) std::cerr << "validation.json in the commit\n";
  if (r.tag) {
    std::cerr << (r.tag->created ? "tagged " : "tag already there: ") << r.tag->ref << " -> " << r.tag->commit << "\n";
  }
  std::cerr << "pin it as hf://" << r.repo << "@" << r.commit << "\n";
  std::cout << "hf://" << r.repo << "@" << r.commit << "\n";
}

PublishSettings publish_settings_from_env(bool create, bool private_repo, Progress& progress) {
  PublishSettings s;
  s.create = create;
  s.private_repo = private_repo;
  s.parallel_uploads = env::hf_parallel_uploads();
  s.xet = !env::hf_hub_disable_xet();
  s.on_progress = [&progress](uint64_t d, uint64_t t) { progress.update(d, t); };
  return s;
}

// publish's --help after its options: examples, then what it does.
constexpr const char* kPublishHelp =
    "Example:\n"
    "  HF_TOKEN=hf_... skippy-model-package publish model-package/ hf://meshllm/Qwen3-8B-Q4_K_M-layers --create\n"
    "The package is checked as its consumers will check it (manifest, every artifact's path and size) and\n"
    "SHA-256-verified first; a package that fails is not uploaded. Then its artifacts, model-package.json and\n"
    "README.md (nothing else in the directory) go up with the Hub's own protocol (Xet storage when the Hub\n"
    "offers it: chunked, and only chunks the Hub does not hold are sent; else the LFS batch, basic or multipart\n"
    "uploads; several at once, retried; HF_HUB_DISABLE_XET=1 keeps to LFS) and appear in ONE commit, on top of\n"
    "the branch head that was read first: a commit someone else made meanwhile is detected and refused, never\n"
    "overwritten. Files the Hub already has are not sent again, so rerunning an interrupted publish sends only\n"
    "what is missing.\n"
    "Prints the commit to pin (hf://ns/repo@<commit>).\n"
    "A package schema 2 directory (write-package --schema 2, convert-package --to 2) is read with the strict\n"
    "schema 2 reader and every catalog artifact SHA-256-verified first. Schema 1 on main, its conversion on a\n"
    "branch of the same repository (only the new carrier and the root are uploaded: LFS holds the fragments):\n"
    "  skippy-model-package convert-package pkg/ --to 2 --out-dir pkg-schema2/ --source model.gguf\n"
    "  skippy-model-package publish pkg-schema2/ hf://meshllm/Qwen3-8B-Q4_K_M-layers@schema-2\n"
    "validation.json (validate-package --write-result) and model-package.json.sig (sign-package) go up in the\n"
    "same commit when present; a validation.json of another manifest, or a signature that does not verify, is\n"
    "refused first. --sign OWNER_DIR signs the package (writing model-package.json.sig) before uploading:\n"
    "  skippy-model-package publish pkg/ hf://meshllm/Model-layers --sign ~/.skippy/owner --tag src-0123abc\n"
    "--tag NAME tags the commit with the Hub's tag API (a tag names one commit for good: one per source\n"
    "revision; an existing tag on another commit is refused before anything is uploaded); consumers can then\n"
    "use hf://ns/repo@NAME as well as the commit.\n"
    "The token goes only to the Hub's API endpoints; storage URLs get exactly the headers the LFS batch gave.\n"
    "Every retry prints one line on stderr (\"retry: <what>: <reason> (attempt N of M failed; trying again in S s)\").\n"
    "An upload slower than --min-rate (averaged over SKIPPY_HF_MIN_RATE_SECS, default 30 s) is a failed\n"
    "attempt: retried, then given up with the rate in the message; rerunning sends only what is missing.\n"
    "Environment: HF_TOKEN (a token with write access), HF_ENDPOINT, SKIPPY_HF_UPLOADS (files at once, default 4),\n"
    "SKIPPY_HF_MAX_ATTEMPTS (5), SKIPPY_HF_BACKOFF_MS (1000), SKIPPY_HF_MIN_RATE (bytes/s, 4096),\n"
    "SKIPPY_HF_MIN_RATE_SECS (30),\n"
    "SKIPPY_HF_STALL_SECS (60: no byte moving for that long is a failed attempt).";

Command register_publish(CLI::App& app) {
  auto* cmd = app.add_subcommand("publish", "Upload a verified layer package to the Hugging Face Hub in one commit");
  cmd->footer(kPublishHelp);
  struct Args {
    std::string dir, target, message, sign, tag;
    bool create = false, private_repo = false, json = false;
    std::string min_rate;
  };
  auto a = std::make_shared<Args>();
  path_option(cmd->add_option("package", a->dir, "Local package directory"))->required();
  cmd->add_option("target", a->target, "hf://ns/repo or hf://ns/repo@branch (default branch main)")->required();
  cmd->add_flag("--create", a->create, "Create the repository when it does not exist");
  cmd->add_flag("--private", a->private_repo, "With --create: make it private");
  cmd->add_option("--message", a->message, "Commit summary (default: \"Publish layer package <model_id> (N layers)\")");
  auto* min_rate = cmd->add_option("--min-rate", a->min_rate,
                  "Minimum upload rate per connection in bytes/s (512K, 1M...), averaged over SKIPPY_HF_MIN_RATE_SECS (default 4096, "
                  "or SKIPPY_HF_MIN_RATE; 0: no floor)");
  path_option(cmd->add_option("--sign", a->sign, "Sign the package with this owner directory (owner.key, owner.crt) before uploading"));
  cmd->add_option("--tag", a->tag, "Tag the commit NAME on the Hub (hf://ns/repo@NAME; never moved)");
  cmd->add_flag("--json", a->json, "Print one JSON document on stdout");
  return {cmd, [a, min_rate]() {
            if (a->private_repo && !a->create) throw Error(ErrorKind::kUsage, "--private needs --create");
            const auto target = parse_push_target(a->target);
            Progress verify("verify");
            Progress upload("upload");
            HubConfig hub = HubConfig::from_env();
            if (min_rate->count() > 0) hub.min_rate_bytes_per_sec = size_flag("--min-rate", a->min_rate);
            auto settings = publish_settings_from_env(a->create, a->private_repo, upload);
            settings.sign_owner = a->sign;
            settings.tag = a->tag;
            if (!a->tag.empty()) check_tag_name(a->tag);
            const auto r = publish_package(a->dir, hub, target, settings, a->message,
                                           [&](uint64_t d, uint64_t t) { verify.update(d, t); });
            if (a->json) {
              print_xet_note(r.xet);
              print_json(publish_result_json(r));
            } else {
              print_publish_summary(r);
            }
            return kExitOk;
          }};
}

}  // namespace skippy::cli
