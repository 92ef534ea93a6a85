// skippy-make-model: writes a synthetic but valid llama-architecture GGUF of
// a target size, for benchmarks. The header comes from skippy::GgufWriter;
// tensor payloads are pseudo-random bytes (xorshift64, so nothing compresses
// or dedups) generated and written in chunks, never the whole model in
// memory. Payload bytes are shaped so every value is finite (Q8_0 scales,
// F16 halves, F32 norms). With --split N it writes PREFIX-0000i-of-0000N.gguf
// shards the way llama-gguf-split does: all KVs in the first shard, split.no
// (u16), split.count (u16) and split.tensors.count (i32) in every shard.
// The result is re-opened with skippy::GgufFile / ModelSource before exit.
//
//   skippy-make-model /tmp/skippy-bench/model.gguf --size 2GiB --layers 32
//   skippy-make-model /tmp/skippy-bench/split/model --size 2GiB --split 3
#include <CLI/CLI.hpp>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "skippy/error.h"
#include "util/file.h"
#include "gguf/ggml_types.h"
#include "skippy/gguf.h"
#include "gguf/gguf_writer.h"
#include "skippy/model_source.h"

namespace {

using skippy::GgufType;
using skippy::GgufWriter;

constexpr uint32_t kF32 = 0;
constexpr uint32_t kF16 = 1;
constexpr uint32_t kQ8_0 = 8;
constexpr uint32_t kQ8_0Block = 34;  // bytes per 32 elements: f16 scale + 32 x i8

struct Params {
  uint64_t target = 2ull << 30;
  uint32_t layers = 32;
  uint32_t type = kQ8_0;  // for 2-D tensors
  uint32_t vocab = 512;
  uint32_t split = 1;
  uint64_t seed = 1;
  int64_t embd = 0;  // 0: derived from the target size
  int64_t ff = 0;    // 0: derived from the target size
};

// "2GiB", "1.5 GiB", "512MiB", "3G", "1000000": bytes.
uint64_t parse_size(const std::string& text) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (const std::exception&) {
    throw CLI::ValidationError("--size", "not a size: " + text);
  }
  std::string unit = text.substr(pos);
  unit.erase(std::remove(unit.begin(), unit.end(), ' '), unit.end());
  for (auto& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double mul = 1;
  if (unit.empty() || unit == "b") mul = 1;
  else if (unit == "k" || unit == "kib") mul = 1024.0;
  else if (unit == "m" || unit == "mib") mul = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib") mul = 1024.0 * 1024 * 1024;
  else if (unit == "kb") mul = 1e3;
  else if (unit == "mb") mul = 1e6;
  else if (unit == "gb") mul = 1e9;
  else throw CLI::ValidationError("--size", "unknown unit in " + text);
  if (!(v > 0) || v * mul > 1e15) throw CLI::ValidationError("--size", "out of range: " + text);
  return static_cast<uint64_t>(v * mul);
}

// A small llama (SentencePiece-style) vocabulary: <unk> <s> </s>, 256 byte
// tokens, then unique word pieces.
void add_tokenizer(GgufWriter& w, uint32_t vocab) {
  std::vector<std::string> tokens;
  std::vector<double> scores;
  std::vector<int64_t> types;
  for (uint32_t i = 0; i < vocab; ++i) {
    std::string piece;
    int32_t type = 1;  // normal
    if (i == 0) {
      piece = "<unk>", type = 2;
    } else if (i == 1) {
      piece = "<s>", type = 3;
    } else if (i == 2) {
      piece = "</s>", type = 3;
    } else if (i < 3 + 256) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "<0x%02X>", i - 3);
      piece = buf, type = 6;
    } else {
      piece = "\xE2\x96\x81";  // U+2581, SentencePiece's word boundary
      for (uint32_t n = i - 259;; n /= 26) {
        piece += static_cast<char>('a' + n % 26);
        if (n < 26) break;
      }
    }
    tokens.push_back(std::move(piece));
    scores.push_back(type == 1 ? -static_cast<double>(i) : 0.0);
    types.push_back(type);
  }
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_array("tokenizer.ggml.scores", GgufType::kFloat32, scores);
  w.add_array("tokenizer.ggml.token_type", GgufType::kInt32, types);
  w.add_u32("tokenizer.ggml.unknown_token_id", 0);
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_u32("tokenizer.ggml.eos_token_id", 2);
}

