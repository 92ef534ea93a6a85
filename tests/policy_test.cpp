// The generation policy resolver (spec: "Generation Defaults", "Execution
// Policy", "Policy Resolution"; GLM-DSA.md): each rule through the library,
// and the issue's examples through the real CLI as well.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "skippy/error.h"
#include "util/file.h"
#include "skippy/gguf.h"
#include "gguf/gguf_writer.h"
#include "skippy/policy.h"
#include "util/sha256.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::run_cli;

constexpr uint64_t k128k = 131072;

GenerationPolicy glm_dsa_v1() {
  GenerationPolicy p;
  p.profile = "glm-dsa-v1";
  p.decode = "compact-flash";
  p.short_prefill = "dense";
  p.long_prefill = "sparse-chunked";
  p.verify = "auto";
  p.indexshare = "required";
  p.experimental = {{"selected_row_flash", "evidence-gated"},
                    {"moe_weighted_down", "evidence-gated"},
                    {"moe_merged_shared_gate_up", "evidence-gated"}};
  return p;
}

GenerationThresholds glm_dsa_thresholds() {
  GenerationThresholds t;
  t.short_prefill_max_tokens = 2048;
  t.compact_flash_min_kv = 1;
  t.dense_mask_max_bytes = 268435456;
  return t;
}

PolicyInputs inputs(RequestKind kind, uint64_t n_tokens, uint64_t n_kv, const std::string& backend = "reference") {
  PolicyInputs in;
  in.policy = glm_dsa_v1();
  in.thresholds = glm_dsa_thresholds();
  in.architecture = "glm-dsa";
  in.request.kind = kind;
  in.request.n_tokens = n_tokens;
  in.request.n_kv = n_kv;
  in.backend = *builtin_backend(backend);
  return in;
}

