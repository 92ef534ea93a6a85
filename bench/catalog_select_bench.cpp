// In-process open + select of a schema 2 package (the target: under
// 10 ms for a 94-layer, ~1,000-tensor model). Each iteration does the whole
// open_local_catalog_v2 (root parse, carrier checks and SHA-256, directory-
// only GGUF open, catalog build) and then select_stage of the first
// half of the layers; the figures are the minimum and the median.
//
// Run: scripts/bench-select.sh (it writes the package under /tmp), or
//   build/bin/skippy-bench-catalog PKG [ITERATIONS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "skippy/stage.h"
#include "skippy/package.h"
#include "skippy/error.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void report(const char* what, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::printf("%-34s min %6.2f ms  median %6.2f ms  (%zu runs)\n", what, v.front(), v[v.size() / 2], v.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: skippy-bench-catalog PKG [ITERATIONS]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int n = argc > 2 ? std::max(1, std::atoi(argv[2])) : 21;
  try {
    std::vector<double> open_ms, select_ms, both_ms;
    size_t tensors = 0;
    for (int i = 0; i < n; ++i) {
      const auto t0 = Clock::now();
      const auto pkg = skippy::open_local_package(dir).catalog(skippy::CatalogNeed::all());
      const double opened = ms_since(t0);
      const auto t1 = Clock::now();
      const auto stage = skippy::select_stage(pkg.catalog, {0, pkg.catalog.layer_count / 2});
      select_ms.push_back(ms_since(t1));
      open_ms.push_back(opened);
      both_ms.push_back(ms_since(t0));
      tensors = pkg.catalog.tensors.size();
      if (stage.parts.empty()) return 1;
    }
    std::printf("schema 2 package %s: %zu tensors\n", dir.c_str(), tensors);
    report("open_local_catalog_v2", open_ms);
    report("select_stage (first half)", select_ms);
    report("open + select (target < 10 ms)", both_ms);
  } catch (const skippy::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
