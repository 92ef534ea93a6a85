// The metadata carrier's SHA-256 on open goes through the verification cache
// (src/consume/catalog_stage.cpp): a repeat open of the same carrier file is
// not hashed again, and any change to the file is hashed (and refused) as
// before. Driven through the CLI (`select`) with a scratch cache.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "schema_v2_package.h"
#include "test_util.h"

namespace v2_carrier_cache_test {

namespace fs = std::filesystem;
using skippy::test::data_path;
using skippy::test::run_cli;
using skippy::test::TempDir;

size_t records(const fs::path& dir) {
  std::error_code ec;
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir, ec)) n += e.is_regular_file() ? 1 : 0;
  return n;
}

void flip_byte(const fs::path& file, std::streamoff at) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good()) << file;
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x01);
  f.seekp(at);
  f.write(&c, 1);
}

TEST(V2CarrierCache, RepeatOpenIsVouchedForAndAChangedCarrierIsStillRefused) {
  const TempDir t;
  const auto pkg = skippy::test::write_schema_v2_package(data_path("llama-tiny-f16.gguf"), t / "pkg");
  const fs::path carrier = pkg.dir / "shared" / "metadata.gguf";
  ASSERT_TRUE(fs::is_regular_file(carrier));
  const std::vector<std::string> env = {"SKIPPY_CACHE_DIR=" + (t / "cache").string()};
  const fs::path verified = t / "cache" / "verified";
  const std::vector<std::string> select = {"select", pkg.dir.string(), "--layers", "0..1", "--json"};
  // Out of the racy window (a carrier changed < 50 ms before its hash is
  // verified but not recorded).
  std::this_thread::sleep_for(std::chrono::milliseconds(120));

  auto r = run_cli(select, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(records(verified), 1u) << "the first open records the carrier";
  r = run_cli(select, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(records(verified), 1u) << "a repeat open is a hit: nothing new recorded";

  // A flipped byte: the file's identity moved, so it is hashed and refused.
  const auto mid = static_cast<std::streamoff>(fs::file_size(carrier) / 2);
  flip_byte(carrier, mid);
  r = run_cli(select, env);
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE((r.out + r.err).find("SHA-256"), std::string::npos) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("metadata carrier"), std::string::npos) << r.out << r.err;

  // Restored bytes, a new file state: hashed again, accepted, recorded anew.
  flip_byte(carrier, mid);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  r = run_cli(select, env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(records(verified), 2u);
}

}  // namespace v2_carrier_cache_test
