// skippy-model-package: split GGUF models into layer packages and consume
// them. Thin: parses flags, calls the library, prints.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli.h"
#include "terminal_safe.h"
#include "skippy/error.h"
#include "skippy/version.h"

namespace {

// Edit distance (insert, delete, substitute), for "did you mean".
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The first word that is not an option: what the user meant as the command.
int command_index(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] != '-') return i;
  }
  return 0;
}

// "unknown command ..." naming the nearest command when `word` is none of
// app's; nullopt when it is one.
std::optional<std::string> unknown_command(CLI::App& app, std::string_view word) {
  std::string nearest, names;
  size_t best = ~size_t{0};
  for (const auto* sub : app.get_subcommands({})) {
    if (sub->get_name() == word) return std::nullopt;
    names += (names.empty() ? "" : ", ") + sub->get_name();
    const size_t d = edit_distance(word, sub->get_name());
    if (d < best) best = d, nearest = sub->get_name();
  }
  std::string msg = "unknown command \"" + std::string(word) + "\"";
  if (best <= std::max<size_t>(2, word.size() / 3)) msg += "; did you mean \"" + nearest + "\"?";
  msg += " (commands: " + names + "; see skippy-model-package --help)";
  return msg;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace skippy::cli;
  // No untrusted string drives the terminal: stdout and stderr
  // escape control code points.
  const TerminalSafeOutput terminal_safe;
  // --json anywhere on the line: failures are reported as JSON too, even
  // when the flags themselves do not parse.
  bool json = false;
  for (int i = 1; i < argc; ++i) json = json || std::string_view(argv[i]) == "--json";
  CLI::App app{"skippy-model-package: layer packages for GGUF models (Layer Package Repository spec): writes, reads and "
               "converts package schemas 1 and 2",
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
      register_sign_package(app),
      register_convert_package(app),
      register_restamp_package(app),
      register_catalog_entry(app),
  };

  // "--json" before the command belongs to the command: move it behind.
  std::vector<char*> args(argv, argv + argc);
  const int cmd_at = command_index(argc, argv);
  if (cmd_at > 1) {
    const auto first = args.begin() + 1, cmd = args.begin() + cmd_at;
    const auto moved = std::stable_partition(first, cmd, [](char* a) { return std::string_view(a) != "--json"; });
    std::rotate(moved, cmd, cmd + 1);  // [other options] command [--json...]
  }
  // An unknown command: name it, and the nearest one.
  if (cmd_at > 0) {
    if (const auto msg = unknown_command(app, argv[cmd_at])) return report_error(skippy::ErrorKind::kUsage, *msg, json);
  }
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One format for every usage error: "error: ...", exit 2 (and the JSON with --json).
    const int code = report_error(skippy::ErrorKind::kUsage, e.what(), json);
    if (!json) std::cerr << "Run with --help for more information.\n";
    return code;
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
