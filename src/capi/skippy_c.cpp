// The C API (include/skippy/skippy.h) over the C++ library: every entry
// point catches everything, turns it into a status and a per-thread message.
#include "format/json_output.h"
#include "skippy/skippy.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "skippy/stage.h"
#include "skippy/error.h"
#include "util/file.h"
#include "skippy/hub.h"
#include "skippy/materialize.h"
#include "skippy/package_catalog.h"
#include "skippy/package_generation.h"
#include "skippy/policy.h"
#include "skippy/speculative.h"
#include "skippy/source.h"
#include "skippy/verify.h"
#include "skippy/version.h"

struct skippy_package {
  skippy::OpenedPackage pkg;
  // What the getters read: the package's catalog of artifacts (its reader's
  // CatalogNeed::artifacts: a carrier read and checked where the schema has
  // one; no fragment read).
  skippy::OpenedCatalog listed;
  std::string commit;
  std::optional<uint64_t> activation_width;
};

struct skippy_stage {
  skippy_package* package = nullptr;
  // The catalog the stage was selected from (CatalogNeed::stage: the
  // reader brings only what this stage reads).
  std::shared_ptr<const skippy::OpenedCatalog> opened;
  skippy::StageSelection stage;          // open_stage's: parts brought and checked, the projector
  std::vector<skippy::StagePart> parts;  // stage.parts, then the projector (if any)
  std::vector<std::string> paths;        // parts[i].path as strings (stable c_str)
  std::string materialized;
};

namespace {

thread_local std::string g_last_error;

skippy_status status_of(skippy::ErrorKind k) {
  using skippy::ErrorKind;
  switch (k) {
    case ErrorKind::kUsage: return SKIPPY_ERR_USAGE;
    case ErrorKind::kInvalidInput: return SKIPPY_ERR_INVALID_INPUT;
    case ErrorKind::kNotFound: return SKIPPY_ERR_NOT_FOUND;
    case ErrorKind::kOffline: return SKIPPY_ERR_OFFLINE;
    case ErrorKind::kUnauthorized: return SKIPPY_ERR_UNAUTHORIZED;
    case ErrorKind::kIntegrity: return SKIPPY_ERR_INTEGRITY;
    case ErrorKind::kTransport: return SKIPPY_ERR_TRANSPORT;
    case ErrorKind::kIo: return SKIPPY_ERR_IO;
  }
  return SKIPPY_ERR_INTERNAL;
}

skippy_status fail(skippy_status s, std::string message) {
  g_last_error = std::move(message);
  return s;
}

// Runs `f`, mapping every exception to a status; clears the message on success.
template <class F>
skippy_status guarded(F&& f) noexcept {
  try {
    f();
    g_last_error.clear();
    return SKIPPY_OK;
  } catch (const skippy::Error& e) {
    return fail(status_of(e.kind()), e.what());
  } catch (const std::bad_alloc&) {
    return fail(SKIPPY_ERR_IO, "out of memory");
  } catch (const std::exception& e) {
    return fail(SKIPPY_ERR_INTERNAL, e.what());
  } catch (...) {
    return fail(SKIPPY_ERR_INTERNAL, "unknown exception");
  }
}

// A malloc'd copy for the caller (freed by skippy_string_free).
char* new_c_string(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p == nullptr) throw std::bad_alloc();
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

[[noreturn]] void usage(const std::string& message) { throw skippy::Error(skippy::ErrorKind::kUsage, message); }

// A call that answers with a JSON document: `json_out` and `package` checked
// (the messages name `fn`), then `document()` under guarded, its text handed
// to the caller (freed by skippy_string_free).
template <class F>
skippy_status json_call(const char* fn, skippy_package* package, char** json_out, F&& document) noexcept {
  if (json_out == nullptr) return fail(SKIPPY_ERR_USAGE, std::string(fn) + ": json_out is NULL");
  *json_out = nullptr;
  if (package == nullptr) return fail(SKIPPY_ERR_USAGE, std::string(fn) + ": package is NULL");
  return guarded([&] { *json_out = new_c_string(skippy::json_output(document())); });
}

// The one way the C API opens a package, of any schema, from a local
// directory or hf:// (open_package: the same sources as the CLI).
void open_into(skippy_package& p, const char* ref, const skippy::Sources& sources) {
  p.pkg = skippy::open_package(ref, sources);
  p.listed = p.pkg.catalog(skippy::CatalogNeed::artifacts());
  // The reference runtime's fallback when the package declares no width.
  p.activation_width = p.pkg.reader->activation_width(p.pkg, &p.listed.catalog).width;
  p.commit = p.pkg.commit.value_or("");
}

}  // namespace

