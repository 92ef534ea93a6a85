// The source's file layout as a schema 2 package carries it (skippy/package.h
// SourceLayout): the carrier's KVs (less its locator keys) and its tensor
// directory. The root and the carrier have no room for more (the reference
// refuses fields it does not declare): a split source's shard boundaries and
// split.* keys are not carried, and the directory's order is the source's
// only when the writer kept it so.
#include "format/schema2/reader.h"

#include "skippy/error.h"
#include "skippy/gguf.h"
#include "skippy/package_catalog.h"

namespace skippy::schema2 {

SourceLayout source_layout_v2(const PackageRootV2& root, const PackageCatalog& cat) {
  SourceLayout out;
  if (!cat.carrier_file) throw Error(ErrorKind::kUsage, "source_layout: the carrier was not read into the catalog");
  if (root.source_model.files.size() != 1) {
    out.missing = "the shard boundaries and split.* keys of the source's " +
                  std::to_string(root.source_model.files.size()) +
                  " files (package schema 2's carrier lists their tensors as one directory and drops split.*; "
                  "package schema 1, write-package's default, records them)";
    return out;
  }
  const GgufFile& g = *cat.carrier_file;
  SourceLayout::File file;
  for (const auto& kv : g.kvs()) {
    if (!cat.bookkeeping_key || !cat.bookkeeping_key(kv.key)) file.kvs.push_back(&kv);
  }
  file.alignment = g.alignment();
  for (size_t i = 0; i < cat.tensors.size(); ++i) file.tensors.push_back(i);
  // The writers add general.alignment after the source's KVs when the source lacks it.
  out.last_kv_maybe_added = !file.kvs.empty() && file.kvs.back()->key == "general.alignment";
  out.files.push_back(std::move(file));
  out.assumed = "the source's tensor order is the carrier's directory order, as write-package --schema 2 writes it "
                "(the reference's writer, --layout reference and convert-package order it part by part)";
  return out;
}

}  // namespace skippy::schema2
