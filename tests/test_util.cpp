#include "test_util.h"

#include "skippy/manifest.h"
#include "format/schema1/reader.h"

#include <algorithm>

#include <fcntl.h>
#include <sys/stat.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <chrono>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "util/file.h"
#include "gguf/gguf_writer.h"
#include "skippy/model_source.h"

extern char** environ;

namespace skippy::test {

StageSelection select_v1(const OpenedPackage& pkg, LayerRange range, const SelectOptions& options) {
  return open_stage(pkg.catalog(CatalogNeed::stage(range)), range, options);
}

OpenedCatalog local_catalog(const std::filesystem::path& dir) { return open_local_package(dir).catalog(CatalogNeed::all()); }

OpenedCatalog catalog_of(const OpenedPackage& pkg, std::optional<LayerRange> range) {
  return pkg.catalog(range ? CatalogNeed::stage(*range) : CatalogNeed::all());
}

const PackageManifest& manifest(const OpenedPackage& pkg) {
  const PackageManifest* m = schema1::manifest_of(pkg);
  if (m == nullptr) throw std::logic_error(pkg.ref + ": not a schema 1 package");
  return *m;
}

PackageRootV2 root_v2(const OpenedPlace& place) { return root_v2(place.root); }

PackageRootV2 root_v2(const std::filesystem::path& dir) {
  const auto path = dir / "model-package.json";
  return parse_package_root_v2(read_text(path), path.string());
}

StageView view_v1(const OpenedPackage& pkg, LayerRange range) {
  const OpenedCatalog cat = pkg.catalog(CatalogNeed::stage(range));
  return StageView::open(cat.catalog, open_stage(cat, range));
}

MaterializeResult materialize_v1(const OpenedPackage& pkg, const StageSelection& stage, const MaterializeOptions& options) {
  return materialize_stage(pkg.catalog(CatalogNeed::stage(*stage.range)), stage, options);
}

std::vector<StagePart> all_parts_v1(const OpenedPackage& pkg) {
  const auto listed = pkg.catalog(CatalogNeed::root_only());
  auto parts = all_parts(listed.catalog);
  provide_parts(listed, parts);
  return parts;
}

std::filesystem::path with_extra_tensors(const std::filesystem::path& src, const std::filesystem::path& dir,
                                         const std::vector<std::pair<std::string, int64_t>>& extra) {
  const auto g = GgufFile::open(src);
  GgufWriter w(g.alignment());
  for (const auto& kv : g.kvs()) w.add_kv(std::string(kv.key), kv.value);
  int64_t most = 1;
  for (const auto& [name, n] : extra) most = std::max(most, n);
  const auto zeros = dir / "zeros.bin";
  write_file(zeros, std::vector<uint8_t>(static_cast<size_t>(most) * 4, 0));
  const auto scratch = MappedFile::open(zeros);
  for (const auto& [name, n] : extra) w.add_tensor(name, 0 /* F32 */, {n}, scratch, 0);
  for (const auto& t : g.tensors()) w.add_tensor_from(g, t);
  const auto out = dir / src.filename();
  AtomicFile af(out);
  w.write(af);
  af.commit();
  return out;
}

std::set<std::string> expected_stage_tensors(const ModelSource& model, uint32_t a, uint32_t b) {
  const uint32_t layers = model.layer_count();
  const bool tied = model.find_tensor("output.weight") == nullptr;
  std::set<std::string> out;
  for (const auto& t : model.tensors()) {
    bool in = false;
    switch (t.placement.role) {
      case TensorRole::kGlobal: in = true; break;
      case TensorRole::kEmbeddings: in = a == 0 || (b == layers && tied); break;
      case TensorRole::kLayer: in = t.placement.layer >= a && t.placement.layer < b; break;
      case TensorRole::kOutput: in = b == layers; break;
    }
    if (in) out.insert(std::string(t.info->name));
  }
  return out;
}

std::filesystem::path data_path(const std::string& name) {
  return std::filesystem::path(SKIPPY_TEST_DATA_DIR) / name;
}

std::vector<std::filesystem::path> model_fixtures() {
  return {data_path("llama-tiny-f16.gguf"), data_path("llama-tiny-q8_0.gguf"),
          data_path("llama-tiny-q4_0-00001-of-00003.gguf"), data_path("qwen3moe-tiny.gguf"),
          data_path("glm4moe-mtp-tiny.gguf")};
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/skippy-test-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  // Restore write permission on anything a test made read-only.
  for (auto it = std::filesystem::recursive_directory_iterator(path_, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) {
      std::filesystem::permissions(it->path(), std::filesystem::perms::owner_all,
                                   std::filesystem::perm_options::add, ec);
    }
  }
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
  std::filesystem::remove_all(path_, ec);
}

std::vector<uint8_t> read_file(const std::filesystem::path& p) {
  // One bulk read: the tests are built unoptimized, where a byte-wise
  // stream iterator made reading a few MB the largest cost of whole suites.
  std::ifstream in(p, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::vector<uint8_t> out(static_cast<size_t>(in.tellg()));
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()))) {
    throw std::runtime_error("cannot read " + p.string());
  }
  return out;
}

