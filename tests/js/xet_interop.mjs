#!/usr/bin/env node
// The official JS client (@huggingface/hub, pinned in package.json), which
// speaks Xet, against the Hub stand-in's Xet CAS (tests/hub/cas_standin.mjs):
// proof that the stand-in accepts what a real client uploads and serves what
// a real client downloads, and that its refusals and lies work. The C++ test
// tests/xet_standin_test.cpp starts the stand-in and runs this.
//
//   node xet_interop.mjs --endpoint URL --workdir DIR [--token hf_test]
//     -> one JSON document {"checks": [...], "figures": {...}} on stdout;
//        exit 1 with the failed check on stderr.
//
// What it does, in order (files are written under DIR, so put DIR in /tmp):
//  1. uploadFiles() of three files (5 KB; 3 MiB of float32 noise, text and
//     random bytes; 66 MiB random: more than one xorb) to a new repo: the
//     client is answered "xet" by the LFS batch, chunks, compresses (lz4js:
//     LZ4 and byte-grouping-4 chunks), uploads xorbs and a shard, commits
//     lfsFile lines; the stand-in must have decoded every chunk and
//     registered every file.
//  2. A second repo gets files overlapping the first (a 24 MiB prefix of the
//     big one plus new bytes; two far-apart slices of it around new bytes):
//     the client's global dedupe query must hit and it must upload only the
//     new bytes (plus the chunks around the seams).
//  3. downloadFile() (XetBlob: file info, read token, v2 reconstruction,
//     signed xorb ranges, multipart/byteranges where a xorb is needed in two
//     places) and ranged Blob slices return the same bytes; so does the
//     resolve path (the bridge), whole and ranged.
//  4. The v1 endpoints agree with v2; a shard re-posted to /v2/shards
//     streams NDJSON ending in a result.
//  5. Tampered copies of the client's own xorbs and shards are refused with
//     a reason; tokens: read scope on a write route 403, expired 401.
//  6. Injected faults surface in the client: a refused shard fails the
//     upload (nothing committed), lying terms fail the download, a storage
//     refusing multi-range fails it unless the CAS stops asking for it.
//  7. A model published Xet-backed from the admin API downloads through
//     XetBlob (lz4js decodes the stand-in's own LZ4 frames) and its chunks
//     are in the global dedupe index; with Xet off the client falls back to
//     LFS.
import { createHash } from "node:crypto";
import { mkdirSync, openAsBlob, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createRepo, downloadFile, uploadFiles } from "@huggingface/hub";

for (const k of ["log", "info", "debug", "warn"]) console[k] = (...a) => console.error(...a);

const MiB = 1024 * 1024;
const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
const { endpoint, workdir } = args;
const token = args.token ?? "hf_test";
if (!endpoint || !workdir) {
  console.error("usage: xet_interop.mjs --endpoint URL --workdir DIR [--token T]");
  process.exit(2);
}
mkdirSync(workdir, { recursive: true });

const checks = [];
const figures = {};
function check(ok, what) {
  if (!ok) throw new Error(`check failed: ${what}`);
  checks.push(what);
}
const sha256 = (b) => createHash("sha256").update(b).digest("hex");
const t0 = Date.now();
const lap = (name) => {
  figures[`${name}_ms`] = Date.now() - t0;
  console.error(`xet_interop: ${name} done at ${figures[`${name}_ms`]} ms`);
};