std::string model_name(const Params& p, int64_t embd, int64_t ff) {
  return "skippy synthetic llama L" + std::to_string(p.layers) + " E" + std::to_string(embd) + " F" +
         std::to_string(ff) + " V" + std::to_string(p.vocab) + " " + skippy::ggml_type_name(p.type) + " seed" +
         std::to_string(p.seed);
}

struct TensorSpec {
  std::string name;
  uint32_t type;
  std::vector<int64_t> ne;
};

std::vector<TensorSpec> tensor_specs(const Params& p, int64_t embd, int64_t ff) {
  const int64_t v = p.vocab;
  std::vector<TensorSpec> t;
  t.push_back({"token_embd.weight", p.type, {embd, v}});
  for (uint32_t l = 0; l < p.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    t.push_back({b + "attn_norm.weight", kF32, {embd}});
    t.push_back({b + "attn_q.weight", p.type, {embd, embd}});
    t.push_back({b + "attn_k.weight", p.type, {embd, embd}});
    t.push_back({b + "attn_v.weight", p.type, {embd, embd}});
    t.push_back({b + "attn_output.weight", p.type, {embd, embd}});
    t.push_back({b + "ffn_norm.weight", kF32, {embd}});
    t.push_back({b + "ffn_gate.weight", p.type, {embd, ff}});
    t.push_back({b + "ffn_up.weight", p.type, {embd, ff}});
    t.push_back({b + "ffn_down.weight", p.type, {ff, embd}});
  }
  t.push_back({"output_norm.weight", kF32, {embd}});
  t.push_back({"output.weight", p.type, {embd, v}});
  return t;
}

// One writer per output file (one unless --split), tensors already added.
std::vector<GgufWriter> build(const Params& p, int64_t embd, int64_t ff) {
  const auto specs = tensor_specs(p, embd, ff);
  GgufWriter kv;
  kv.add_string("general.architecture", "llama");
  kv.add_string("general.name", model_name(p, embd, ff));
  kv.add_u32("general.file_type", p.type == kQ8_0 ? 7u : 1u);  // llama_ftype MOSTLY_Q8_0 / MOSTLY_F16
  kv.add_u32("llama.block_count", p.layers);
  kv.add_u32("llama.context_length", 4096);
  kv.add_u32("llama.embedding_length", static_cast<uint32_t>(embd));
  kv.add_u32("llama.feed_forward_length", static_cast<uint32_t>(ff));
  kv.add_u32("llama.attention.head_count", static_cast<uint32_t>(embd / 128));
  kv.add_u32("llama.attention.head_count_kv", static_cast<uint32_t>(embd / 128));
  kv.add_u32("llama.rope.dimension_count", 128);
  kv.add_kv("llama.attention.layer_norm_rms_epsilon", GgufType::kFloat32,
            [] {
              std::vector<uint8_t> b(sizeof(float));
              const float eps = 1e-5f;
              std::memcpy(b.data(), &eps, sizeof eps);
              return b;
            }());
  kv.add_u32("llama.vocab_size", p.vocab);
  add_tokenizer(kv, p.vocab);

  // Which shard each tensor goes to: by cumulative bytes, in order, every
  // shard non-empty.
  std::vector<uint64_t> bytes;
  uint64_t total = 0;
  for (const auto& s : specs) {
    bytes.push_back(*skippy::ggml_tensor_bytes(s.type, s.ne));
    total += bytes.back();
  }
  std::vector<uint32_t> shard_of(specs.size());
  uint32_t s = 0;
  uint64_t cum = 0, in_shard = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const bool past = static_cast<long double>(cum) >=
                      static_cast<long double>(total) * (s + 1) / static_cast<long double>(p.split);
    const bool forced = specs.size() - i == p.split - 1 - s;
    if (s + 1 < p.split && in_shard > 0 && (past || forced)) ++s, in_shard = 0;
    shard_of[i] = s;
    ++in_shard;
    cum += bytes[i];
  }

  std::vector<GgufWriter> out(p.split);
  for (uint32_t i = 0; i < p.split; ++i) {
    if (i == 0) {
      for (const auto& k : kv.kvs()) out[i].add_kv(k.key, k.type, {k.encoded.begin(), k.encoded.end()});
    }
    if (p.split > 1) {
      out[i].add_u16("split.no", static_cast<uint16_t>(i));
      out[i].add_u16("split.count", static_cast<uint16_t>(p.split));
      out[i].add_i32("split.tensors.count", static_cast<int32_t>(specs.size()));
    }
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    out[shard_of[i]].add_tensor(specs[i].name, specs[i].type, specs[i].ne, nullptr, 0);
  }
  return out;
}