std::vector<uint8_t> splitmix64_data(size_t n, uint64_t seed) {
  std::vector<uint8_t> out((n + 7) / 8 * 8);
  uint64_t state = seed;
  for (size_t i = 0; i < out.size(); i += 8) {
    state += 0x9E3779B97F4A7C15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    uint8_t le[8];
    for (int b = 0; b < 8; ++b) le[b] = static_cast<uint8_t>(z >> (8 * b));
    std::memcpy(out.data() + i, le, 8);  // (one word at a time: the sanitizer trees run this unoptimized)
  }
  out.resize(n);
  return out;
}

void write_file(const std::filesystem::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

namespace {
std::string drain(int fd) {
  std::string s;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    s.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return s;
}
}  // namespace

std::string read_text(const std::filesystem::path& p) {
  const auto b = read_file(p);
  return {b.begin(), b.end()};
}

PackageManifest load_manifest(const std::filesystem::path& package_dir) {
  return parse_manifest(read_text(package_dir / "model-package.json"), "model-package.json");
}

std::string cli_path() {
  // SKIPPY_TEST_CLI: another build of the CLI (an older commit's, to show
  // that a new test fails there).
  const char* other = std::getenv("SKIPPY_TEST_CLI");
  return other && *other ? other : SKIPPY_CLI_PATH;
}

CliResult run_cli(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  return run_program(cli_path(), args, env);
}

CliResult write_pkg(const std::filesystem::path& src, const std::filesystem::path& out,
                    const std::vector<std::string>& extra, const std::vector<std::string>& env) {
  std::vector<std::string> args = {"write-package", src.string(), "--out-dir", out.string(),
                                   "--model-id",    "org/tiny:Q8_0", "--source-revision", "0123abc",
                                   "--source-file", src.filename().string(), "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_cli(args, env);
}

std::vector<std::string> inherited_env_with(const std::vector<std::string>& env) {
  // `env` entries replace inherited variables of the same name (getenv
  // returns the first match, so appending would not override).
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) {
    const std::string_view kv(*e);
    const auto name = kv.substr(0, kv.find('='));
    const bool overridden = std::any_of(env.begin(), env.end(), [&](const std::string& x) {
      return x.size() > name.size() && x.compare(0, name.size(), name) == 0 && x[name.size()] == '=';
    });
    if (!overridden) env_s.emplace_back(kv);
  }
  env_s.insert(env_s.end(), env.begin(), env.end());
  return env_s;
}

CliResult run_program(const std::string& program, const std::vector<std::string>& args,
                      const std::vector<std::string>& env) {
  std::vector<std::string> argv_s = {program};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  std::vector<std::string> env_s = inherited_env_with(env);
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (::pipe(out_pipe) != 0 || ::pipe(err_pipe) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  posix_spawn_file_actions_addclose(&fa, out_pipe[0]);
  posix_spawn_file_actions_addclose(&fa, err_pipe[0]);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  if (posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), envp.data()) != 0) {
    throw std::runtime_error("cannot start " + argv_s[0]);
  }
  posix_spawn_file_actions_destroy(&fa);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  CliResult r;
  std::thread t([&] { r.err = drain(err_pipe[0]); });
  r.out = drain(out_pipe[0]);
  t.join();
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  // Under the sanitizer builds the child is checked too: a test that expects
  // the run to fail must not pass on a sanitizer's exit code.
  for (const char* report : {"WARNING: ThreadSanitizer", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                             "runtime error:"}) {
    const auto at = r.err.find(report);
    if (at != std::string::npos) {
      ADD_FAILURE() << argv_s[0] << " " << (args.empty() ? "" : args[0]) << ": the child's sanitizer reported:\n"
                    << r.err.substr(at, 4000);
    }
  }
  return r;
}

