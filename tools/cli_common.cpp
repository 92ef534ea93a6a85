#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>

#include "cli.h"
#include "progress.h"
#include "skippy/hub.h"

namespace skippy::cli {

void print_json(const nlohmann::json& doc) { std::cout << doc.dump(2) << "\n"; }

std::string human_bytes(uint64_t n) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  } else {
    std::snprintf(buf, sizeof buf, "%.2f %s", v, kUnits[u]);
  }
  return buf;
}

bool stderr_is_tty() { return ::isatty(2) == 1; }

int exit_code_for(ErrorKind kind) noexcept { return kind == ErrorKind::kUsage ? kExitUsage : kExitInvalid; }

int report_error(ErrorKind kind, const std::string& message, bool json) {
  std::cerr << "error: " << message << "\n";
  if (json) print_json({{"error", {{"kind", std::string(error_kind_name(kind))}, {"message", message}}}});
  return exit_code_for(kind);
}

OpenedPackage open_package_for_cli(const std::string& ref, bool refresh_revision, const std::optional<Sources>& sources) {
  OpenOptions o;
  o.refresh_revision = refresh_revision;
  auto progress = std::make_shared<Progress>("download");
  o.on_progress = [progress](uint64_t done, uint64_t total) { progress->update(done, total); };
  auto pkg = open_package(ref, sources ? *sources : default_sources(), o);
  for (const auto& w : pkg.warnings) std::cerr << "warning: " << w << "\n";
  return pkg;
}

PartsToUse parts_for(const OpenedPackage& pkg, const std::optional<LayerRange>& range, const SelectOptions& options) {
  PartsToUse out;
  if (!range) {
    out.parts = all_parts(pkg);
    return out;
  }
  auto sel = select_stage(pkg, *range, options);
  out.parts = std::move(sel.parts);
  if (sel.projector) out.parts.push_back(std::move(*sel.projector));
  out.notes = std::move(sel.notes);
  return out;
}

std::chrono::milliseconds seconds_to_ms(double s) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(s * 1000.0)));
}

}  // namespace skippy::cli