// Resolves and collects the log lines.
struct Resolved {
  PolicyDecision d;
  std::vector<std::string> log;
};
Resolved resolve(const PolicyInputs& in) {
  Resolved r;
  r.d = resolve_policy(in, [&](const std::string& line) { r.log.push_back(line); });
  return r;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// ------------------------------------------------------ the issue's examples

TEST(PolicyResolution, DecodeAtKv1024SelectsCompactFlash) {
  const auto r = resolve(inputs(RequestKind::kDecode, 1, 1024));
  EXPECT_EQ(r.d.phase, Phase::kDecode);
  EXPECT_EQ(r.d.selected, ExecutionPath::kCompactFlash);
  EXPECT_EQ(r.d.source, PolicySource::kPackage);
  EXPECT_TRUE(r.d.package_recommendation_used);
  EXPECT_FALSE(r.d.fallback_reason);
  EXPECT_TRUE(r.log.empty()) << "the package recommendation ran: nothing to log";
  const auto& t = r.d.telemetry;
  EXPECT_EQ(t.selected_path, "compact-flash");
  EXPECT_EQ(t.dense_mask_bytes, 4096u);
  EXPECT_EQ(t.mask_bytes_avoided, 4096u);
  ASSERT_TRUE(t.threshold);
  EXPECT_EQ(t.threshold->name, "compact_flash_min_kv");
  EXPECT_EQ(t.threshold->unit, "KV rows");
}

TEST(PolicyResolution, FourTokenPrefillSelectsDense) {
  const auto r = resolve(inputs(RequestKind::kPrefill, 4, 4));
  EXPECT_EQ(r.d.phase, Phase::kShortPrefill);
  EXPECT_EQ(r.d.selected, ExecutionPath::kDense);
  EXPECT_EQ(r.d.package_path, "dense");
  EXPECT_EQ(r.d.telemetry.mask_bytes_avoided, 0u) << "dense materializes its mask";
  EXPECT_EQ(r.d.telemetry.dense_mask_bytes, 64u);
  EXPECT_TRUE(r.log.empty());
}

TEST(PolicyResolution, LongPrefillAt128kSelectsSparseChunkedAndAvoidsTheDenseMask) {
  const auto r = resolve(inputs(RequestKind::kPrefill, 4096, k128k));
  EXPECT_EQ(r.d.phase, Phase::kLongPrefill);
  EXPECT_EQ(r.d.selected, ExecutionPath::kSparseChunked);
  EXPECT_EQ(r.d.telemetry.dense_mask_bytes, 2147483648u) << "4096 x 131072 x 4";
  EXPECT_EQ(r.d.telemetry.mask_bytes_avoided, 2147483648u);
  ASSERT_TRUE(r.d.telemetry.threshold);
  EXPECT_EQ(r.d.telemetry.threshold->name, "short_prefill_max_tokens");
  EXPECT_EQ(r.d.telemetry.threshold->unit, "tokens");
  EXPECT_TRUE(r.log.empty());
}

TEST(PolicyResolution, BackendWithoutCompactFlashFallsBackAndLogsTheReason) {
  const auto r = resolve(inputs(RequestKind::kDecode, 1, 1024, "cpu"));
  EXPECT_EQ(r.d.selected, ExecutionPath::kDense);
  EXPECT_EQ(r.d.source, PolicySource::kFallback);
  EXPECT_FALSE(r.d.package_recommendation_used);
  ASSERT_TRUE(r.d.fallback_reason);
  EXPECT_TRUE(contains(*r.d.fallback_reason, "backend \"cpu\" cannot run compact-flash")) << *r.d.fallback_reason;
  EXPECT_EQ(r.d.telemetry.rejected_path, "compact-flash");
  ASSERT_EQ(r.log.size(), 1u) << "one structured line";
  EXPECT_FALSE(contains(r.log[0], "\n"));
  const auto line = json::parse(r.log[0]);
  EXPECT_EQ(line["event"], "skippy.generation_policy");
  EXPECT_EQ(line["package_recommendation_used"], false);
  EXPECT_EQ(line["telemetry"]["selected_path"], "dense");
  EXPECT_EQ(line["telemetry"]["rejected_path"], "compact-flash");
  EXPECT_EQ(line["telemetry"]["backend"], "cpu");
  EXPECT_EQ(line["telemetry"]["fallback_reason"], *r.d.fallback_reason);
  EXPECT_EQ(r.d.log_line, r.log[0]);
}

// --------------------------------------------------------- phase identification

TEST(PolicyResolution, PhaseIdentificationFromRequestShapeAndShortPrefillMaxTokens) {
  EXPECT_EQ(identify_phase(RequestKind::kDecode, 1, 2048), Phase::kDecode);
  EXPECT_EQ(identify_phase(RequestKind::kVerify, 5, 2048), Phase::kVerify);
  EXPECT_EQ(identify_phase(RequestKind::kPrefill, 2048, 2048), Phase::kShortPrefill) << "at or below: short";
  EXPECT_EQ(identify_phase(RequestKind::kPrefill, 2049, 2048), Phase::kLongPrefill);
  auto in = inputs(RequestKind::kPrefill, 600, 600);
  in.overrides.short_prefill_max_tokens = 512;
  const auto r = resolve(in);
  EXPECT_EQ(r.d.phase, Phase::kLongPrefill);
  EXPECT_EQ(r.d.telemetry.threshold->source, PolicySource::kOverride);
}

TEST(PolicyResolution, VerifyAutoLetsTheRuntimeChoose) {
  const auto r = resolve(inputs(RequestKind::kVerify, 4, 1024));
  EXPECT_EQ(r.d.phase, Phase::kVerify);
  EXPECT_EQ(r.d.package_path, "auto");
  EXPECT_EQ(r.d.selected, ExecutionPath::kDense) << "dense won the measured 4-16 token shapes";
  EXPECT_EQ(r.d.source, PolicySource::kPackage);
  EXPECT_TRUE(r.log.empty()) << "auto is the package's recommendation";
}

TEST(PolicyResolution, RequestShapeIsChecked) {
  EXPECT_THROW(resolve(inputs(RequestKind::kPrefill, 0, 4)), Error);
  EXPECT_THROW(resolve(inputs(RequestKind::kPrefill, 8, 4)), Error) << "n_kv includes the batch";
  EXPECT_THROW(resolve(inputs(RequestKind::kDecode, 4, 8)), Error) << "decode is one token";
  EXPECT_EQ(dense_mask_bytes(UINT64_MAX, 2), UINT64_MAX) << "the estimate saturates";
}

// ------------------------------------------------------- resolution order

TEST(PolicyResolutionOrder, RuntimeOverrideComesFirstAndIsLogged) {
  auto in = inputs(RequestKind::kDecode, 1, 1024);
  add_policy_override(in.overrides, "decode=dense");
  const auto r = resolve(in);
  EXPECT_EQ(r.d.selected, ExecutionPath::kDense);
  EXPECT_EQ(r.d.source, PolicySource::kOverride);
  EXPECT_FALSE(r.d.package_recommendation_used);
  EXPECT_TRUE(contains(r.d.fallback_reason.value_or(""), "runtime override decode=dense"));
  ASSERT_EQ(r.log.size(), 1u) << "the overridden package recommendation is logged";
  EXPECT_EQ(json::parse(r.log[0])["package_path"], "compact-flash");
}

TEST(PolicyResolutionOrder, PackagePolicyComesBeforeTheBuiltinDefault) {
  auto in = inputs(RequestKind::kDecode, 1, 1024);
  in.policy->decode = "direct-sparse";  // not what the runtime would pick
  const auto r = resolve(in);
  EXPECT_EQ(r.d.selected, ExecutionPath::kDirectSparse);
  EXPECT_EQ(r.d.source, PolicySource::kPackage);
}

TEST(PolicyResolutionOrder, BuiltinDefaultForTheArchitectureWhenThePackageHasNoPolicy) {
  auto in = inputs(RequestKind::kDecode, 1, 1024);
  in.policy.reset();
  in.thresholds.reset();
  auto r = resolve(in);
  EXPECT_EQ(r.d.selected, ExecutionPath::kCompactFlash) << "glm-dsa: the glm-dsa-v1 table";
  EXPECT_EQ(r.d.source, PolicySource::kBuiltin);
  EXPECT_EQ(r.d.telemetry.profile, "glm-dsa-v1");
  EXPECT_TRUE(r.log.empty()) << "no package recommendation to depart from";

  in.architecture = "llama";
  r = resolve(in);
  EXPECT_EQ(r.d.selected, ExecutionPath::kDense) << "an architecture without sparse attention runs dense";
  EXPECT_FALSE(r.d.telemetry.profile);
  EXPECT_EQ(r.d.telemetry.mask_bytes_avoided, 0u);
  add_policy_override(in.overrides, "decode=compact-flash");
  r = resolve(in);
  EXPECT_EQ(r.d.selected, ExecutionPath::kDense) << "an override cannot invent a path the model lacks";
  ASSERT_TRUE(r.d.override_rejected);
  EXPECT_TRUE(contains(*r.d.override_rejected, "no sparse attention"));
  EXPECT_EQ(r.log.size(), 1u) << "an override that could not run is logged";
}

TEST(PolicyResolutionOrder, CorrectnessFallbackWhenNoPreferredPathRuns) {
  auto in = inputs(RequestKind::kDecode, 1, 1024);
  in.backend = parse_backend_capabilities(R"({"name": "sparse-only", "paths": ["direct-sparse"]})", "sparse.json");
  const auto r = resolve(in);
  EXPECT_EQ(r.d.selected, ExecutionPath::kDirectSparse);
  EXPECT_EQ(r.d.source, PolicySource::kFallback);
  EXPECT_EQ(r.log.size(), 1u);
  in.backend = parse_backend_capabilities(R"({"name": "nothing", "paths": []})", "none.json");
  EXPECT_THROW(resolve(in), Error) << "no path runs: refused, never guessed";
}

// ---------------------------------------------------- thresholds in their units

TEST(PolicyThresholds, CompactFlashMinKvIsInKvRows) {
  auto in = inputs(RequestKind::kDecode, 1, 1024);
  in.thresholds->compact_flash_min_kv = 1025;
  auto r = resolve(in);
  EXPECT_EQ(r.d.selected, ExecutionPath::kDense);
  EXPECT_TRUE(contains(r.d.fallback_reason.value_or(""), "n_kv 1024 is below compact_flash_min_kv 1025"));
  ASSERT_TRUE(r.d.telemetry.threshold);
  EXPECT_EQ(r.d.telemetry.threshold->name, "compact_flash_min_kv");
  EXPECT_EQ(r.d.telemetry.threshold->value, 1025u);
  in.request.n_kv = 1025;
  r = resolve(in);
  EXPECT_EQ(r.d.selected, ExecutionPath::kCompactFlash) << "at the minimum: allowed";
}

TEST(PolicyThresholds, DenseMaskMaxBytesAgainstNTokensTimesNKvTimes4) {
  // 2048 x 32768 x 4 = 268435456: exactly the budget.
  auto r = resolve(inputs(RequestKind::kPrefill, 2048, 32768));
  EXPECT_EQ(r.d.selected, ExecutionPath::kDense);
  EXPECT_EQ(r.d.telemetry.dense_mask_bytes, 268435456u);
  r = resolve(inputs(RequestKind::kPrefill, 2048, 32769));
  EXPECT_EQ(r.d.selected, ExecutionPath::kSparseChunked) << "one KV row more: over budget";
  EXPECT_FALSE(r.d.package_recommendation_used);
  ASSERT_TRUE(r.d.telemetry.threshold);
  EXPECT_EQ(r.d.telemetry.threshold->name, "dense_mask_max_bytes");
  EXPECT_EQ(r.d.telemetry.threshold->unit, "bytes");
  EXPECT_EQ(r.d.telemetry.mask_bytes_avoided, 268443648u);
  EXPECT_TRUE(contains(r.d.fallback_reason.value_or(""), "exceeds dense_mask_max_bytes 268435456"));
  EXPECT_EQ(r.log.size(), 1u);
}

TEST(PolicyThresholds, UnknownNumericThresholdsMayBeIgnored) {
  auto in = inputs(RequestKind::kDecode, 1, 1024);
  in.thresholds->extra = {{"verify_max_window", 7}};
  const auto r = resolve(in);
  EXPECT_EQ(r.d.ignored_thresholds, std::vector<std::string>{"verify_max_window"});
  EXPECT_TRUE(r.d.unsupported.empty()) << "thresholds are hints";
  EXPECT_EQ(r.d.selected, ExecutionPath::kCompactFlash);
}

// ----------------------------------------------- unknown values: unsupported

TEST(PolicyUnsupported, UnknownProfileIsReportedNeverTreatedAsKnown) {
  auto in = inputs(RequestKind::kDecode, 1, 1024);
  in.policy->profile = "glm-dsa-v9";
  in.architecture = "llama";
  const auto r = resolve(in);
  EXPECT_EQ(r.d.selected, ExecutionPath::kDense) << "the v9 phase values are not interpreted";
  EXPECT_EQ(r.d.source, PolicySource::kBuiltin);
  ASSERT_FALSE(r.d.unsupported.empty());
  EXPECT_TRUE(contains(r.d.unsupported[0], "unknown profile \"glm-dsa-v9\""));
  EXPECT_TRUE(contains(r.d.fallback_reason.value_or(""), "unsupported profile"));
  EXPECT_EQ(r.log.size(), 1u);
}

TEST(PolicyUnsupported, AKnownProfileWithoutItsModelEvidenceIsIgnored) {
  // glm-dsa-v1 on a llama model: the profile alone switches on no sparse path (#35).
  auto in = inputs(RequestKind::kDecode, 1, 1024);
  in.architecture = "llama";
  const auto r = resolve(in);
  EXPECT_EQ(r.d.selected, ExecutionPath::kDense);
  EXPECT_EQ(r.d.source, PolicySource::kBuiltin);
  EXPECT_FALSE(r.d.package_recommendation_used);
  EXPECT_FALSE(r.d.telemetry.profile);
  ASSERT_EQ(r.d.unsupported.size(), 1u);
  EXPECT_TRUE(contains(r.d.unsupported[0], "generation.policy.profile \"glm-dsa-v1\" ignored: it is for architecture "
                                           "\"glm-dsa\" and this model's is \"llama\""))
      << r.d.unsupported[0];
  EXPECT_TRUE(contains(r.d.fallback_reason.value_or(""), "ignored")) << r.d.fallback_reason.value_or("");
  ASSERT_EQ(r.log.size(), 1u);
  EXPECT_TRUE(contains(r.log[0], "ignored: it is for architecture")) << r.log[0];
  // The same package values on the glm-dsa model they were validated for.
  in.architecture = "glm-dsa";
  EXPECT_EQ(resolve(in).d.selected, ExecutionPath::kCompactFlash);
}

TEST(PolicyUnsupported, UnknownPhaseValueIsReportedNeverTreatedAsKnown) {
  auto in = inputs(RequestKind::kDecode, 1, 1024);
  in.policy->decode = "turbo-flash";
  const auto r = resolve(in);
  EXPECT_EQ(r.d.selected, ExecutionPath::kCompactFlash) << "the built-in glm-dsa default, not a guess at turbo";
  EXPECT_EQ(r.d.source, PolicySource::kBuiltin);
  EXPECT_FALSE(r.d.package_recommendation_used);
  EXPECT_EQ(r.d.telemetry.rejected_path, "turbo-flash");
  EXPECT_TRUE(contains(r.d.fallback_reason.value_or(""), "unsupported phase value \"turbo-flash\""));
  EXPECT_EQ(r.log.size(), 1u);
}

TEST(PolicyUnsupported, UnknownExperimentalSwitchIsReportedAndOff) {
  auto in = inputs(RequestKind::kDecode, 1, 1024);
  in.policy->experimental["warp_speed"] = "on";
  in.policy->experimental["moe_weighted_down"] = "always";
  const auto r = resolve(in);
  std::map<std::string, ExperimentalDecision> e;
  for (const auto& x : r.d.experimental) e[x.name] = x;
  EXPECT_FALSE(e.at("warp_speed").enabled);
  EXPECT_FALSE(e.at("moe_weighted_down").enabled) << "an unknown value is not a known switch state";
  EXPECT_EQ(r.d.unsupported.size(), 2u);
  EXPECT_EQ(r.log.size(), 1u);
}

// ----------------------------------------------------------- evidence-gated

TEST(PolicyExperimental, EvidenceGatedSwitchesStayOffWithoutEvidence) {
  const auto r = resolve(inputs(RequestKind::kDecode, 1, 1024, "metal"));
  ASSERT_EQ(r.d.experimental.size(), 3u);
  for (const auto& e : r.d.experimental) {
    EXPECT_FALSE(e.enabled) << e.name;
    EXPECT_TRUE(contains(e.reason, "no evidence")) << e.reason;
  }
}

TEST(PolicyExperimental, EvidenceGatedSwitchTurnsOnOnlyWithExplicitEvidence) {
  auto in = inputs(RequestKind::kDecode, 1, 1024);
  in.backend = parse_backend_capabilities(
      R"({"name": "metal-m3", "paths": ["dense", "compact-flash"], "evidence": {"selected_row_flash": "bench/2025-06-01"}})",
      "metal-m3.json");
  auto r = resolve(in);
  std::map<std::string, ExperimentalDecision> e;
  for (const auto& x : r.d.experimental) e[x.name] = x;
  EXPECT_TRUE(e.at("selected_row_flash").enabled);
  EXPECT_TRUE(contains(e.at("selected_row_flash").reason, "bench/2025-06-01"));
  EXPECT_FALSE(e.at("moe_weighted_down").enabled);
  ASSERT_EQ(r.log.size(), 1u) << "an experimental path is logged";
  EXPECT_TRUE(contains(r.log[0], "experimental_enabled"));

  auto o = inputs(RequestKind::kDecode, 1, 1024);
  add_policy_override(o.overrides, "experimental.moe_weighted_down=on");
  r = resolve(o);
  for (const auto& x : r.d.experimental) EXPECT_EQ(x.enabled, x.name == "moe_weighted_down") << x.name;
}

// --------------------------------------------------------------- IndexShare

TEST(PolicyIndexShare, RequiredMeansSharedLayersReuseTheFullLayersTopK) {
  auto in = inputs(RequestKind::kDecode, 1, 1024);
  in.request.top_k = 768;
  in.request.indexshare_role = IndexShareRole::kShared;
  auto r = resolve(in);
  EXPECT_EQ(r.d.indexshare, "reuse");
  EXPECT_EQ(r.d.telemetry.top_k, 768u);
  EXPECT_EQ(r.d.telemetry.indexshare_role, IndexShareRole::kShared);
  EXPECT_TRUE(r.log.empty());
  in.request.indexshare_role = IndexShareRole::kFull;
  EXPECT_EQ(resolve(in).d.indexshare, "compute");
  // Recomputing a Shared layer's indexer is only an explicit, logged choice.
  in.request.indexshare_role = IndexShareRole::kShared;
  add_policy_override(in.overrides, "indexshare=recompute");
  r = resolve(in);
  EXPECT_EQ(r.d.indexshare, "recompute");
  EXPECT_FALSE(r.d.package_recommendation_used);
  EXPECT_EQ(r.log.size(), 1u);
}

// ---------------------------------------------------------------- telemetry

TEST(PolicyTelemetry, RecordCarriesEveryFieldTheSpecNames) {
  auto in = inputs(RequestKind::kDecode, 1, 1024);
  in.request.top_k = 768;
  in.request.indexshare_role = IndexShareRole::kShared;
  const auto j = policy_telemetry_json(resolve(in).d.telemetry);
  for (const char* key : {"profile", "phase", "backend", "n_tokens", "n_kv", "top_k", "indexshare_role",
                          "dense_mask_bytes", "threshold", "selected_path", "rejected_path", "fallback_reason",
                          "mask_bytes_avoided"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["profile"], "glm-dsa-v1");
  EXPECT_EQ(j["indexshare_role"], "shared");
  EXPECT_EQ(j["top_k"], 768);
  EXPECT_TRUE(j["fallback_reason"].is_null());
}

// -------------------------------------------------- overrides and backends

TEST(PolicyOverrides, EachOverrideIsCheckedWhenGiven) {
  PolicyOverrides o;
  add_policy_override(o, "long_prefill=dense");
  add_policy_override(o, "dense_mask_max_bytes=1024");
  add_policy_override(o, "selected_row_flash=off");
  EXPECT_EQ(o.paths.at(Phase::kLongPrefill), "dense");
  EXPECT_EQ(o.dense_mask_max_bytes, 1024u);
  EXPECT_EQ(o.experimental.at("selected_row_flash"), false);
  for (const char* bad : {"decode", "=dense", "decode=turbo", "prefill=dense", "dense_mask_max_bytes=-1",
                          "compact_flash_min_kv=1e3", "selected_row_flash=yes", "warp=on", "indexshare=maybe"}) {
    try {
      add_policy_override(o, bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUsage) << bad;
      EXPECT_TRUE(contains(e.what(), bad)) << e.what();
    }
  }
}

TEST(PolicyBackends, BuiltinsAndDescriptionFiles) {
  EXPECT_FALSE(builtin_backend("cpu")->runs(ExecutionPath::kCompactFlash));
  EXPECT_TRUE(builtin_backend("cuda")->runs(ExecutionPath::kCompactFlash));
  EXPECT_TRUE(builtin_backend("metal")->runs(ExecutionPath::kSparseChunked));
  EXPECT_EQ(builtin_backend("reference")->paths.size(), all_execution_paths().size());
  EXPECT_FALSE(builtin_backend("vulkan"));
  auto refused = [](const std::string& text, const std::string& needle) {
    try {
      parse_backend_capabilities(text, "lab.json");
      ADD_FAILURE() << text;
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), "lab.json")) << e.what();
      EXPECT_TRUE(contains(e.what(), needle)) << e.what();
    }
  };
  refused("not json", "not valid UTF-8 JSON");
  refused("[]", "expected a JSON object");
  refused(R"({"paths": []})", "name");
  refused(R"({"name": "x", "paths": ["warp"]})", "paths[0]: unknown path \"warp\"");
  refused(R"({"name": "x", "paths": ["dense", "dense"]})", "duplicate path");
  refused(R"({"name": "x", "name": "y", "paths": []})", "duplicate key");
  refused(R"({"name": "x", "paths": [], "evidence": {"warp": "b"}})", "unknown experimental switch");
  refused(std::string(2'000'000, ' '), "limit");
  refused(std::string(100, '[') + std::string(100, ']'), "nesting");
  const auto b = parse_backend_capabilities(R"({"name": "x", "paths": ["dense"], "future": 1})", "lab.json");
  EXPECT_EQ(b.name, "x") << "unknown top-level keys are ignored";
  EXPECT_THROW(backend_by_name_or_file("vulkan"), Error);
}

