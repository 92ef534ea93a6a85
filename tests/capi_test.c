/* Drives the C API the way a C runtime would: open a package, select a
 * stage, list its parts, verify them, materialize the stage. Written in C99
 * (compiled as C) so the header is proven usable from C. Prints one line per
 * fact for tests/capi_test.cpp to check.
 *   usage: skippy_capi_test PACKAGE START END [MATERIALIZE_OUT]
 *          skippy_capi_test --errors PACKAGE   (error paths)
 *          skippy_capi_test --trusted PACKAGE [CERT...]   (#25: trusted signers) */
#include <skippy/skippy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check(skippy_status s, const char* what) {
  if (s != SKIPPY_OK) {
    printf("error %s %s: %s\n", what, skippy_status_name(s), skippy_last_error());
    return 1;
  }
  return 0;
}

static int errors(const char* ref) {
  skippy_package* pkg = (skippy_package*)1;
  skippy_status s = skippy_package_open("/nonexistent/package", &pkg);
  printf("open-missing %s %s null=%d\n", skippy_status_name(s), strlen(skippy_last_error()) > 0 ? "message" : "empty",
         pkg == NULL);
  s = skippy_package_open("hf://bad ref", &pkg);
  printf("open-bad-ref %s\n", skippy_status_name(s));
  s = skippy_package_open(NULL, &pkg);
  printf("open-null %s\n", skippy_status_name(s));
  if (check(skippy_package_open(ref, &pkg), "open")) return 1;
  skippy_stage* stage = (skippy_stage*)1;
  s = skippy_stage_select(pkg, 3, 3, NULL, &stage);
  printf("select-empty %s null=%d\n", skippy_status_name(s), stage == NULL);
  s = skippy_stage_select(pkg, 0, skippy_package_layer_count(pkg) + 1, NULL, &stage);
  printf("select-past-end %s\n", skippy_status_name(s));
  s = skippy_stage_select(pkg, 0, 1, "projectors/none.gguf", &stage);
  printf("select-undeclared-projector %s\n", skippy_status_name(s));
  if (check(skippy_stage_select(pkg, 0, 1, NULL, &stage), "select")) {
    skippy_package_close(pkg);
    return 1;
  }
  char* doc = (char*)1;
  s = skippy_policy_resolve(pkg, "sideways", 1, 1, NULL, &doc);
  printf("policy-bad-phase %s null=%d\n", skippy_status_name(s), doc == NULL);
  s = skippy_policy_resolve(pkg, "decode", 1, 1, "/nonexistent/backend.json", &doc);
  printf("policy-missing-backend %s\n", skippy_status_name(s));
  s = skippy_speculative_resolve(NULL, NULL, &doc);
  printf("speculative-null %s\n", skippy_status_name(s));
  skippy_string_free(NULL);
  skippy_part part;
  s = skippy_stage_part(stage, 1000, &part);
  printf("part-out-of-range %s\n", skippy_status_name(s));
  skippy_stage_free(stage);
  skippy_package_close(pkg);
  skippy_package_close(NULL);
  skippy_stage_free(NULL);
  return 0;
}

/* #25: skippy_package_open_trusted with the certificates argv[3..]; prints
 * "trusted <status> signer <owner id|(none)>" and the message on failure. */
static int trusted(int argc, char** argv) {
  skippy_package* pkg = (skippy_package*)1;
  const char* const* signers = (const char* const*)(argv + 3);
  skippy_status s = skippy_package_open_trusted(argv[2], signers, (size_t)(argc - 3), &pkg);
  printf("trusted %s signer %s\n", skippy_status_name(s),
         s == SKIPPY_OK && skippy_package_signer(pkg) ? skippy_package_signer(pkg) : "(none)");
  if (s != SKIPPY_OK) printf("message %s null=%d\n", skippy_last_error(), pkg == NULL);
  if (s == SKIPPY_OK) {
    skippy_stage* stage = NULL;
    if (check(skippy_stage_select(pkg, 0, 1, NULL, &stage), "select") == 0) {
      if (check(skippy_stage_verify(stage, 0, NULL), "verify") == 0) printf("stage verified\n");
    }
    skippy_stage_free(stage);
    skippy_package_close(pkg);
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "--errors") == 0) return errors(argv[2]);
  if (argc >= 3 && strcmp(argv[1], "--trusted") == 0) return trusted(argc, argv);
  if (argc < 4) {
    fprintf(stderr, "usage: %s PACKAGE START END [MATERIALIZE_OUT]\n", argv[0]);
    return 2;
  }
  printf("version %s abi %s\n", skippy_version(), skippy_runtime_abi_version());
  int rc = 1;
  skippy_package* pkg = NULL;
  skippy_stage* stage = NULL;
  if (check(skippy_package_open(argv[1], &pkg), "open")) goto done;
  printf("model_id %s\n", skippy_package_model_id(pkg));
  printf("manifest_sha256 %s\n", skippy_package_manifest_sha256(pkg));
  printf("layer_count %u\n", (unsigned)skippy_package_layer_count(pkg));
  printf("activation_width %llu\n", (unsigned long long)skippy_package_activation_width(pkg));
  printf("package_abi %s\n", skippy_package_abi_version(pkg));
  printf("source %s %s %s\n", skippy_package_source_repo(pkg), skippy_package_source_revision(pkg),
         skippy_package_source_file(pkg));
  printf("commit %s\n", skippy_package_commit(pkg) ? skippy_package_commit(pkg) : "(none)");
  printf("schema %u %s\n", (unsigned)skippy_package_schema_version(pkg),
         skippy_package_id(pkg) ? skippy_package_id(pkg) : "(none)");
  for (size_t i = 0; i < skippy_package_warning_count(pkg); ++i) printf("warning %s\n", skippy_package_warning(pkg, i));
  /* Generation defaults: the same JSON documents as the policy and
   * speculative commands. A refusal is reported and the stage still loads. */
  char* doc = NULL;
  if (check(skippy_policy_resolve(pkg, "prefill", 4096, 131072, "cpu", &doc), "policy") == 0) printf("policy %s\n", doc);
  skippy_string_free(doc);
  doc = NULL;
  skippy_status spec = skippy_speculative_resolve(pkg, NULL, &doc);
  printf("speculative %s %s\n", skippy_status_name(spec), doc ? doc : "null");
  skippy_string_free(doc);
  if (check(skippy_stage_select(pkg, (uint32_t)atoi(argv[2]), (uint32_t)atoi(argv[3]), NULL, &stage), "select")) goto done;
  for (size_t i = 0; i < skippy_stage_part_count(stage); ++i) {
    skippy_part part;
    if (check(skippy_stage_part(stage, i, &part), "part")) goto done;
    printf("part %s %lld %s %llu %s %s\n", part.role, (long long)part.layer_index, part.rel_path,
           (unsigned long long)part.bytes, part.sha256, part.path);
  }
  uint64_t hashed = 0;
  if (check(skippy_stage_verify(stage, 0, &hashed), "verify")) goto done;
  printf("verified hashed_bytes %llu\n", (unsigned long long)hashed);
  if (argc > 4) {
    if (check(skippy_stage_materialize(stage, argv[4]), "materialize")) goto done;
    printf("materialized %s\n", skippy_stage_materialized_path(stage));
  }
  rc = 0;
done:
  /* Both accept NULL: one cleanup path, leak-free under LeakSanitizer. */
  skippy_stage_free(stage);
  skippy_package_close(pkg);
  return rc;
}