uint64_t total_size(const std::vector<GgufWriter>& ws) {
  uint64_t n = 0;
  for (const auto& w : ws) n += w.total_size();
  return n;
}

// Picks the width (multiple of 128: 128-wide heads) from the target, then the
// smallest feed-forward width (multiple of 32) that reaches the target.
std::pair<int64_t, int64_t> choose_dims(const Params& p) {
  const double per_elem = p.type == kQ8_0 ? 34.0 / 32 : 2.0;
  int64_t embd = p.embd;
  if (embd == 0) {
    // ~12 E^2 elements per layer with F = 8/3 E.
    const double e = std::sqrt(static_cast<double>(p.target) / (12.0 * per_elem * p.layers));
    embd = std::max<int64_t>(128, static_cast<int64_t>(e / 128) * 128);
  }
  if (p.ff != 0) return {embd, p.ff};
  const uint64_t t32 = total_size(build(p, embd, 32));
  if (t32 >= p.target) return {embd, 32};
  const uint64_t t64 = total_size(build(p, embd, 64));
  const uint64_t slope = std::max<uint64_t>(1, t64 - t32);
  int64_t ff = 32 + 32 * static_cast<int64_t>((p.target - t32) / slope);
  while (ff > 32 && total_size(build(p, embd, ff)) > p.target) ff -= 32;
  while (total_size(build(p, embd, ff)) < p.target) ff += 32;
  return {embd, ff};
}

