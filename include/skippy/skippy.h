/* skippy.h: the C API of libskippy for runtimes that load a stage of a
 * layer package (spec: "Consumer Validation", "Layer Selection"). C99; no
 * exception crosses it; every call that can fail returns a skippy_status
 * and leaves a message for skippy_last_error().
 *
 *   skippy_package* pkg;
 *   if (skippy_package_open("hf://ns/repo@<commit>", &pkg) != SKIPPY_OK) {
 *     fprintf(stderr, "%s\n", skippy_last_error());
 *     return 1;
 *   }
 *   skippy_stage* stage;
 *   skippy_stage_select(pkg, 0, 12, NULL, &stage);     // layers 0..12, half-open
 *   skippy_stage_verify(stage, 1, NULL);               // SHA-256, verification cache
 *   for (size_t i = 0; i < skippy_stage_part_count(stage); ++i) {
 *     skippy_part part;
 *     skippy_stage_part(stage, i, &part);              // load order: metadata, embeddings, layers, output
 *     load(part.path, part.bytes);
 *   }
 *   skippy_stage_free(stage);
 *   skippy_package_close(pkg);
 *
 * Thread-safety: distinct handles may be used from distinct threads at once; one
 * handle from one thread at a time. skippy_last_error() is per thread.
 * Strings returned by getters belong to the handle and stay valid until it
 * is freed.
 */
#ifndef SKIPPY_SKIPPY_H
#define SKIPPY_SKIPPY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What went wrong; the same kinds as the C++ skippy::ErrorKind. */
typedef enum skippy_status {
  SKIPPY_OK = 0,
  SKIPPY_ERR_USAGE = 1,         /* a bad argument (NULL handle, malformed reference, empty range) */
  SKIPPY_ERR_INVALID_INPUT = 2, /* a file, manifest or reference breaks a rule */
  SKIPPY_ERR_NOT_FOUND = 3,     /* a package, repository, revision or part does not exist */
  SKIPPY_ERR_OFFLINE = 4,       /* needs the network and HF_HUB_OFFLINE=1 forbids it */
  SKIPPY_ERR_UNAUTHORIZED = 5,  /* a token was refused, or a gated repository needs access */
  SKIPPY_ERR_INTEGRITY = 6,     /* bytes do not match their declared size or SHA-256 */
  SKIPPY_ERR_TRANSPORT = 7,     /* the network failed */
  SKIPPY_ERR_IO = 8,            /* the operating system refused */
  SKIPPY_ERR_INTERNAL = 9       /* a bug: please report the message */
} skippy_status;

typedef struct skippy_package skippy_package; /* an opened, manifest-validated package */
typedef struct skippy_stage skippy_stage;     /* a validated layer range of a package */

/* One part a stage loads, in load order. */
typedef struct skippy_part {
  const char* role;       /* "metadata", "embeddings", "layer", "output" or "projector"; schema 2: "metadata", "layer", "common" */
  int64_t layer_index;    /* the layer for role "layer", else -1 */
  const char* rel_path;   /* as the manifest declares it */
  const char* path;       /* absolute path of the file to read */
  uint64_t bytes;         /* artifact_bytes (the file's size, checked) */
  const char* sha256;     /* declared SHA-256, lowercase or uppercase hex */
} skippy_part;

/* The library's version, "MAJOR.MINOR.PATCH". */
const char* skippy_version(void);
/* The skippy runtime ABI this library reads and writes ("MAJOR.MINOR.PATCH"). */
const char* skippy_runtime_abi_version(void);
/* "ok", "usage", "invalid_input", "not_found", "offline", "unauthorized",
 * "integrity", "transport", "io", "internal". */
const char* skippy_status_name(skippy_status status);
/* The message of the last failed call on this thread ("" if none). */
const char* skippy_last_error(void);

/* Opens a local package directory or hf://ns/repo[@rev|:rev] (through the
 * Hugging Face cache and the Hub, as HF_ENDPOINT / HF_TOKEN /
 * HF_HUB_OFFLINE say) and validates its manifest. *out is NULL on failure. */
skippy_status skippy_package_open(const char* ref, skippy_package** out);
void skippy_package_close(skippy_package* package);

/* ---- Signed packages ----
 * skippy_package_open, and the package must be signed (model-package.json.sig)
 * by one of the owner certificates (PEM files, owner.crt of `identity
 * init-owner`) in trusted_signers[0..n_signers), added to those of
 * SKIPPY_TRUSTED_SIGNERS / SKIPPY_TRUSTED_OWNERS (which skippy_package_open
 * honours too). An unsigned package, another signer or a certificate out of
 * its validity period fail with SKIPPY_ERR_UNAUTHORIZED; a signature that
 * does not verify over the manifest's exact bytes (or validation.json's)
 * with SKIPPY_ERR_INTEGRITY; the message says which. Every part used is
 * then SHA-256-verified. n_signers 0: exactly skippy_package_open. */
skippy_status skippy_package_open_trusted(const char* ref, const char* const* trusted_signers, size_t n_signers,
                                          skippy_package** out);
/* The owner id (SHA-256 of the signer's Ed25519 key, hex) that the trusted
 * signers check accepted; NULL when none was configured. */
const char* skippy_package_signer(const skippy_package* package);
/* ---- end signed packages ---- */

/* Identity fields of the manifest. */
const char* skippy_package_model_id(const skippy_package* package);
const char* skippy_package_manifest_sha256(const skippy_package* package);
const char* skippy_package_abi_version(const skippy_package* package);
const char* skippy_package_source_repo(const skippy_package* package);
const char* skippy_package_source_revision(const skippy_package* package);
const char* skippy_package_source_file(const skippy_package* package);
uint32_t skippy_package_layer_count(const skippy_package* package);
/* activation_width; when the manifest does not declare it, the reference
 * runtime's fallback (the element count of blk.0.hc_attn_norm.weight, else
 * blk.0.attn_norm.weight, in the first layer's fragment when it is on disk);
 * 0 when unknown. */
