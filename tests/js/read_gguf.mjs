// Parses GGUF files with @huggingface/gguf (an independent reader) and prints
// one JSON document: per file, its tensors and a few metadata values, for
// the C++ tests to compare with what skippy wrote.
import { gguf } from "@huggingface/gguf";

const out = [];
for (const file of process.argv.slice(2)) {
  const { metadata, tensorInfos, tensorDataOffset } = await gguf(file, { allowLocalFile: true });
  out.push({
    file,
    version: metadata.version,
    kv_count: Number(metadata.kv_count),
    tensor_count: Number(metadata.tensor_count),
    architecture: metadata["general.architecture"] ?? null,
    role: metadata["skippy.package.role"] ?? null,
    data_offset: Number(tensorDataOffset),
    tensors: tensorInfos.map((t) => ({
      name: t.name,
      type: t.dtype,
      shape: t.shape.map((d) => Number(d)),
      offset: Number(t.offset),
    })),
  });
}
process.stdout.write(JSON.stringify(out));