size_t make_projector(const std::filesystem::path& path, uint8_t seed) {
  // As llama.cpp's convert_hf_to_gguf.py --mmproj writes a vision projector:
  // general.architecture "clip", clip.vision.* hyper-parameters (its own
  // clip.vision.block_count: the encoder's blocks, not a decoder's), v.*
  // encoder tensors with v.blk.N per encoder block, mm.* projection tensors.
  constexpr int64_t kWidth = 32, kFfn = 64, kBlocks = 2, kPatch = 4, kProj = 64;
  struct T {
    std::string name;
    uint32_t type;  // 0 F32, 1 F16
    std::vector<int64_t> ne;
  };
  std::vector<T> tensors = {{"v.patch_embd.weight", 1, {kPatch, kPatch, 3, kWidth}},
                            {"v.patch_embd.bias", 0, {kWidth}},
                            {"v.position_embd.weight", 1, {kWidth, 16}}};
  for (int64_t b = 0; b < kBlocks; ++b) {
    const std::string blk = "v.blk." + std::to_string(b) + ".";
    for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_out"}) {
      tensors.push_back({blk + n + ".weight", 1, {kWidth, kWidth}});
      tensors.push_back({blk + n + ".bias", 0, {kWidth}});
    }
    for (const char* n : {"ln1", "ln2"}) {
      tensors.push_back({blk + n + ".weight", 0, {kWidth}});
      tensors.push_back({blk + n + ".bias", 0, {kWidth}});
    }
    tensors.push_back({blk + "ffn_up.weight", 1, {kWidth, kFfn}});
    tensors.push_back({blk + "ffn_up.bias", 0, {kFfn}});
    tensors.push_back({blk + "ffn_down.weight", 1, {kFfn, kWidth}});
    tensors.push_back({blk + "ffn_down.bias", 0, {kWidth}});
  }
  tensors.push_back({"v.post_ln.weight", 0, {kWidth}});
  tensors.push_back({"v.post_ln.bias", 0, {kWidth}});
  tensors.push_back({"mm.0.weight", 1, {kWidth, kProj}});
  tensors.push_back({"mm.0.bias", 0, {kProj}});
  tensors.push_back({"mm.2.weight", 1, {kProj, kProj}});
  tensors.push_back({"mm.2.bias", 0, {kProj}});
  std::vector<uint64_t> offsets;
  uint64_t total = 0;
  for (const auto& t : tensors) {
    uint64_t n = t.type == 0 ? 4 : 2;
    for (const auto d : t.ne) n *= static_cast<uint64_t>(d);
    offsets.push_back(total);
    total += n;
  }
  // The payload: deterministic bytes in a scratch file the writer reads from
  // (kept below 0x7f so an F16 is never a NaN).
  const auto payload_path = path.parent_path() / (".payload-" + path.filename().string());
  std::vector<uint8_t> payload(total);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>((i * 31 + seed * 7) & 0x3f);
  write_file(payload_path, payload);
  const auto src = MappedFile::open(payload_path);
  auto f32 = [](float v) {
    std::vector<uint8_t> b(4);
    std::memcpy(b.data(), &v, 4);
    return b;
  };
  GgufWriter w;
  w.add_string("general.architecture", "clip");
  w.add_string("general.type", "mmproj");
  w.add_string("general.name", "tiny-mmproj");
  w.add_u32("general.file_type", 1);
  w.add_bool("clip.has_vision_encoder", true);
  w.add_string("clip.projector_type", "mlp");
  w.add_bool("clip.use_gelu", true);
  w.add_u32("clip.vision.image_size", 16);
  w.add_u32("clip.vision.patch_size", static_cast<uint32_t>(kPatch));
  w.add_u32("clip.vision.embedding_length", static_cast<uint32_t>(kWidth));
  w.add_u32("clip.vision.feed_forward_length", static_cast<uint32_t>(kFfn));
  w.add_u32("clip.vision.projection_dim", static_cast<uint32_t>(kProj));
  w.add_u32("clip.vision.block_count", static_cast<uint32_t>(kBlocks));
  w.add_u32("clip.vision.attention.head_count", 4);
  w.add_kv("clip.vision.attention.layer_norm_epsilon", GgufType::kFloat32, f32(1e-6f));
  const std::vector<double> mean = {0.5, 0.5, 0.5};
  w.add_array("clip.vision.image_mean", GgufType::kFloat32, mean);
  w.add_array("clip.vision.image_std", GgufType::kFloat32, mean);
  for (size_t i = 0; i < tensors.size(); ++i) w.add_tensor(tensors[i].name, tensors[i].type, tensors[i].ne, src, offsets[i]);
  AtomicFile out(path);
  (void)w.write(out);
  out.commit();
  std::filesystem::remove(payload_path);
  return w.tensors().size();
}

