// Xet's binary formats for the CAS stand-in (tests/hub/cas_standin.mjs), as
// hub-docs docs/xet/ (spec 1.1.0) and xet-core define them: hash strings,
// the hashes themselves, chunks, xorbs and shards. Parsers bounds-check every
// field and throw XetFormatError with what is wrong and where; the stand-in
// answers that message to the client.
//
// Hashes are 32 raw bytes (Buffers) here. Their string form (API paths, JSON)
// prints each 8-byte word as a little-endian u64 in hex (api.md "Converting
// Hashes to Strings"). The shard's sha256 metadata extension is stored the
// same way: hashToHex(field) is the file's SHA-256 in hex (xet-core builds it
// with Sha256::from_be_bytes(digest); @huggingface/hub writes the hex string
// as a hash). The hash functions are xet-core's own, from its wasm build
// vendored in @huggingface/hub (tests/js/node_modules, loaded offline): chunk
// = keyed BLAKE3 (DATA_KEY) of the chunk's bytes; xorb = the Merkle root over
// (chunk hash, length); file = that root hashed again with a zero key; term
// verification = keyed BLAKE3 (VERIFICATION_KEY) of the term's raw chunk
// hashes; the dedupe "HMAC" = keyed BLAKE3 of a chunk hash with the key.
//
// Xorb: chunks, each an 8-byte header [version 0, compressed size u24 LE,
// scheme (0 none, 1 LZ4 frame, 2 byte grouping 4 then LZ4 frame),
// uncompressed size u24 LE] and its data; optionally followed by xet-core's
// footer (XorbObjectInfo: "XETBLOB", version 1 or 0, ...) and its u32 length
// as the last 4 bytes. Uncompressed chunks are at most 128 KiB; a xorb's
// chunk bytes at most 64 MiB and 8192 chunks (the footer comes on top).
//
// Shard: 48-byte header (32-byte tag "HFRepoMetaData\0...", version u64 2,
// footer size u64: 0 or 200); file info blocks (48-byte header: file hash,
// flags u32 [1<<31 verification, 1<<30 sha256 metadata ext], entry count
// u32, 8 reserved; entries: xorb hash, flags u32, unpacked bytes u32, chunk
// start u32, end u32 exclusive; one verification entry (hash + 16 reserved)
// per entry; the metadata ext (sha256 + 16 reserved)), a bookend (32 x 0xFF,
// 16 x 0); CAS info blocks (48-byte header: xorb hash, flags u32, chunk count
// u32, unpacked bytes u32, bytes on disk u32; per chunk: hash, unpacked start
// offset u32, unpacked size u32, flags u32 [1<<31: global dedupe], u32), a
// bookend; then the 200-byte footer when the header says so (version 1,
// section offsets, lookup-table offsets (the JS client stops reading CAS info
// at the file lookup offset), the chunk-hash HMAC key at 72, creation time
// at 104, key expiry at 112, footer offset at 192).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { decodeFrame, encodeFrame, bg4Split, bg4Regroup } from "./lz4_frame.mjs";

export const KiB = 1024;
export const MiB = 1024 * KiB;
export const MAX_CHUNK_BYTES = 128 * KiB;
export const MAX_XORB_BYTES = 64 * MiB;
export const MAX_XORB_CHUNKS = 8192;
export const MAX_SHARD_BYTES = 64 * MiB;
export const CHUNK_HEADER_BYTES = 8;
export const SCHEME_NAMES = ["none", "lz4", "bg4_lz4"];
export const globalDedupFlag = 0x80000000;
const FILE_FLAG_VERIFICATION = 0x80000000;
const FILE_FLAG_METADATA_EXT = 0x40000000;
const SHARD_FOOTER_BYTES = 200;
export const SHARD_TAG = Buffer.from([
  ...Buffer.from("HFRepoMetaData"), 0, 85, 105, 103, 69, 106, 123, 129, 87, 131, 165, 189, 217, 92, 205, 209, 74, 169,
]);
const BOOKEND = Buffer.concat([Buffer.alloc(32, 0xff), Buffer.alloc(16)]);

export class XetFormatError extends Error {}
const fail = (msg) => {
  throw new XetFormatError(msg);
};

// ------------------------------------------------------------------- hashes

