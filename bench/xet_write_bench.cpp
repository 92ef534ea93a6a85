// write-package's one pass with the Xet work an upload through Xet adds,
// and no Hub: every fragment cut into Xet chunks beside its SHA-256
// (WritePackageOptions::xet_chunks, as write-package --push asks), and,
// with --source-chunks, the source chunked as it is read too (what dedupe
// against a Xet-backed source adds: WritePackageOptions::on_source_read).
// scripts/bench.sh times it (wall and CPU) against the same floor as the
// push, so the client's cost is seen without the stand-in's on the cores.
//
//   build/bin/skippy-bench-xet-write MODEL.gguf OUT_DIR [--source-chunks]
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "skippy/package_writer.h"
#include "xet/file_hasher.h"

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4 || std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(stderr,
                 "usage: skippy-bench-xet-write MODEL.gguf OUT_DIR [--source-chunks]\n"
                 "example: skippy-bench-xet-write /tmp/model.gguf /tmp/pkg --source-chunks\n");
    return 2;
  }
  try {
    skippy::WritePackageOptions opt;
    opt.source = argv[1];
    opt.out_dir = argv[2];
    opt.force = true;
    opt.provenance.model_id = "bench/Xet-GGUF:Q8_0";
    opt.provenance.revision = "0000000000000000000000000000000000000000";
    opt.provenance.primary_file = "model.gguf";
    opt.xet_chunks = true;
    uint64_t files = 0, chunks = 0;
    opt.on_artifact = [&](const skippy::WrittenArtifact& a) {
      ++files;
      if (a.xet_chunks) chunks += a.xet_chunks->size();
    };
    std::unique_ptr<skippy::xet::FileHasher> source;
    size_t source_shard = SIZE_MAX;
    if (argc == 4 && std::strcmp(argv[3], "--source-chunks") == 0) {
      opt.on_source_read = [&](size_t shard, uint64_t, std::span<const uint8_t> bytes) {
        if (shard != source_shard) {
          if (source) (void)source->finish();
          source = std::make_unique<skippy::xet::FileHasher>(skippy::xet::FileHasher::ChunkSink{}, false);
          source_shard = shard;
        }
        source->update(bytes);
      };
    }
    const auto r = skippy::write_package(opt);
    if (source) (void)source->finish();
    std::printf("{\"artifacts\":%llu,\"xet_chunks\":%llu,\"source_bytes\":%llu}\n", static_cast<unsigned long long>(files),
                static_cast<unsigned long long>(chunks), static_cast<unsigned long long>(r.source_bytes_hashed));
    return chunks > 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "skippy-bench-xet-write: %s\n", e.what());
    return 1;
  }
}