// ------------------------------------------------------------ the real CLI

// shared/metadata.gguf of `pkg` rewritten with general.architecture
// `arch` (everything else as written), and its manifest entry updated.
void set_metadata_architecture(const fs::path& pkg, const std::string& arch) {
  const auto meta = pkg / "shared" / "metadata.gguf";
  const auto tmp = pkg / "shared" / "metadata.gguf.new";
  {
    const auto g = GgufFile::open(meta);
    GgufWriter w(g.alignment());
    for (const auto& kv : g.kvs()) {
      if (kv.key == "general.architecture") {
        w.add_string("general.architecture", arch);
      } else {
        w.add_kv(std::string(kv.key), kv.value);
      }
    }
    for (const auto& t : g.tensors()) w.add_tensor_from(g, t);
    AtomicFile af(tmp);
    w.write(af);
    af.commit();
  }
  fs::rename(tmp, meta);
  auto j = json::parse(test::read_text(pkg / "model-package.json"));
  j["shared"]["metadata"]["sha256"] = sha256_file(meta);
  j["shared"]["metadata"]["artifact_bytes"] = fs::file_size(meta);
  const auto s = j.dump(2);
  test::write_file(pkg / "model-package.json", std::vector<uint8_t>(s.begin(), s.end()));
}

// A package whose metadata says architecture glm-dsa (the llama fixture's
// tensors, general.architecture rewritten) and whose manifest declares the
// glm-dsa-v1 policy (what the writer emits for a GLM-DSA model; GLM-DSA.md).
// The resolver applies a profile only to the architecture it is for.
fs::path dsa_package(const fs::path& dir, const std::function<void(json&)>& edit = {}) {
  static test::TempDir base;
  static const fs::path made = [] {
    const auto src = test::data_path("llama-tiny-q8_0.gguf");
    const auto out = base / "pkg";
    const auto r = test::write_pkg(src, out);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    set_metadata_architecture(out, "glm-dsa");
    return out;
  }();
  const auto dst = dir / "pkg";
  fs::create_directories(dir);
  fs::copy(made, dst, fs::copy_options::recursive);
  auto j = json::parse(test::read_text(dst / "model-package.json"));
  j["generation"] = {{"policy",
                      {{"profile", "glm-dsa-v1"},
                       {"decode", "compact-flash"},
                       {"short_prefill", "dense"},
                       {"long_prefill", "sparse-chunked"},
                       {"verify", "auto"},
                       {"indexshare", "required"},
                       {"experimental", {{"selected_row_flash", "evidence-gated"}}}}},
                     {"thresholds",
                      {{"short_prefill_max_tokens", 2048},
                       {"compact_flash_min_kv", 1},
                       {"dense_mask_max_bytes", 268435456}}}};
  if (edit) edit(j);
  const auto s = j.dump(2);
  test::write_file(dst / "model-package.json", std::vector<uint8_t>(s.begin(), s.end()));
  return dst;
}