void expect_json_error(const CliResult& r, const std::string& kind, const std::string& needle) {
  EXPECT_EQ(r.exit_code, kind == "usage" ? 2 : 1) << r.out << r.err;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "stdout is not one JSON document (" << e.what() << "): " << r.out;
    return;
  }
  ASSERT_TRUE(j.is_object() && j.size() == 1 && j.contains("error")) << r.out;
  const auto& e = j["error"];
  EXPECT_EQ(e.value("kind", ""), kind) << r.out;
  const std::string message = e.value("message", "");
  EXPECT_NE(message.find(needle), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("error: " + message), std::string::npos) << "stderr says the same: " << r.err;
}

uint64_t bytes_under(const std::vector<std::filesystem::path>& dirs) {
  namespace fs = std::filesystem;
  uint64_t n = 0;
  for (const auto& d : dirs) {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(d, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      std::error_code ec2;
      if (!it->is_regular_file(ec2)) continue;
      struct stat st {};
      if (::stat(it->path().c_str(), &st) == 0) {
        n += std::min<uint64_t>(static_cast<uint64_t>(st.st_size), static_cast<uint64_t>(st.st_blocks) * 512);
      }
    }
  }
  return n;
}

DiskSampler::DiskSampler(std::vector<std::filesystem::path> dirs) : dirs_(std::move(dirs)) {
  thread_ = std::thread([this] {
    while (!done_) {
      peak_ = std::max<uint64_t>(peak_, bytes_under(dirs_));
      ++samples_;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
}

DiskSampler::~DiskSampler() { stop(); }

void DiskSampler::stop() {
  done_ = true;
  if (thread_.joinable()) thread_.join();
}

std::map<std::string, std::vector<uint8_t>> package_files(const std::filesystem::path& dir) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    const auto rel = e.path().lexically_relative(dir).generic_string();
    if (!e.is_regular_file() || rel.starts_with(".") || rel.find("/.") != std::string::npos) continue;
    out[rel] = read_file(e.path());
  }
  return out;
}

}  // namespace skippy::test
