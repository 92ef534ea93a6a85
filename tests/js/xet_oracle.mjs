// xet-core's own chunker and hashes, as a byte-level oracle for src/xet/: the
// wasm build of xet-core that @huggingface/hub ships under
// src/vendor/xet-chunk (hf_xet_thin_wasm; its commit is printed), loaded
// offline with initSync. (Not @huggingface/xetchunk-wasm: that one cuts below
// xet-core's 8 KiB minimum.)
//
//   node xet_oracle.mjs [--feed N] [--hmac-key HEX] FILE...
//     prints one JSON document: per file its chunks (hash, length), the xorb
//     hash and file hash over all of them, verification hashes of a few
//     chunk ranges ([0,n), [0,1), [n-1,n), [n/3, 2n/3)), and with --hmac-key
//     each chunk hash keyed with it. --feed N gives the chunker N bytes at a
//     time (default: the whole file at once).
//   node xet_oracle.mjs --merkle JSON_FILE
//     JSON_FILE holds a list of chunk lists [[{hash, length}, ...], ...]:
//     prints [{xorb_hash, file_hash}, ...], one per list.
//   node xet_oracle.mjs --bench FILE
//     chunks and hashes FILE (8 MiB reads) and prints {bytes, chunks,
//     cpu_seconds, wall_seconds}.
import { readFileSync, openSync, readSync, closeSync, fstatSync } from "node:fs";

const base = new URL("./node_modules/@huggingface/hub/src/vendor/xet-chunk/", import.meta.url);

function loadWasm() {
  const src = readFileSync(new URL("chunker_wasm_bg.wasm.base64.ts", base), "utf8");
  const b64 = src.match(/const wasmBase64 = `([^`]*)`/);
  const commit = src.match(/XET_CORE_COMMIT = "([0-9a-f]+)"/);
  if (!b64) throw new Error("chunker_wasm_bg.wasm.base64.ts: no wasmBase64 found");
  return { bytes: Buffer.from(b64[1].replace(/\s+/g, ""), "base64"), commit: commit ? commit[1] : null };
}

const wasm = loadWasm();
const xet = await import(new URL("chunker_wasm_bg.js", base));
xet.initSync({ module: wasm.bytes });

const TARGET_CHUNK_SIZE = 64 * 1024;

function chunkFile(path, feed) {
  const data = readFileSync(path);
  const chunker = new xet.Chunker(TARGET_CHUNK_SIZE);
  const chunks = [];
  const step = feed > 0 ? feed : Math.max(data.length, 1);
  for (let pos = 0; pos < data.length; pos += step) {
    for (const c of chunker.add_data(data.subarray(pos, Math.min(data.length, pos + step)))) chunks.push(c);
  }
  for (const c of chunker.finish()) chunks.push(c);
  chunker.free();
  return { size: data.length, chunks: chunks.map((c) => ({ hash: c.hash, length: c.length })) };
}

function ranges(n) {
  const out = [];
  if (n === 0) return out;
  out.push([0, n], [0, 1], [n - 1, n]);
  if (n > 2) out.push([Math.floor(n / 3), Math.floor((2 * n) / 3)]);
  return out;
}

const args = process.argv.slice(2);
let feed = 0;
let hmacKey = null;
let mode = "files";
const files = [];
for (let i = 0; i < args.length; ++i) {
  if (args[i] === "--feed") feed = Number(args[++i]);
  else if (args[i] === "--hmac-key") hmacKey = args[++i];
  else if (args[i] === "--merkle") mode = "merkle";
  else if (args[i] === "--bench") mode = "bench";
  else files.push(args[i]);
}

if (mode === "merkle") {
  const lists = JSON.parse(readFileSync(files[0], "utf8"));
  process.stdout.write(
    JSON.stringify(
      lists.map((chunks) => ({ xorb_hash: xet.compute_xorb_hash(chunks), file_hash: xet.compute_file_hash(chunks) })),
    ),
  );
} else if (mode === "bench") {
  const fd = openSync(files[0], "r");
  const size = fstatSync(fd).size;
  const buf = Buffer.allocUnsafe(8 << 20);
  const chunker = new xet.Chunker(TARGET_CHUNK_SIZE);
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  let chunks = 0;
  for (;;) {
    const n = readSync(fd, buf, 0, buf.length, null);
    if (n === 0) break;
    chunks += chunker.add_data(buf.subarray(0, n)).length;
  }
  chunks += chunker.finish().length;
  const cpu = process.cpuUsage(cpu0);
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  closeSync(fd);
  process.stdout.write(
    JSON.stringify({ bytes: size, chunks, cpu_seconds: (cpu.user + cpu.system) / 1e6, wall_seconds: wall }),
  );
} else {
  const out = { xet_core_commit: wasm.commit, files: [] };
  for (const file of files) {
    const { size, chunks } = chunkFile(file, feed);
    const hashes = chunks.map((c) => c.hash);
    const doc = {
      file,
      size,
      chunks,
      xorb_hash: xet.compute_xorb_hash(chunks),
      file_hash: xet.compute_file_hash(chunks),
      verification: ranges(chunks.length).map(([s, e]) => ({
        start: s,
        end: e,
        hash: xet.compute_verification_hash(hashes.slice(s, e)),
      })),
    };
    if (hmacKey) doc.hmac = hashes.map((h) => xet.compute_hmac(h, hmacKey));
    out.files.push(doc);
  }
  process.stdout.write(JSON.stringify(out));
}