export function hashToHex(raw) {
  let s = "";
  for (let w = 0; w < 32; w += 8) s += Buffer.from(raw.subarray(w, w + 8)).reverse().toString("hex");
  return s;
}

export function hexToHash(hex) {
  if (typeof hex !== "string" || !/^[0-9a-f]{64}$/.test(hex)) fail(`not a 64-character lowercase hex hash: ${JSON.stringify(hex)}`);
  const out = Buffer.alloc(32);
  for (let w = 0; w < 4; w++) Buffer.from(hex.slice(16 * w, 16 * w + 16), "hex").reverse().copy(out, 8 * w);
  return out;
}

// The last 8 bytes as a little-endian u64, divisible by 1024.
export const isDedupEligibleHash = (raw) => raw[24] === 0 && (raw[25] & 3) === 0;

let wasm = null;
const vendorDir = path.join(
  path.dirname(fileURLToPath(import.meta.url)),
  "..", "js", "node_modules", "@huggingface", "hub", "src", "vendor", "xet-chunk",
);

// xet-core's wasm (Chunker and hash functions); throws when the npm tools are
// not installed (the stand-in then answers Xet requests with 501).
export async function loadXetWasm() {
  if (wasm) return wasm;
  const js = path.join(vendorDir, "chunker_wasm_bg.js");
  const b64file = path.join(vendorDir, "chunker_wasm_bg.wasm.base64.ts");
  if (!fs.existsSync(js) || !fs.existsSync(b64file)) {
    throw new Error(`xet-core's wasm is not installed (${vendorDir}); run npm ci in tests/js`);
  }
  const m = await import(js);
  const text = fs.readFileSync(b64file, "utf8");
  const b64 = /const wasmBase64 = `([^`]*)`/.exec(text)?.[1];
  if (!b64) throw new Error(`no wasm found in ${b64file}`);
  m.initSync({ module: Buffer.from(b64.replace(/\s+/g, ""), "base64") });
  wasm = m;
  return wasm;
}

const need = () => wasm ?? fail("xet-core's wasm is not loaded");

// The chunk hash of `data` (at most 128 KiB): a Chunker whose minimum chunk
// (target / 8 = 2 MiB) exceeds the data returns it as one chunk.
export function chunkHash(data) {
  const c = new (need().Chunker)(1 << 24);
  try {
    const all = [...c.add_data(data), ...c.finish()];
    if (all.length !== 1 || all[0].length !== data.length) fail("internal: the whole-data chunker cut a chunk");
    return hexToHash(all[0].hash);
  } finally {
    c.free();
  }
}

const asEntries = (chunks) => chunks.map((c) => ({ hash: hashToHex(c.hash), length: c.size }));
export const xorbHash = (chunks) => hexToHash(need().compute_xorb_hash(asEntries(chunks)));
export const fileHash = (chunks) => hexToHash(need().compute_file_hash(asEntries(chunks)));
export const verificationHash = (hashes) => hexToHash(need().compute_verification_hash(hashes.map(hashToHex)));
export const hmacHash = (hash, key) => hexToHash(need().compute_hmac(hashToHex(hash), hashToHex(key)));

// Content-defined chunking of a stream with xet-core's Chunker: feed()
// returns the chunks completed so far as {size, hash}; finish() the rest.
export function newChunker() {
  const c = new (need().Chunker)(64 * KiB);
  const conv = (list) => list.map((x) => ({ size: x.length, hash: hexToHash(x.hash) }));
  return {
    feed: (buf) => {
      const out = [];
      for (let o = 0; o < buf.length; o += MiB) out.push(...conv(c.add_data(buf.subarray(o, o + MiB))));
      return out;
    },
    finish: () => {
      const out = conv(c.finish());
      c.free();
      return out;
    },
  };
}

// ------------------------------------------------------------------- chunks

// Decodes one serialized chunk (header + data); `where` names it in errors.
export function decodeChunk(buf, where) {
  if (buf.length < CHUNK_HEADER_BYTES) fail(`${where}: truncated chunk header`);
  const version = buf[0];
  const csize = buf[1] | (buf[2] << 8) | (buf[3] << 16);
  const scheme = buf[4];
  const usize = buf[5] | (buf[6] << 8) | (buf[7] << 16);
  if (version !== 0) fail(`${where}: chunk header version ${version}, expected 0`);
  if (scheme > 2) fail(`${where}: unknown compression scheme ${scheme}`);
  if (usize === 0) fail(`${where}: empty chunk`);
  if (usize > MAX_CHUNK_BYTES) fail(`${where}: ${usize} uncompressed bytes exceed the 128 KiB chunk maximum`);
  if (buf.length !== CHUNK_HEADER_BYTES + csize) fail(`${where}: header says ${csize} data bytes, ${buf.length - CHUNK_HEADER_BYTES} present`);
  const data = buf.subarray(CHUNK_HEADER_BYTES);
  if (scheme === 0) {
    if (csize !== usize) fail(`${where}: uncompressed chunk with compressed size ${csize} != uncompressed size ${usize}`);
    return { scheme, data };
  }
  try {
    const out = decodeFrame(data, usize);
    return { scheme, data: scheme === 2 ? bg4Regroup(out) : out };
  } catch (e) {
    fail(`${where} (${SCHEME_NAMES[scheme]}): ${e.message}`);
  }
}

// The end of the chunk whose header is at `p`, without decoding it.
function chunkExtent(buf, p, where) {
  if (p + CHUNK_HEADER_BYTES > buf.length) fail(`${where}: truncated chunk header`);
  const csize = buf[p + 1] | (buf[p + 2] << 8) | (buf[p + 3] << 16);
  const end = p + CHUNK_HEADER_BYTES + csize;
  if (end > buf.length) fail(`${where}: chunk data (${csize} bytes) runs past the end of the xorb`);
  return end;
}

// Serializes `data` as a chunk. compression: "none", "lz4", "bg4_lz4" or
// "auto" (the smaller of LZ4 and BG4+LZ4 when it shrinks the chunk, judged
// on a 4 KiB sample first so incompressible data costs little).
export function encodeChunk(data, compression = "auto") {
  let scheme = 0;
  let payload = data;
  const tryScheme = (s) => {
    const z = encodeFrame(s === 2 ? bg4Split(data) : data);
    if (z.length < payload.length) {
      scheme = s;
      payload = z;
    }
  };
  if (compression === "lz4") tryScheme(1);
  else if (compression === "bg4_lz4") tryScheme(2);
  else if (compression === "auto") {
    const sample = data.subarray(0, 4 * KiB);
    const gain = (s) => sample.length - encodeFrame(s === 2 ? bg4Split(sample) : sample).length;
    const g1 = gain(1);
    const g2 = gain(2);
    if (Math.max(g1, g2) > sample.length / 20) tryScheme(g2 > g1 ? 2 : 1);
  } else if (compression !== "none") fail(`unknown compression ${compression}`);
  const n = payload.length;
  const u = data.length;
  const header = Buffer.from([0, n & 0xff, (n >> 8) & 0xff, n >> 16, scheme, u & 0xff, (u >> 8) & 0xff, u >> 16]);
  return { bytes: Buffer.concat([header, payload]), scheme };
}

// -------------------------------------------------------------------- xorbs

const IDENT = "XETBLOB";

// Parses and checks a whole serialized xorb against the hash in its URL:
// decodes every chunk, hashes it, recomputes the xorb hash, and checks the
// footer (when present) field by field. Returns {chunks: [{hash, size,
// start, end, scheme}], chunkBytes, footerBytes}.
export function verifyXorb(buf, expectHash) {
  const chunks = [];
  let p = 0;
  while (p < buf.length) {
    if (buf[p] === 0x58 && buf.toString("latin1", p, p + 7) === IDENT) break;
    const where = `chunk ${chunks.length} at byte ${p}`;
    if (chunks.length === MAX_XORB_CHUNKS) fail(`more than ${MAX_XORB_CHUNKS} chunks`);
    const end = chunkExtent(buf, p, where);
    const { scheme, data } = decodeChunk(buf.subarray(p, end), where);
    chunks.push({ hash: chunkHash(data), size: data.length, start: p, end, scheme });
    p = end;
  }
  if (!chunks.length) fail("a xorb holds at least one chunk");
  if (p > MAX_XORB_BYTES) fail(`${p} bytes of chunks exceed the 64 MiB xorb maximum`);
  const hash = xorbHash(chunks);
  if (!hash.equals(expectHash)) {
    fail(`the chunks hash to xorb ${hashToHex(hash)}, not ${hashToHex(expectHash)} (the hash in the URL)`);
  }
  if (p < buf.length) checkFooter(buf, p, chunks, hash);
  return { chunks, chunkBytes: p, footerBytes: buf.length - p };
}

function checkFooter(buf, p, chunks, hash) {
  const n = chunks.length;
  if (buf.length - p < 4 + 8) fail(`truncated footer at byte ${p}`);
  const infoLength = buf.readUInt32LE(buf.length - 4);
  if (infoLength !== buf.length - 4 - p) fail(`footer length field ${infoLength} != the ${buf.length - 4 - p} footer bytes at byte ${p}`);
  const f = buf.subarray(p, buf.length - 4);
  let q = 8;
  const take = (len, what) => {
    if (q + len > f.length) fail(`footer: truncated ${what}`);
    const v = f.subarray(q, q + len);
    q += len;
    return v;
  };
  const u32 = (what) => take(4, what).readUInt32LE(0);
  const version = f[7];
  if (version !== 0 && version !== 1) fail(`footer version ${version} is not 0 or 1`);
  if (!take(32, "xorb hash").equals(hash)) fail("footer: xorb hash differs from the chunks' hash");
  const hashes = [];
  const bounds = [];
  const unpacked = [];
  if (version === 1) {
    const hsh = take(8, "hash section ident");
    if (hsh.toString("latin1", 0, 7) !== "XBLBHSH" || hsh[7] !== 0) fail("footer: bad hash section ident or version");
    if (u32("chunk count") !== n) fail(`footer: hash section chunk count != ${n}`);
    for (let i = 0; i < n; i++) hashes.push(take(32, "chunk hashes"));
    const bnd = take(8, "boundary section ident");
    if (bnd.toString("latin1", 0, 7) !== "XBLBBND" || bnd[7] !== 1) fail("footer: bad boundary section ident or version");
    if (u32("chunk count") !== n) fail(`footer: boundary section chunk count != ${n}`);
    for (let i = 0; i < n; i++) bounds.push(u32("chunk boundaries"));
    for (let i = 0; i < n; i++) unpacked.push(u32("unpacked offsets"));
    if (u32("chunk count") !== n) fail(`footer: final chunk count != ${n}`);
    const hashesOff = u32("hash section offset");
    const boundsOff = u32("boundary section offset");
    if (boundsOff !== 40 + 8 * n || hashesOff !== 52 + 40 * n) fail("footer: wrong section offsets");
  } else {
    if (u32("chunk count") !== n) fail(`footer: chunk count != ${n}`);
    for (let i = 0; i < n; i++) bounds.push(u32("chunk boundaries"));
    for (let i = 0; i < n; i++) hashes.push(take(32, "chunk hashes"));
  }
  take(16, "reserved bytes");
  if (q !== f.length) fail(`footer: ${f.length - q} unexpected bytes`);
  let total = 0;
  for (let i = 0; i < n; i++) {
    total += chunks[i].size;
    if (!hashes[i].equals(chunks[i].hash)) fail(`footer: chunk ${i}'s hash differs from its data's`);
    if (bounds[i] !== chunks[i].end) fail(`footer: chunk ${i} ends at ${bounds[i]}, not ${chunks[i].end}`);
    if (version === 1 && unpacked[i] !== total) fail(`footer: chunk ${i}'s unpacked end is ${unpacked[i]}, not ${total}`);
  }
}

