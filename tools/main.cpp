// skippy-model-package: split GGUF models into layer packages and consume
// them. Thin: parses flags, calls the library, prints.
#include <cstdio>
#include <iostream>
#include <string_view>
#include <vector>

#include "cli.h"
#include "skippy/error.h"
#include "skippy/version.h"

int main(int argc, char** argv) {
  using namespace skippy::cli;
  // --json anywhere on the line: failures are reported as JSON too, even
  // when the flags themselves do not parse.
  bool json = false;
  for (int i = 1; i < argc; ++i) json = json || std::string_view(argv[i]) == "--json";
  CLI::App app{"skippy-model-package: layer packages for GGUF models (Layer Package Repository spec, schema 1)",
               "skippy-model-package"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "skippy-model-package " + std::string(skippy::library_version()));
  const std::vector<Command> commands = {
      register_inspect(app),
      register_write_package(app),
      register_validate_package(app),
      register_select(app),
      register_plan(app),
      register_verify(app),
      register_materialize(app),
      register_fetch(app),
      register_policy(app),
      register_speculative(app),
      register_publish(app),
      register_identity(app),
      register_serve_artifacts(app),
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (json) return report_error(skippy::ErrorKind::kUsage, e.what(), true);
    app.exit(e);
    return kExitUsage;
  }
  try {
    for (const auto& c : commands) {
      if (c.app->parsed()) return c.run();
    }
  } catch (const skippy::Error& e) {
    return report_error(e.kind(), e.what(), json);
  } catch (const std::exception& e) {
    return report_error(skippy::ErrorKind::kInvalidInput, e.what(), json);
  }
  return kExitUsage;
}
