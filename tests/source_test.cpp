// The source layer: the Hugging Face cache, then remotes in order, file by
// file, with error kinds kept (spec: "Peer Cache Transfer" asks a peer
// before normal resolution). Remotes here are fakes that serve a real
// package from a directory through the real blob writer.
#include <gtest/gtest.h>

#include <set>

#include "skippy/error.h"
#include "util/sha256.h"
#include "skippy/source.h"
#include "skippy/stage.h"
#include "source/blob_writer.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

const std::string kCommit(40, 'c');

// Serves files of `store` at kCommit; refuses the paths in `refuse` with
// `kind`; a "peer" cannot resolve names, a "hub" can.
class FakeRemote final : public Remote {
 public:
  FakeRemote(std::string name, fs::path store) : name_(std::move(name)), store_(std::move(store)) {}
  std::set<std::string> refuse;
  ErrorKind refuse_kind = ErrorKind::kUnauthorized;
  bool throw_for_batch = false;
  bool corrupt = false;
  std::vector<std::string> asked;

  std::string name() const override { return name_; }
  std::optional<std::string> resolve_commit(const HfRepoCache&, const std::string&, const std::string&) override {
    if (name_ == "peer") return std::nullopt;
    return kCommit;
  }
  std::optional<RemoteListing> list(const HfRepoCache&, const std::string&) override { return std::nullopt; }
  std::vector<RemoteOutcome> fetch(const HfRepoCache& cache, const std::string& commit, const std::vector<RemoteFile>& files,
                                   const std::function<void(uint64_t)>& on_bytes) override {
    if (throw_for_batch) throw Error(ErrorKind::kTransport, name_ + ": connection refused");
    std::vector<RemoteOutcome> out;
    for (const auto& f : files) {
      asked.push_back(f.path);
      if (refuse.count(f.path)) {
        out.push_back({false, false, false, Error(refuse_kind, name_ + " refused " + f.path)});
        continue;
      }
      auto bytes = test::read_file(store_ / f.path);
      detail::BlobSpec spec;
      spec.etag = sha256_hex(bytes);
      spec.size = bytes.size();
      spec.sha256 = f.sha256;
      spec.what = "hf://org/pkg@" + commit + ": " + f.path;
      if (corrupt && f.sha256) bytes[bytes.size() / 2] ^= 1;
      try {
        const auto got = detail::receive_blob(cache, commit, f.path, spec, on_bytes, [&](detail::BlobWriter& w) {
          w.append(std::span<const uint8_t>(bytes).subspan(w.have()));
        });
        out.push_back({true, got.received, got.verified, std::nullopt});
      } catch (const Error& e) {
        out.push_back({false, false, false, e});
      }
    }
    return out;
  }

 private:
  std::string name_;
  fs::path store_;
};

class SourceChain : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), tmp_ / "store").exit_code, 0);
    peer_ = std::make_shared<FakeRemote>("peer", tmp_ / "store");
    hub_ = std::make_shared<FakeRemote>("hub", tmp_ / "store");
    sources_.hf_cache = tmp_ / "hf";
    sources_.remotes = {peer_, hub_};
  }
  OpenedPackage open() { return open_package("hf://org/pkg@" + kCommit, sources_); }

  TempDir tmp_;
  std::shared_ptr<FakeRemote> peer_, hub_;
  Sources sources_;
};

