// The wire format of src/peer/PROTOCOL.md: round trips, every malformed
// shape refused with a WireError, caps enforced before allocation, and the
// seeds that fuzz/peer_seeds.py wrote from the document alone decode.
#include <gtest/gtest.h>

#include <filesystem>

#include "peer/protocol.h"
#include "test_util.h"

namespace skippy::peer::wire {
namespace {

Request sample_request() {
  Request r;
  for (size_t i = 0; i < 32; ++i) r.requester[i] = static_cast<uint8_t>(i);
  r.topology_id = "t-1";
  r.run_id = "r-1";
  r.stage_id = "s1";
  r.package_ref = "hf://org/tiny-layers@0123456789abcdef0123456789abcdef01234567";
  r.manifest_sha256.fill(0xab);
  r.rel_path = "layers/layer-00004.gguf";
  r.offset = 123;
  r.expected_size = 4096;
  Digest32 d;
  d.fill(0xcd);
  r.expected_sha256 = d;
  return r;
}

TEST(PeerProtocol, MessagesRoundTrip) {
  Open o;
  o.features = {"artifact-transfer", "x"};
  EXPECT_EQ(decode_open(encode(o)), o);
  OpenAck a;
  a.features = {"artifact-transfer"};
  EXPECT_EQ(decode_open_ack(encode(a)), a);
  EXPECT_TRUE(a.has_feature("artifact-transfer"));
  auto r = sample_request();
  EXPECT_EQ(decode_request(encode(r)), r);
  r.expected_size.reset();
  r.expected_sha256.reset();
  EXPECT_EQ(decode_request(encode(r)), r);
  Response ok;
  ok.accepted = true;
  ok.offset = 5;
  ok.total_size = 9;
  ok.sha256.fill(7);
  EXPECT_EQ(decode_response(encode(ok)), ok);
  for (const auto why : {Refusal::kDisabled, Refusal::kUnavailable, Refusal::kInvalidOffset, Refusal::kBusy}) {
    Response no;
    no.refusal = why;
    EXPECT_EQ(decode_response(encode(no)), no);
  }
}

TEST(PeerProtocol, TheRequestLayoutIsTheDocumentedOne) {
  Request r;
  r.requester.fill(1);
  r.topology_id = "t";
  r.run_id = "r";
  r.stage_id = "s";
  r.package_ref = "hf://a/b@c";
  r.manifest_sha256.fill(2);
  r.rel_path = "p";
  r.offset = 0x0102030405060708ull;
  const auto b = encode(r);
  std::vector<uint8_t> want = {1, 0};                    // generation 1, u16 LE
  want.insert(want.end(), 32, 1);                        // requester
  for (const std::string s : {"t", "r", "s", "hf://a/b@c"}) {
    want.push_back(static_cast<uint8_t>(s.size()));
    want.push_back(0);
    want.insert(want.end(), s.begin(), s.end());
  }
  want.insert(want.end(), 32, 2);                        // manifest_sha256
  want.insert(want.end(), {1, 0, 'p'});                  // rel_path
  want.insert(want.end(), {8, 7, 6, 5, 4, 3, 2, 1});     // offset, u64 LE
  want.insert(want.end(), {0, 0});                       // no expected size, no expected SHA-256
  EXPECT_EQ(b, want);
  EXPECT_EQ(frame(b).size(), b.size() + 4);
  EXPECT_EQ(frame(b)[0], b.size());
}

TEST(PeerProtocol, MalformedRequestsAreRefused) {
  const auto good = encode(sample_request());
  auto expect_bad = [](std::vector<uint8_t> bytes, const char* field) {
    try {
      (void)decode_request(bytes);
      ADD_FAILURE() << "accepted, expected a problem with " << field;
    } catch (const WireError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  // Every truncation.
  for (size_t n = 0; n < good.size(); ++n) expect_bad({good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n)}, "request");
  // Trailing bytes.
  auto longer = good;
  longer.push_back(0);
  expect_bad(longer, "trailing");
  // Unknown generation.
  auto gen = good;
  gen[0] = 2;
  expect_bad(gen, "generation");
  // A presence byte that is neither 0 nor 1.
  auto r = sample_request();
  r.expected_sha256.reset();
  auto pres = encode(r);
  pres.back() = 2;
  expect_bad(pres, "presence");
  // Field rules, via requests the encoder would refuse to build.
  auto with = [](auto edit) {
    auto q = sample_request();
    edit(q);
    return q;
  };
  EXPECT_THROW(encode(with([](Request& q) { q.topology_id.clear(); })), WireError);
  EXPECT_THROW(encode(with([](Request& q) { q.run_id = std::string(257, 'x'); })), WireError);
  EXPECT_THROW(encode(with([](Request& q) { q.stage_id = "a\nb"; })), WireError);
  EXPECT_THROW(encode(with([](Request& q) { q.stage_id = "\xc0\xaf"; })), WireError);  // overlong UTF-8
  EXPECT_THROW(encode(with([](Request& q) { q.package_ref = "/local/dir"; })), WireError);
  EXPECT_THROW(encode(with([](Request& q) { q.rel_path = "../model-package.json"; })), WireError);
  EXPECT_THROW(encode(with([](Request& q) { q.rel_path = "/etc/passwd"; })), WireError);
  EXPECT_THROW(encode(with([](Request& q) { q.rel_path = "layers//x"; })), WireError);
  EXPECT_THROW(encode(with([](Request& q) { q.offset = *q.expected_size + 1; })), WireError);
  EXPECT_NO_THROW(encode(with([](Request& q) { q.stage_id = "stage \xc3\xa9t\xc3\xa9"; })));  // UTF-8 is fine
  // The same rules when the bytes come from a peer: patch a valid request.
  auto path_bytes = good;
  const std::string path = "layers/layer-00004.gguf";
  auto at = std::search(path_bytes.begin(), path_bytes.end(), path.begin(), path.end());
  ASSERT_NE(at, path_bytes.end());
  const std::string escape = "../../../../../etc/pass";
  std::copy(escape.begin(), escape.end(), at);
  expect_bad(path_bytes, "rel_path");
  // A string length larger than what is left.
  auto len = good;
  len[2 + 32] = 0xff;
  len[2 + 32 + 1] = 0x00;
  expect_bad(len, "request");
}

TEST(PeerProtocol, ResponsesAndOpensAreChecked) {
  EXPECT_THROW(decode_response(std::vector<uint8_t>{1, 0, 3}), WireError);        // unknown status
  EXPECT_THROW(decode_response(std::vector<uint8_t>{1, 0, 2, 0}), WireError);     // refusal code 0
  EXPECT_THROW(decode_response(std::vector<uint8_t>{1, 0, 2, 5}), WireError);     // refusal code 5
  Response bad;
  bad.accepted = true;
  bad.offset = 10;
  bad.total_size = 9;
  EXPECT_THROW(encode(bad), WireError);
  auto b = encode(Response{true, 1, 9, {}, Refusal::kUnavailable});
  b[3] = 10;  // offset 10 > total 9
  EXPECT_THROW(decode_response(b), WireError);
  Open o;
  o.features.assign(33, "f");
  EXPECT_THROW(encode(o), WireError);
  o.features = {std::string(65, 'f')};
  EXPECT_THROW(encode(o), WireError);
  auto ob = encode(Open{});
  ob[ob.size() - 2] = 0xff;  // feature count 255 (> 32), checked before reading them
  EXPECT_THROW(decode_open(ob), WireError);
}

TEST(PeerProtocol, FrameLengthsAreCappedBeforeAnythingIsAllocated) {
  auto header = [](uint32_t n) {
    return std::array<uint8_t, 4>{static_cast<uint8_t>(n), static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n >> 16),
                                  static_cast<uint8_t>(n >> 24)};
  };
  EXPECT_EQ(frame_length(header(100), kMaxRequestFrameBytes, "f"), 100u);
  EXPECT_THROW(frame_length(header(0), kMaxRequestFrameBytes, "f"), WireError);
  EXPECT_THROW(frame_length(header(kMaxRequestFrameBytes + 1), kMaxRequestFrameBytes, "f"), WireError);
  EXPECT_EQ(frame_length(header(kMaxFrameBytes), UINT32_MAX, "f"), kMaxFrameBytes);  // 8 MiB: the hard cap
  EXPECT_THROW(frame_length(header(kMaxFrameBytes + 1), UINT32_MAX, "f"), WireError);
  EXPECT_THROW(frame_length(header(0xffffffffu), UINT32_MAX, "f"), WireError);
  EXPECT_THROW(frame(std::vector<uint8_t>{}), WireError);
}

TEST(PeerProtocol, DigestsAsHex) {
  Digest32 d;
  for (size_t i = 0; i < 32; ++i) d[i] = static_cast<uint8_t>(i * 7);
  EXPECT_EQ(digest_from_hex(to_hex(d), "x"), d);
  std::string upper = to_hex(d);
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(digest_from_hex(upper, "x"), d);
  EXPECT_THROW(digest_from_hex("abc", "x"), WireError);
  EXPECT_THROW(digest_from_hex(std::string(64, 'g'), "x"), WireError);
}

// fuzz/corpus-peer/ was written by fuzz/peer_seeds.py from PROTOCOL.md: an
// independent encoder. Its valid messages decode; its malformed ones do not.
TEST(PeerProtocol, SeedsWrittenFromTheDocumentDecode) {
  const std::filesystem::path dir = std::filesystem::path(SKIPPY_SOURCE_DIR) / "fuzz" / "corpus-peer";
  size_t valid = 0, invalid = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const auto bytes = test::read_file(e.path());
    ASSERT_FALSE(bytes.empty());
    const std::string name = e.path().filename().string();
    if (name.starts_with("stream-")) continue;  // the fuzzer's stream mode
    const std::vector<uint8_t> payload(bytes.begin() + 1, bytes.end());
    auto decode = [&] {
      switch (bytes[0] % 4) {
        case 0: (void)decode_open(payload); break;
        case 1: (void)decode_open_ack(payload); break;
        case 2: (void)decode_request(payload); break;
        default: (void)decode_response(payload); break;
      }
    };
    if (name.starts_with("bad-")) {
      EXPECT_THROW(decode(), WireError) << name;
      ++invalid;
    } else {
      EXPECT_NO_THROW(decode()) << name;
      ++valid;
    }
  }
  EXPECT_GE(valid, 6u);
  EXPECT_GE(invalid, 3u);
}

}  // namespace
}  // namespace skippy::peer::wire
