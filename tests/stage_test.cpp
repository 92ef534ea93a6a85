// Consumer validation and layer selection (spec: "Consumer Validation",
// "Layer Selection", "Compatibility"): a hostile suite where each rule is
// broken in turn and refused with its own message, and the selection order.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "skippy/error.h"
#include "util/sha256.h"
#include "skippy/stage.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::data_path;
using test::run_cli;

// One package per fixture, written once per test binary run.
const fs::path& package_of(const std::string& fixture) {
  static test::TempDir dir;  // removed at exit
  static std::map<std::string, fs::path> made;
  auto it = made.find(fixture);
  if (it != made.end()) return it->second;
  const auto src = data_path(fixture);
  const auto out = dir / src.stem().string();
  const auto r = run_cli({"write-package", src.string(), "--out-dir", out.string(), "--model-id", "org/tiny:Q8_0",
                          "--source-revision", "0123abc", "--source-file", src.filename().string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return made.emplace(fixture, out).first->second;
}

// A private copy of a package to break.
fs::path copy_package(const std::string& fixture, const test::TempDir& tmp) {
  const auto dst = tmp / "pkg";
  fs::copy(package_of(fixture), dst, fs::copy_options::recursive);
  return dst;
}

nlohmann::json read_manifest(const fs::path& pkg) {
  return nlohmann::json::parse(test::read_text(pkg / "model-package.json"));
}
void write_manifest(const fs::path& pkg, const nlohmann::json& j) {
  const auto s = j.dump(2);
  test::write_file(pkg / "model-package.json", std::vector<uint8_t>(s.begin(), s.end()));
}

// Expects `fn` to throw skippy::Error whose message contains `needle`.
template <typename F>
void expect_refused(F&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected a refusal containing: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// Breaks the manifest with `edit`, then checks open+select refuse it with
// `needle` both in the library and through the CLI (exit 1, a JSON error document).
template <typename Edit>
void manifest_rule(const std::string& needle, Edit&& edit, const std::string& range = "0..2") {
  test::TempDir tmp;
  const auto pkg = copy_package("llama-tiny-q8_0.gguf", tmp);
  auto j = read_manifest(pkg);
  edit(j);
  write_manifest(pkg, j);
  expect_refused([&] { test::select_v1(open_local_package(pkg.string()), parse_layer_range(range)); }, needle);
  const auto r = run_cli({"select", pkg.string(), "--layers", range, "--json"});
  test::expect_json_error(r, "invalid_input", needle);
}

TEST(ConsumerValidation, SchemaVersionMustBe1) {
  manifest_rule("schema_version", [](auto& j) { j["schema_version"] = 2; });
}
TEST(ConsumerValidation, FormatMustBeLayerPackage) {
  manifest_rule("format", [](auto& j) { j["format"] = "full-gguf"; });
}
TEST(ConsumerValidation, IncompatibleAbiMajorIsRefused) {
  manifest_rule("not compatible with this runtime's ABI", [](auto& j) { j["skippy_abi_version"] = "2.0.0"; });
}
TEST(ConsumerValidation, NewerAbiMinorIsRefused) {
  manifest_rule("not compatible with this runtime's ABI", [](auto& j) { j["skippy_abi_version"] = "0.2.0"; });
}
TEST(ConsumerValidation, OlderPatchIsAccepted) {
  test::TempDir tmp;
  const auto pkg = copy_package("llama-tiny-q8_0.gguf", tmp);
  auto j = read_manifest(pkg);
  j["skippy_abi_version"] = "0.1.99";
  write_manifest(pkg, j);
  EXPECT_NO_THROW(test::select_v1(open_local_package(pkg.string()), {0, 2}));
}
TEST(ConsumerValidation, ModelIdMustBeNonEmpty) {
  manifest_rule("model_id", [](auto& j) { j["model_id"] = ""; });
}
TEST(ConsumerValidation, SourceIdentityMustBeNonEmpty) {
  manifest_rule("source_model.revision", [](auto& j) { j["source_model"]["revision"] = ""; });
}
TEST(ConsumerValidation, DuplicateLayerIsRefused) {
  manifest_rule("layers", [](auto& j) { j["layers"][2]["layer_index"] = 1; });
}
TEST(ConsumerValidation, MissingLayerIsRefused) {
  manifest_rule("layers", [](auto& j) { j["layers"].erase(j["layers"].begin() + 3); });
}
TEST(ConsumerValidation, ParentEscapePathIsRefused) {
  manifest_rule("layers[1].path", [](auto& j) { j["layers"][1]["path"] = "../layer-00001.gguf"; });
}
TEST(ConsumerValidation, AbsolutePathIsRefused) {
  manifest_rule("layers[1].path", [](auto& j) { j["layers"][1]["path"] = "/etc/passwd"; });
}
TEST(ConsumerValidation, BackslashPathIsRefused) {
  manifest_rule("layers[1].path", [](auto& j) { j["layers"][1]["path"] = "layers\\layer-00001.gguf"; });
}
TEST(ConsumerValidation, DriveLetterPathIsRefused) {
  manifest_rule("layers[1].path", [](auto& j) { j["layers"][1]["path"] = "C:layer.gguf"; });
}
TEST(ConsumerValidation, NulInPathIsRefused) {
  manifest_rule("layers[1].path", [](auto& j) { j["layers"][1]["path"] = std::string("layers/a\0b.gguf", 15); });
}
TEST(ConsumerValidation, UnknownProjectorKindServesTextStagesAndRefusesToSelectIt) {
  test::TempDir tmp;
  const auto pkg = copy_package("llama-tiny-q8_0.gguf", tmp);
  // A projector of a kind from a later schema, declared and present.
  fs::create_directories(pkg / "projectors");
  test::make_projector(pkg / "projectors" / "audio.gguf");
  auto j = read_manifest(pkg);
  const auto bytes = test::read_file(pkg / "projectors" / "audio.gguf");
  j["projectors"] = {{{"kind", "audio-encoder"},
                      {"path", "projectors/audio.gguf"},
                      {"tensor_count", 3},
                      {"tensor_bytes", 1},
                      {"artifact_bytes", bytes.size()},
                      {"sha256", sha256_hex(bytes)}}};
  write_manifest(pkg, j);
  const auto opened = open_local_package(pkg);
  ASSERT_EQ(opened.warnings.size(), 1u);
  EXPECT_NE(opened.warnings[0].find("projectors[0] (projectors/audio.gguf): kind \"audio-encoder\" is not supported"),
            std::string::npos)
      << opened.warnings[0];
  // Stage 0 and single-stage serving get no projector: the default is the first mmproj.
  const auto s0 = test::select_v1(opened, {0, 2});
  EXPECT_FALSE(s0.projector);
  EXPECT_FALSE(test::select_v1(opened, {0, 8}, {.projector_path = std::nullopt, .single_stage = true}).projector);
  // Asking for it is refused, naming the kind.
  expect_refused([&] { test::select_v1(opened, {0, 2}, {.projector_path = "projectors/audio.gguf"}); },
                 "has kind \"audio-encoder\", which this runtime does not support");
  const auto cli = run_cli({"select", pkg.string(), "--layers", "0..2", "--json"});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.err.find("audio-encoder"), std::string::npos) << "the warning reaches the user: " << cli.err;
  const auto asked = run_cli({"select", pkg.string(), "--layers", "0..2", "--projector", "projectors/audio.gguf", "--json"});
  test::expect_json_error(asked, "invalid_input", "audio-encoder");
}

TEST(ConsumerValidation, EmptyRangeIsRefused) {
  const auto pkg = open_local_package(package_of("llama-tiny-q8_0.gguf").string());
  expect_refused([&] { test::select_v1(pkg, {3, 3}); }, "is empty");
}
TEST(ConsumerValidation, RangeBeyondLayerCountIsRefused) {
  const auto pkg = open_local_package(package_of("llama-tiny-q8_0.gguf").string());
  expect_refused([&] { test::select_v1(pkg, {4, 9}); }, "outside the package's 8 layers");
  const auto r = run_cli({"select", package_of("llama-tiny-q8_0.gguf").string(), "--layers", "0..9"});
  EXPECT_EQ(r.exit_code, 1);
}
TEST(ConsumerValidation, MalformedRangeIsAUsageError) {
  for (const char* bad : {"3", "a..b", "4..2", "-1..3", "0...3", ""}) {
    EXPECT_THROW(parse_layer_range(bad), Error) << bad;
    const auto r = run_cli({"select", package_of("llama-tiny-q8_0.gguf").string(), "--layers", bad});
    EXPECT_EQ(r.exit_code, 2) << bad << r.err;
  }
  EXPECT_EQ(parse_layer_range("0..4"), (LayerRange{0, 4}));
}

TEST(ConsumerValidation, TruncatedArtifactIsRefused) {
  test::TempDir tmp;
  const auto pkg = copy_package("llama-tiny-q8_0.gguf", tmp);
  fs::resize_file(pkg / "layers/layer-00001.gguf", 1000);
  expect_refused([&] { test::select_v1(open_local_package(pkg.string()), {0, 2}); },
                 "layers/layer-00001.gguf: 1000 bytes, manifest says artifact_bytes");
  // A stage that does not select it is not affected.
  EXPECT_NO_THROW(test::select_v1(open_local_package(pkg.string()), {2, 4}));
}
TEST(ConsumerValidation, MissingArtifactIsRefused) {
  test::TempDir tmp;
  const auto pkg = copy_package("llama-tiny-q8_0.gguf", tmp);
  fs::remove(pkg / "shared/embeddings.gguf");
  expect_refused([&] { test::select_v1(open_local_package(pkg.string()), {0, 2}); }, "shared/embeddings.gguf: missing");
}
TEST(ConsumerValidation, DirectoryInsteadOfFileIsRefused) {
  test::TempDir tmp;
  const auto pkg = copy_package("llama-tiny-q8_0.gguf", tmp);
  fs::remove(pkg / "layers/layer-00000.gguf");
  fs::create_directory(pkg / "layers/layer-00000.gguf");
  expect_refused([&] { test::select_v1(open_local_package(pkg.string()), {0, 2}); }, "not a regular file");
}
TEST(ConsumerValidation, SymlinkEscapingThePackageIsRefused) {
  test::TempDir tmp;
  const auto pkg = copy_package("llama-tiny-q8_0.gguf", tmp);
  // Same bytes, but outside the package: still refused.
  fs::rename(pkg / "layers/layer-00002.gguf", tmp / "outside.gguf");
  fs::create_symlink(tmp / "outside.gguf", pkg / "layers/layer-00002.gguf");
  expect_refused([&] { test::select_v1(open_local_package(pkg.string()), {2, 3}); }, "outside the package");
  fs::remove(pkg / "layers/layer-00002.gguf");
  fs::create_symlink("../../outside.gguf", pkg / "layers/layer-00002.gguf");
  expect_refused([&] { test::select_v1(open_local_package(pkg.string()), {2, 3}); }, "outside the package");
}
TEST(ConsumerValidation, SymlinkInsideThePackageIsAccepted) {
  // Hugging Face snapshots are links into the repo's blobs/: links that stay
  // inside the boundary are fine.
  test::TempDir tmp;
  const auto pkg = copy_package("llama-tiny-q8_0.gguf", tmp);
  fs::create_directory(pkg / "blobs");
  fs::rename(pkg / "layers/layer-00002.gguf", pkg / "blobs/abc");
  fs::create_symlink("../blobs/abc", pkg / "layers/layer-00002.gguf");
  const auto s = test::select_v1(open_local_package(pkg.string()), {2, 3});
  EXPECT_EQ(s.parts[1].path.filename(), "abc");
}
TEST(ConsumerValidation, DanglingSymlinkIsRefused) {
  test::TempDir tmp;
  const auto pkg = copy_package("llama-tiny-q8_0.gguf", tmp);
  fs::remove(pkg / "layers/layer-00002.gguf");
  fs::create_symlink("nowhere.gguf", pkg / "layers/layer-00002.gguf");
  expect_refused([&] { test::select_v1(open_local_package(pkg.string()), {2, 3}); }, "dangling symlink");
}
TEST(ConsumerValidation, DeclaredProjectorMustExistWithItsSize) {
  test::TempDir tmp;
  const auto pkg = copy_package("llama-tiny-q8_0.gguf", tmp);
  auto j = read_manifest(pkg);
  j["projectors"] = {{{"kind", "mmproj"}, {"path", "projectors/mmproj.gguf"}, {"tensor_count", 1},
                      {"tensor_bytes", 4}, {"artifact_bytes", 100}, {"sha256", std::string(64, 'a')}}};
  write_manifest(pkg, j);
  // Declared projectors are checked for every stage, even one that does not use them.
  expect_refused([&] { test::select_v1(open_local_package(pkg.string()), {2, 4}); }, "projectors/mmproj.gguf: missing");
  fs::create_directories(pkg / "projectors");
  test::write_file(pkg / "projectors/mmproj.gguf", std::vector<uint8_t>(99, 0));
  expect_refused([&] { test::select_v1(open_local_package(pkg.string()), {2, 4}); },
                 "projectors/mmproj.gguf: 99 bytes, manifest says artifact_bytes 100");
}
TEST(ConsumerValidation, NotAPackageDirectory) {
  test::TempDir tmp;
  expect_refused([&] { open_local_package((tmp / "nope").string()); }, "no such package directory");
  expect_refused([&] { open_local_package(tmp.path().string()); }, "no model-package.json");
  test::write_file(tmp / "model-package.json", {'{', 'x'});
  expect_refused([&] { open_local_package(tmp.path().string()); }, "model-package.json");
}

TEST(LayerSelection, SpecOrderMetadataEmbeddingsLayersOutput) {
  const auto pkg = open_local_package(package_of("qwen3moe-tiny.gguf").string());
  const auto all = test::select_v1(pkg, {0, 4});
  std::vector<std::string> got;
  for (const auto& p : all.parts) got.push_back(p.rel_path);
  EXPECT_EQ(got, (std::vector<std::string>{"shared/metadata.gguf", "shared/embeddings.gguf", "layers/layer-00000.gguf",
                                           "layers/layer-00001.gguf", "layers/layer-00002.gguf",
                                           "layers/layer-00003.gguf", "shared/output.gguf"}));
  const auto mid = test::select_v1(pkg, {1, 3});
  ASSERT_EQ(mid.parts.size(), 3u);
  EXPECT_EQ(mid.parts[0].role, PartRole::kMetadata);
  EXPECT_EQ(mid.parts[1].layer_index, 1u);
  EXPECT_EQ(mid.parts[2].layer_index, 2u);
  // Untied output: the final stage does not need the embeddings.
  const auto last = test::select_v1(pkg, {2, 4});
  ASSERT_EQ(last.parts.size(), 4u);
  EXPECT_EQ(last.parts.back().role, PartRole::kOutput);
  EXPECT_TRUE(last.notes.empty());
}
TEST(LayerSelection, TiedOutputFinalStageAlsoLoadsEmbeddings) {
  const auto pkg = open_local_package(package_of("llama-tiny-f16.gguf").string());
  const auto last = test::select_v1(pkg, {4, 8});
  ASSERT_EQ(last.parts.size(), 7u);
  EXPECT_EQ(last.parts[1].role, PartRole::kEmbeddings);
  EXPECT_NE(last.parts[1].reason.find("tied"), std::string::npos);
  ASSERT_EQ(last.notes.size(), 1u);
  EXPECT_NE(last.notes[0].find("tied"), std::string::npos);
}
TEST(LayerSelection, ProjectorChoice) {
  test::TempDir tmp;
  const auto src = data_path("llama-tiny-q8_0.gguf");
  test::make_projector(tmp / "mmproj-a.gguf", 1);
  test::make_projector(tmp / "mmproj-b.gguf", 2);
  const auto out = tmp / "p";
  ASSERT_EQ(run_cli({"write-package", src.string(), "--out-dir", out.string(), "--model-id", "org/m:Q8_0",
                     "--source-revision", "r1", "--source-file", "m.gguf", "--projector", (tmp / "mmproj-a.gguf").string(),
                     "--projector", (tmp / "mmproj-b.gguf").string()})
                .exit_code,
            0);
  const auto pkg = open_local_package(out.string());
  // Stage 0 gets the first declared mmproj.
  auto s = test::select_v1(pkg, {0, 4});
  ASSERT_TRUE(s.projector);
  EXPECT_EQ(s.projector->rel_path, "projectors/mmproj-a.gguf");
  // Downstream stages get none, unless single-stage serving.
  EXPECT_FALSE(test::select_v1(pkg, {4, 8}).projector);
  EXPECT_TRUE(test::select_v1(pkg, {4, 8}, {.projector_path = std::nullopt, .single_stage = true}).projector);
  // An explicit path wins.
  s = test::select_v1(pkg, {0, 4}, {.projector_path = "projectors/mmproj-b.gguf"});
  EXPECT_EQ(s.projector->rel_path, "projectors/mmproj-b.gguf");
  // Never inferred from file names: an undeclared file is refused even if present.
  fs::copy_file(tmp / "mmproj-a.gguf", out / "projectors/mmproj-c.gguf");
  expect_refused([&] { test::select_v1(pkg, {0, 4}, {.projector_path = "projectors/mmproj-c.gguf"}); },
                 "not declared in the manifest");
  const auto r = run_cli({"select", out.string(), "--layers", "0..8", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["parts"].back()["role"], "projector");
}
TEST(LayerSelection, SelectJsonFollowsTheCliContract) {
  const auto pkg = package_of("llama-tiny-q8_0.gguf");
  const auto r = run_cli({"select", pkg.string(), "--layers", "0..2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["layer_start"], 0);
  EXPECT_EQ(j["layer_end"], 2);
  ASSERT_EQ(j["parts"].size(), 4u);
  EXPECT_EQ(j["parts"][0]["role"], "metadata");
  EXPECT_TRUE(j["parts"][0]["layer_index"].is_null());
  EXPECT_EQ(j["parts"][1]["role"], "embeddings");
  EXPECT_EQ(j["parts"][2]["role"], "layer");
  EXPECT_EQ(j["parts"][2]["layer_index"], 0);
  for (const auto& p : j["parts"]) {
    EXPECT_TRUE(fs::path(p["path"].get<std::string>()).is_absolute());
    EXPECT_EQ(p["bytes"].get<uint64_t>(), fs::file_size(p["path"].get<std::string>()));
    EXPECT_EQ(p["sha256"].get<std::string>().size(), 64u);
  }
}
TEST(MetadataOnly, NeedsNoRangeAndChecksOnlyTheManifestAndMetadata) {
  test::TempDir tmp;
  const auto pkg = copy_package("llama-tiny-q8_0.gguf", tmp);
  fs::remove(pkg / "layers/layer-00004.gguf");  // a stage would fail; inventory does not care
  EXPECT_NO_THROW(check_metadata_only(open_local_package(pkg.string()).catalog(CatalogNeed::root_only())));
  test::write_file(pkg / "shared/metadata.gguf", std::vector<uint8_t>(10, 0));
  expect_refused([&] { check_metadata_only(open_local_package(pkg.string()).catalog(CatalogNeed::root_only())); }, "shared/metadata.gguf");
}
}  // namespace
}  // namespace skippy

namespace skippy {
namespace {

TEST(ConsumerValidation, SelectVerifiesWhenSkippyVerifyPackageShaIsSet) {
  test::TempDir tmp;
  const auto pkg = copy_package("llama-tiny-q8_0.gguf", tmp);
  // Same size, different bytes: only SHA-256 can tell.
  auto bytes = test::read_file(pkg / "layers/layer-00001.gguf");
  bytes[bytes.size() - 1] ^= 0xff;
  test::write_file(pkg / "layers/layer-00001.gguf", bytes);
  const std::string cache = "SKIPPY_CACHE_DIR=" + (tmp / "cache").string();
  auto r = run_cli({"select", pkg.string(), "--layers", "0..2", "--json"}, {cache});
  EXPECT_EQ(r.exit_code, 0) << r.err;  // local packages verify only on request
  EXPECT_FALSE(nlohmann::json::parse(r.out)["verified"].get<bool>());
  r = run_cli({"select", pkg.string(), "--layers", "0..2", "--json"}, {cache, "SKIPPY_VERIFY_PACKAGE_SHA=1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("layers/layer-00001.gguf"), std::string::npos) << r.err;
  r = run_cli({"select", pkg.string(), "--layers", "2..4", "--json"}, {cache, "SKIPPY_VERIFY_PACKAGE_SHA=1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out)["verified"].get<bool>());
}

TEST(InspectPackage, MetadataOnlyInspection) {
  const auto pkg = package_of("glm4moe-mtp-tiny.gguf");
  const auto r = run_cli({"inspect", pkg.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kind"], "package");
  EXPECT_EQ(j["architecture"], "glm4moe");
  EXPECT_EQ(j["layer_count"], 4);
  EXPECT_EQ(j["activation_width"], 64);
  EXPECT_EQ(j["tensor_count"], 71);
  EXPECT_EQ(j["tensor_bytes"], 3812400);  // the source's tensor bytes
  EXPECT_EQ(j["model_id"], "org/tiny:Q8_0");
  const auto human = run_cli({"inspect", pkg.string()});
  EXPECT_EQ(human.exit_code, 0);
  EXPECT_NE(human.out.find("speculative       mtp"), std::string::npos) << human.out;
}

}  // namespace
}  // namespace skippy
