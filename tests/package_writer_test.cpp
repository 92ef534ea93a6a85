// write-package and validate-package through the real CLI, on llama.cpp's
// own fixtures.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "skippy/gguf.h"
#include "gguf/gguf_writer.h"
#include "skippy/manifest.h"
#include "skippy/model_source.h"
#include "skippy/package_layout.h"
#include "util/sha256.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::data_path;
using test::run_cli;

using test::write_pkg;

nlohmann::json validate_json(const fs::path& src, const fs::path& pkg, int expect_exit) {
  const auto r = run_cli({"validate-package", src.string(), pkg.string(), "--json"});
  EXPECT_EQ(r.exit_code, expect_exit) << r.out << r.err;
  return nlohmann::json::parse(r.out);
}

using test::load_manifest;

std::vector<fs::path> all_artifacts(const fs::path& pkg, const PackageManifest& m) {
  std::vector<fs::path> out = {pkg / m.shared.metadata.path, pkg / m.shared.embeddings.path, pkg / m.shared.output.path};
  for (const auto& l : m.layers) out.push_back(pkg / l.path);
  return out;
}

TEST(WritePackage, EveryFixturePackagesAndValidates) {
  test::TempDir tmp;
  for (const auto& src : test::model_fixtures()) {
    SCOPED_TRACE(src.string());
    const auto out = tmp / src.stem().string();
    const auto w = write_pkg(src, out);
    ASSERT_EQ(w.exit_code, 0) << w.err;
    const auto wj = nlohmann::json::parse(w.out);
    const auto model = ModelSource::open(src);
    EXPECT_EQ(wj["layer_count"], model.layer_count());
    EXPECT_EQ(wj["artifact_count"], model.layer_count() + 3);
    EXPECT_EQ(wj["manifest_sha256"], sha256_file(out / "model-package.json"));
    const auto vj = validate_json(src, out, 0);
    EXPECT_TRUE(vj["valid"].get<bool>()) << vj.dump(2);
    EXPECT_TRUE(vj["problems"].empty());

    // Independently of validate-package: every source tensor sits in exactly
    // one fragment, in the right one, byte-identical, with type and shape.
    const auto m = load_manifest(out);
    std::map<std::string, int> seen;
    for (const auto& art : all_artifacts(out, m)) {
      const auto g = GgufFile::open(art);
      EXPECT_FALSE(g.find_kv("split.no")) << art;
      // Only the metadata fragment carries the tokenizer and the rest of the
      // source's metadata; the others just what reading their tensors needs.
      const bool is_metadata = art.filename() == "metadata.gguf";
      for (const auto& kv : g.kvs()) {
        if (!is_metadata) {
          EXPECT_FALSE(kv.key.starts_with("tokenizer.")) << art << ": " << kv.key;
          EXPECT_TRUE(kv.key == "general.architecture" || kv.key == "general.alignment" ||
                      kv.key.starts_with(std::string(model.primary().architecture()) + ".") ||
                      kv.key.starts_with("skippy.package."))
              << art << ": " << kv.key;
        }
      }
      if (is_metadata) {
        EXPECT_TRUE(g.find_kv("tokenizer.ggml.tokens")) << art;
        // The record of the source's layout: tensor order and shard boundaries, and a split source's keys.
        EXPECT_TRUE(g.find_kv(kSourceTensorsKey)) << art;
        EXPECT_TRUE(g.find_kv(kSourceFileTensorsKey)) << art;
        EXPECT_EQ(g.find_kv(kSourceSplitKeysKey) != nullptr, model.shards().size() > 1) << art;
        const size_t record = model.shards().size() > 1 ? 3 : 2;
        EXPECT_EQ(g.kvs().size(), model.primary().kvs().size() - (model.shards().size() > 1 ? 3 : 0) + 1 + record)
            << "every source KV but split.*, plus the role and the record";
      } else {
        EXPECT_TRUE(g.find_kv("general.architecture")) << art;
        EXPECT_TRUE(g.find_kv(std::string(model.primary().architecture()) + ".block_count")) << art;
      }
      EXPECT_TRUE(g.get_string(kRoleKey)) << art;
      for (const auto& t : g.tensors()) {
        const auto* s = model.find_tensor(t.name);
        ASSERT_NE(s, nullptr) << t.name;
        seen[std::string(t.name)]++;
        EXPECT_EQ(t.type, s->info->type);
        EXPECT_EQ(t.ne, s->info->ne);
        EXPECT_TRUE(std::ranges::equal(g.tensor_data(t), model.shards()[s->shard].tensor_data(*s->info))) << t.name;
        if (s->placement.role == TensorRole::kLayer) {
          EXPECT_EQ(art.filename().string(), fs::path(layer_artifact_path(s->placement.layer)).filename().string());
          EXPECT_EQ(g.get_uint(kLayerStartKey), s->placement.layer);
          EXPECT_EQ(g.get_uint(kLayerEndKey), s->placement.layer + 1);
        }
      }
    }
    EXPECT_EQ(seen.size(), model.tensors().size());
    for (const auto& [name, n] : seen) EXPECT_EQ(n, 1) << name;
    EXPECT_TRUE(fs::exists(out / "README.md"));
    EXPECT_FALSE(fs::exists(out / ".skippy-write-package-in-progress"));
  }
}