function u32le(v) {
  const b = Buffer.allocUnsafe(4);
  b.writeUInt32LE(v >>> 0);
  return b;
}

// xet-core's version 1 footer for these chunks ({hash, size, end}), with its
// trailing u32 length.
export function buildXorbFooter(chunks, hash) {
  const n = chunks.length;
  const parts = [Buffer.from(IDENT + "\x01", "latin1"), hash, Buffer.from("XBLBHSH\x00", "latin1"), u32le(n)];
  for (const c of chunks) parts.push(c.hash);
  parts.push(Buffer.from("XBLBBND\x01", "latin1"), u32le(n));
  for (const c of chunks) parts.push(u32le(c.end));
  let total = 0;
  for (const c of chunks) parts.push(u32le((total += c.size)));
  parts.push(u32le(n), u32le(52 + 40 * n), u32le(40 + 8 * n), Buffer.alloc(16));
  const info = Buffer.concat(parts);
  return Buffer.concat([info, u32le(info.length)]);
}

// ------------------------------------------------------------------- shards

// Parses a shard. Returns {files: [{hash, flags, terms: [{xorb, size, start,
// end}], verification: [hash] | null, sha256: Buffer | null}], xorbs: [{hash,
// flags, size, onDisk, chunks: [{hash, offset, size, flags}]}], footer: null
// | {hmacKey, created, expiry}}.
export function parseShard(buf) {
  if (buf.length > MAX_SHARD_BYTES) fail(`${buf.length} bytes exceed the 64 MiB shard maximum`);
  if (buf.length < 48) fail(`${buf.length} bytes are too few for a shard header`);
  if (!buf.subarray(0, 32).equals(SHARD_TAG)) fail("the header tag is not the MDB shard tag");
  const version = buf.readBigUInt64LE(32);
  if (version !== 2n) fail(`shard header version ${version}, expected 2`);
  const footerSize = Number(buf.readBigUInt64LE(40));
  if (footerSize !== 0 && footerSize !== SHARD_FOOTER_BYTES) fail(`footer size ${footerSize} is neither 0 nor 200`);
  let p = 48;
  const take = (what) => {
    if (p + 48 > buf.length) fail(`truncated ${what} at byte ${p}`);
    const v = buf.subarray(p, p + 48);
    p += 48;
    return v;
  };
  const isBookend = (e) => e.subarray(0, 32).equals(BOOKEND.subarray(0, 32));
  const files = [];
  for (;;) {
    const h = take("file info header");
    if (isBookend(h)) {
      if (!h.equals(BOOKEND)) fail(`file info bookend at byte ${p - 48} has non-zero trailing bytes`);
      break;
    }
    const where = `file info ${files.length} (at byte ${p - 48})`;
    const flags = h.readUInt32LE(32);
    const n = h.readUInt32LE(36);
    if (flags & ~(FILE_FLAG_VERIFICATION | FILE_FLAG_METADATA_EXT)) fail(`${where}: unknown flags 0x${flags.toString(16)}`);
    if (n > (buf.length - p) / 48) fail(`${where}: ${n} entries do not fit in the shard`);
    const file = { hash: Buffer.from(h.subarray(0, 32)), flags, terms: [], verification: null, sha256: null };
    for (let i = 0; i < n; i++) {
      const e = take(`${where} entry ${i}`);
      const term = { xorb: Buffer.from(e.subarray(0, 32)), size: e.readUInt32LE(36), start: e.readUInt32LE(40), end: e.readUInt32LE(44) };
      if (term.start >= term.end) fail(`${where} entry ${i}: empty chunk range [${term.start}, ${term.end})`);
      file.terms.push(term);
    }
    if (flags & FILE_FLAG_VERIFICATION) {
      file.verification = [];
      for (let i = 0; i < n; i++) file.verification.push(Buffer.from(take(`${where} verification ${i}`).subarray(0, 32)));
    }
    if (flags & FILE_FLAG_METADATA_EXT) file.sha256 = Buffer.from(take(`${where} metadata ext`).subarray(0, 32));
    files.push(file);
  }
  const casStart = p;
  const xorbs = [];
  for (;;) {
    const h = take("CAS info header");
    if (isBookend(h)) {
      if (!h.equals(BOOKEND)) fail(`CAS info bookend at byte ${p - 48} has non-zero trailing bytes`);
      break;
    }
    const where = `CAS info ${xorbs.length} (at byte ${p - 48})`;
    const n = h.readUInt32LE(36);
    if (n > (buf.length - p) / 48) fail(`${where}: ${n} chunks do not fit in the shard`);
    const x = { hash: Buffer.from(h.subarray(0, 32)), flags: h.readUInt32LE(32), size: h.readUInt32LE(40), onDisk: h.readUInt32LE(44), chunks: [] };
    for (let i = 0; i < n; i++) {
      const e = take(`${where} chunk ${i}`);
      x.chunks.push({ hash: Buffer.from(e.subarray(0, 32)), offset: e.readUInt32LE(32), size: e.readUInt32LE(36), flags: e.readUInt32LE(40) });
    }
    xorbs.push(x);
  }
  let footer = null;
  if (footerSize === 0) {
    if (p !== buf.length) fail(`${buf.length - p} bytes after the CAS info bookend of a shard without footer`);
  } else {
    if (buf.length - p !== SHARD_FOOTER_BYTES) fail(`the footer should be the last 200 bytes, found ${buf.length - p} after the CAS info bookend`);
    const f = buf.subarray(p);
    const u64 = (o) => Number(f.readBigUInt64LE(o));
    if (u64(0) !== 1) fail(`shard footer version ${u64(0)}, expected 1`);
    if (u64(8) !== 48 || u64(16) !== casStart || u64(192) !== p) fail("shard footer offsets do not match the sections");
    footer = { hmacKey: Buffer.from(f.subarray(72, 104)), created: u64(104), expiry: f.readBigUInt64LE(112) };
  }
  return { files, xorbs, footer };
}