TEST_F(SourceChain, RemotesAreAskedInOrderAndAFileOneCannotDeliverGoesToTheNext) {
  peer_->refuse = {"layers/layer-00001.gguf"};
  const auto pkg = open();
  const auto sel = test::select_v1(pkg, {0, 2});
  ASSERT_EQ(sel.parts.size(), 4u);  // metadata, embeddings, layers 0 and 1
  const auto origins = pkg.source->origins();
  EXPECT_EQ(origins.at("model-package.json"), "peer");
  EXPECT_EQ(origins.at("shared/metadata.gguf"), "peer");
  EXPECT_EQ(origins.at("layers/layer-00000.gguf"), "peer");
  EXPECT_EQ(origins.at("layers/layer-00001.gguf"), "hub");
  EXPECT_EQ(hub_->asked, std::vector<std::string>{"layers/layer-00001.gguf"}) << "the hub only gets what the peer could not give";
  const auto notes = pkg.source->notes();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("layers/layer-00001.gguf: the peer could not deliver it (peer refused"), std::string::npos)
      << notes[0];
  EXPECT_NE(notes[0].find("asking the hub"), std::string::npos) << notes[0];
  for (const auto& p : sel.parts) EXPECT_TRUE(pkg.source->verified_while_fetching(p.rel_path)) << p.rel_path;

  // A second open is answered by the cache alone.
  peer_->asked.clear();
  hub_->asked.clear();
  const auto again = open();
  (void)test::select_v1(again, {0, 2});
  EXPECT_TRUE(peer_->asked.empty());
  EXPECT_TRUE(hub_->asked.empty());
  for (const auto& [path, origin] : again.source->origins()) EXPECT_EQ(origin, "cache") << path;
}

TEST_F(SourceChain, AFileNoRemoteDeliversKeepsTheLastErrorKindAndTheEarlierReasons) {
  peer_->refuse = {"layers/layer-00001.gguf"};
  hub_->refuse = {"layers/layer-00001.gguf"};
  hub_->refuse_kind = ErrorKind::kNotFound;
  const auto pkg = open();
  try {
    (void)test::select_v1(pkg, {1, 2});
    FAIL() << "no remote delivers layer 1";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    const std::string m = e.what();
    EXPECT_NE(m.find("peer: peer refused layers/layer-00001.gguf"), std::string::npos) << m;
    EXPECT_NE(m.find("hub refused layers/layer-00001.gguf"), std::string::npos) << m;
  }
}

TEST_F(SourceChain, ARemoteThatFailsTheWholeBatchIsSkipped) {
  peer_->throw_for_batch = true;
  const auto pkg = open();
  (void)test::select_v1(pkg, {0, 1});
  for (const auto& [path, origin] : pkg.source->origins()) EXPECT_EQ(origin, "hub") << path;
}

TEST_F(SourceChain, WithOneRemoteItsErrorIsPassedOnUnchanged) {
  sources_.remotes = {hub_};
  hub_->refuse = {"layers/layer-00003.gguf"};
  hub_->refuse_kind = ErrorKind::kUnauthorized;
  const auto pkg = open();
  try {
    (void)test::select_v1(pkg, {3, 4});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnauthorized);
    EXPECT_EQ(std::string(e.what()), "hub refused layers/layer-00003.gguf");
  }
}

TEST_F(SourceChain, WrongBytesAreAnIntegrityErrorAndNeverGetAName) {
  sources_.remotes = {hub_};
  const auto pkg = open();
  hub_->corrupt = true;
  try {
    (void)test::select_v1(pkg, {2, 3});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIntegrity) << e.what();
    EXPECT_NE(std::string(e.what()).find("manifest says"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(fs::symlink_status(pkg.root / "layers" / "layer-00002.gguf")));
  for (const auto& e : fs::directory_iterator(tmp_ / "hf" / "models--org--pkg" / "blobs")) {
    const auto name = e.path().filename().string();
    EXPECT_FALSE(name.ends_with(".incomplete")) << "wrong bytes are not kept: " << name;
    EXPECT_EQ(sha256_file(e.path()), name);
  }
}

TEST_F(SourceChain, OfflineWithNothingCachedIsAnOfflineErrorNamingTheReason) {
  sources_.remotes.clear();
  sources_.offline = true;
  try {
    (void)open();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kOffline);
    EXPECT_NE(std::string(e.what()).find("model-package.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("HF_HUB_OFFLINE=1"), std::string::npos) << e.what();
  }
}

TEST_F(SourceChain, APeerCannotResolveABranchSoItNeedsACommitOrAResolvingRemote) {
  sources_.remotes = {peer_};
  try {
    (void)open_package("hf://org/pkg@main", sources_);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_NE(std::string(e.what()).find("pin the commit"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW((void)open());
}

}  // namespace
}  // namespace skippy