TEST(WritePackage, SplitSourceRecordsEveryShard) {
  test::TempDir tmp;
  const auto src = data_path("llama-tiny-q4_0-00003-of-00003.gguf");  // any shard
  ASSERT_EQ(write_pkg(src, tmp / "p").exit_code, 0);
  const auto m = load_manifest(tmp / "p");
  ASSERT_EQ(m.source_model.files.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const auto shard = data_path("llama-tiny-q4_0-0000" + std::to_string(i + 1) + "-of-00003.gguf");
    EXPECT_EQ(m.source_model.files[i].path, shard.filename().string());
    EXPECT_EQ(m.source_model.files[i].size_bytes, fs::file_size(shard));
    EXPECT_EQ(m.source_model.files[i].sha256, sha256_file(shard));
  }
  EXPECT_EQ(m.source_model.sha256, sha256_file(data_path("llama-tiny-q4_0-00001-of-00003.gguf")));
}

TEST(WritePackage, ManifestFieldsFollowTheSpec) {
  test::TempDir tmp;
  const auto src = data_path("qwen3moe-tiny.gguf");
  ASSERT_EQ(write_pkg(src, tmp / "p", {}, {"SOURCE_DATE_EPOCH=1790000000"}).exit_code, 0);
  const auto m = load_manifest(tmp / "p");
  EXPECT_EQ(m.schema_version, 1u);
  EXPECT_EQ(m.format, "layer-package");
  EXPECT_EQ(m.model_id, "org/tiny:Q8_0");
  EXPECT_EQ(m.source_model.repo, "org/tiny");
  EXPECT_EQ(m.source_model.distribution_id, "Q8_0");
  EXPECT_EQ(m.source_model.revision, "0123abc");
  EXPECT_EQ(m.layer_count, 4u);
  EXPECT_EQ(m.activation_width, 64u);
  EXPECT_EQ(m.created_at_unix_secs, 1790000000);
  EXPECT_EQ(m.shared.metadata.tensor_count, 0u);
  EXPECT_EQ(m.shared.metadata.tensor_bytes, 0u);
  EXPECT_EQ(m.shared.output.tensor_count, 2u);  // untied output.weight + output_norm
  EXPECT_FALSE(m.generation);                   // nothing to declare for qwen3moe
  EXPECT_TRUE(parse_abi_version(m.skippy_abi_version));
  for (const auto& l : m.layers) {
    EXPECT_EQ(l.path, layer_artifact_path(l.layer_index));
    EXPECT_EQ(l.artifact_bytes, fs::file_size(tmp / "p" / l.path));
    EXPECT_EQ(l.sha256, sha256_file(tmp / "p" / l.path));
  }
  // The fragments keep the source's 128-byte alignment.
  EXPECT_EQ(GgufFile::open(tmp / "p" / m.layers[0].path).alignment(), 128u);
}

TEST(WritePackage, MtpDeclaredOnlyWithNextnTensors) {
  test::TempDir tmp;
  ASSERT_EQ(write_pkg(data_path("glm4moe-mtp-tiny.gguf"), tmp / "glm").exit_code, 0);
  const auto m = load_manifest(tmp / "glm");
  ASSERT_TRUE(m.generation && m.generation->speculative_decoding);
  const auto& sd = *m.generation->speculative_decoding;
  EXPECT_EQ(sd.default_strategy, "mtp");
  const auto& mtp = sd.strategies.at("mtp");
  EXPECT_EQ(mtp.type, "native-mtp");
  EXPECT_EQ(mtp.proposer, "mtp");  // the native MTP source is declared under proposers
  EXPECT_EQ(sd.proposers.at("mtp").prediction_depth, 1u);
  EXPECT_EQ(sd.proposers.at("mtp").layer_indices, (std::vector<uint32_t>{3}));
  EXPECT_FALSE(m.generation->policy);  // glm4moe is not glm-dsa
  ASSERT_EQ(write_pkg(data_path("llama-tiny-f16.gguf"), tmp / "llama").exit_code, 0);
  EXPECT_FALSE(load_manifest(tmp / "llama").generation);
}