// Serializes a shard: files as parseShard returns them (verification and
// sha256 optional), xorbs likewise; footer: null (what uploads send) or
// {hmacKey, expiry} (what dedupe answers carry).
export function buildShard({ files = [], xorbs = [], footer = null }) {
  const parts = [];
  const head = Buffer.alloc(48);
  SHARD_TAG.copy(head, 0);
  head.writeBigUInt64LE(2n, 32);
  head.writeBigUInt64LE(BigInt(footer ? SHARD_FOOTER_BYTES : 0), 40);
  parts.push(head);
  let materialized = 0;
  for (const f of files) {
    const h = Buffer.alloc(48);
    f.hash.copy(h, 0);
    h.writeUInt32LE(((f.verification ? FILE_FLAG_VERIFICATION : 0) | (f.sha256 ? FILE_FLAG_METADATA_EXT : 0)) >>> 0, 32);
    h.writeUInt32LE(f.terms.length, 36);
    parts.push(h);
    for (const t of f.terms) {
      const e = Buffer.alloc(48);
      t.xorb.copy(e, 0);
      e.writeUInt32LE(t.size, 36);
      e.writeUInt32LE(t.start, 40);
      e.writeUInt32LE(t.end, 44);
      parts.push(e);
      materialized += t.size;
    }
    for (const v of f.verification ?? []) parts.push(Buffer.concat([v, Buffer.alloc(16)]));
    if (f.sha256) parts.push(Buffer.concat([f.sha256, Buffer.alloc(16)]));
  }
  parts.push(BOOKEND);
  const casStart = parts.reduce((s, b) => s + b.length, 0);
  let stored = 0;
  let onDisk = 0;
  for (const x of xorbs) {
    const h = Buffer.alloc(48);
    x.hash.copy(h, 0);
    h.writeUInt32LE(x.flags ?? 0, 32);
    h.writeUInt32LE(x.chunks.length, 36);
    h.writeUInt32LE(x.size, 40);
    h.writeUInt32LE(x.onDisk ?? 0, 44);
    parts.push(h);
    stored += x.size;
    onDisk += x.onDisk ?? 0;
    for (const c of x.chunks) {
      const e = Buffer.alloc(48);
      c.hash.copy(e, 0);
      e.writeUInt32LE(c.offset, 32);
      e.writeUInt32LE(c.size, 36);
      e.writeUInt32LE((c.flags ?? 0) >>> 0, 40);
      parts.push(e);
    }
  }
  parts.push(BOOKEND);
  if (footer) {
    const footerAt = parts.reduce((s, b) => s + b.length, 0);
    const f = Buffer.alloc(SHARD_FOOTER_BYTES);
    const put = (o, v) => f.writeBigUInt64LE(BigInt(v), o);
    put(0, 1);
    put(8, 48);
    put(16, casStart);
    for (const o of [24, 40, 56]) put(o, footerAt); // lookup tables: none (xet-core points them at the footer)
    footer.hmacKey.copy(f, 72);
    put(104, Math.floor(Date.now() / 1000));
    put(112, footer.expiry);
    put(168, onDisk);
    put(176, materialized);
    put(184, stored);
    put(192, footerAt);
    parts.push(f);
  }
  return Buffer.concat(parts);
}