async function admin(method, path, body) {
  const r = await fetch(endpoint + path, { method, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${path}: HTTP ${r.status} ${text}`);
  return JSON.parse(text);
}
const stats = () => admin("GET", "/_admin/xet");
const log = () => admin("GET", "/_admin/log");

// Deterministic bytes: xorshift128+ (seeded), float32 noise, text.
function randomBytes(n, seed) {
  const out = Buffer.allocUnsafe(n);
  let a = BigInt(seed) * 0x9e3779b97f4a7c15n + 1n;
  let b = a ^ 0x5deece66dn;
  const M = (1n << 64n) - 1n;
  for (let i = 0; i < n; i += 8) {
    let x = a;
    const y = b;
    a = y;
    x = (x ^ (x << 23n)) & M;
    b = x ^ y ^ (x >> 17n) ^ (y >> 26n);
    const v = (b + y) & M;
    for (let k = 0; k < 8 && i + k < n; k++) out[i + k] = Number((v >> BigInt(8 * k)) & 0xffn);
  }
  return out;
}
function fastRandom(n, seed) {
  // 64 KiB of seeded randomness, each block varied: cheap and chunk-unique.
  const base = randomBytes(64 * 1024, seed);
  const out = Buffer.allocUnsafe(n);
  for (let off = 0, blk = 0; off < n; off += base.length, blk++) {
    const piece = out.subarray(off, Math.min(n, off + base.length));
    base.copy(piece, 0, 0, piece.length);
    piece.writeUInt32LE(blk ^ (seed << 20), 0);
    for (let k = 4; k + 4 <= piece.length; k += 4096) piece.writeUInt32LE((k * 2654435761 + blk * 40503 + seed) >>> 0, k);
  }
  return out;
}
function floats(n, seed) {
  const r = randomBytes(n, seed);
  const out = Buffer.allocUnsafe(n - (n % 4));
  for (let i = 0; i + 4 <= out.length; i += 4) out.writeFloatLE((r.readUInt16LE(i) - 32768) / 1e6, i);
  return out;
}
const text = (n) => Buffer.from("the quick brown fox jumps over the lazy dog; ".repeat(Math.ceil(n / 45))).subarray(0, n);

function writeFiles(dir, files) {
  mkdirSync(join(workdir, dir), { recursive: true });
  for (const [name, data] of Object.entries(files)) writeFileSync(join(workdir, dir, name), data);
}
async function upload(repo, dir, files, opts = {}) {
  writeFiles(dir, files);
  const list = [];
  for (const name of Object.keys(files)) list.push({ path: name, content: await openAsBlob(join(workdir, dir, name)) });
  return uploadFiles({ repo, accessToken: token, hubUrl: endpoint, files: list, ...opts });
}
async function treeOf(repo) {
  const r = await fetch(`${endpoint}/api/models/${repo}/tree/main`, { headers: { Authorization: `Bearer ${token}` } });
  return Object.fromEntries((await r.json()).map((e) => [e.path, e]));
}
const dl = async (repo, path, opts = {}) => {
  const blob = await downloadFile({ repo, path, hubUrl: endpoint, accessToken: token, ...opts });
  return { blob, bytes: async () => Buffer.from(await blob.arrayBuffer()) };
};
async function rejects(promise, what) {
  try {
    await promise;
  } catch (e) {
    checks.push(`${what} (${String(e.message).slice(0, 120)})`);
    return e;
  }
  throw new Error(`check failed: ${what}: it succeeded`);
}

// Every xorb and shard body the client sends, kept for the tampering checks.
const sent = { xorbs: [], shards: [] };
const recordingFetch = async (url, init) => {
  const u = String(url);
  if (init?.method === "POST" && init.body && (u.includes("/v1/xorbs/") || u.endsWith("/v1/shards"))) {
    const body = Buffer.from(init.body instanceof Uint8Array ? init.body : await new Response(init.body).arrayBuffer());
    (u.includes("/v1/xorbs/") ? sent.xorbs : sent.shards).push({ url: u, body });
  }
  return fetch(url, init);
};

// ------------------------------------------------------------------ 1. upload
await admin("DELETE", "/_admin/xet");
await createRepo({ repo: "org/xet-a", accessToken: token, hubUrl: endpoint });
const big = fastRandom(66 * MiB, 1);
const filesA = {
  "small.gguf": randomBytes(5000, 2),
  "mixed.gguf": Buffer.concat([floats(MiB, 3), text(MiB), randomBytes(MiB, 4)]),
  "big.gguf": big,
};
await upload("org/xet-a", "a", filesA, { fetch: recordingFetch });
lap("upload_a");
let st = await stats();
const stored = st.xorbs.filter((x) => x.status === "stored");
check(stored.length >= 3, `upload 1: ${stored.length} xorbs stored (the 66 MiB file needs two)`);
check(st.xorbs.every((x) => x.status !== "refused"), "upload 1: no xorb refused");
check(st.shards.length >= 1 && st.shards.every((s) => s.status === "registered"), "upload 1: every shard registered");
check(st.chunk_schemes.lz4 > 0 && st.chunk_schemes.bg4_lz4 > 0 && st.chunk_schemes.none > 0,
  `upload 1: chunks of every scheme decoded (${JSON.stringify(st.chunk_schemes)})`);
const sizeA = Object.values(filesA).reduce((n, b) => n + b.length, 0);
figures.upload_a_bytes = sizeA;
figures.upload_a_xorb_bytes = st.bytes.xorb_upload;
check(st.bytes.xorb_upload < sizeA, "upload 1: compressed xorbs are smaller than the files");
check(st.bytes.lfs_upload === 0, "upload 1: nothing went through LFS");
check(st.sessions.length > 0, "upload 1: the client sent the batch's X-Xet-Session-Id");
let tree = await treeOf("org/xet-a");
for (const [name, data] of Object.entries(filesA)) {
  check(tree[name]?.lfs?.oid === sha256(data) && /^[0-9a-f]{64}$/.test(tree[name]?.xetHash ?? ""),
    `upload 1: ${name} committed as an LFS file with its sha256 and a xetHash`);
}

// -------------------------------------------------------------- 2. dedupe
await admin("DELETE", "/_admin/xet");
await createRepo({ repo: "org/xet-b", accessToken: token, hubUrl: endpoint });
const filesB = {
  "overlap.gguf": Buffer.concat([big.subarray(0, 24 * MiB), randomBytes(MiB, 5)]),
  "splice.gguf": Buffer.concat([big.subarray(0, 8 * MiB), randomBytes(2 * MiB, 6), big.subarray(30 * MiB, 38 * MiB)]),
};
await upload("org/xet-b", "b", filesB);
lap("upload_b");
st = await stats();
const sizeB = Object.values(filesB).reduce((n, b) => n + b.length, 0);
figures.upload_b_bytes = sizeB;
figures.upload_b_xorb_bytes = st.bytes.xorb_upload;
figures.upload_b_dedupe_queries = st.dedupe_queries.length;
check(st.dedupe_queries.some((q) => q.found), "upload 2: a global dedupe query found the first upload's chunks");
check(st.bytes.xorb_upload < 4 * MiB, `upload 2: ${st.bytes.xorb_upload} xorb bytes for ${sizeB} bytes of files (3 MiB new)`);
check(st.shards.every((s) => s.status === "registered"), "upload 2: shards registered");

// ------------------------------------------------------------ 3. download
await admin("DELETE", "/_admin/log");
for (const [repo, name, data] of [["org/xet-b", "splice.gguf", filesB["splice.gguf"]], ["org/xet-a", "big.gguf", big],
  ["org/xet-a", "small.gguf", filesA["small.gguf"]], ["org/xet-a", "mixed.gguf", filesA["mixed.gguf"]]]) {
  const { blob, bytes } = await dl(repo, name);
  check(blob.constructor.name === "XetBlob", `download: ${name} comes through XetBlob`);
  check(sha256(await bytes()) === sha256(data), `download: ${name} through Xet equals what was uploaded`);
}
lap("download");
let entries = await log();
const multi = entries.filter((e) => e.listener === "storage" && e.path.startsWith("/xorbs/") && (e.range ?? "").includes(","));
check(multi.length > 0 && multi.every((e) => e.status === 206), "download: a xorb needed in two places came as one multi-range 206");
check(entries.some((e) => e.listener === "cas" && e.path.startsWith("/v2/reconstructions/")), "download: the v2 reconstruction was used");
{
  const { blob } = await dl("org/xet-a", "big.gguf");
  for (const [a, b] of [[12345, 12445], [64 * MiB - 10, 64 * MiB + 10], [big.length - 5, big.length], [0, 1], [5 * MiB + 1, 9 * MiB + 3]]) {
    const got = Buffer.from(await blob.slice(a, b).arrayBuffer());
    check(got.equals(big.subarray(a, b)), `ranged read [${a}, ${b}) of big.gguf`);
  }
}
for (const xet of [false]) {
  const { blob, bytes } = await dl("org/xet-b", "overlap.gguf", { xet });
  check(blob.constructor.name !== "XetBlob" && sha256(await bytes()) === sha256(filesB["overlap.gguf"]), "download with xet: false (the resolve path) equals");
}
{
  const r = await fetch(`${endpoint}/org/xet-b/resolve/main/splice.gguf`, { headers: { Authorization: `Bearer ${token}` } });
  check(r.ok && sha256(Buffer.from(await r.arrayBuffer())) === sha256(filesB["splice.gguf"]), "bridge: the resolve redirect serves the Xet-backed file");
  const head = await fetch(`${endpoint}/org/xet-b/resolve/main/splice.gguf`, { method: "HEAD", redirect: "manual" });
  check(head.status === 302 && head.headers.get("x-xet-hash") && /rel="xet-auth"/.test(head.headers.get("link") ?? ""),
    "resolve HEAD: 302 with X-Xet-Hash and the xet-auth link");
  const ranged = await fetch(head.headers.get("location"), { headers: { Range: "bytes=8388000-8389000" } });
  check(ranged.status === 206 && Buffer.from(await ranged.arrayBuffer()).equals(filesB["splice.gguf"].subarray(8388000, 8389001)),
    "bridge: a ranged read across a seam of the spliced file");
}
lap("resolve");

// ------------------------------------------------------------------ 4. v1, v2
const writeTok = await (await fetch(`${endpoint}/api/models/org/xet-a/xet-write-token/main`, { headers: { Authorization: `Bearer ${token}` } })).json();
const readTok = await (await fetch(`${endpoint}/api/models/org/xet-a/xet-read-token/main`)).json();
const cas = writeTok.casUrl;
const W = { Authorization: `Bearer ${writeTok.accessToken}` };
const R = { Authorization: `Bearer ${readTok.accessToken}` };
{
  const id = (await treeOf("org/xet-b"))["splice.gguf"].xetHash;
  const v2 = await (await fetch(`${cas}/v2/reconstructions/${id}`, { headers: R })).json();
  const v1 = await (await fetch(`${cas}/v1/reconstructions/${id}`, { headers: R })).json();
  check(JSON.stringify(v1.terms) === JSON.stringify(v2.terms), "v1 and v2 reconstructions have the same terms");
  for (const [x, list] of Object.entries(v2.xorbs)) {
    const v1ranges = v1.fetch_info[x].map((f) => JSON.stringify([f.range, f.url_range]));
    const v2ranges = list.flatMap((e) => e.ranges.map((r) => JSON.stringify([r.chunks, r.bytes])));
    check(JSON.stringify(v1ranges) === JSON.stringify(v2ranges), `v1 fetch_info matches v2 ranges for xorb ${x.slice(0, 8)}`);
    const f = v1.fetch_info[x][0];
    const r = await fetch(f.url, { headers: { Range: `bytes=${f.url_range.start}-${f.url_range.end}` } });
    check(r.status === 206 && Number(r.headers.get("content-length")) === f.url_range.end - f.url_range.start + 1, "a v1 fetch_info URL serves its range");
  }
  const part = await (await fetch(`${cas}/v2/reconstructions/${id}`, { headers: { ...R, Range: "bytes=9000000-9100000" } })).json();
  check(part.offset_into_first_range > 0 && part.terms.length >= 1, "a ranged v2 reconstruction starts inside its first term");
  check((await fetch(`${cas}/v2/reconstructions/${id}`, { headers: { ...R, Range: `bytes=${filesB["splice.gguf"].length}-` } })).status === 416,
    "a range starting at the end is 416");
  const r2 = await fetch(`${cas}/v2/shards`, { method: "POST", headers: W, body: sent.shards[0].body });
  const events = (await r2.text()).trim().split("\n").map((l) => JSON.parse(l));
  check(r2.status === 200 && r2.headers.get("content-type") === "application/x-ndjson" && events.at(-1).type === "result",
    "/v2/shards streams NDJSON ending in a result");
}

// --------------------------------------------------------------- 5. refusals
async function refused(path, body, headers, status, needle, what) {
  const r = await fetch(cas + path, { method: "POST", headers, body });
  const t = await r.text();
  check(r.status === status && t.includes(needle), `${what}: ${status} mentioning "${needle}" (got ${r.status} ${t.slice(0, 160)})`);
  return t;
}
{
  // A stored hash is answered without looking at the body, so tampered
  // copies go to fresh hashes (what a client with a hashing bug would send).
  const x = sent.xorbs.find((e) => e.body.length > 200000);
  const path = new URL(x.url).pathname;
  const fresh = (d) => path.replace(/[0-9a-f]{64}$/, String(d).repeat(64));
  const chunkOf = (body, scheme) => {
    for (let p = 0; p + 8 <= body.length; p += 8 + (body[p + 1] | (body[p + 2] << 8) | (body[p + 3] << 16))) if (body[p + 4] === scheme) return p;
    return -1;
  };
  const tampered = Buffer.from(x.body);
  tampered[chunkOf(x.body, 0) + 100] ^= 1; // inside an uncompressed chunk's data
  await refused(fresh(0), tampered, W, 400, "the hash in the URL", "a xorb with a flipped data byte");
  await refused(fresh(1), x.body.subarray(0, 100000), W, 400, "runs past the end", "a truncated xorb");
  const badVersion = Buffer.from(x.body);
  badVersion[0] = 1;
  await refused(fresh(2), badVersion, W, 400, "chunk 0 at byte 0: chunk header version 1", "a chunk header of another version");
  const packed = sent.xorbs.map((e) => e.body).find((b) => chunkOf(b, 1) >= 0);
  const badFrame = Buffer.from(packed);
  badFrame[chunkOf(packed, 1) + 8] ^= 0xff; // an LZ4 chunk's frame magic number
  await refused(fresh(3), badFrame, W, 400, "bad magic number", "a chunk whose LZ4 frame is damaged");
  await refused(path, x.body, R, 403, "read scope", "a read token on a xorb upload");
  await refused(path.replace("/default/", "/other/"), x.body, W, 400, "bad xorb key", "an unknown prefix");
  const ok = await fetch(cas + path.replace("/default/", "/default-merkledb/"), { method: "POST", headers: W, body: x.body });
  check(ok.status === 200 && (await ok.json()).was_inserted === false, "the default-merkledb prefix is accepted (already stored)");

  const shard = sent.shards[0].body;
  const fileAt = 48; // first file info header
  const nTerms = shard.readUInt32LE(fileAt + 36);
  const shaAt = fileAt + 48 + nTerms * 96;
  const badSha = Buffer.from(shard);
  badSha[shaAt] ^= 1;
  await refused("/v1/shards", badSha, W, 400, "SHA-256", "a shard whose sha256 extension is wrong");
  const badVer = Buffer.from(shard);
  badVer[fileAt + 48 + nTerms * 48] ^= 1;
  await refused("/v1/shards", badVer, W, 400, "verification hash", "a shard with a wrong verification entry");
  const badXorb = Buffer.from(shard);
  badXorb[fileAt + 48] ^= 1;
  await refused("/v1/shards", badXorb, W, 400, "never uploaded", "a shard naming a xorb never uploaded");
  await refused("/v1/shards", shard.subarray(0, shard.length - 7), W, 400, "shard", "a truncated shard");
}
lap("refusals");

// ------------------------------------------------------------------ 6. faults
await createRepo({ repo: "org/xet-c", accessToken: token, hubUrl: endpoint });
const headBefore = (await (await fetch(`${endpoint}/api/models/org/xet-c`)).json()).sha;
await admin("POST", "/_admin/faults", { kind: "xet_refuse_shard", match: "/shards", message: "no thanks", times: -1 });
await rejects(upload("org/xet-c", "c", { "refused.gguf": randomBytes(300000, 7) }), "a refused shard fails the upload");
await admin("DELETE", "/_admin/faults");
check((await (await fetch(`${endpoint}/api/models/org/xet-c`)).json()).sha === headBefore, "a refused shard commits nothing");

await admin("POST", "/_admin/faults", { kind: "xet_bad_terms", mode: "unpacked_length", match: "/reconstructions/", times: -1 });
await rejects((await dl("org/xet-a", "mixed.gguf")).bytes(), "a term whose unpacked length lies fails the download");
await admin("DELETE", "/_admin/faults");
await admin("POST", "/_admin/faults", { kind: "xet_refuse_multirange", match: "/xorbs/", times: -1 });
await rejects((await dl("org/xet-b", "splice.gguf")).bytes(), "storage refusing multi-range fails a multi-range download");
await admin("POST", "/_admin/config", { xet_multi_range: false });
await admin("DELETE", "/_admin/log");
check(sha256(await (await dl("org/xet-b", "splice.gguf")).bytes()) === sha256(filesB["splice.gguf"]),
  "with xet_multi_range off, the same download succeeds one range per request");
entries = await log();
check(!entries.some((e) => e.path.startsWith("/xorbs/") && (e.range ?? "").includes(",")), "with xet_multi_range off, no request asks for two ranges");
await admin("POST", "/_admin/config", { xet_multi_range: true });
await admin("DELETE", "/_admin/faults");
lap("faults");

// -------------------------------------------------- 7. publish, LFS fallback
const pubModel = Buffer.concat([floats(2 * MiB, 8), text(MiB), randomBytes(3 * MiB, 9)]);
writeFiles("pub", { "model.gguf": pubModel });
await admin("POST", "/_admin/repos", { repo: "org/pub", dir: join(workdir, "pub"), xet: true });
const store = await admin("GET", "/_admin/xet/store");
const pubFile = store.files.find((f) => f.sha256 === sha256(pubModel));
const pubXorb = store.xorbs.find((x) => x.hash === pubFile.terms[0].xorb);
check(pubXorb.schemes.lz4 + pubXorb.schemes.bg4_lz4 > 0, `the published xorb holds compressed chunks (${JSON.stringify(pubXorb.schemes)})`);
check(sha256(await (await dl("org/pub", "model.gguf")).bytes()) === sha256(pubModel), "a model published Xet-backed downloads through XetBlob");
await admin("DELETE", "/_admin/xet");
await createRepo({ repo: "org/xet-d", accessToken: token, hubUrl: endpoint });
await upload("org/xet-d", "d", { "derived.gguf": Buffer.concat([pubModel.subarray(0, 5 * MiB), randomBytes(MiB, 10)]) });
st = await stats();
check(st.dedupe_queries.some((q) => q.found) && st.bytes.xorb_upload < 2 * MiB,
  `an upload of the published model's bytes dedupes against them (${st.bytes.xorb_upload} xorb bytes for 6 MiB)`);

await admin("POST", "/_admin/config", { xet_enabled: false });
await admin("DELETE", "/_admin/xet");
await createRepo({ repo: "org/xet-e", accessToken: token, hubUrl: endpoint });
const lfsFile = randomBytes(2 * MiB, 11);
await upload("org/xet-e", "e", { "lfs.gguf": lfsFile });
st = await stats();
check(st.bytes.lfs_upload >= lfsFile.length && st.xorbs.length === 0, "with Xet off, the client falls back to LFS");
const e = await fetch(`${endpoint}/org/xet-e/resolve/main/lfs.gguf`, { method: "HEAD", redirect: "manual" });
check(e.status === 302 && !e.headers.get("x-xet-hash"), "with Xet off, resolve has no X-Xet-Hash");
await admin("POST", "/_admin/config", { xet_enabled: true });

// Last: the client caches read tokens until their exp, so expiring them
// server-side would fail its later downloads.
await admin("POST", "/_admin/xet/expire-tokens");
await refused("/v1/shards", sent.shards[0].body, W, 401, "expired", "an expired token");
lap("total");

process.stdout.write(JSON.stringify({ checks, figures }) + "\n");
