# The installed headers, include/skippy/<name>: the library's whole public
# API, listed one by one (nothing is installed by wildcard). Every other
# header is internal and lives beside its sources (src/<library>/*.h).
# scripts/check-layering.sh (a test) checks that this list is exactly
# include/skippy/ and that each header's leading comment states its
# thread-safety. Only what these headers declare is exported from the shared
# library (src/CMakeLists.txt).
set(SKIPPY_PUBLIC_HEADERS
  abi.h
  error.h
  gguf.h
  hub.h
  hub_publish.h
  hub_stream.h
  manifest.h
  manifest_v2.h
  materialize.h
  model_source.h
  ngram.h
  package.h
  package_catalog.h
  package_convert.h
  package_generation.h
  package_layout.h
  package_signature.h
  package_validator.h
  package_writer.h
  peer.h
  peer_identity.h
  peer_topology.h
  plan.h
  policy.h
  skippy.h
  source.h
  speculative.h
  stage.h
  stage_admission.h
  stage_view.h
  verify.h
  version.h
)