extern "C" {

const char* skippy_version(void) { return skippy::library_version().data(); }  // a literal: NUL-terminated

const char* skippy_runtime_abi_version(void) {
  static const std::string v = skippy::format_abi_version(skippy::kRuntimeAbiVersion);
  return v.c_str();
}

const char* skippy_status_name(skippy_status status) {
  switch (status) {
    case SKIPPY_OK: return "ok";
    case SKIPPY_ERR_USAGE: return "usage";
    case SKIPPY_ERR_INVALID_INPUT: return "invalid_input";
    case SKIPPY_ERR_NOT_FOUND: return "not_found";
    case SKIPPY_ERR_OFFLINE: return "offline";
    case SKIPPY_ERR_UNAUTHORIZED: return "unauthorized";
    case SKIPPY_ERR_INTEGRITY: return "integrity";
    case SKIPPY_ERR_TRANSPORT: return "transport";
    case SKIPPY_ERR_IO: return "io";
    case SKIPPY_ERR_INTERNAL: return "internal";
  }
  return "internal";
}

const char* skippy_last_error(void) { return g_last_error.c_str(); }

skippy_status skippy_package_open(const char* ref, skippy_package** out) {
  if (out == nullptr) return fail(SKIPPY_ERR_USAGE, "skippy_package_open: out is NULL");
  *out = nullptr;
  if (ref == nullptr || *ref == '\0') return fail(SKIPPY_ERR_USAGE, "skippy_package_open: empty package reference");
  return guarded([&] {
    auto p = std::make_unique<skippy_package>();
    open_into(*p, ref, skippy::default_sources());
    *out = p.release();
  });
}

// ---- Signed packages ----
skippy_status skippy_package_open_trusted(const char* ref, const char* const* trusted_signers, size_t n_signers,
                                          skippy_package** out) {
  if (out == nullptr) return fail(SKIPPY_ERR_USAGE, "skippy_package_open_trusted: out is NULL");
  *out = nullptr;
  if (ref == nullptr || *ref == '\0') return fail(SKIPPY_ERR_USAGE, "skippy_package_open_trusted: empty package reference");
  if (n_signers > 0 && trusted_signers == nullptr) {
    return fail(SKIPPY_ERR_USAGE, "skippy_package_open_trusted: trusted_signers is NULL with n_signers > 0");
  }
  for (size_t i = 0; i < n_signers; ++i) {
    if (trusted_signers[i] == nullptr || *trusted_signers[i] == '\0') {
      return fail(SKIPPY_ERR_USAGE, "skippy_package_open_trusted: trusted_signers[" + std::to_string(i) + "] is empty");
    }
  }
  return guarded([&] {
    auto sources = skippy::default_sources();  // SKIPPY_TRUSTED_SIGNERS / _OWNERS already in it
    for (size_t i = 0; i < n_signers; ++i) sources.trusted_signers.emplace_back(trusted_signers[i]);
    auto p = std::make_unique<skippy_package>();
    open_into(*p, ref, sources);
    *out = p.release();
  });
}
const char* skippy_package_signer(const skippy_package* p) {
  return p && p->pkg.signature ? p->pkg.signature->owner_id.c_str() : nullptr;
}
// ---- end signed packages ----

void skippy_package_close(skippy_package* package) { delete package; }

skippy_status skippy_package_check_runtime_abi(const skippy_package* p, const char* runtime_abi) {
  if (p == nullptr) return fail(SKIPPY_ERR_USAGE, "skippy_package_check_runtime_abi: package is NULL");
  return guarded([&] {
    std::optional<std::string> flag;
    if (runtime_abi != nullptr && *runtime_abi != '\0') flag = runtime_abi;
    const auto runtime = skippy::runtime_abi_from(flag);
    if (!runtime) return;
    skippy::check_runtime_abi(p->pkg.identity(), *runtime, p->pkg.ref);
  });
}

const char* skippy_package_model_id(const skippy_package* p) { return p ? p->pkg.identity().model_id.c_str() : ""; }
const char* skippy_package_manifest_sha256(const skippy_package* p) { return p ? p->pkg.manifest_sha256.c_str() : ""; }
const char* skippy_package_abi_version(const skippy_package* p) { return p ? p->pkg.identity().abi_version.c_str() : ""; }
const char* skippy_package_source_repo(const skippy_package* p) {
  return p ? p->pkg.identity().source_model.repo.c_str() : "";
}
const char* skippy_package_source_revision(const skippy_package* p) {
  return p ? p->pkg.identity().source_model.revision.c_str() : "";
}
const char* skippy_package_source_file(const skippy_package* p) {
  return p ? p->pkg.identity().source_model.primary_file.c_str() : "";
}
uint32_t skippy_package_layer_count(const skippy_package* p) { return p ? p->pkg.identity().layer_count : 0; }
uint64_t skippy_package_activation_width(const skippy_package* p) {
  return p ? p->activation_width.value_or(0) : 0;
}
size_t skippy_package_warning_count(const skippy_package* p) { return p ? p->pkg.warnings.size() : 0; }
const char* skippy_package_warning(const skippy_package* p, size_t index) {
  return p && index < p->pkg.warnings.size() ? p->pkg.warnings[index].c_str() : nullptr;
}
const char* skippy_package_root(const skippy_package* p) { return p ? p->pkg.root.c_str() : ""; }
const char* skippy_package_commit(const skippy_package* p) { return p && p->pkg.commit ? p->commit.c_str() : nullptr; }
uint32_t skippy_package_schema_version(const skippy_package* p) { return p ? p->pkg.schema_version() : 0; }
const char* skippy_package_id(const skippy_package* p) {
  return p && !p->pkg.identity().package_id.empty() ? p->pkg.identity().package_id.c_str() : nullptr;
}

skippy_status skippy_stage_select(skippy_package* package, uint32_t layer_start, uint32_t layer_end,
                                  const char* projector_path, skippy_stage** out) {
  if (out == nullptr) return fail(SKIPPY_ERR_USAGE, "skippy_stage_select: out is NULL");
  *out = nullptr;
  if (package == nullptr) return fail(SKIPPY_ERR_USAGE, "skippy_stage_select: package is NULL");
  if (layer_end <= layer_start) {
    return fail(SKIPPY_ERR_USAGE, "skippy_stage_select: layer range " + std::to_string(layer_start) + ".." +
                                      std::to_string(layer_end) + " is empty (half-open START..END)");
  }
  return guarded([&] {
    auto s = std::make_unique<skippy_stage>();
    s->package = package;
    const skippy::LayerRange range{layer_start, layer_end};
    s->opened = std::make_shared<const skippy::OpenedCatalog>(package->pkg.catalog(skippy::CatalogNeed::stage(range)));
    const auto& opened = *s->opened;
    skippy::SelectOptions options;
    if (projector_path != nullptr) options.projector_path = projector_path;
    s->stage = skippy::open_stage(opened, range, options);  // hf://: brought first
    s->parts = s->stage.parts_with_projector();
    // As the CLI's select: hf:// (or SKIPPY_VERIFY_PACKAGE_SHA) verifies
    // before any path is handed out, cache hits included.
    (void)skippy::verify_if_required(opened, s->parts);
    for (const auto& part : s->parts) s->paths.push_back(part.path.string());
    *out = s.release();
  });
}

void skippy_stage_free(skippy_stage* stage) { delete stage; }

size_t skippy_stage_part_count(const skippy_stage* stage) { return stage ? stage->parts.size() : 0; }

skippy_status skippy_stage_part(const skippy_stage* stage, size_t index, skippy_part* out) {
  if (stage == nullptr || out == nullptr) return fail(SKIPPY_ERR_USAGE, "skippy_stage_part: NULL argument");
  if (index >= stage->parts.size()) {
    return fail(SKIPPY_ERR_USAGE, "skippy_stage_part: index " + std::to_string(index) + " is past the stage's " +
                                      std::to_string(stage->parts.size()) + " parts");
  }
  const auto& p = stage->parts[index];
  out->role = skippy::part_role_label(p).data();  // literals: NUL-terminated
  out->layer_index = p.layer_index ? static_cast<int64_t>(*p.layer_index) : -1;
  out->rel_path = p.rel_path.c_str();
  out->path = stage->paths[index].c_str();
  out->bytes = p.bytes;
  out->sha256 = p.sha256.c_str();
  g_last_error.clear();
  return SKIPPY_OK;
}

skippy_status skippy_stage_verify(skippy_stage* stage, int use_cache, uint64_t* hashed_bytes) {
  if (stage == nullptr) return fail(SKIPPY_ERR_USAGE, "skippy_stage_verify: stage is NULL");
  return guarded([&] {
    skippy::VerifyOptions o;
    o.use_cache = use_cache != 0;
    auto all = stage->stage;
    all.parts = stage->parts;  // the projector too, as the stage lists it
    const auto r = skippy::verify_stage(*stage->opened, all, o);
    if (hashed_bytes != nullptr) *hashed_bytes = r.hashed_bytes;
    if (!r.verified) {
      std::string msg = stage->package->pkg.ref + ": SHA-256 verification failed:";
      for (const auto& problem : r.problems) msg += "\n  " + problem;
      throw skippy::Error(skippy::ErrorKind::kIntegrity, msg);
    }
  });
}

skippy_status skippy_stage_materialize(skippy_stage* stage, const char* out_path) {
  if (stage == nullptr) return fail(SKIPPY_ERR_USAGE, "skippy_stage_materialize: stage is NULL");
  return guarded([&] {
    skippy::MaterializeOptions o;
    if (out_path != nullptr) o.out = out_path;
    stage->materialized = skippy::materialize_stage(*stage->opened, stage->stage, o).path.string();
  });
}

const char* skippy_stage_materialized_path(const skippy_stage* stage) {
  return stage && !stage->materialized.empty() ? stage->materialized.c_str() : nullptr;
}

skippy_status skippy_policy_resolve(skippy_package* package, const char* phase, uint64_t n_tokens, uint64_t n_kv,
                                    const char* backend, char** json_out) {
  return json_call("skippy_policy_resolve", package, json_out, [&] {
    const auto kind = phase ? skippy::parse_request_kind(phase) : std::nullopt;
    if (!kind) usage("skippy_policy_resolve: phase must be \"decode\", \"prefill\" or \"verify\"");
    skippy::PackagePolicyQuery q;
    q.request = {*kind, n_tokens, n_kv, std::nullopt, std::nullopt};
    if (backend) q.backend = backend;
    return skippy::resolve_package_policy(package->pkg, q).document;
  });
}

skippy_status skippy_speculative_resolve(skippy_package* package, const char* strategy, char** json_out) {
  std::optional<skippy::SpeculativeRefusal> refused;
  const auto st = json_call("skippy_speculative_resolve", package, json_out, [&] {
    skippy::SpeculativeSettings flags;
    if (strategy) flags.strategy = strategy;
    auto r = skippy::resolve_package_speculative(package->pkg, flags);
    refused = r.resolution.refusal;
    return std::move(r.document);
  });
  if (st != SKIPPY_OK || !refused) return st;
  return fail(SKIPPY_ERR_INVALID_INPUT, "speculative decoding refused (rule " + refused->rule + "): " + refused->message);
}

void skippy_string_free(char* s) { std::free(s); }

}  // extern "C"
