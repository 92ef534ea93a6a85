// skippy-model-package: split GGUF models into layer packages and consume
// them. Thin: parses flags, calls the library, prints.
#include <cstdio>
#include <iostream>
#include <vector>

#include "cli.h"
#include "skippy/error.h"

int main(int argc, char** argv) {
  using namespace skippy::cli;
  CLI::App app{"skippy-model-package: layer packages for GGUF models (Layer Package Repository spec, schema 1)",
               "skippy-model-package"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "skippy-model-package 0.1.0");
  const std::vector<Command> commands = {
      register_inspect(app),
      register_write_package(app),
      register_validate_package(app),
      register_select(app),
      register_plan(app),
      register_verify(app),
      register_materialize(app),
      register_fetch(app),
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
    app.exit(e);
    return kExitUsage;
  }
  try {
    for (const auto& c : commands) {
      if (c.app->parsed()) return c.run();
    }
  } catch (const skippy::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return e.kind() == skippy::ErrorKind::kUsage ? kExitUsage : kExitInvalid;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kExitInvalid;
  }
  return kExitUsage;
}
