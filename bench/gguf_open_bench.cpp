// skippy-bench-gguf: how long opening a multi-GB model takes. Opening parses
// the header only, so it should take milliseconds however big the model is;
// the counters show how many pages an open touches against how many the file
// has (evidence that no tensor data is read).
//
//   SKIPPY_BENCH_MODEL=/tmp/skippy-bench/model.gguf
//   SKIPPY_BENCH_SPLIT_MODEL=/tmp/skippy-bench/split/model-00001-of-00003.gguf
//   build-bench/bin/skippy-bench-gguf
//   build-bench/bin/skippy-bench-gguf --model=PATH [--split-model=PATH] [--benchmark_* flags]
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/gguf.h"
#include "skippy/model_source.h"

namespace {

long minor_faults() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt + ru.ru_majflt;
}

// Adds file size and page-touch counters common to every benchmark.
void add_counters(benchmark::State& state, uint64_t file_bytes, long faults) {
  const double iters = static_cast<double>(state.iterations());
  state.counters["file_MiB"] = static_cast<double>(file_bytes) / (1 << 20);
  state.counters["faults/open"] = iters > 0 ? static_cast<double>(faults) / iters : 0;
  state.counters["file_pages"] = static_cast<double>(file_bytes / 4096);
}

void bm_gguf_file_open(benchmark::State& state, std::string path) {
  uint64_t size = 0;
  const long f0 = minor_faults();
  for (auto _ : state) {
    auto f = skippy::GgufFile::open(path);
    benchmark::DoNotOptimize(f.tensors().data());
    size = f.file_size();
  }
  add_counters(state, size, minor_faults() - f0);
}

void bm_model_source_open(benchmark::State& state, std::string path) {
  uint64_t size = 0;
  const long f0 = minor_faults();
  for (auto _ : state) {
    auto m = skippy::ModelSource::open(path);
    benchmark::DoNotOptimize(m.tensors().data());
    size = 0;
    for (const auto& s : m.shards()) size += s.file_size();
  }
  add_counters(state, size, minor_faults() - f0);
}

// What `inspect` does before printing: open and summarize.
void bm_open_and_summarize(benchmark::State& state, std::string path) {
  uint64_t size = 0;
  const long f0 = minor_faults();
  for (auto _ : state) {
    auto m = skippy::ModelSource::open(path);
    auto s = skippy::summarize(m);
    benchmark::DoNotOptimize(s.tensor_bytes);
    size = s.file_bytes;
  }
  add_counters(state, size, minor_faults() - f0);
}

std::string take_flag(std::vector<char*>& args, std::string_view name) {
  std::string value;
  for (auto it = args.begin() + 1; it != args.end();) {
    const std::string_view a(*it);
    if (a.size() > name.size() + 1 && a.substr(0, name.size()) == name && a[name.size()] == '=') {
      value = std::string(a.substr(name.size() + 1));
      it = args.erase(it);
    } else {
      ++it;
    }
  }
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  std::string model = take_flag(args, "--model");
  std::string split = take_flag(args, "--split-model");
  if (model.empty() && std::getenv("SKIPPY_BENCH_MODEL")) model = std::getenv("SKIPPY_BENCH_MODEL");
  if (split.empty() && std::getenv("SKIPPY_BENCH_SPLIT_MODEL")) split = std::getenv("SKIPPY_BENCH_SPLIT_MODEL");
  if (model.empty() && split.empty()) {
    std::fprintf(stderr,
                 "skippy-bench-gguf: set SKIPPY_BENCH_MODEL (and optionally SKIPPY_BENCH_SPLIT_MODEL) or pass\n"
                 "--model=PATH [--split-model=PATH]; scripts/bench.sh generates both.\n");
    return 2;
  }
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;

  // Fail early, with the reader's message, on a bad path.
  try {
    if (!model.empty()) (void)skippy::GgufFile::open(model);
    if (!split.empty()) (void)skippy::ModelSource::open(split);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "skippy-bench-gguf: %s\n", e.what());
    return 1;
  }
  if (!model.empty()) {
    benchmark::RegisterBenchmark("gguf_file_open/single", bm_gguf_file_open, model)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("model_source_open/single", bm_model_source_open, model)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("open_and_summarize/single", bm_open_and_summarize, model)
        ->Unit(benchmark::kMillisecond);
  }
  if (!split.empty()) {
    benchmark::RegisterBenchmark("model_source_open/split", bm_model_source_open, split)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("open_and_summarize/split", bm_open_and_summarize, split)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