class Xorshift {
 public:
  explicit Xorshift(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {
    if (s_ == 0) s_ = 1;
  }
  uint64_t next() noexcept {
    s_ ^= s_ << 13;
    s_ ^= s_ >> 7;
    s_ ^= s_ << 17;
    return s_;
  }

 private:
  uint64_t s_;
};

// Fills `n` bytes (a multiple of the type's block) with random values of
// tensor type `type` that are all finite.
void fill(Xorshift& rng, uint32_t type, uint8_t* buf, size_t n) {
  const size_t words = n / 8;
  uint64_t mask = ~0ull, set = 0;
  if (type == kF16) mask = 0xBFFFBFFFBFFFBFFFull;  // exponent < 0x10: |x| < 2, never inf/nan
  if (type == kF32) mask = 0x007FFFFF007FFFFFull, set = 0x3F8000003F800000ull;  // [1, 2)
  for (size_t i = 0; i < words; ++i) {
    const uint64_t v = (rng.next() & mask) | set;
    std::memcpy(buf + 8 * i, &v, 8);
  }
  if (n % 8) {
    const uint64_t v = (rng.next() & mask) | set;
    std::memcpy(buf + 8 * words, &v, n % 8);
  }
  if (type == kQ8_0) {
    // Scale (f16, little-endian) small and finite: exponent 7.
    for (size_t b = 0; b + kQ8_0Block <= n; b += kQ8_0Block) buf[b + 1] = static_cast<uint8_t>(0x1C | (buf[b + 1] & 0x03));
  }
}

std::vector<std::filesystem::path> output_paths(const std::string& out, uint32_t split) {
  if (split == 1) return {out};
  std::string prefix = out;
  if (prefix.size() > 5 && prefix.compare(prefix.size() - 5, 5, ".gguf") == 0) prefix.resize(prefix.size() - 5);
  std::vector<std::filesystem::path> paths;
  for (uint32_t i = 1; i <= split; ++i) paths.push_back(skippy::split_path(prefix, i, split));
  return paths;
}

// True when every output exists, parses, and has the layout these
// parameters give (name, tensor count and size): the data is not re-read.
bool reusable(const std::vector<std::filesystem::path>& paths, const std::vector<GgufWriter>& ws,
              const std::string& name) {
  try {
    for (size_t i = 0; i < paths.size(); ++i) {
      if (!std::filesystem::exists(paths[i])) return false;
      const auto f = skippy::GgufFile::open(paths[i]);
      if (f.file_size() != ws[i].total_size() || f.tensors().size() != ws[i].tensors().size()) return false;
      if (i == 0 && f.get_string("general.name") != name) return false;
    }
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// Re-opens what was written: each file with GgufFile, the whole model with
// ModelSource (which checks split keys and layer numbering).
void verify(const std::vector<std::filesystem::path>& paths, const std::vector<GgufWriter>& ws, const Params& p) {
  size_t tensors = 0;
  for (size_t i = 0; i < paths.size(); ++i) {
    const auto f = skippy::GgufFile::open(paths[i]);
    if (f.file_size() != ws[i].total_size() || f.tensors().size() != ws[i].tensors().size() ||
        f.data_offset() != ws[i].data_offset()) {
      throw skippy::Error(skippy::ErrorKind::kInvalidInput, paths[i].string() + ": layout differs from the plan");
    }
    tensors += f.tensors().size();
  }
  const auto m = skippy::ModelSource::open(paths.front());
  if (m.tensors().size() != tensors || m.layer_count() != p.layers || m.architecture() != "llama") {
    throw skippy::Error(skippy::ErrorKind::kInvalidInput, paths.front().string() + ": model does not read back");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"skippy-make-model: a synthetic llama GGUF of a target size (random payloads), for benchmarks",
               "skippy-make-model"};
  Params p;
  std::string out, size = "2GiB", type = "q8_0";
  bool reuse = false, quiet = false;
  app.add_option("out", out, "Output path (with --split: prefix, shards are PREFIX-0000i-of-0000N.gguf)")->required();
  app.add_option("--size", size, "Target file size (total over shards); the model is at least this big")
      ->capture_default_str();
  app.add_option("--layers", p.layers, "Transformer blocks")->capture_default_str()->check(CLI::Range(1u, 100000u));
  app.add_option("--type", type, "Type of 2-D tensors: q8_0 or f16")->capture_default_str()->check(
      CLI::IsMember({"q8_0", "f16"}, CLI::ignore_case));
  app.add_option("--split", p.split, "Write N shards like llama-gguf-split")->capture_default_str()->check(
      CLI::Range(1u, 99999u));
  app.add_option("--vocab", p.vocab, "Tokenizer entries")->capture_default_str()->check(CLI::Range(260u, 1000000u));
  app.add_option("--embd", p.embd, "Embedding width (multiple of 128; default: from --size)");
  app.add_option("--ff", p.ff, "Feed-forward width (multiple of 32; default: from --size)");
  app.add_option("--seed", p.seed, "Random seed")->capture_default_str();
  app.add_flag("--reuse", reuse, "Keep existing outputs when they parse and match these parameters");
  app.add_flag("--quiet,-q", quiet, "Print only the output paths");
  CLI11_PARSE(app, argc, argv);

  try {
    p.target = parse_size(size);
    p.type = (type == "f16" || type == "F16") ? kF16 : kQ8_0;
    if (p.embd < 0 || p.embd % 128 != 0) throw CLI::ValidationError("--embd", "must be a multiple of 128");
    if (p.ff < 0 || p.ff % 32 != 0) throw CLI::ValidationError("--ff", "must be a multiple of 32");
    const size_t tensor_count = 3 + 9 * static_cast<size_t>(p.layers);
    if (p.split > tensor_count) throw CLI::ValidationError("--split", "more shards than tensors");

    const auto [embd, ff] = choose_dims(p);
    const auto writers = build(p, embd, ff);
    const auto paths = output_paths(out, p.split);
    const std::string name = model_name(p, embd, ff);
    const uint64_t total = total_size(writers);

    if (reuse && reusable(paths, writers, name)) {
      verify(paths, writers, p);
      if (quiet) {
        for (const auto& path : paths) std::cout << path.string() << "\n";
      } else {
        std::printf("reused %s (%s, %.3f GiB)\n", paths.front().c_str(), name.c_str(),
                    static_cast<double>(total) / (1ull << 30));
      }
      return 0;
    }
    if (!paths.front().parent_path().empty()) std::filesystem::create_directories(paths.front().parent_path());

    const auto t0 = std::chrono::steady_clock::now();
    // Two buffers: one is filled here while the other is written by a
    // helper thread (generation and the kernel's copy overlap on two cores).
    constexpr size_t kChunk = kQ8_0Block * 8 * 15420;  // ~4 MiB: whole Q8_0 blocks, whole words
    std::vector<uint64_t> storage[2] = {std::vector<uint64_t>(kChunk / 8 + 64), std::vector<uint64_t>(kChunk / 8 + 64)};
    std::future<void> pending;
    auto drain = [&] {
      if (pending.valid()) pending.get();
    };
    Xorshift rng(p.seed);
    double sync_secs = 0;
    for (size_t i = 0; i < writers.size(); ++i) {
      const auto& w = writers[i];
      skippy::AtomicFile f(paths[i]);
      f.write_all(w.header());
      int cur = 0;
      for (const auto& t : w.tensors()) {
        for (uint64_t done = 0; done < t.bytes;) {
          auto* buf = reinterpret_cast<uint8_t*>(storage[cur].data());
          size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, t.bytes - done));
          fill(rng, t.type, buf, n);
          done += n;
          if (done == t.bytes) {  // the tensor's zero padding rides with its last chunk
            const uint64_t padded = (t.bytes + w.alignment() - 1) / w.alignment() * w.alignment();
            std::memset(buf + n, 0, static_cast<size_t>(padded - t.bytes));
            n += static_cast<size_t>(padded - t.bytes);
          }
          drain();
          pending = std::async(std::launch::async, [&f, buf, n] { f.write_all({buf, n}); });
          cur ^= 1;
        }
      }
      drain();
      const auto c0 = std::chrono::steady_clock::now();
      f.commit();  // fsync: the data is on disk before any benchmark runs
      sync_secs += std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);  // all threads: generation + the kernel's copy into the page cache
    const double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                       static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    verify(paths, writers, p);

    if (quiet) {
      for (const auto& path : paths) std::cout << path.string() << "\n";
    } else {
      std::printf("wrote %s%s\n  %s: %u layers, width %lld, ff %lld, vocab %u, %zu tensors\n"
                  "  %llu bytes (%.3f GiB): generated and written in %.2f s (%.2f GB/s; %.2f CPU s), "
                  "fsync %.2f s; re-opened OK\n",
                  paths.front().c_str(), p.split > 1 ? (" + " + std::to_string(p.split - 1) + " shards").c_str() : "",
                  name.c_str(), p.layers, static_cast<long long>(embd), static_cast<long long>(ff), p.vocab,
                  tensor_count, static_cast<unsigned long long>(total), static_cast<double>(total) / (1ull << 30),
                  secs - sync_secs, static_cast<double>(total) / (secs - sync_secs) / 1e9, cpu, sync_secs);
    }
    return 0;
  } catch (const CLI::Error& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::cerr << "skippy-make-model: " << e.what() << "\n";
    return 1;
  }
}
