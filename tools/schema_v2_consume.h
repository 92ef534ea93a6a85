// The CLI's schema 2 consumer path that materialize takes (`materialize`
// dispatches here when open_any_for_cli found a schema 2 package: a local
// directory or hf://), and the identity fields a schema 2 report adds.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "skippy/catalog_stage.h"
#include "skippy/materialize.h"
#include "cli.h"

namespace skippy::cli {

namespace v2consume_detail {
// schema_version and package_id, added to a command's JSON document.
nlohmann::json identity(const PackageCatalog& catalog);
nlohmann::json identity(const OpenedCatalog& pkg);
}  // namespace v2consume_detail

// materialize REF --layers A..B (or --tensors N,N,... with `range` nullopt):
// the stage through materialize_catalog_stage, printed as the schema 1
// command prints it (plus schema_version, package_id). The sidecars the
// stage loads (`sidecars`: an --admission descriptor's; for a range, the
// default projector of a stage starting at layer 0) are not merged: they are
// brought (hf://), checked, and their paths reported (`projector`, the
// first; `sidecars`, all).
int materialize_schema_v2(const OpenedCatalog& pkg, std::optional<LayerRange> range, const std::vector<std::string>& tensors,
                          const MaterializeOptions& options, bool json, std::vector<CatalogPart> sidecars = {});

}  // namespace skippy::cli
