#!/usr/bin/env node
// What huggingface.js (@huggingface/hub, pinned in package.json) uploads
// through Xet for some files, captured offline: its commit() runs against an
// in-process fake of the Hub and the CAS (its `fetch` parameter), which
// answers the preupload and LFS batch calls with "xet", refuses global dedupe
// queries (404), keeps every xorb and shard it is sent and answers the commit.
// Nothing reaches the network. The C++ tests read what it wrote with our
// xorb and shard parsers and rebuild the shard with our builder.
//
//   node xet_hfjs_upload.mjs OUT_DIR FILE...
//     writes OUT_DIR/xorb-<hash> and OUT_DIR/shard-<n>, prints
//     {"xorbs":[{"hash","path"}], "shards":[path], "files":[{"path","size"}]}
//
// The library chunks with @huggingface/xetchunk-wasm (not xet-core's rule:
// its cuts can fall below 8 KiB), so only the formats are compared, never the
// chunk boundaries. It sends xorbs without footer and shards with one.
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { basename, join } from "node:path";
import { commit } from "@huggingface/hub";

const [outDir, ...inputs] = process.argv.slice(2);
if (!outDir || inputs.length === 0) {
  console.error("usage: node xet_hfjs_upload.mjs OUT_DIR FILE...");
  process.exit(2);
}
mkdirSync(outDir, { recursive: true });

const HUB = "http://hub.invalid";
const CAS = "http://cas.invalid";
const xorbs = [];
const shards = [];

async function bodyBytes(body) {
  if (body === undefined || body === null) return Buffer.alloc(0);
  if (typeof body === "string") return Buffer.from(body);
  if (body instanceof Uint8Array) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (body instanceof ArrayBuffer) return Buffer.from(body);
  if (typeof body.arrayBuffer === "function") return Buffer.from(await body.arrayBuffer());
  throw new Error("fake fetch: unexpected body type " + Object.prototype.toString.call(body));
}

function json(value, status = 200) {
  return new Response(JSON.stringify(value), { status, headers: { "Content-Type": "application/json" } });
}

async function fakeFetch(input, init = {}) {
  const url = typeof input === "string" ? input : input.url;
  const body = await bodyBytes(init.body);
  if (url.startsWith(HUB) && url.includes("/preupload/")) {
    const req = JSON.parse(body.toString());
    return json({ files: req.files.map((f) => ({ path: f.path, uploadMode: "lfs" })) });
  }
  if (url.startsWith(HUB) && url.includes("/info/lfs/objects/batch")) {
    const req = JSON.parse(body.toString());
    const header = {
      "X-Xet-Cas-Url": CAS,
      "X-Xet-Access-Token": "token",
      "X-Xet-Token-Expiration": String(Math.floor(Date.now() / 1000) + 3600),
      "X-Xet-Session-Id": "session",
    };
    return json({
      transfer: "xet",
      objects: req.objects.map((o) => ({ oid: o.oid, size: o.size, actions: { upload: { href: `${HUB}/xet-token`, header } } })),
    });
  }
  if (url === `${HUB}/xet-token`) {
    return json({ accessToken: "token", casUrl: CAS, exp: Math.floor(Date.now() / 1000) + 3600 });
  }
  if (url.startsWith(`${CAS}/v1/chunks/`)) return new Response("not found", { status: 404 });
  if (url.startsWith(`${CAS}/v1/xorbs/default/`)) {
    const hash = url.slice(`${CAS}/v1/xorbs/default/`.length);
    const path = join(outDir, `xorb-${hash}`);
    writeFileSync(path, body);
    xorbs.push({ hash, path });
    return json({ was_inserted: true });
  }
  if (url === `${CAS}/v1/shards`) {
    const path = join(outDir, `shard-${shards.length}`);
    writeFileSync(path, body);
    shards.push(path);
    return json({ result: 0 });
  }
  if (url.startsWith(HUB) && url.includes("/commit/")) {
    return json({ commitOid: "0".repeat(40), commitUrl: `${HUB}/org/repo/commit/${"0".repeat(40)}` });
  }
  throw new Error(`fake fetch: unexpected ${init.method ?? "GET"} ${url}`);
}

const files = inputs.map((f) => ({ path: basename(f), content: readFileSync(f) }));
await commit({
  repo: { type: "model", name: "org/repo" },
  accessToken: "hf_fake",
  hubUrl: HUB,
  fetch: fakeFetch,
  title: "xet formats",
  useXet: true,
  operations: files.map((f) => ({ operation: "addOrUpdate", path: f.path, content: new Blob([f.content]) })),
});
process.stdout.write(
  JSON.stringify({ xorbs, shards, files: files.map((f) => ({ path: f.path, size: f.content.length })) }) + "\n",
);