uint64_t skippy_package_activation_width(const skippy_package* package);
/* What a person should be told about the package, one message each: a
 * projector of an unknown kind (never used), a malformed generation block
 * (set aside: stages still load; policy and speculative calls refuse), a
 * moving branch. The count, and message `index` (valid until the package is
 * closed; NULL past the end). */
size_t skippy_package_warning_count(const skippy_package* package);
const char* skippy_package_warning(const skippy_package* package, size_t index);
/* The directory holding model-package.json. */
const char* skippy_package_root(const skippy_package* package);
/* The commit an hf:// revision resolved to; NULL for a local directory. */
const char* skippy_package_commit(const skippy_package* package);
/* The package schema: 1 (the spec's layer package) or 2 (mesh-llm's
 * "package v2": a metadata carrier and payload parts; local directories).
 * For schema 2 the identity getters read its root (abi_version is its
 * native_abi_version; source_* its source_model), the activation width
 * comes from blk.0's attn_norm in the carrier's directory, and there are no
 * warnings. */
uint32_t skippy_package_schema_version(const skippy_package* package);
/* Schema 2: the root's package_id ("sha256:<hex>", recomputed and checked
 * when opened); NULL for schema 1. */
const char* skippy_package_id(const skippy_package* package);

/* Whether a runtime of ABI runtime_abi ("MAJOR.MINOR.PATCH") admits the
 * package, by that runtime's own rule: schema 2, native_abi_version exactly
 * runtime_abi; schema 1, the same major and a minor no newer. runtime_abi
 * NULL or "": $SKIPPY_RUNTIME_ABI, and SKIPPY_OK when that is unset too (no
 * check). A refusal is SKIPPY_ERR_INVALID_INPUT naming both versions and the
 * fix (for schema 2, the restamp-package command); a malformed version is
 * SKIPPY_ERR_USAGE. Call it before selecting stages for that runtime. */
skippy_status skippy_package_check_runtime_abi(const skippy_package* package, const char* runtime_abi);

/* Consumer validation of layers [layer_start, layer_end) and the parts
 * they load (fetching them first for hf://). projector_path: NULL for the
 * default choice (stage 0 gets the first declared mmproj), else a
 * projector path declared in the manifest. When the package requires it
 * (hf://, cache hits included; local directories with
 * SKIPPY_VERIFY_PACKAGE_SHA set) every selected part's SHA-256 is checked
 * before a path is returned: a mismatch is SKIPPY_ERR_INTEGRITY naming the
 * file. *out is NULL on failure. */
skippy_status skippy_stage_select(skippy_package* package, uint32_t layer_start, uint32_t layer_end,
                                  const char* projector_path, skippy_stage** out);
void skippy_stage_free(skippy_stage* stage);

/* Parts in load order (the stage's projector last, when it has one).
 * Schema 2: the metadata carrier first (role "metadata": a runtime reads
 * KVs and the tensor directory there), then the payload parts holding the
 * stage's tensors: "layer" (layer_index set) and "common" (tensors without
 * a layer); projector_path must be NULL. */
size_t skippy_stage_part_count(const skippy_stage* stage);
skippy_status skippy_stage_part(const skippy_stage* stage, size_t index, skippy_part* out);

/* SHA-256 of every part against the manifest; use_cache != 0 consults and
 * updates the verification cache. SKIPPY_ERR_INTEGRITY when a part does
 * not match (the message lists them). hashed_bytes may be NULL. */
skippy_status skippy_stage_verify(skippy_stage* stage, int use_cache, uint64_t* hashed_bytes);

/* Writes the stage as one GGUF (derived cache): to out_path when not NULL,
 * else into the stage cache (reused when valid). The file's path is then
 * skippy_stage_materialized_path(). */
skippy_status skippy_stage_materialize(skippy_stage* stage, const char* out_path);
const char* skippy_stage_materialized_path(const skippy_stage* stage);

/* ---- Generation defaults (spec: "Policy Resolution", "Speculative
 * Decoding"), for either schema (schema 2: its generation block read as
 * schema 1's; it carries no generation.policy, so the built-in policy
 * applies, as the commands say). Both answer with one JSON document, the
 * one `policy --json` and `speculative --json` print, in a string the caller frees with
 * skippy_string_free(). *json_out is NULL on failure. */

/* The execution path for one request shape. phase: "decode", "prefill" or
 * "verify"; backend: NULL or "reference" (every path), "cpu", "cuda",
 * "metal", or the path of a backend description file. Keys include
 * "phase", "selected_path", "package_path", "fallback_reason" and
 * "telemetry" (the spec's record). When the package's recommendation is not
 * what runs, the decision's JSON log line is in "log". */
skippy_status skippy_policy_resolve(skippy_package* package, const char* phase, uint64_t n_tokens, uint64_t n_kv,
                                    const char* backend, char** json_out);

/* The speculative-decoding plan: strategy NULL for the package's default,
 * else a strategy id (or "none"). Keys include "strategy" (the effective
 * strategy id, or "disabled") and "plan". A refusal by a rule of the spec
 * is SKIPPY_ERR_INVALID_INPUT, its message naming the rule; the document
 * is then still returned with an "error" object. */
skippy_status skippy_speculative_resolve(skippy_package* package, const char* strategy, char** json_out);

/* Frees a string returned by this API (NULL is fine). */
void skippy_string_free(char* s);

#ifdef __cplusplus
}
#endif

#endif /* SKIPPY_SKIPPY_H */