json policy_json(const fs::path& pkg, std::vector<std::string> args, test::CliResult* raw = nullptr) {
  std::vector<std::string> full = {"policy", pkg.string()};
  full.insert(full.end(), args.begin(), args.end());
  full.push_back("--json");
  const auto r = run_cli(full);
  if (raw) *raw = r;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

TEST(PolicyCli, DecodeAtKv1024SelectsCompactFlash) {
  test::TempDir tmp;
  const auto j = policy_json(dsa_package(tmp.path()), {"--phase", "decode", "--n-tokens", "1", "--n-kv", "1024"});
  EXPECT_EQ(j["phase"], "decode");
  EXPECT_EQ(j["selected_path"], "compact-flash");
  EXPECT_EQ(j["package_path"], "compact-flash");
  EXPECT_TRUE(j["fallback_reason"].is_null());
  EXPECT_EQ(j["telemetry"]["profile"], "glm-dsa-v1");
  EXPECT_EQ(j["telemetry"]["backend"], "reference");
  EXPECT_EQ(j["telemetry"]["n_kv"], 1024);
  EXPECT_EQ(j["architecture"], "glm-dsa");
}

TEST(PolicyCli, FourTokenPrefillSelectsDense) {
  test::TempDir tmp;
  const auto j = policy_json(dsa_package(tmp.path()), {"--phase", "prefill", "--n-tokens", "4", "--n-kv", "4"});
  EXPECT_EQ(j["phase"], "short_prefill");
  EXPECT_EQ(j["selected_path"], "dense");
}

TEST(PolicyCli, LongPrefillAt128kSelectsSparseChunkedWithTheMaskBytesAvoided) {
  test::TempDir tmp;
  for (const char* backend : {"reference", "cpu"}) {  // "what would it do at 128k on a CPU backend"
    test::CliResult raw;
    const auto j = policy_json(dsa_package(tmp / backend),
                               {"--phase", "prefill", "--n-tokens", "4096", "--n-kv", "131072", "--backend", backend},
                               &raw);
    EXPECT_EQ(j["phase"], "long_prefill") << backend;
    EXPECT_EQ(j["selected_path"], "sparse-chunked") << backend;
    EXPECT_EQ(j["telemetry"]["dense_mask_bytes"], 2147483648u);
    EXPECT_EQ(j["telemetry"]["mask_bytes_avoided"], 2147483648u);
    EXPECT_EQ(j["telemetry"]["threshold"]["name"], "short_prefill_max_tokens");
    EXPECT_FALSE(contains(raw.err, "skippy.generation_policy")) << "the package recommendation ran";
  }
}

// The glm-dsa-v1 phase table of the spec ("Policy Resolution"), row by row.
TEST(PolicyCli, GlmDsaV1PhaseTable) {
  test::TempDir tmp;
  const auto pkg = dsa_package(tmp.path());
  struct Row {
    std::vector<std::string> args;
    const char* phase;
    const char* path;
  };
  const Row rows[] = {
      {{"--phase", "decode", "--n-tokens", "1", "--n-kv", "257", "--top-k", "64"}, "decode", "compact-flash"},
      {{"--phase", "prefill", "--n-tokens", "16", "--n-kv", "16"}, "short_prefill", "dense"},
      {{"--phase", "prefill", "--n-tokens", "2049", "--n-kv", "4096"}, "long_prefill", "sparse-chunked"},
      {{"--phase", "verify", "--n-tokens", "2", "--n-kv", "1024"}, "verify", "dense"},
  };
  for (const auto& row : rows) {
    auto args = row.args;
    args.insert(args.end(), {"--indexshare-role", "shared"});
    const auto j = policy_json(pkg, args);
    EXPECT_EQ(j["phase"], row.phase);
    EXPECT_EQ(j["selected_path"], row.path) << row.phase;
    EXPECT_EQ(j["indexshare"], "reuse") << "indexshare required: Shared layers reuse the Full layer's top-k";
    EXPECT_EQ(j["package_recommendation_used"], true);
  }
}

TEST(PolicyCli, BackendWithoutCompactFlashLogsTheFallbackOnStderr) {
  test::TempDir tmp;
  const auto pkg = dsa_package(tmp.path());
  const auto backend = tmp / "vulkan-lab.json";
  const std::string desc = R"({"name": "vulkan-lab", "paths": ["dense", "sparse-chunked"]})";
  test::write_file(backend, std::vector<uint8_t>(desc.begin(), desc.end()));
  for (const std::string& b : {std::string("cpu"), backend.string()}) {
    test::CliResult raw;
    const auto j = policy_json(pkg, {"--phase", "decode", "--n-tokens", "1", "--n-kv", "1024", "--backend", b}, &raw);
    EXPECT_EQ(j["selected_path"], "dense") << b;
    EXPECT_EQ(j["package_path"], "compact-flash");
    EXPECT_TRUE(contains(j["fallback_reason"].get<std::string>(), "cannot run compact-flash")) << j.dump();
    EXPECT_EQ(j["telemetry"]["rejected_path"], "compact-flash");
    // The structured line on stderr, alone on its line.
    const auto at = raw.err.find("{\"event\"");
    ASSERT_NE(at, std::string::npos) << raw.err;
    const auto line = json::parse(raw.err.substr(at, raw.err.find('\n', at) - at));
    EXPECT_EQ(line["telemetry"]["fallback_reason"], j["fallback_reason"]);
  }
}

TEST(PolicyCli, OverridesHumanOutputAndErrors) {
  test::TempDir tmp;
  const auto pkg = dsa_package(tmp.path());
  auto r = run_cli({"policy", pkg.string(), "--phase", "decode", "--n-tokens", "1", "--n-kv", "64", "--override",
                    "decode=dense"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "selected path   dense (override)")) << r.out;
  EXPECT_TRUE(contains(r.err, "\"package_recommendation_used\":false")) << r.err;
  // Usage errors: exit 2.
  EXPECT_EQ(run_cli({"policy", pkg.string(), "--phase", "warp", "--n-tokens", "1", "--n-kv", "1"}).exit_code, 2);
  EXPECT_EQ(run_cli({"policy", pkg.string(), "--phase", "decode", "--n-tokens", "1"}).exit_code, 2);
  r = run_cli({"policy", pkg.string(), "--phase", "decode", "--n-tokens", "1", "--n-kv", "1", "--override", "turbo=1",
               "--json"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(json::parse(r.out)["error"]["kind"], "usage");
  // Invalid input: exit 1, the error document on stdout with --json.
  r = run_cli({"policy", pkg.string(), "--phase", "decode", "--n-tokens", "4", "--n-kv", "8", "--json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(json::parse(r.out)["error"]["kind"], "invalid_input");
  EXPECT_TRUE(contains(r.err, "decode is one-token generation")) << r.err;
  r = run_cli({"policy", pkg.string(), "--phase", "decode", "--n-tokens", "1", "--n-kv", "8", "--backend",
               (tmp / "missing.json").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "missing.json")) << r.err;
  r = run_cli({"policy", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(contains(r.out, "Example")) << r.out;
}

TEST(PolicyCli, InspectAndSelectWarnAboutUnsupportedPolicyValues) {
  test::TempDir tmp;
  const auto pkg = dsa_package(tmp.path(), [](json& j) {
    j["generation"]["policy"]["profile"] = "glm-dsa-v9";
    j["generation"]["speculative_decoding"] = {
        {"default", "draft"}, {"strategies", {{"draft", {{"type", "draft-model"}, {"draft_model", "org/d:Q8_0"}}}}}};
  });
  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"inspect", pkg.string(), "--json"},
        std::vector<std::string>{"select", pkg.string(), "--layers", "0..1", "--json"}}) {
    const auto r = run_cli(cmd);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.err, "warning: generation.policy.profile: unknown profile \"glm-dsa-v9\"")) << r.err;
    EXPECT_TRUE(contains(r.err, "unsupported type \"draft-model\"")) << r.err;
    const auto w = json::parse(r.out)["warnings"];
    ASSERT_EQ(w.size(), 2u) << r.out;
  }
  test::TempDir clean;
  const auto r = run_cli({"inspect", dsa_package(clean.path()).string(), "--json"});
  EXPECT_TRUE(json::parse(r.out)["warnings"].empty());
  EXPECT_FALSE(contains(r.err, "warning:")) << r.err;
}

}  // namespace
}  // namespace skippy
