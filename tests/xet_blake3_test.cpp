// Our BLAKE3 (src/xet/blake3.h) against the official test vectors
// (BLAKE3-team/BLAKE3 test_vectors/test_vectors.json: input byte i is
// i % 251; the first 32 bytes of each extended output) and against b3sum,
// Debian's build of the reference implementation, on every backend this CPU
// has: the portable code must stay right on its own.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "test_util.h"
#include "xet/blake3.h"

namespace skippy::xet {
namespace {

namespace fs = std::filesystem;

std::string b3_hex(const Blake3Digest& d) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

std::vector<uint8_t> b3_vector_input(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i % 251);
  return v;
}

std::vector<uint8_t> b3_random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

const Blake3Key& b3_vector_key() {
  static const Blake3Key key = [] {
    const std::string k = "whats the Elvish word for friend";
    Blake3Key out{};
    std::copy(k.begin(), k.end(), out.begin());
    return out;
  }();
  return key;
}

struct B3OfficialVector {
  size_t len;
  const char* hash;
  const char* keyed_hash;
};

// Every input length the official file lists (it crosses block, chunk and
// subtree boundaries: 1023, 1024, 1025, 2048, 2049, ... 31744, 102400).
const B3OfficialVector kB3Vectors[] = {
    {0, "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262",
     "92b2b75604ed3c761f9d6f62392c8a9227ad0ea3f09573e783f1498a4ed60d26"},
    {1, "2d3adedff11b61f14c886e35afa036736dcd87a74d27b5c1510225d0f592e213",
     "6d7878dfff2f485635d39013278ae14f1454b8c0a3a2d34bc1ab38228a80c95b"},
    {2, "7b7015bb92cf0b318037702a6cdd81dee41224f734684c2c122cd6359cb1ee63",
     "5392ddae0e0a69d5f40160462cbd9bd889375082ff224ac9c758802b7a6fd20a"},
    {3, "e1be4d7a8ab5560aa4199eea339849ba8e293d55ca0a81006726d184519e647f",
     "39e67b76b5a007d4921969779fe666da67b5213b096084ab674742f0d5ec62b9"},
    {4, "f30f5ab28fe047904037f77b6da4fea1e27241c5d132638d8bedce9d40494f32",
     "7671dde590c95d5ac9616651ff5aa0a27bee5913a348e053b8aa9108917fe070"},
    {5, "b40b44dfd97e7a84a996a91af8b85188c66c126940ba7aad2e7ae6b385402aa2",
     "73ac69eecf286894d8102018a6fc729f4b1f4247d3703f69bdc6a5fe3e0c8461"},
    {6, "06c4e8ffb6872fad96f9aaca5eee1553eb62aed0ad7198cef42e87f6a616c844",
     "82d3199d0013035682cc7f2a399d4c212544376a839aa863a0f4c91220ca7a6d"},
    {7, "3f8770f387faad08faa9d8414e9f449ac68e6ff0417f673f602a646a891419fe",
     "af0a7ec382aedc0cfd626e49e7628bc7a353a4cb108855541a5651bf64fbb28a"},
    {8, "2351207d04fc16ade43ccab08600939c7c1fa70a5c0aaca76063d04c3228eaeb",
     "be2f5495c61cba1bb348a34948c004045e3bd4dae8f0fe82bf44d0da245a0600"},
    {63, "e9bc37a594daad83be9470df7f7b3798297c3d834ce80ba85d6e207627b7db7b",
     "bb1eb5d4afa793c1ebdd9fb08def6c36d10096986ae0cfe148cd101170ce37ae"},
    {64, "4eed7141ea4a5cd4b788606bd23f46e212af9cacebacdc7d1f4c6dc7f2511b98",
     "ba8ced36f327700d213f120b1a207a3b8c04330528586f414d09f2f7d9ccb7e6"},
    {65, "de1e5fa0be70df6d2be8fffd0e99ceaa8eb6e8c93a63f2d8d1c30ecb6b263dee",
     "c0a4edefa2d2accb9277c371ac12fcdbb52988a86edc54f0716e1591b4326e72"},
    {127, "d81293fda863f008c09e92fc382a81f5a0b4a1251cba1634016a0f86a6bd640d",
     "c64200ae7dfaf35577ac5a9521c47863fb71514a3bcad18819218b818de85818"},
    {128, "f17e570564b26578c33bb7f44643f539624b05df1a76c81f30acd548c44b45ef",
     "b04fe15577457267ff3b6f3c947d93be581e7e3a4b018679125eaf86f6a628ec"},
    {129, "683aaae9f3c5ba37eaaf072aed0f9e30bac0865137bae68b1fde4ca2aebdcb12",
     "d4a64dae6cdccbac1e5287f54f17c5f985105457c1a2ec1878ebd4b57e20d38f"},
    {1023, "10108970eeda3eb932baac1428c7a2163b0e924c9a9e25b35bba72b28f70bd11",
     "c951ecdf03288d0fcc96ee3413563d8a6d3589547f2c2fb36d9786470f1b9d6e"},
    {1024, "42214739f095a406f3fc83deb889744ac00df831c10daa55189b5d121c855af7",
     "75c46f6f3d9eb4f55ecaaee480db732e6c2105546f1e675003687c31719c7ba4"},
    {1025, "d00278ae47eb27b34faecf67b4fe263f82d5412916c1ffd97c8cb7fb814b8444",
     "357dc55de0c7e382c900fd6e320acc04146be01db6a8ce7210b7189bd664ea69"},
    {2048, "e776b6028c7cd22a4d0ba182a8bf62205d2ef576467e838ed6f2529b85fba24a",
     "879cf1fa2ea0e79126cb1063617a05b6ad9d0b696d0d757cf053439f60a99dd1"},
    {2049, "5f4d72f40d7a5f82b15ca2b2e44b1de3c2ef86c426c95c1af0b6879522563030",
     "9f29700902f7c86e514ddc4df1e3049f258b2472b6dd5267f61bf13983b78dd5"},
    {3072, "b98cb0ff3623be03326b373de6b9095218513e64f1ee2edd2525c7ad1e5cffd2",
     "044a0e7b172a312dc02a4c9a818c036ffa2776368d7f528268d2e6b5df191770"},
    {3073, "7124b49501012f81cc7f11ca069ec9226cecb8a2c850cfe644e327d22d3e1cd3",
     "68dede9bef00ba89e43f31a6825f4cf433389fedae75c04ee9f0cf16a427c95a"},
    {4096, "015094013f57a5277b59d8475c0501042c0b642e531b0a1c8f58d2163229e969",
     "befc660aea2f1718884cd8deb9902811d332f4fc4a38cf7c7300d597a081bfc0"},
    {4097, "9b4052b38f1c5fc8b1f9ff7ac7b27cd242487b3d890d15c96a1c25b8aa0fb995",
     "00df940cd36bb9fa7cbbc3556744e0dbc8191401afe70520ba292ee3ca80abbc"},
    {5120, "9cadc15fed8b5d854562b26a9536d9707cadeda9b143978f319ab34230535833",
     "2c493e48e9b9bf31e0553a22b23503c0a3388f035cece68eb438d22fa1943e20"},
    {5121, "628bd2cb2004694adaab7bbd778a25df25c47b9d4155a55f8fbd79f2fe154cff",
     "6ccf1c34753e7a044db80798ecd0782a8f76f33563accaddbfbb2e0ea4b2d024"},
    {6144, "3e2e5b74e048f3add6d21faab3f83aa44d3b2278afb83b80b3c35164ebeca205",
     "3d6b6d21281d0ade5b2b016ae4034c5dec10ca7e475f90f76eac7138e9bc8f1d"},
    {6145, "f1323a8631446cc50536a9f705ee5cb619424d46887f3c376c695b70e0f0507f",
     "9ac301e9e39e45e3250a7e3b3df701aa0fb6889fbd80eeecf28dbc6300fbc539"},
    {7168, "61da957ec2499a95d6b8023e2b0e604ec7f6b50e80a9678b89d2628e99ada77a",
     "b42835e40e9d4a7f42ad8cc04f85a963a76e18198377ed84adddeaecacc6f3fc"},
    {7169, "a003fc7a51754a9b3c7fae0367ab3d782dccf28855a03d435f8cfe74605e7817",
     "ed9b1a922c046fdb3d423ae34e143b05ca1bf28b710432857bf738bcedbfa511"},
    {8192, "aae792484c8efe4f19e2ca7d371d8c467ffb10748d8a5a1ae579948f718a2a63",
     "dc9637c8845a770b4cbf76b8daec0eebf7dc2eac11498517f08d44c8fc00d58a"},
    {8193, "bab6c09cb8ce8cf459261398d2e7aef35700bf488116ceb94a36d0f5f1b7bc3b",
     "954a2a75420c8d6547e3ba5b98d963e6fa6491addc8c023189cc519821b4a1f5"},
    {16384, "f875d6646de28985646f34ee13be9a576fd515f76b5b0a26bb324735041ddde4",
     "9e9fc4eb7cf081ea7c47d1807790ed211bfec56aa25bb7037784c13c4b707b0d"},
    {31744, "62b6960e1a44bcc1eb1a611a8d6235b6b4b78f32e7abc4fb4c6cdcce94895c47",
     "efa53b389ab67c593dba624d898d0f7353ab99e4ac9d42302ee64cbf9939a419"},
    {102400, "bc3e3d41a1146b069abffad3c0d44860cf664390afce4d9661f7902e7943e085",
     "1c35d1a5811083fd7119f5d5d1ba027b4d01c0c6c49fb6ff2cf75393ea5db4a7"},
};

// Runs `body` once per backend this CPU has, the best one restored after.
template <class F>
void b3_for_each_backend(F&& body) {
  for (auto b : {Blake3Backend::kPortable, Blake3Backend::kSse41, Blake3Backend::kAvx2}) {
    if (!blake3_set_backend(b)) continue;
    SCOPED_TRACE(blake3_backend_name(b));
    body();
  }
  ASSERT_TRUE(blake3_set_backend(Blake3Backend::kAuto));
}

TEST(XetBlake3, OfficialTestVectorsOnEveryBackend) {
  int backends = 0;
  b3_for_each_backend([&] {
    ++backends;
    for (const auto& v : kB3Vectors) {
      SCOPED_TRACE(v.len);
      const auto in = b3_vector_input(v.len);
      EXPECT_EQ(b3_hex(blake3(in)), v.hash);
      EXPECT_EQ(b3_hex(blake3_keyed(b3_vector_key(), in)), v.keyed_hash);
    }
  });
  EXPECT_GE(backends, 1);
  EXPECT_NE(blake3_backend(), Blake3Backend::kAuto);
}

TEST(XetBlake3, AnySplitOfTheInputGivesTheSameDigest) {
  const auto in = b3_random_bytes(300'000, 7);
  const auto whole = blake3_keyed(b3_vector_key(), in);
  std::mt19937 rng(11);
  b3_for_each_backend([&] {
    for (int round = 0; round < 20; ++round) {
      Blake3 h(b3_vector_key());
      size_t pos = 0;
      while (pos < in.size()) {
        // Mostly small and odd pieces, now and then a large one (the
        // many-chunk path starting mid-tree).
        const size_t piece = rng() % 8 == 0 ? rng() % 70'000 : rng() % 3000;
        const size_t take = std::min(piece, in.size() - pos);
        h.update({in.data() + pos, take});
        pos += take;
      }
      EXPECT_EQ(h.finalize(), whole) << "round " << round;
    }
    // finalize() does not end the hash: more input may follow.
    Blake3 h(b3_vector_key());
    h.update({in.data(), 5000});
    (void)h.finalize();
    h.update({in.data() + 5000, in.size() - 5000});
    EXPECT_EQ(h.finalize(), whole);
    h.reset();
    h.update(in);
    EXPECT_EQ(h.finalize(), whole);
  });
}

TEST(XetBlake3, AgreesWithB3sumPlainAndKeyed) {
  if (test::run_program("b3sum", {"--version"}).exit_code != 0) {
    GTEST_SKIP() << "b3sum is not installed (scripts/install-deps.sh installs it)";
  }
  test::TempDir tmp;
  const auto key_file = tmp / "key";
  test::write_file(key_file, std::vector<uint8_t>(b3_vector_key().begin(), b3_vector_key().end()));
  // Sizes around chunk, subtree and the wide kernels' batch boundaries, and
  // a few megabytes (subtrees of 256 chunks, a deep stack).
  const size_t sizes[] = {0,       1,         1024,      1025,      8 * 1024 - 1, 64 * 1024,
                          65'537,  131'072,   262'145,   1 << 20,   (3 << 20) + 17};
  for (size_t n : sizes) {
    SCOPED_TRACE(n);
    const auto in = b3_random_bytes(n, static_cast<uint32_t>(n));
    const auto file = tmp / ("in-" + std::to_string(n));
    test::write_file(file, in);
    const auto plain = test::run_program("b3sum", {"--no-names", "--num-threads", "1", file.string()});
    ASSERT_EQ(plain.exit_code, 0) << plain.err;
    // b3sum --keyed reads the raw 32-byte key on standard input.
    const auto keyed = test::run_program(
        "sh", {"-c", "b3sum --keyed --no-names \"$1\" < \"$2\"", "sh", file.string(), key_file.string()});
    ASSERT_EQ(keyed.exit_code, 0) << keyed.err;
    b3_for_each_backend([&] {
      EXPECT_EQ(b3_hex(blake3(in)) + "\n", plain.out);
      EXPECT_EQ(b3_hex(blake3_keyed(b3_vector_key(), in)) + "\n", keyed.out);
    });
  }
}

}  // namespace
}  // namespace skippy::xet
