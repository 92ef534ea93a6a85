// An out-of-tree C++ program built against an installed libskippy through
// find_package(skippy): the C++ API (consumer path) on a package of either
// schema, one path for both: open it, ask its reader for the stage's
// catalog, open the stage, verify its parts.
#include <cstdio>
#include <skippy/hub.h>
#include <skippy/package.h>
#include <skippy/source.h>
#include <skippy/stage.h>
#include <skippy/verify.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s PACKAGE START..END\n", argv[0]);
    return 2;
  }
  try {
    const auto pkg = skippy::open_package(argv[1], skippy::default_sources());
    const auto range = skippy::parse_layer_range(argv[2]);
    const auto opened = pkg.catalog(skippy::CatalogNeed::stage(range));
    const auto stage = skippy::open_stage(opened, range);
    const auto report = skippy::verify_parts(opened, stage.parts);
    std::printf("c++: %s (schema %u), %zu parts, verified %s\n", pkg.identity().model_id.c_str(),
                pkg.schema_version(), stage.parts.size(), report.verified ? "yes" : "no");
    return report.verified ? 0 : 1;
  } catch (const skippy::Error& e) {
    std::fprintf(stderr, "error (%s): %s\n", std::string(skippy::error_kind_name(e.kind())).c_str(), e.what());
    return 1;
  }
}