TEST(WritePackage, ReproducibleBytes) {
  test::TempDir tmp;
  const auto src = data_path("glm4moe-mtp-tiny.gguf");
  ASSERT_EQ(write_pkg(src, tmp / "a", {}, {"SOURCE_DATE_EPOCH=1700000000"}).exit_code, 0);
  ASSERT_EQ(write_pkg(src, tmp / "b", {"--threads", "1"}, {"SOURCE_DATE_EPOCH=1700000000"}).exit_code, 0);
  for (const auto& e : fs::recursive_directory_iterator(tmp / "a")) {
    if (!e.is_regular_file()) continue;
    const auto rel = fs::relative(e.path(), tmp / "a");
    if (rel == "model-package.json" || rel == "README.md") continue;  // carry the output path
    EXPECT_EQ(sha256_file(e.path()), sha256_file(tmp / "b" / rel)) << rel;
  }
  // The manifest differs only in source_model.path (the local path read).
  auto ma = load_manifest(tmp / "a");
  auto mb = load_manifest(tmp / "b");
  EXPECT_EQ(ma, mb);
}

TEST(WritePackage, CorruptedLayerByteIsNamedByValidate) {
  test::TempDir tmp;
  const auto src = data_path("llama-tiny-q8_0.gguf");
  ASSERT_EQ(write_pkg(src, tmp / "p").exit_code, 0);
  const auto layer = tmp / "p" / "layers/layer-00003.gguf";
  const auto g = GgufFile::open(layer);
  const auto* t = g.find_tensor("blk.3.ffn_up.weight");
  ASSERT_NE(t, nullptr);
  auto bytes = test::read_file(layer);
  bytes[t->file_offset + 100] ^= 0x01;
  test::write_file(layer, bytes);
  const auto vj = validate_json(src, tmp / "p", 1);
  EXPECT_FALSE(vj["valid"].get<bool>());
  const auto problems = vj["problems"].dump();
  EXPECT_NE(problems.find("layers/layer-00003.gguf: tensor 'blk.3.ffn_up.weight' differs from the source at byte 100"),
            std::string::npos)
      << problems;
  EXPECT_NE(problems.find("layers/layer-00003.gguf: SHA-256"), std::string::npos) << problems;
  // Human mode lists the problems on stderr and exits 1.
  const auto r = run_cli({"validate-package", src.string(), (tmp / "p").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("layer-00003.gguf"), std::string::npos);
}

TEST(WritePackage, ValidateListsEveryProblem) {
  test::TempDir tmp;
  const auto src = data_path("llama-tiny-q8_0.gguf");
  ASSERT_EQ(write_pkg(src, tmp / "p").exit_code, 0);
  fs::remove(tmp / "p" / "layers/layer-00005.gguf");
  auto out = test::read_file(tmp / "p" / "shared/output.gguf");
  out.resize(out.size() - 10);
  test::write_file(tmp / "p" / "shared/output.gguf", out);
  const auto vj = validate_json(src, tmp / "p", 1);
  const auto problems = vj["problems"].dump();
  EXPECT_NE(problems.find("layers/layer-00005.gguf: missing"), std::string::npos) << problems;
  EXPECT_NE(problems.find("blk.5.attn_q.weight' of the source is in no artifact"), std::string::npos) << problems;
  EXPECT_NE(problems.find("shared/output.gguf"), std::string::npos) << problems;
  // Against the wrong source: every shard and layer mismatch is reported.
  const auto other = validate_json(data_path("llama-tiny-f16.gguf"), tmp / "p", 1);
  EXPECT_GT(other["problems"].size(), 5u);
}

TEST(WritePackage, NonEmptyOutDirNeedsForce) {
  test::TempDir tmp;
  fs::create_directories(tmp / "p");
  test::write_file(tmp / "p" / "keep.txt", {'x'});
  const auto src = data_path("llama-tiny-q8_0.gguf");
  auto r = write_pkg(src, tmp / "p");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not empty"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "p" / "model-package.json"));
  r = write_pkg(src, tmp / "p", {"--force"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(validate_json(src, tmp / "p", 0)["valid"].get<bool>());
}

TEST(WritePackage, RerunAfterCrashFinishesTheJob) {
  test::TempDir tmp;
  const auto src = data_path("llama-tiny-q8_0.gguf");
  // What a crash mid-write leaves: the in-progress marker, some finished
  // fragments, a hidden partial file, and no manifest.
  fs::create_directories(tmp / "p" / "layers");
  test::write_file(tmp / "p" / ".skippy-write-package-in-progress", {'x'});
  test::write_file(tmp / "p" / "layers" / "layer-00000.gguf", {'j', 'u', 'n', 'k'});
  test::write_file(tmp / "p" / "layers" / ".layer-00001.gguf.partial-abc", {'j'});
  const auto r = write_pkg(src, tmp / "p");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(validate_json(src, tmp / "p", 0)["valid"].get<bool>());
  for (const auto& e : fs::recursive_directory_iterator(tmp / "p")) {
    EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos) << e.path();
  }
}

TEST(WritePackage, ProvenanceIsRequiredForLocalFiles) {
  test::TempDir tmp;
  const auto r = run_cli({"write-package", data_path("llama-tiny-q8_0.gguf").string(), "--out-dir",
                          (tmp / "p").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--model-id"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "p"));
}

TEST(WritePackage, BadSourcesLeaveNothingBehind) {
  test::TempDir tmp;
  // Truncated source.
  auto bytes = test::read_file(data_path("llama-tiny-q8_0.gguf"));
  bytes.resize(bytes.size() / 2);
  test::write_file(tmp / "trunc.gguf", bytes);
  auto r = write_pkg(tmp / "trunc.gguf", tmp / "p1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("trunc.gguf"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "p1" / "model-package.json"));
  // Not a GGUF at all.
  test::write_file(tmp / "text.gguf", {'h', 'e', 'l', 'l', 'o', '\n', 0, 0});
  r = write_pkg(tmp / "text.gguf", tmp / "p2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not a GGUF file"), std::string::npos) << r.err;
  // A split model with a shard missing.
  fs::copy_file(data_path("llama-tiny-q4_0-00001-of-00003.gguf"), tmp / "m-00001-of-00003.gguf");
  fs::copy_file(data_path("llama-tiny-q4_0-00002-of-00003.gguf"), tmp / "m-00002-of-00003.gguf");
  r = write_pkg(tmp / "m-00001-of-00003.gguf", tmp / "p3");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("m-00003-of-00003.gguf"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "p3" / "model-package.json"));
  // A model with no layers (vocab-only file: block_count but no blk.N tensors).
  r = write_pkg(data_path("ggml-vocab-llama-spm.gguf"), tmp / "p4");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no tensors"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "p4" / "model-package.json"));
  // An output path that cannot be a directory.
  test::write_file(tmp / "file", {'x'});
  r = write_pkg(data_path("llama-tiny-q8_0.gguf"), tmp / "file" / "p");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("file"), std::string::npos) << r.err;
}

TEST(WritePackage, ZeroLayerModelIsRefused) {
  test::TempDir tmp;
  const auto src = GgufFile::open(data_path("llama-tiny-q8_0.gguf"));
  GgufWriter w;
  for (const auto& kv : src.kvs()) {
    if (kv.key == "llama.block_count") {
      w.add_u32("llama.block_count", 0);
    } else {
      w.add_kv(std::string(kv.key), kv.value);
    }
  }
  w.add_tensor_from(src, *src.find_tensor("token_embd.weight"));
  AtomicFile af(tmp / "zero.gguf");
  w.write(af);
  af.commit();
  const auto r = write_pkg(tmp / "zero.gguf", tmp / "p");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no layers"), std::string::npos) << r.err;
}

TEST(WritePackage, ProjectorsAreCopiedAndDeclared) {
  test::TempDir tmp;
  const auto src = data_path("llama-tiny-q8_0.gguf");
  // Any valid GGUF serves as a stand-in projector.
  const size_t projector_tensors = test::make_projector(tmp / "mmproj-model-f16.gguf");
  const auto r = write_pkg(src, tmp / "p", {"--projector", (tmp / "mmproj-model-f16.gguf").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto m = load_manifest(tmp / "p");
  ASSERT_EQ(m.projectors.size(), 1u);
  EXPECT_EQ(m.projectors[0].kind, "mmproj");
  EXPECT_EQ(m.projectors[0].path, "projectors/mmproj-model-f16.gguf");
  EXPECT_EQ(m.projectors[0].sha256, sha256_file(tmp / "mmproj-model-f16.gguf"));
  EXPECT_EQ(m.projectors[0].tensor_count, projector_tensors);
  EXPECT_EQ(nlohmann::json::parse(r.out)["artifact_count"], 12);
  EXPECT_TRUE(validate_json(src, tmp / "p", 0)["valid"].get<bool>());
  const auto readme = test::read_text(tmp / "p" / "README.md");
  EXPECT_NE(readme.find("projectors/mmproj-model-f16.gguf"), std::string::npos);
  // A projector that is not a GGUF is refused.
  test::write_file(tmp / "bad.gguf", {'n', 'o'});
  EXPECT_EQ(write_pkg(src, tmp / "q", {"--projector", (tmp / "bad.gguf").string()}).exit_code, 1);
  EXPECT_FALSE(fs::exists(tmp / "q" / "model-package.json"));
  // So is a GGUF that is not a projector (a language model), before any work.
  fs::copy_file(data_path("qwen3moe-tiny.gguf"), tmp / "mmproj-fake.gguf");
  const auto fake = write_pkg(src, tmp / "f", {"--projector", (tmp / "mmproj-fake.gguf").string()});
  EXPECT_EQ(fake.exit_code, 1);
  EXPECT_NE(fake.err.find("not a projector GGUF (general.architecture is \"qwen3moe\""), std::string::npos) << fake.err;
  EXPECT_FALSE(fs::exists(tmp / "f" / "model-package.json"));
}

TEST(WritePackage, ReadmeListsThePublishingItems) {
  test::TempDir tmp;
  ASSERT_EQ(write_pkg(data_path("glm4moe-mtp-tiny.gguf"), tmp / "p").exit_code, 0);
  const auto readme = test::read_text(tmp / "p" / "README.md");
  const auto m = load_manifest(tmp / "p");
  for (const std::string& item : {std::string("org/tiny:Q8_0"), std::string("0123abc"), m.source_model.sha256,
                                 sha256_file(tmp / "p" / "model-package.json"), std::string("Layers: 4"),
                                 std::string("Activation width: 64"), m.skippy_abi_version,
                                 std::string("`mtp`"), std::string("prediction depth 1"),
                                 std::string("validate-package")}) {
    EXPECT_NE(readme.find(item), std::string::npos) << item;
  }
}

TEST(WritePackage, FragmentsParseWithHuggingFaceGguf) {
  const fs::path js = fs::path(SKIPPY_SOURCE_DIR) / "tests/js";
  if (!fs::exists(js / "node_modules/@huggingface/gguf")) {
    GTEST_SKIP() << "run scripts/install-deps.sh to install @huggingface/gguf";
  }
  test::TempDir tmp;
  for (const auto& src : test::model_fixtures()) {
    const auto out = tmp / src.stem().string();
    ASSERT_EQ(write_pkg(src, out).exit_code, 0);
    const auto m = load_manifest(out);
    std::vector<std::string> args = {(js / "read_gguf.mjs").string()};
    for (const auto& a : all_artifacts(out, m)) args.push_back(a.string());
    const auto r = test::run_program("node", args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto docs = nlohmann::json::parse(r.out);
    ASSERT_EQ(docs.size(), args.size() - 1);
    for (const auto& d : docs) {
      const auto ours = GgufFile::open(d["file"].get<std::string>());
      SCOPED_TRACE(d["file"].get<std::string>());
      EXPECT_EQ(d["tensor_count"].get<size_t>(), ours.tensors().size());
      EXPECT_EQ(d["kv_count"].get<size_t>(), ours.kvs().size());
      EXPECT_EQ(d["role"], std::string(*ours.get_string(kRoleKey)));
      if (!ours.tensors().empty()) {
        EXPECT_EQ(d["data_offset"].get<uint64_t>(), ours.data_offset());
      }
      for (size_t i = 0; i < ours.tensors().size(); ++i) {
        const auto& t = ours.tensors()[i];
        EXPECT_EQ(d["tensors"][i]["name"], std::string(t.name));
        EXPECT_EQ(d["tensors"][i]["type"].get<uint32_t>(), t.type);
        EXPECT_EQ(d["tensors"][i]["offset"].get<uint64_t>(), t.offset);
        EXPECT_EQ(d["tensors"][i]["shape"].get<std::vector<int64_t>>(), t.ne);
      }
    }
  }
}

}  // namespace
}  // namespace skippy
