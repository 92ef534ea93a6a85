#!/usr/bin/env node
// A local stand-in for the Hugging Face Hub (huggingface.co), for the
// storage (CDN / S3) that LFS downloads are redirected to, and for the Xet
// CAS (tests/hub/cas_standin.mjs, which documents its endpoints), for tests
// and benchmarks. Node builtins only; the Xet parts load xet-core's wasm
// (hashes, chunker) from tests/js/node_modules and answer 501 without it.
//
//   node tests/hub/hub_standin.mjs
//
// Listens on three ephemeral 127.0.0.1 ports and, once all listen, prints one
// line to stdout:
//   {"endpoint":"http://127.0.0.1:P1","storage":"http://127.0.0.1:P2","cas":"http://127.0.0.1:P3"}
// It exits when stdin reaches EOF (so a crashed test never leaves it behind)
// or on SIGTERM/SIGINT.
//
// Hub listener, as huggingface_hub (Python) and @huggingface/hub (JS) see it:
//   HEAD|GET /{ns}/{name}/resolve/{rev}/{path...}
//       rev is URL-encoded (refs%2Fpr%2F1); an unencoded refs/pr/N also works.
//       It may be a full 40-hex commit, a branch or a tag (refs/heads/X and
//       refs/tags/X are accepted too).
//     LFS files (*.gguf and every file >= 1 MiB):
//       302, Location: <storage>/repos/{ns}/{name}/{sha256}?response-content-disposition=..&expires=..&sig=..
//       X-Linked-Etag: "<sha256>", X-Linked-Size, ETag: "<git oid of the LFS pointer>",
//       X-Repo-Commit. A GET carries the Express-style body "Found. Redirecting to <url>".
//     Other files: 200 (206 / 416 with Range) with the bytes,
//       ETag: "<git blob sha1>", Content-Length, Accept-Ranges, X-Repo-Commit.
//       With config resolve_cache_redirect (what huggingface.co does since
//       2025): 307 with a RELATIVE Location
//       /api/resolve-cache/models/{ns}/{name}/{commit}/{path}?<orig>=&etag=..
//       and X-Repo-Commit; that URL then answers as above.
//     Errors (JSON body {"error": msg}, X-Error-Code, X-Error-Message):
//       unknown (or private) repo: 401 RepoNotFound without a token, 404 with one
//       gated repo: 401 GatedRepo without a token, 403 GatedRepo with a wrong one
//       unknown revision: 404 RevisionNotFound ("Invalid rev id: X")
//       missing file: 404 EntryNotFound (with X-Repo-Commit, which
//         huggingface_hub uses to cache the absence under .no_exist/<commit>/)
//       config reject_unknown_tokens: a wrong token gets 401
//         "Invalid credentials in Authorization header" everywhere.
//   GET /api/models/{ns}/{name}[/revision/{rev}][?blobs=true][&expand=..]
//       {_id,id,modelId,author,sha,lastModified,createdAt,private,gated,disabled,
//        downloads,likes,tags,library_name,siblings,spaces,usedStorage}
//       siblings are [{rfilename}], plus {size,blobId,lfs:{sha256,size,pointerSize}}
//       with blobs=true (as the Hub). expand=X (repeatable) returns only _id,id and X.
//   GET /api/models/{ns}/{name}/tree/{rev}[/{path}]?recursive=true|false&expand=true|false
//       [{type:"file"|"directory",oid,size,path,lfs?:{oid,size,pointerSize},
//         lastCommit?:{id,title,date},securityFileStatus?}] (no pagination)
//   POST /api/models/{ns}/{name}/paths-info/{rev}  (JSON {paths,expand} or form
//       paths=a&paths=b&expand=true) -> the same entries for the paths that exist.
//       lastCommit is the last commit that changed the path (as on the Hub).
//   GET /api/models/{ns}/{name}/refs  -> {branches,tags,converts,pullRequests}
//   GET /api/models/{ns}/{name}/commits/{rev} -> [{id,title,message,authors,date}]
//   Every response carries X-Request-Id.
//
// Xet on the Hub side (switched per repo, or by config xet_enabled; off: no
// "xet" transfer, no Xet headers or xetHash, token routes 404 XetNotEnabled):
//   GET /api/models/{ns}/{name}/xet-read-token/{rev}   (read access; rev must resolve)
//   GET /api/models/{ns}/{name}/xet-write-token/{rev}  (a write token; any rev)
//       -> {"accessToken":"xet_...","exp":<unix s>,"casUrl":"<cas>"}, the same
//       in X-Xet-Cas-Url / X-Xet-Access-Token / X-Xet-Token-Expiration; the
//       CAS token lives config xet_token_ttl_secs.
//   LFS batch offered "xet": {"transfer":"xet","objects":[{oid,size,authenticated,
//       actions:{upload:{href:"<endpoint>/api/models/{ns}/{name}/xet-write-token/<ref or main>",
//       header:{"X-Xet-Cas-Url","X-Xet-Access-Token","X-Xet-Token-Expiration","X-Xet-Session-Id"}}}}]}
//       (objects the repo holds already: no actions).
//   A file whose bytes the CAS holds (a shard registered them with their
//   sha256, or an admin publish with "xet") is Xet-backed: the LFS batch,
//   verify and a commit's lfsFile lines accept its sha256 (in the repo whose
//   write token registered it); tree and paths-info entries carry
//   "xetHash"; resolve HEAD/GET answers the usual 302 plus
//     X-Xet-Hash: <file hash>, X-Xet-Refresh-Route: /api/models/{ns}/{name}/xet-read-token/{commit},
//     Link: <endpoint + that route>; rel="xet-auth", <cas>/v1/reconstructions/<file hash>; rel="xet-reconstruction-info"
//   and, with Accept: application/vnd.xet-fileinfo+json, 200 with that
//   Content-Type, the same headers and X-Linked-Size / X-Linked-Etag, body
//   {"hash","size","etag","refreshUrl","reconstructionUrl"}. The redirect
//   still serves it (storage rebuilds it from its xorbs, Range included).
//
// Upload side (as huggingface_hub's create_repo/create_commit and
// @huggingface/hub's createRepo/commit/uploadFiles use it). Tokens: config
// token (write) and read_token (valid for reading, 403 on every write);
// none: 401; unknown: 401 "Invalid credentials".
//   GET  /api/whoami-v2 -> {type,name,...,auth:{type,accessToken:{role:"write"|"read"}}}
//   POST /api/repos/create {name, organization, private?|visibility?, type?}
//       -> {url,name,id}; 409 when it exists. The first commit holds a .gitattributes.
//   POST /api/models/{ns}/{name}/preupload/{rev} {files:[{path,size,sample(base64)}]}
//       -> {files:[{path,uploadMode:"lfs"|"regular",shouldIgnore,oid?}],commitOid}
//       lfs: *.gguf, >= 1 MiB, or a NUL byte in the sample.
//   POST /{ns}/{name}.git/info/lfs/objects/batch {operation:"upload",transfers,objects:[{oid,size}]}
//       -> {transfer,objects:[{oid,size,actions?:{upload:{href,header?},verify:{href}}}|{error}]}
//       No actions: the repo holds that object already. With "multipart" offered
//       and size >= multipart_threshold: header {chunk_size, "00001": url, ...} and
//       href = POST {endpoint}/api/complete_multipart?uploadId&expires&sig
//       ({oid, parts:[{partNumber, etag}]}); else href = a basic PUT URL.
//   PUT  <storage>/upload/{ns}/{name}/{oid}[/part/N]?...&expires&sig  (signed,
//       400 with an Authorization header, 403 when expired; the body is hashed
//       and checked against oid and size; the ETag is opaque, as S3's)
//   POST /{ns}/{name}.git/info/lfs/objects/verify {oid,size} -> 200 | 404 | 422
//   POST /api/models/{ns}/{name}/commit/{branch}  application/x-ndjson:
//       {key:"header",value:{summary,description?,parentCommit?}} then
//       {key:"file",value:{path,content,encoding}} | {key:"lfsFile",value:{path,algo,oid,size?}}
//       | {key:"deletedFile",value:{path}} -> {success,commitOid,commitUrl,hookOutput}
//       412 "A commit has happened since..." when parentCommit is not the head;
//       422 for an lfsFile never uploaded; 400 for a regular file that must be LFS.
//       ?create_pr=1: the commit goes to a new refs/pr/N on the branch head (the
//       branch stays) and the answer adds pullRequestUrl .../discussions/N.
//   Datasets (the repo "datasets/{ns}/{name}", published through the admin API
//   under that id): POST /api/datasets/{ns}/{name}/commit/{branch}[?create_pr=1]
//       as above, and GET|HEAD /datasets/{ns}/{name}/resolve/{rev}/{path}.
//   POST /api/models/{ns}/{name}/branch/{branch} {startingPoint?} (409 when it exists)
//   POST /api/models/{ns}/{name}/tag/{rev} {tag, message?} -> {} (HfApi.create_tag; 409
//       when the tag exists, 404 RevisionNotFound; the tag then resolves like a branch)
//   Uploaded bytes live in a temporary directory ($HUB_STANDIN_DATA_DIR/...)
//   removed at exit. The log's bytes_received counts request-body bytes; the
//   cut and slow faults also apply to storage PUT and CAS POST bodies.
//
// Storage listener:
//   GET|HEAD /repos/{ns}/{name}/{sha256}?expires=<unix s>&n=<serial>&sig=<hex HMAC-SHA256(secret, path "\n" expires "\n" n)>
//     400 (S3 "InvalidArgument") when the request has an Authorization header;
//     403 (S3 "AccessDenied") for a bad signature or expires <= now, and, with
//       config url_max_uses N > 0, for every request after the first N on one
//       signed URL ("Request has expired": a link that expires mid-download;
//       each resolve signs a new URL);
//     Range bytes=N- / N-M / -N -> 206 + Content-Range, 416 when unsatisfiable;
//     200 otherwise (always, with config storage_ignore_range). Files are
//     streamed from where they were published. With config
//     storage_conn_bytes_per_sec R > 0, every storage connection sends its
//     bodies at R bytes/s at most (a CDN edge's per-connection cap: several
//     connections at once get several times R).
//   GET|HEAD /xorbs/{prefix}/{xorb}?X-Xet-Signed-Range&Expires&Signature: xorb
//     bytes for the CAS's reconstructions (see tests/hub/cas_standin.mjs).
//
// Admin API on the hub listener (never logged):
//   POST   /_admin/repos   {"repo":"ns/name","dir":"/abs","branch":"main","tags":[],
//                           "gated":false,"private":false,"message":"..."}
//          -> {"commit","files":[{path,size,sha256,lfs,oid}]}
//          gated/private are repo-wide and change only when given.
//          "xet": true | {"compression":"auto"|"none"|"lz4"|"bg4_lz4"}: the LFS
//          files are also stored Xet-backed (chunked with xet-core's chunker,
//          packed into xorbs, registered by one shard: they enter the global
//          dedupe index); each file's answer then has "xetHash" (else null).
//          "xet_enabled": true|false|null (repo-wide; null: follow config).
//   POST   /_admin/repo-settings {"repo","xet_enabled": true|false|null}
//   GET    /_admin/repos   -> {repo: {branches,tags,gated,private}}
//   GET    /_admin/log     -> [{listener,method,path,query,range,authorization,port,status,bytes_sent,bytes_received}]
//          (listener "hub", "storage" or "cas")
//          (waits up to 500 ms for requests still being answered)
//   DELETE /_admin/log
//   POST   /_admin/faults  a rule {match, listener?, method?, kind, times?=1 (-1: forever), ...}
//            kind "status":  status, headers?, body? or body_base64? (raw bytes) (answer
//                            instead of the real handler)
//            kind "cut":     after_bytes (send that many body bytes, then close the socket)
//            kind "corrupt": offset (flip the body byte at that offset)
//            kind "slow":    bytes_per_sec (throttle the body: keeps downloads in
//                            flight long enough for concurrency tests; for a
//                            storage PUT, the rate the body is read at)
//            kind "hang":    take the request and never answer (a blackhole;
//                            the socket is closed after 120 s at the latest)
//            kind "endless": answer 200 with headers? and Content-Length size (HEAD:
//                            head_size when given), then a body of spaces until the
//                            client stops reading or max_bytes (default 32 MiB) went
//                            out; then the socket is closed (a Hub lying about a size)
//          status, hang and endless rules are taken when a request arrives; cut/corrupt rules when
//          a 2xx body starts. Rules are tried in order; the first match is used.
//   GET    /_admin/faults, DELETE /_admin/faults
//   POST   /_admin/config  {"token":"hf_test","read_token":"hf_read","url_ttl_secs":3600,
//                           "reject_unknown_tokens":false,"resolve_cache_redirect":false,
//                           "multipart_threshold":16777216,"multipart_chunk_size":8388608,
//                           "storage_conn_bytes_per_sec":0,"url_max_uses":0,"storage_ignore_range":false,
//                           "storage_same_origin":false}
//                           (these are the defaults; any subset; verify_path: null, or a path
//                           "/{repo}.git/..." the batch answer's verify href names on the Hub's
//                           origin instead of the real one, written as given). storage_same_origin: signed
//                           storage URLs (downloads, basic and multipart uploads) name the Hub's
//                           own origin, which serves /repos/... and /upload/... as the storage
//                           listener does (logged as listener "storage"; an Authorization
//                           header there gets 400 InvalidArgument, as S3 answers)
//   DELETE /_admin/uploads  forget every uploaded LFS object (benchmarks)
//                           and the Xet keys (defaults): "xet_enabled":true,
//                           "xet_token_ttl_secs":3600, "xet_url_ttl_secs":null (null:
//                           url_ttl_secs; signed xorb URLs), "xet_multi_range":true (false:
//                           one range per xorb URL), "xet_dedupe_expiry_secs":604800,
//                           "xet_global_dedupe":true (false: the global dedupe index
//                           answers 404 for every chunk, as for a source it never indexed)
//   GET    /_admin/config
//   GET|DELETE /_admin/xet, GET|DELETE /_admin/xet/store, POST /_admin/xet/expire-tokens:
//          see tests/hub/cas_standin.mjs. GET /_admin/xet: {"bytes":{"xorb_upload",
//          "shard_upload","lfs_upload","xorb_download","dedupe_answered"},"xorbs":[{hash,
//          bytes,prefix,status:"stored"|"exists"|"refused",error?,chunks?,schemes?}],
//          "shards":[{route:"v1"|"v2",bytes,status:"registered"|"refused",error?,repo,
//          files?:[{hash,sha256,size}],xorbs?}],"dedupe_queries":[{chunk,found,xorbs?}],
//          "reconstructions":[{file,version,range,status}],"chunk_schemes":{none,lz4,
//          bg4_lz4},"tokens_issued":{read,write},"sessions":[X-Xet-Session-Id...]}
import http from "node:http";
import crypto from "node:crypto";
import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";
import os from "node:os";
import { createCas } from "./cas_standin.mjs";

const MiB = 1024 * 1024;
const LFS_THRESHOLD = MiB;

const config = {
  token: "hf_test",
  read_token: "hf_read",
  user: "standin",
  url_ttl_secs: 3600,
  reject_unknown_tokens: false,
  resolve_cache_redirect: false,
  multipart_chunk_size: 8 * MiB,
  multipart_threshold: 16 * MiB,
  storage_conn_bytes_per_sec: 0,
  url_max_uses: 0,
  storage_ignore_range: false,
  storage_same_origin: false,
  verify_path: null,
  xet_enabled: true,
  xet_token_ttl_secs: 3600,
  xet_url_ttl_secs: null,
  xet_multi_range: true,
  xet_dedupe_expiry_secs: 7 * 24 * 3600,
  xet_global_dedupe: true,
};
const urlUses = new Map(); // signature -> requests answered with it
let urlSerial = 0;
const secret = crypto.randomBytes(32);
const repos = new Map(); // "ns/name" -> Repo
const blobs = new Map(); // sha256 -> [{ abs, size }]: every published copy (content-addressed, like S3)
let log = [];
let faults = [];
let pending = 0;
let pendingWaiters = [];
let publishSeq = 0;
let storageBase = "";
let casBase = "";
let lfsBytesReceived = 0; // storage PUT body bytes (LFS uploads), for /_admin/xet
// Where signed storage URLs point: the storage listener, or (config
// storage_same_origin) the Hub's own origin, which then serves the storage
// routes too, as a Hub whose LFS storage shares its host.
const storageUrlBase = () => (config.storage_same_origin ? endpoint : storageBase);
// Uploaded bytes (LFS objects, multipart parts, regular files of commits):
// $HUB_STANDIN_DATA_DIR when set (it must exist), else a fresh temporary
// directory removed when the stand-in exits.
const dataDir = process.env.HUB_STANDIN_DATA_DIR
  ? fs.mkdtempSync(path.join(process.env.HUB_STANDIN_DATA_DIR, "hub-standin-"))
  : fs.mkdtempSync(path.join(os.tmpdir(), "hub-standin-"));
process.on("exit", () => fs.rmSync(dataDir, { recursive: true, force: true }));

// The Xet CAS (tests/hub/cas_standin.mjs): its own listener, xorb bytes on the
// storage listener, tokens and file registration through the Hub.
const cas = createCas({
  dataDir,
  secret,
  config,
  casBase: () => casBase,
  storageBase: () => storageUrlBase(),
  sendBody: (...a) => sendBody(...a),
  sendJson: (...a) => sendJson(...a),
  sendSmallCounted: (...a) => sendSmallCounted(...a),
  s3Error: (...a) => s3Error(...a),
  takeFault: (...a) => takeFault(...a),
  readBodyBuffer: (...a) => readBodyBuffer(...a),
  // Counts one more request on a signed URL; true once config url_max_uses is exceeded.
  urlUsedUp: (sig) => {
    const uses = (urlUses.get(sig) ?? 0) + 1;
    urlUses.set(sig, uses);
    return config.url_max_uses > 0 && uses > config.url_max_uses;
  },
  lfsBytesReceived: () => lfsBytesReceived,
  resetLfsBytes: () => {
    lfsBytesReceived = 0;
  },
  // A file registered by a shard: an LFS object of the token's repository,
  // served (the bridge) by rebuilding it from its xorbs.
  onFileRegistered: (repoId, rec) => {
    if (repoId) repos.get(repoId)?.lfs.add(rec.sha256);
    const copies = blobs.get(rec.sha256) ?? [];
    if (!copies.some((b) => b.xet === rec.hash)) copies.push({ xet: rec.hash, size: rec.size });
    blobs.set(rec.sha256, copies);
  },
});

// ---------------------------------------------------------------- utilities

const nowSecs = () => Math.floor(Date.now() / 1000);
const sha1hex = (buf) => crypto.createHash("sha1").update(buf).digest("hex");
const isCommitHash = (s) => /^[0-9a-f]{40}$/.test(s);

function safeDecode(s) {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

function lfsPointer(sha256, size) {
  return `version https://git-lfs.github.com/spec/v1\noid sha256:${sha256}\nsize ${size}\n`;
}

function gitBlobOidOfBuffer(buf) {
  return crypto.createHash("sha1").update(`blob ${buf.length}\0`).update(buf).digest("hex");
}

// sha256 of the contents and, for non-LFS files, the git blob sha1; streamed.
async function hashFile(abs, size, wantGitOid) {
  const h256 = crypto.createHash("sha256");
  const h1 = wantGitOid ? crypto.createHash("sha1").update(`blob ${size}\0`) : null;
  let seen = 0;
  for await (const chunk of fs.createReadStream(abs, { highWaterMark: 4 * MiB })) {
    h256.update(chunk);
    if (h1) h1.update(chunk);
    seen += chunk.length;
  }
  if (seen !== size) throw new Error(`${abs} changed while being hashed`);
  return { sha256: h256.digest("hex"), gitOid: h1 ? h1.digest("hex") : null };
}

async function listFilesUnder(root) {
  const out = [];
  async function walk(dir, rel) {
    const entries = await fsp.readdir(dir, { withFileTypes: true });
    for (const e of entries) {
      const abs = path.join(dir, e.name);
      const r = rel ? `${rel}/${e.name}` : e.name;
      let st;
      try {
        st = await fsp.stat(abs); // follows symlinks: a dir of links to big files works
      } catch {
        continue;
      }
      if (st.isDirectory()) await walk(abs, r);
      else if (st.isFile()) out.push({ rel: r, abs, size: st.size });
    }
  }
  await walk(root, "");
  out.sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0));
  return out;
}

// Git tree object ids for every directory of a commit ("" is the root).
function treeOids(files) {
  const dirs = new Map([["", []]]);
  const ensureDir = (d) => {
    if (dirs.has(d)) return;
    dirs.set(d, []);
    const slash = d.lastIndexOf("/");
    const parent = slash < 0 ? "" : d.slice(0, slash);
    ensureDir(parent);
    dirs.get(parent).push({ name: d.slice(slash + 1), dir: d });
  };
  for (const f of files.values()) {
    const slash = f.path.lastIndexOf("/");
    const parent = slash < 0 ? "" : f.path.slice(0, slash);
    ensureDir(parent);
    dirs.get(parent).push({ name: f.path.slice(slash + 1), file: f });
  }
  const oids = new Map();
  const compute = (d) => {
    const kids = dirs.get(d).map((k) => ({ ...k, oid: k.file ? k.file.oid : compute(k.dir) }));
    kids.sort((a, b) => Buffer.compare(Buffer.from(a.name + (a.dir ? "/" : "")), Buffer.from(b.name + (b.dir ? "/" : ""))));
    const parts = kids.map((k) =>
      Buffer.concat([Buffer.from(`${k.dir ? "40000" : "100644"} ${k.name}\0`), Buffer.from(k.oid, "hex")]),
    );
    const body = Buffer.concat(parts);
    const oid = crypto.createHash("sha1").update(`tree ${body.length}\0`).update(body).digest("hex");
    oids.set(d, oid);
    return oid;
  };
  compute("");
  return oids;
}

// ------------------------------------------------------------------ publish

async function publish(body) {
  const repoId = body.repo;
  if (typeof repoId !== "string" || !/^(datasets\/)?[^/\s]+\/[^/\s]+$/.test(repoId)) throw new Error("repo must be ns/name or datasets/ns/name");
  if (typeof body.dir !== "string" || !path.isAbsolute(body.dir)) throw new Error("dir must be an absolute path");
  const branch = body.branch ?? "main";
  const tags = body.tags ?? [];
  if (typeof branch !== "string" || !branch || isCommitHash(branch)) throw new Error("bad branch");
  if (!Array.isArray(tags) || tags.some((t) => typeof t !== "string" || !t)) throw new Error("bad tags");
  const xet = body.xet === true ? {} : body.xet || null;
  if (xet !== null && (typeof xet !== "object" || (xet.compression !== undefined && !["auto", "none", "lz4", "bg4_lz4"].includes(xet.compression)))) {
    throw new Error('xet must be true, false or {"compression": "auto"|"none"|"lz4"|"bg4_lz4"}');
  }
  if (body.xet_enabled !== undefined && body.xet_enabled !== null && typeof body.xet_enabled !== "boolean") throw new Error("xet_enabled must be a boolean or null");

  const found = await listFilesUnder(body.dir);
  let repo = repos.get(repoId);
  const parent = repo?.branches.get(branch) ? repo.commits.get(repo.branches.get(branch)) : null;

  const files = new Map();
  for (const f of found) {
    const lfs = f.rel.endsWith(".gguf") || f.size >= LFS_THRESHOLD;
    const { sha256, gitOid } = await hashFile(f.abs, f.size, !lfs);
    const entry = { path: f.rel, abs: f.abs, size: f.size, sha256, lfs, oid: gitOid, pointerSize: 0, lastCommit: null, xetHash: null };
    if (lfs) {
      const ptr = Buffer.from(lfsPointer(sha256, f.size));
      entry.oid = gitBlobOidOfBuffer(ptr);
      entry.pointerSize = ptr.length;
    }
    files.set(f.rel, entry);
    // Storage is content-addressed: any published copy of these bytes serves.
    const copies = blobs.get(sha256) ?? [];
    copies.unshift({ abs: f.abs, size: f.size });
    blobs.set(sha256, copies);
  }
  if (xet) {
    // Xet-backed: chunked, packed into xorbs and registered as a client's upload would be.
    const list = [...files.values()].filter((f) => f.lfs && f.size > 0);
    const recs = await cas.publish(list, { compression: xet.compression ?? "auto", repo: repoId });
    list.forEach((f, i) => (f.xetHash = recs[i].hash));
  }

  if (!repo) repo = newRepo(repoId);
  if (body.xet_enabled !== undefined) repo.xetEnabled = body.xet_enabled;
  if (typeof body.gated === "boolean") repo.gated = body.gated;
  if (typeof body.private === "boolean") repo.private = body.private;
  for (const f of files.values()) if (f.lfs) repo.lfs.add(f.sha256);
  const commit = makeCommit(repo, branch, parent, files, typeof body.message === "string" ? body.message : "");
  for (const t of tags) repo.tags.set(t, commit.id);
  return {
    commit: commit.id,
    files: [...files.values()].map((f) => ({ path: f.path, size: f.size, sha256: f.sha256, lfs: f.lfs, oid: f.oid, xetHash: f.xetHash })),
  };
}

function newRepo(repoId) {
  const repo = {
    id: repoId,
    _id: crypto.randomBytes(12).toString("hex"),
    createdAt: new Date(nowSecs() * 1000).toISOString(),
    gated: false,
    private: false,
    branches: new Map(),
    tags: new Map(),
    commits: new Map(),
    lfs: new Set(), // LFS objects uploaded to (or published in) this repo: the batch's "already there"
    xetEnabled: null, // null: config.xet_enabled decides
  };
  repos.set(repoId, repo);
  return repo;
}

// Records a commit holding exactly `files` (path -> entry) on `branch`, whose
// parent is `parent` (a commit object or null), and moves the branch to it.
function makeCommit(repo, branch, parent, files, message) {
  const trees = treeOids(files);
  const seq = ++publishSeq;
  const secs = nowSecs();
  const title = message || `Publish ${seq}`;
  const commitText =
    `tree ${trees.get("")}\n` +
    (parent ? `parent ${parent.id}\n` : "") +
    `author Hub Stand-in <standin@127.0.0.1> ${secs} +0000\n` +
    `committer Hub Stand-in <standin@127.0.0.1> ${secs} +0000\n\n${title}\n\nstand-in publish #${seq} ${crypto.randomBytes(8).toString("hex")}\n`;
  const id = crypto.createHash("sha1").update(`commit ${Buffer.byteLength(commitText)}\0`).update(commitText).digest("hex");
  const commit = { id, parent: parent ? parent.id : null, title, date: new Date(secs * 1000).toISOString(), files, trees };
  const self = { id, title, date: commit.date };
  for (const f of files.values()) {
    const before = parent?.files.get(f.path);
    f.lastCommit = before && before.oid === f.oid && before.lastCommit ? before.lastCommit : self;
  }
  repo.commits.set(id, commit);
  repo.branches.set(branch, id);
  return commit;
}

const xetOn = (repo) => repo.xetEnabled ?? config.xet_enabled;

function resolveRev(repo, rev) {
  if (isCommitHash(rev) && repo.commits.has(rev)) return repo.commits.get(rev);
  let id = repo.branches.get(rev) ?? repo.tags.get(rev);
  if (!id && rev.startsWith("refs/heads/")) id = repo.branches.get(rev.slice(11));
  if (!id && rev.startsWith("refs/tags/")) id = repo.tags.get(rev.slice(10));
  return id ? repo.commits.get(id) : null;
}

// Splits "rev/path..." raw segments into the revision and the rest; a
// revision may arrive encoded in one segment or, for refs/pr/N and
// refs/heads|tags/X, unencoded over three.
function splitRev(repo, segs) {
  const first = safeDecode(segs[0] ?? "");
  if (first === "refs" && segs.length >= 3) {
    const rev3 = segs.slice(0, 3).map(safeDecode).join("/");
    if (resolveRev(repo, rev3)) return { rev: rev3, rest: segs.slice(3) };
  }
  return { rev: first, rest: segs.slice(1) };
}

// ------------------------------------------------------------------ logging

function startEntry(listener, req, url) {
  const entry = {
    listener,
    method: req.method,
    path: safeDecode(url.pathname),
    query: url.search.startsWith("?") ? url.search.slice(1) : url.search,
    range: req.headers.range ?? null,
    authorization: req.headers.authorization ?? null,
    user_agent: req.headers["user-agent"] ?? null,
    port: req.socket?.localPort ?? 0, // which listener's port the request reached
    status: 0,
    bytes_sent: 0,
    bytes_received: 0,
  };
  log.push(entry);
  pending++;
  return entry;
}

function finishEntry(entry, res) {
  if (entry.done) return;
  Object.defineProperty(entry, "done", { value: true, enumerable: false });
  entry.status = res.headersSent || res.writableEnded ? res.statusCode : entry.status;
  pending--;
  if (pending === 0) {
    const w = pendingWaiters;
    pendingWaiters = [];
    for (const f of w) f();
  }
}

function waitForPending(ms) {
  if (pending === 0) return Promise.resolve();
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    pendingWaiters.push(() => {
      clearTimeout(t);
      resolve();
    });
  });
}

// ------------------------------------------------------------------- faults

const XET_FAULTS = ["xet_expired_token", "xet_refuse_shard", "xet_bad_terms", "xet_wrong_bytes", "xet_short_read", "xet_refuse_multirange"];

// phase "request": status/hang/endless rules; "body": cut/corrupt/slow;
// "xet": the xet_* rule of kind `xetKind` (the CAS asks where it applies).
function takeFault(listener, entry, phase, xetKind = null) {
  for (let i = 0; i < faults.length; i++) {
    const r = faults[i];
    const isStatus = r.kind === "status" || r.kind === "hang" || r.kind === "endless";
    if (phase === "xet" ? r.kind !== xetKind : r.kind.startsWith("xet_") || (phase === "request") !== isStatus) continue;
    if (r.listener && r.listener !== listener) continue;
    if (r.method && r.method.toUpperCase() !== entry.method) continue;
    if (r.match && !entry.path.includes(r.match)) continue;
    if (r.times > 0) {
      r.times--;
      if (r.times === 0) faults.splice(i, 1);
    }
    return r;
  }
  return null;
}

function validateFault(r) {
  if (!r || typeof r !== "object") throw new Error("a fault rule is an object");
  if (!["status", "cut", "corrupt", "slow", "hang", "endless", ...XET_FAULTS].includes(r.kind)) {
    throw new Error(`kind must be status, cut, corrupt, slow, hang, endless or one of ${XET_FAULTS.join(", ")}`);
  }
  if (r.listener !== undefined && !["hub", "storage", "cas"].includes(r.listener)) throw new Error("listener must be hub, storage or cas");
  if (r.match !== undefined && typeof r.match !== "string") throw new Error("match must be a string");
  const times = r.times ?? 1;
  if (!Number.isInteger(times) || times === 0 || times < -1) throw new Error("times must be a positive integer or -1");
  const rule = { match: r.match ?? "", listener: r.listener ?? null, method: r.method ?? null, kind: r.kind, times };
  if (r.kind === "status") {
    if (!Number.isInteger(r.status) || r.status < 100 || r.status > 599) throw new Error("status must be an HTTP status");
    rule.status = r.status;
    rule.headers = r.headers ?? {};
    rule.body = r.body_base64 !== undefined ? Buffer.from(String(r.body_base64), "base64")
                                             : (r.body ?? JSON.stringify({ error: `injected fault: HTTP ${r.status}` }));
  } else if (r.kind === "cut") {
    if (!Number.isInteger(r.after_bytes) || r.after_bytes < 0) throw new Error("after_bytes must be >= 0");
    rule.after_bytes = r.after_bytes;
  } else if (r.kind === "hang") {
    // nothing more: the request is taken and never answered
  } else if (r.kind === "endless") {
    for (const k of ["size", "head_size", "max_bytes"]) {
      if (r[k] !== undefined && (!Number.isSafeInteger(r[k]) || r[k] < 0)) throw new Error(`${k} must be >= 0`);
    }
    if (r.size === undefined) throw new Error("size is required");
    rule.size = r.size;
    rule.head_size = r.head_size ?? r.size;
    rule.max_bytes = r.max_bytes ?? 32 * MiB;
    rule.headers = r.headers ?? {};
  } else if (r.kind === "xet_bad_terms") {
    const modes = ["unpacked_length", "chunk_range", "unknown_xorb", "missing_fetch", "offset"];
    rule.mode = r.mode ?? "unpacked_length";
    if (!modes.includes(rule.mode)) throw new Error(`mode must be one of ${modes.join(", ")}`);
  } else if (r.kind === "xet_short_read") {
    rule.drop_bytes = r.drop_bytes ?? 1000;
    if (!Number.isInteger(rule.drop_bytes) || rule.drop_bytes < 1) throw new Error("drop_bytes must be >= 1");
  } else if (r.kind === "xet_refuse_shard") {
    if (r.message !== undefined) rule.message = String(r.message);
    rule.retryable = !!r.retryable;
  } else if (r.kind.startsWith("xet_")) {
    // no parameters
  } else if (r.kind === "slow") {
    if (!Number.isInteger(r.bytes_per_sec) || r.bytes_per_sec <= 0) throw new Error("bytes_per_sec must be > 0");
    rule.bytes_per_sec = r.bytes_per_sec;
  } else {
    if (!Number.isInteger(r.offset) || r.offset < 0) throw new Error("offset must be >= 0");
    rule.offset = r.offset;
  }
  return rule;
}

// ------------------------------------------------------------------ replies

function baseHeaders() {
  return { "X-Request-Id": `Root=1-${crypto.randomBytes(12).toString("hex")}` };
}

function sendSmall(res, method, status, headers, body) {
  const buf = Buffer.isBuffer(body) ? body : Buffer.from(body ?? "");
  res.writeHead(status, { ...baseHeaders(), ...headers, "Content-Length": buf.length });
  if (method === "HEAD") res.end();
  else res.end(buf, () => {});
  return buf.length;
}

function sendSmallCounted(ctx, status, headers, body) {
  const n = sendSmall(ctx.res, ctx.req.method, status, headers, body);
  if (ctx.req.method !== "HEAD") ctx.entry.bytes_sent += n;
}

function sendJson(ctx, status, value, headers = {}) {
  return sendBody(ctx, status, { "Content-Type": "application/json; charset=utf-8", ...headers }, Buffer.from(JSON.stringify(value)));
}

function hubError(ctx, status, code, message, extra = {}) {
  const headers = { "Content-Type": "application/json; charset=utf-8", "X-Error-Message": message, ...extra };
  if (code) headers["X-Error-Code"] = code;
  sendSmallCounted(ctx, status, headers, JSON.stringify({ error: message }));
}

function s3Error(ctx, status, code, message) {
  const xml =
    `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message>` +
    `<RequestId>${crypto.randomBytes(8).toString("hex").toUpperCase()}</RequestId></Error>`;
  sendSmallCounted(ctx, status, { "Content-Type": "application/xml" }, xml);
}

function writeChunk(res, chunk) {
  return new Promise((resolve) => {
    let settled = false;
    const done = (ok) => {
      if (settled) return;
      settled = true;
      res.off("close", onClose);
      resolve(ok);
    };
    const onClose = () => done(false);
    res.once("close", onClose);
    const flushed = res.write(chunk, (err) => {
      if (err) done(false);
      else if (flushed) done(true);
    });
    if (!flushed) res.once("drain", () => done(true));
  });
}

// A body source: a Buffer; a file range {abs, start, end (inclusive), flip?}
// (flip: that byte, counted from start, is sent inverted); {stream: async
// iterable of Buffers, length}; or {parts: [sources]} sent one after another.
function sourceLength(source) {
  if (Buffer.isBuffer(source)) return source.length;
  if (source.parts) return source.parts.reduce((n, p) => n + sourceLength(p), 0);
  if (source.stream) return source.length;
  return source.end - source.start + 1;
}

async function* sourceChunks(source, hwm) {
  if (Buffer.isBuffer(source)) {
    yield source;
  } else if (source.parts) {
    for (const p of source.parts) yield* sourceChunks(p, hwm);
  } else if (source.stream) {
    yield* source.stream;
  } else {
    let off = 0;
    for await (let c of fs.createReadStream(source.abs, { start: source.start, end: source.end, highWaterMark: hwm })) {
      if (source.flip !== undefined && source.flip >= off && source.flip < off + c.length) {
        c = Buffer.from(c);
        c[source.flip - off] ^= 0xff;
      }
      off += c.length;
      yield c;
    }
  }
}

// Sends a 2xx body (see sourceLength), applying cut/corrupt faults and
// counting the body bytes handed to the socket.
async function sendBody(ctx, status, headers, source) {
  const { req, res, entry } = ctx;
  const length = sourceLength(source);
  res.writeHead(status, { ...baseHeaders(), ...headers, "Content-Length": length });
  if (req.method === "HEAD" || length === 0) {
    res.end();
    return;
  }
  const fault = status >= 200 && status < 300 ? takeFault(ctx.listener, entry, "body") : null;
  const slow = fault?.kind === "slow" ? fault.bytes_per_sec : 0;
  const capped = ctx.listener === "storage" ? config.storage_conn_bytes_per_sec : 0;
  const chunkFor = (rate) => Math.max(1, Math.min(MiB, Math.floor(rate / 50)));
  const chunks = sourceChunks(source, slow ? chunkFor(slow) : capped ? chunkFor(capped) : MiB);
  let off = 0;
  try {
    for await (let chunk of chunks) {
      if (res.destroyed) break;
      if (fault?.kind === "corrupt" && fault.offset >= off && fault.offset < off + chunk.length) {
        chunk = Buffer.from(chunk);
        chunk[fault.offset - off] ^= 0xff;
      }
      if (fault?.kind === "cut" && off + chunk.length >= fault.after_bytes) {
        const part = chunk.subarray(0, fault.after_bytes - off);
        if (part.length) {
          if (await writeChunk(res, part)) entry.bytes_sent += part.length;
        } else {
          res.flushHeaders();
        }
        const sock = res.socket;
        if (sock) sock.end(() => sock.destroy());
        else res.destroy();
        return;
      }
      if (slow) await new Promise((r) => setTimeout(r, (chunk.length / slow) * 1000));
      if (capped) await paceConnection(res.socket, chunk.length, capped);
      if (!(await writeChunk(res, chunk))) break;
      off += chunk.length;
      entry.bytes_sent += chunk.length;
    }
    if (!res.destroyed) res.end();
  } catch (err) {
    process.stderr.write(`hub_standin: body error: ${err.message}\n`);
    res.destroy();
  } finally {
    await chunks.return?.();
  }
}

// The per-connection cap: a socket's bytes leave no faster than `rate`
// bytes/s, over all the responses it carries (keep-alive included).
function paceConnection(sock, n, rate) {
  if (!sock) return null;
  const now = performance.now();
  const st = sock.__pace ?? (sock.__pace = { next: now });
  st.next = Math.max(st.next, now) + (n / rate) * 1000;
  const wait = st.next - now;
  return wait >= 1 ? new Promise((r) => setTimeout(r, wait)) : null;
}

// Range header -> {start,end} (inclusive), "unsatisfiable", or null (no or
// ignorable header: serve everything).
function parseRange(h, size) {
  if (!h) return null;
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(h);
  if (!m || (m[1] === "" && m[2] === "")) return null;
  if (m[1] === "") {
    const n = Number(m[2]);
    if (n === 0 || size === 0) return "unsatisfiable";
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(m[1]);
  if (m[2] !== "" && Number(m[2]) < start) return null;
  if (start >= size) return "unsatisfiable";
  const end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  return { start, end };
}

// Answers a file (or a slice of it) with Range support.
function sendRanged(ctx, headers, size, sourceFor) {
  const r = parseRange(ctx.req.headers.range, size);
  if (r === "unsatisfiable") {
    return sendSmallCounted(ctx, 416, { ...headers, "Content-Range": `bytes */${size}` }, "");
  }
  if (r) {
    return sendBody(ctx, 206, { ...headers, "Content-Range": `bytes ${r.start}-${r.end}/${size}` }, sourceFor(r.start, r.end));
  }
  return sendBody(ctx, 200, headers, sourceFor(0, size - 1));
}

// -------------------------------------------------------------------- auth

function bearer(req) {
  const h = req.headers.authorization;
  if (!h) return null;
  const m = /^Bearer\s+(.+)$/i.exec(h.trim());
  return m ? m[1] : "";
}

// Returns true when the request may go on; otherwise it has been answered.
function checkAccess(ctx, repoId) {
  const token = bearer(ctx.req);
  const valid = token !== null && (token === config.token || (!!config.read_token && token === config.read_token));
  if (token !== null && !valid && config.reject_unknown_tokens) {
    hubError(ctx, 401, null, "Invalid credentials in Authorization header");
    return null;
  }
  const repo = repos.get(repoId);
  if (!repo || (repo.private && !valid)) {
    hubError(ctx, token === null ? 401 : 404, "RepoNotFound", "Repository not found");
    return null;
  }
  if (repo.gated && !valid) {
    if (token === null) {
      hubError(ctx, 401, "GatedRepo",
        `Access to model ${repoId} is restricted. You must have access to it and be authenticated to access it. Please log in.`);
    } else {
      hubError(ctx, 403, "GatedRepo",
        `Access to model ${repoId} is restricted and you are not in the authorized list. Visit ${ctx.endpoint}/${repoId} to ask for access.`);
    }
    return null;
  }
  return repo;
}

function revisionNotFound(ctx, rev) {
  hubError(ctx, 404, "RevisionNotFound", `Invalid rev id: ${rev}`);
}

// ------------------------------------------------------------------ resolve

function signStorageUrl(repoId, f) {
  const [ns, name] = repoId.split("/");
  const p = `/repos/${encodeURIComponent(ns)}/${encodeURIComponent(name)}/${f.sha256}`;
  const expires = nowSecs() + Number(config.url_ttl_secs);
  const n = ++urlSerial; // every resolve signs a URL of its own
  const sig = crypto.createHmac("sha256", secret).update(`${p}\n${expires}\n${n}`).digest("hex");
  const base = path.posix.basename(f.path);
  const disp = `inline; filename*=UTF-8''${encodeURIComponent(base)}; filename="${base}";`;
  return `${storageUrlBase()}${p}?response-content-disposition=${encodeURIComponent(disp)}&expires=${expires}&n=${n}&sig=${sig}`;
}

function contentTypeFor(p) {
  if (p.endsWith(".json")) return "application/json; charset=utf-8";
  if (p.endsWith(".md") || p.endsWith(".txt")) return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

// viaCache: the request is GET|HEAD /api/resolve-cache/models/{ns}/{name}/{commit}/{path}.
function handleResolve(ctx, repoId, segs, viaCache = false) {
  const { req } = ctx;
  if (req.method !== "GET" && req.method !== "HEAD") return hubError(ctx, 405, null, "Method not allowed");
  const repo = checkAccess(ctx, repoId);
  if (!repo) return;
  if (segs.length === 0) return revisionNotFound(ctx, "");
  const { rev, rest } = splitRev(repo, segs);
  const commit = resolveRev(repo, rev);
  if (!commit) return revisionNotFound(ctx, rev);
  const filePath = rest.map(safeDecode).join("/");
  const f = commit.files.get(filePath);
  const commitHeader = { "X-Repo-Commit": commit.id };
  if (!f) return hubError(ctx, 404, "EntryNotFound", "Entry not found", commitHeader);

  if (f.lfs) {
    const linked = { ETag: `"${f.oid}"`, "X-Linked-Etag": `"${f.sha256}"`, "X-Linked-Size": String(f.size), Vary: "Origin, Accept", ...commitHeader };
    let xet = null;
    if (f.xetHash && xetOn(repo)) {
      const refresh = `/api/models/${repoId}/xet-read-token/${commit.id}`;
      xet = {
        "X-Xet-Hash": f.xetHash,
        "X-Xet-Refresh-Route": refresh,
        Link: `<${ctx.endpoint}${refresh}>; rel="xet-auth", <${casBase}/v1/reconstructions/${f.xetHash}>; rel="xet-reconstruction-info"`,
      };
      if ((req.headers.accept ?? "").includes("application/vnd.xet-fileinfo+json")) {
        const info = { hash: f.xetHash, size: f.size, etag: f.sha256, refreshUrl: `${ctx.endpoint}${refresh}`, reconstructionUrl: `${casBase}/v1/reconstructions/${f.xetHash}` };
        return sendSmallCounted(ctx, 200, { "Content-Type": "application/vnd.xet-fileinfo+json", ...linked, ...xet }, JSON.stringify(info));
      }
    }
    const location = signStorageUrl(repoId, f);
    return sendSmallCounted(
      ctx,
      302,
      { Location: location, "Content-Type": "text/plain; charset=utf-8", ...linked, ...(xet ?? {}) },
      `Found. Redirecting to ${location}`,
    );
  }
  if (config.resolve_cache_redirect && !viaCache) {
    // What huggingface.co does for regular files today: a RELATIVE 307 to a
    // cacheable, commit-pinned URL on the same host (huggingface_hub follows
    // relative redirects even for its metadata HEAD; auth is kept, same host).
    const [ns, name] = repoId.split("/");
    const encPath = f.path.split("/").map(encodeURIComponent).join("/");
    const original = `/${repoId}/resolve/${rev}/${f.path}`;
    const location =
      `/api/resolve-cache/models/${encodeURIComponent(ns)}/${encodeURIComponent(name)}/${commit.id}/${encPath}` +
      `?${encodeURIComponent(original)}=&etag=${encodeURIComponent(`"${f.oid}"`)}`;
    return sendSmallCounted(
      ctx,
      307,
      { Location: location, "Content-Type": "text/plain; charset=utf-8", Vary: "Origin, Accept", ...commitHeader },
      `Temporary Redirect. Redirecting to ${location}`,
    );
  }
  const headers = {
    "Content-Type": contentTypeFor(f.path),
    ETag: `"${f.oid}"`,
    "Accept-Ranges": "bytes",
    Vary: "Origin, Accept",
    ...commitHeader,
  };
  return sendRanged(ctx, headers, f.size, (start, end) => ({ abs: f.abs, start, end }));
}

// ---------------------------------------------------------------------- API

function treeEntry(repo, commit, p, expand) {
  const f = commit.files.get(p);
  let e;
  if (f) {
    e = { type: "file", oid: f.oid, size: f.size, path: f.path };
    if (f.xetHash && xetOn(repo)) e.xetHash = f.xetHash;
    if (f.lfs) e.lfs = { oid: f.sha256, size: f.size, pointerSize: f.pointerSize };
    if (expand) {
      e.lastCommit = { ...f.lastCommit };
      e.securityFileStatus = { status: "unscanned" };
    }
    return e;
  }
  if (commit.trees.has(p) && p !== "") {
    e = { type: "directory", oid: commit.trees.get(p), size: 0, path: p };
    if (expand) {
      // The Hub reports the last commit that touched anything below.
      let last = null;
      for (const x of commit.files.values()) {
        if (x.path.startsWith(p + "/") && (!last || x.lastCommit.date > last.date)) last = x.lastCommit;
      }
      e.lastCommit = { ...last };
    }
    return e;
  }
  return null;
}

function childrenOf(commit, dir, recursive) {
  const prefix = dir ? dir + "/" : "";
  const names = new Set();
  for (const p of [...commit.files.keys(), ...commit.trees.keys()]) {
    if (!p || !p.startsWith(prefix) || p === dir) continue;
    const rest = p.slice(prefix.length);
    if (!recursive && rest.includes("/")) continue;
    names.add(p);
  }
  return [...names].sort();
}

function modelInfo(ctx, repo, commit, url) {
  const blobsWanted = url.searchParams.get("blobs") === "true";
  const siblings = [...commit.files.values()].map((f) => {
    if (!blobsWanted) return { rfilename: f.path };
    const s = { rfilename: f.path, blobId: f.oid, size: f.size };
    if (f.lfs) s.lfs = { sha256: f.sha256, size: f.size, pointerSize: f.pointerSize };
    return s;
  });
  const info = {
    _id: repo._id,
    id: repo.id,
    modelId: repo.id,
    author: repo.id.split("/")[0],
    sha: commit.id,
    lastModified: commit.date,
    createdAt: repo.createdAt,
    private: repo.private,
    gated: repo.gated ? "manual" : false,
    disabled: false,
    downloads: 0,
    likes: 0,
    tags: ["gguf"],
    library_name: "gguf",
    siblings,
    spaces: [],
    usedStorage: [...commit.files.values()].reduce((s, f) => s + f.size, 0),
  };
  const expand = url.searchParams.getAll("expand");
  if (expand.length) {
    const out = { _id: info._id, id: info.id };
    for (const k of expand) if (k in info) out[k] = info[k];
    return out;
  }
  return info;
}

async function readBody(req, limit = 1 << 20) {
  const chunks = [];
  let n = 0;
  for await (const c of req) {
    n += c.length;
    if (n > limit) throw new Error("request body too large");
    chunks.push(c);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function parsePathsInfoBody(text, contentType) {
  if ((contentType ?? "").includes("application/json")) {
    const j = JSON.parse(text || "{}");
    return { paths: Array.isArray(j.paths) ? j.paths.map(String) : [], expand: j.expand === true || j.expand === "true" };
  }
  const p = new URLSearchParams(text);
  return { paths: p.getAll("paths"), expand: ["true", "True", "1"].includes(p.get("expand") ?? "") };
}

async function handleApi(ctx, segs, url) {
  const { req } = ctx;
  // segs: ["models", ns, name, ...]; a dataset ("datasets", ns, name) takes commits only
  if (segs[0] === "datasets" && segs.length >= 4 && segs[3] === "commit" && req.method === "POST") {
    return handleCommit(ctx, `datasets/${safeDecode(segs[1])}/${safeDecode(segs[2])}`, segs.slice(4));
  }
  if (segs[0] !== "models" || segs.length < 3) return hubError(ctx, 404, null, "Not Found");
  const repoId = `${safeDecode(segs[1])}/${safeDecode(segs[2])}`;
  const op = segs[3];
  const rest = segs.slice(4);

  if (op === "paths-info") {
    if (req.method !== "POST") return hubError(ctx, 405, null, "Method not allowed");
    let body;
    try {
      body = parsePathsInfoBody(await readBody(req), req.headers["content-type"]);
    } catch (e) {
      return hubError(ctx, 400, null, `Bad request: ${e.message}`);
    }
    const repo = checkAccess(ctx, repoId);
    if (!repo) return;
    const { rev } = rest.length ? splitRev(repo, rest) : { rev: "main" };
    const commit = resolveRev(repo, rev);
    if (!commit) return revisionNotFound(ctx, rev);
    const out = [];
    for (const p of body.paths) {
      const e = treeEntry(repo, commit, p.replace(/^\/+|\/+$/g, ""), body.expand);
      if (e) out.push(e);
    }
    return sendJson(ctx, 200, out);
  }

  if (op === "xet-read-token" || op === "xet-write-token") return handleXetToken(ctx, repoId, rest, op.slice(4, -6));
  if (req.method === "POST" && op === "preupload") return handlePreupload(ctx, repoId, rest);
  if (req.method === "POST" && op === "commit") return handleCommit(ctx, repoId, rest);
  if (req.method === "POST" && op === "branch") return handleCreateBranch(ctx, repoId, rest);
  if (req.method === "POST" && op === "tag") return handleCreateTag(ctx, repoId, rest);
  if (req.method !== "GET" && req.method !== "HEAD") return hubError(ctx, 405, null, "Method not allowed");
  const repo = checkAccess(ctx, repoId);
  if (!repo) return;

  if (op === undefined || op === "revision") {
    const rev = op === undefined ? "main" : rest.map(safeDecode).join("/");
    const commit = resolveRev(repo, rev);
    if (!commit) return revisionNotFound(ctx, rev);
    return sendJson(ctx, 200, modelInfo(ctx, repo, commit, url));
  }
  if (op === "tree") {
    if (!rest.length) return revisionNotFound(ctx, "");
    const { rev, rest: pathSegs } = splitRev(repo, rest);
    const commit = resolveRev(repo, rev);
    if (!commit) return revisionNotFound(ctx, rev);
    const dir = pathSegs.map(safeDecode).join("/").replace(/\/+$/, "");
    if (dir && !commit.trees.has(dir)) {
      return hubError(ctx, 404, "EntryNotFound", `Entry not found: ${dir}`, { "X-Repo-Commit": commit.id });
    }
    const recursive = url.searchParams.get("recursive") === "true" || url.searchParams.get("recursive") === "1";
    const expand = url.searchParams.get("expand") === "true" || url.searchParams.get("expand") === "1";
    const out = childrenOf(commit, dir, recursive).map((p) => treeEntry(repo, commit, p, expand));
    return sendJson(ctx, 200, out);
  }
  if (op === "refs") {
    const ref = (kind, name, id) => ({ name, ref: name.startsWith("refs/") ? name : `refs/${kind}/${name}`, targetCommit: id });
    const branches = [];
    const pullRequests = [];
    for (const [n, id] of repo.branches) {
      if (n.startsWith("refs/pr/")) pullRequests.push(ref("pr", n, id));
      else branches.push(ref("heads", n, id));
    }
    const tags = [...repo.tags].map(([n, id]) => ref("tags", n, id));
    const out = { branches, converts: [], tags };
    if (url.searchParams.get("include_prs") === "1" || url.searchParams.get("include_prs") === "true") out.pullRequests = pullRequests;
    return sendJson(ctx, 200, out);
  }
  if (op === "commits") {
    const rev = rest.length ? rest.map(safeDecode).join("/") : "main";
    let commit = resolveRev(repo, rev);
    if (!commit) return revisionNotFound(ctx, rev);
    const out = [];
    for (; commit; commit = commit.parent ? repo.commits.get(commit.parent) : null) {
      out.push({ id: commit.id, title: commit.title, message: "", authors: [{ user: "standin" }], date: commit.date });
    }
    return sendJson(ctx, 200, out);
  }
  return hubError(ctx, 404, null, "Not Found");
}

// ------------------------------------------------------------------- upload
//
// The Hub's write side, as huggingface_hub (create_repo, create_commit,
// preupload_lfs_files) and @huggingface/hub (createRepo, commit, uploadFiles)
// speak it. Uploaded bytes live under dataDir until the stand-in exits.

const LFS_MULTIPART_THRESHOLD_DEFAULT = 16 * MiB;
const multipartUploads = new Map(); // uploadId -> {repoId, oid, size, chunkSize, nParts, parts: Map n -> {file, etag, size}}

function tokenRole(token) {
  if (token === null) return null;
  if (token === config.token) return "write";
  if (config.read_token && token === config.read_token) return "read";
  return "invalid";
}

// A write to `repoId` (existing unless mayBeMissing): a write token, else the
// Hub's 401/403. Returns the repo (or null when missing and allowed).
function checkWrite(ctx, repoId, mayBeMissing = false) {
  const token = bearer(ctx.req);
  const role = tokenRole(token);
  if (role === null) {
    hubError(ctx, 401, null, "Invalid username or password.");
    return undefined;
  }
  if (role === "invalid") {
    hubError(ctx, 401, null, "Invalid credentials in Authorization header");
    return undefined;
  }
  if (role === "read") {
    hubError(ctx, 403, null, `You don't have the rights to write to ${repoId}: this token has the role "read"`);
    return undefined;
  }
  const repo = repos.get(repoId);
  if (!repo && !mayBeMissing) {
    hubError(ctx, 404, "RepoNotFound", "Repository not found");
    return undefined;
  }
  return repo ?? null;
}

function safeRepoPath(p) {
  return (
    typeof p === "string" &&
    p.length > 0 &&
    p.length <= 1024 &&
    !p.startsWith("/") &&
    !p.endsWith("/") &&
    !p.includes("\\") &&
    !p.includes("\0") &&
    p.split("/").every((s) => s !== "" && s !== "." && s !== "..") &&
    !p.split("/").includes(".git")
  );
}

// The stand-in's LFS rule (the Hub's: .gitattributes patterns, large or binary files).
function wantsLfs(p, size, sample) {
  return p.endsWith(".gguf") || size >= LFS_THRESHOLD || (sample !== null && sample.includes(0));
}

function signUpload(p, expires, extra) {
  return crypto.createHmac("sha256", secret).update(`${p}\n${expires}\n${extra}`).digest("hex");
}

function checkUploadSig(url, extra) {
  const expires = url.searchParams.get("expires") ?? "";
  const sig = url.searchParams.get("sig") ?? "";
  const want = Buffer.from(signUpload(url.pathname, expires, extra), "hex");
  const got = /^[0-9a-f]{64}$/.test(sig) ? Buffer.from(sig, "hex") : Buffer.alloc(0);
  if (got.length !== want.length || !crypto.timingSafeEqual(got, want)) return "The request signature we calculated does not match the signature you provided.";
  if (!/^\d+$/.test(expires) || Number(expires) <= nowSecs()) return "Request has expired";
  return null;
}

// A copy of the object that still serves: a file on disk, or a file the CAS
// rebuilds from its xorbs ({xet: file hash, size}).
const blobServes = (b) => (b.xet ? cas.hasFile(b.xet) : fs.existsSync(b.abs));

function storedBlob(sha) {
  return (blobs.get(sha) ?? []).find(blobServes) ?? null;
}

function storeBlob(sha, abs, size) {
  const copies = blobs.get(sha) ?? [];
  copies.unshift({ abs, size });
  blobs.set(sha, copies);
}

// A body source for bytes [start, end] of a stored copy.
const blobSource = (b, start, end) =>
  b.xet ? { stream: cas.fileBytes(cas.fileRecord(b.xet), start, end + 1), length: end - start + 1 } : { abs: b.abs, start, end };

// A request body into memory (at most `limit` bytes), counted in the log and
// subject to the cut and slow faults as storage uploads are.
async function readBodyBuffer(ctx, limit) {
  const fault = takeFault(ctx.listener, ctx.entry, "body");
  const chunks = [];
  let n = 0;
  try {
    for await (const chunk of ctx.req) {
      if (fault?.kind === "cut" && n + chunk.length >= fault.after_bytes) {
        ctx.entry.bytes_received += fault.after_bytes - n;
        ctx.req.socket?.destroy();
        throw new Error("connection cut by a fault rule");
      }
      n += chunk.length;
      ctx.entry.bytes_received += chunk.length;
      if (n > limit) throw new Error(`the body exceeds ${limit} bytes`);
      if (fault?.kind === "slow") await sleep((chunk.length / fault.bytes_per_sec) * 1000);
      chunks.push(chunk);
    }
  } catch (e) {
    ctx.req.resume();
    throw e;
  }
  if (!ctx.req.complete) throw new Error("the body ended early");
  return Buffer.concat(chunks, n);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Streams a request body into `dest`, hashing it (SHA-256: the object's id,
// and the ETag storage answers, opaque to clients as S3's is). Writes in
// large batches. Applies a cut or slow fault of the storage listener.
// Resolves {size, sha256} or rejects.
async function receiveToFile(ctx, dest, limit) {
  const fault = takeFault(ctx.listener, ctx.entry, "body");
  const h256 = crypto.createHash("sha256");
  const fh = await fsp.open(dest, "w");
  let n = 0;
  let batch = [];
  let batched = 0;
  const flush = async () => {
    if (!batched) return;
    const buf = batch.length === 1 ? batch[0] : Buffer.concat(batch, batched);
    batch = [];
    batched = 0;
    await fh.write(buf);
  };
  try {
    for await (const chunk of ctx.req) {
      let c = chunk;
      if (fault?.kind === "cut" && n + c.length >= fault.after_bytes) {
        c = c.subarray(0, fault.after_bytes - n);
        n += c.length;
        ctx.entry.bytes_received += c.length;
        const sock = ctx.req.socket;
        if (sock) sock.destroy();
        throw new Error("connection cut by a fault rule");
      }
      n += c.length;
      ctx.entry.bytes_received += c.length;
      lfsBytesReceived += c.length;
      if (n > limit) throw new Error("more bytes than declared");
      if (fault?.kind === "slow") {
        // Throttled: take the chunk at the rule's rate, in short sleeps so a
        // client that gives up is noticed at once.
        const until = performance.now() + (c.length / fault.bytes_per_sec) * 1000;
        // (not req.destroyed: a request read to its end is auto-destroyed)
        const gone = () => !ctx.req.socket || ctx.req.socket.destroyed || ctx.res.destroyed;
        while (performance.now() < until && !gone()) await sleep(Math.min(100, until - performance.now()));
        if (gone()) throw new Error("the client closed the connection");
      }
      h256.update(c);
      batch.push(c);
      batched += c.length;
      if (batched >= 4 * MiB) await flush();
    }
    await flush();
  } finally {
    await fh.close();
  }
  if (ctx.req.aborted || !ctx.req.complete) throw new Error("the upload ended early");
  return { size: n, sha256: h256.digest("hex") };
}

function lfsJson(ctx, status, value) {
  return sendBody(ctx, status, { "Content-Type": "application/vnd.git-lfs+json; charset=utf-8" }, Buffer.from(JSON.stringify(value)));
}

// POST /api/repos/create {name, organization, type?, private?, visibility?}
async function handleCreateRepo(ctx) {
  let body;
  try {
    body = JSON.parse(await readBody(ctx.req));
  } catch (e) {
    return hubError(ctx, 400, null, `Bad request: ${e.message}`);
  }
  const name = body?.name;
  const org = body?.organization ?? config.user;
  if (typeof name !== "string" || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$/.test(name) || typeof org !== "string" || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$/.test(org)) {
    return hubError(ctx, 400, null, "Bad request: invalid repository name");
  }
  if (body.type !== undefined && body.type !== null && body.type !== "model") {
    return hubError(ctx, 400, null, `Bad request: the stand-in only hosts model repositories, not ${body.type}`);
  }
  const repoId = `${org}/${name}`;
  const existing = checkWrite(ctx, repoId, true);
  if (existing === undefined) return;
  const url = `${ctx.endpoint}/${repoId}`;
  if (existing) return hubError(ctx, 409, null, "You already created this model repo", {});
  const repo = newRepo(repoId);
  repo.private = body.private === true || body.visibility === "private";
  // The Hub's first commit holds a .gitattributes.
  const attrs = Buffer.from("*.gguf filter=lfs diff=lfs merge=lfs -text\n*.bin filter=lfs diff=lfs merge=lfs -text\n*.safetensors filter=lfs diff=lfs merge=lfs -text\n");
  const files = new Map([[".gitattributes", regularEntry(".gitattributes", attrs)]]);
  makeCommit(repo, "main", null, files, "initial commit");
  return sendJson(ctx, 200, { url, name: repoId, id: repo._id });
}

function regularEntry(p, buf) {
  const oid = gitBlobOidOfBuffer(buf);
  const abs = path.join(dataDir, "git", oid);
  if (!fs.existsSync(abs)) {
    fs.mkdirSync(path.dirname(abs), { recursive: true });
    fs.writeFileSync(abs, buf);
  }
  const sha256 = crypto.createHash("sha256").update(buf).digest("hex");
  storeBlob(sha256, abs, buf.length);
  return { path: p, abs, size: buf.length, sha256, lfs: false, oid, pointerSize: 0, lastCommit: null, xetHash: null };
}

function lfsEntry(p, sha256, blob) {
  const ptr = Buffer.from(lfsPointer(sha256, blob.size));
  // Xet-backed when the CAS holds a file with these bytes (uploaded through Xet or published so).
  const xetHash = cas.fileForSha256(sha256)?.hash ?? null;
  return { path: p, abs: blob.abs, size: blob.size, sha256, lfs: true, oid: gitBlobOidOfBuffer(ptr), pointerSize: ptr.length, lastCommit: null, xetHash };
}

// GET /api/whoami-v2
function handleWhoami(ctx) {
  const role = tokenRole(bearer(ctx.req));
  if (role === null || role === "invalid") return hubError(ctx, 401, null, "Invalid credentials in Authorization header");
  return sendJson(ctx, 200, {
    type: "user",
    id: "0123456789abcdef01234567",
    name: config.user,
    fullname: "Hub Stand-in",
    email: "standin@127.0.0.1",
    emailVerified: true,
    isPro: false,
    canPay: false,
    orgs: [],
    auth: { type: "access_token", accessToken: { displayName: `${role} token`, role, createdAt: new Date(0).toISOString() } },
  });
}

// GET /api/models/{ns}/{name}/xet-{read|write}-token/{rev}
function handleXetToken(ctx, repoId, rest, scope) {
  if (ctx.req.method !== "GET") return hubError(ctx, 405, null, "Method not allowed");
  const repo = scope === "write" ? checkWrite(ctx, repoId) : checkAccess(ctx, repoId);
  if (!repo) return;
  if (!xetOn(repo)) return hubError(ctx, 404, "XetNotEnabled", `Xet storage is not enabled for ${repoId}`);
  const rev = rest.map(safeDecode).join("/") || "main";
  if (scope === "read" && !resolveRev(repo, rev)) return revisionNotFound(ctx, rev);
  const t = cas.issueToken(repoId, rev, scope);
  // The JSON body is the spec's answer; older huggingface_hub releases read the headers.
  return sendJson(ctx, 200, t, { "X-Xet-Cas-Url": t.casUrl, "X-Xet-Access-Token": t.accessToken, "X-Xet-Token-Expiration": String(t.exp) });
}

// POST /api/models/{ns}/{name}/preupload/{rev} {files:[{path,size,sample}]}
async function handlePreupload(ctx, repoId, rest) {
  let body;
  try {
    body = JSON.parse(await readBody(ctx.req, 16 << 20));
  } catch (e) {
    return hubError(ctx, 400, null, `Bad request: ${e.message}`);
  }
  const repo = checkWrite(ctx, repoId);
  if (!repo) return;
  const { rev } = rest.length ? splitRev(repo, rest) : { rev: "main" };
  const commit = resolveRev(repo, rev);
  if (!commit) return revisionNotFound(ctx, rev);
  if (!Array.isArray(body?.files)) return hubError(ctx, 400, null, "Bad request: files must be an array");
  const out = [];
  for (const f of body.files) {
    if (!safeRepoPath(f?.path) || !Number.isSafeInteger(f?.size) || f.size < 0 || typeof f?.sample !== "string") {
      return hubError(ctx, 400, null, `Bad request: invalid file entry ${JSON.stringify(f?.path)}`);
    }
    const sample = Buffer.from(f.sample, "base64");
    const mode = wantsLfs(f.path, f.size, sample) ? "lfs" : "regular";
    const e = { path: f.path, uploadMode: mode, shouldIgnore: false };
    const have = commit.files.get(f.path);
    if (have) e.oid = have.lfs ? have.sha256 : have.oid;
    out.push(e);
  }
  return sendJson(ctx, 200, { files: out, commitOid: commit.id });
}

// POST /{ns}/{name}.git/info/lfs/objects/batch
async function handleLfsBatch(ctx, repoId) {
  let body;
  try {
    body = JSON.parse(await readBody(ctx.req, 16 << 20));
  } catch (e) {
    return hubError(ctx, 400, null, `Bad request: ${e.message}`);
  }
  const repo = checkWrite(ctx, repoId);
  if (!repo) return;
  if (body?.operation !== "upload") return hubError(ctx, 400, null, "Bad request: the stand-in accepts operation upload only");
  if (!Array.isArray(body.objects)) return hubError(ctx, 400, null, "Bad request: objects must be an array");
  if (body.hash_algo !== undefined && body.hash_algo !== "sha256" && body.hash_algo !== "sha_256") {
    return hubError(ctx, 400, null, `Bad request: unsupported hash_algo ${body.hash_algo}`);
  }
  const transfers = Array.isArray(body.transfers) ? body.transfers : ["basic"];
  const multipartOk = transfers.includes("multipart");
  const [ns, name] = repoId.split("/");
  const expires = nowSecs() + Number(config.url_ttl_secs);
  const objects = [];
  let usedMultipart = false;
  // Offered "xet" (and Xet is on for the repo): every object to upload names
  // the write-token route, with a token in its headers.
  let xet = null;
  if (transfers.includes("xet") && xetOn(repo)) {
    const rev = typeof body.ref?.name === "string" && body.ref.name ? body.ref.name : "main";
    const tok = cas.issueToken(repoId, rev, "write");
    xet = {
      href: `${ctx.endpoint}/api/models/${ns}/${name}/xet-write-token/${encodeURIComponent(rev)}`,
      header: {
        "X-Xet-Cas-Url": tok.casUrl,
        "X-Xet-Access-Token": tok.accessToken,
        "X-Xet-Token-Expiration": String(tok.exp),
        "X-Xet-Session-Id": crypto.randomUUID(),
      },
    };
  }
  for (const o of body.objects) {
    if (typeof o?.oid !== "string" || !/^[0-9a-f]{64}$/.test(o.oid) || !Number.isSafeInteger(o?.size) || o.size < 0) {
      objects.push({ oid: String(o?.oid), size: o?.size, error: { code: 422, message: "Invalid object: oid must be a SHA-256 and size a non-negative integer" } });
      continue;
    }
    const have = repo.lfs.has(o.oid) ? storedBlob(o.oid) : null;
    if (have && have.size === o.size) {
      objects.push({ oid: o.oid, size: o.size }); // already stored: nothing to do
      continue;
    }
    if (xet) {
      objects.push({ oid: o.oid, size: o.size, authenticated: true, actions: { upload: { href: xet.href, header: { ...xet.header } } } });
      continue;
    }
    const verify = {
      href: config.verify_path
        ? ctx.endpoint + config.verify_path.replaceAll("{repo}", `${ns}/${name}`)
        : `${ctx.endpoint}/${ns}/${name}.git/info/lfs/objects/verify`,
      header: {},
      expires_at: new Date(expires * 1000).toISOString(),
    };
    const threshold = config.multipart_threshold ?? LFS_MULTIPART_THRESHOLD_DEFAULT;
    if (multipartOk && o.size >= threshold) {
      usedMultipart = true;
      const chunk = config.multipart_chunk_size;
      const nParts = Math.max(1, Math.ceil(o.size / chunk));
      const uploadId = crypto.randomBytes(12).toString("hex");
      multipartUploads.set(uploadId, { repoId, oid: o.oid, size: o.size, chunkSize: chunk, nParts, parts: new Map() });
      const header = { chunk_size: String(chunk) };
      for (let i = 1; i <= nParts; i++) {
        const p = `/upload/${encodeURIComponent(ns)}/${encodeURIComponent(name)}/${o.oid}/part/${i}`;
        header[String(i).padStart(5, "0")] = `${storageUrlBase()}${p}?uploadId=${uploadId}&expires=${expires}&sig=${signUpload(p, expires, uploadId)}`;
      }
      const cp = "/api/complete_multipart";
      const complete = `${ctx.endpoint}${cp}?uploadId=${uploadId}&expires=${expires}&sig=${signUpload(cp, expires, uploadId)}`;
      objects.push({ oid: o.oid, size: o.size, authenticated: true, actions: { upload: { href: complete, header, expires_at: verify.expires_at }, verify } });
    } else {
      const p = `/upload/${encodeURIComponent(ns)}/${encodeURIComponent(name)}/${o.oid}`;
      const href = `${storageUrlBase()}${p}?size=${o.size}&expires=${expires}&sig=${signUpload(p, expires, String(o.size))}`;
      objects.push({ oid: o.oid, size: o.size, authenticated: true, actions: { upload: { href, expires_at: verify.expires_at }, verify } });
    }
  }
  return lfsJson(ctx, 200, { transfer: xet ? "xet" : usedMultipart ? "multipart" : "basic", objects, hash_algo: "sha256" });
}

// POST /{ns}/{name}.git/info/lfs/objects/verify {oid, size}
async function handleLfsVerify(ctx, repoId) {
  let body;
  try {
    body = JSON.parse(await readBody(ctx.req));
  } catch (e) {
    return hubError(ctx, 400, null, `Bad request: ${e.message}`);
  }
  const repo = checkWrite(ctx, repoId);
  if (!repo) return;
  const have = typeof body?.oid === "string" && repo.lfs.has(body.oid) ? storedBlob(body.oid) : null;
  if (!have) return hubError(ctx, 404, null, `Object ${body?.oid} not found`);
  if (have.size !== body.size) return hubError(ctx, 422, null, `Object ${body.oid} has ${have.size} bytes, not ${body.size}`);
  return lfsJson(ctx, 200, { message: "Object verified" });
}

// POST /api/complete_multipart?uploadId&expires&sig {oid, parts:[{partNumber, etag}]}
async function handleCompleteMultipart(ctx, url) {
  const uploadId = url.searchParams.get("uploadId") ?? "";
  let body;
  try {
    body = JSON.parse(await readBody(ctx.req));
  } catch (e) {
    return hubError(ctx, 400, null, `Bad request: ${e.message}`);
  }
  const bad = checkUploadSig(url, uploadId);
  if (bad) return hubError(ctx, 403, null, bad);
  const up = multipartUploads.get(uploadId);
  if (!up) {
    // Completed already (a retried completion) or unknown.
    if (repos.get(String(body?.oid ?? "")) === undefined && storedBlob(body?.oid ?? "")) return sendJson(ctx, 200, { ok: true });
    return hubError(ctx, 404, null, "No such upload");
  }
  if (body?.oid !== up.oid || !Array.isArray(body.parts) || body.parts.length !== up.nParts) {
    return hubError(ctx, 400, null, `Bad request: expected oid ${up.oid} and ${up.nParts} parts`);
  }
  const files = [];
  for (let i = 1; i <= up.nParts; i++) {
    const claimed = body.parts.find((p) => p?.partNumber === i);
    const part = up.parts.get(i);
    if (!part) return hubError(ctx, 400, null, `Bad request: part ${i} was never uploaded`);
    if (!claimed || claimed.etag !== part.etag) return hubError(ctx, 400, null, `Bad request: part ${i} has etag ${part.etag}, not ${claimed?.etag}`);
    const want = i < up.nParts ? up.chunkSize : up.size - up.chunkSize * (up.nParts - 1);
    if (part.size !== want) return hubError(ctx, 400, null, `Bad request: part ${i} has ${part.size} bytes, expected ${want}`);
    files.push(part.file);
  }
  const dest = path.join(dataDir, "lfs", up.oid);
  const tmp = `${dest}.${uploadId}.tmp`;
  const h = crypto.createHash("sha256");
  const out = await fsp.open(tmp, "w");
  try {
    for (const f of files) {
      for await (const c of fs.createReadStream(f, { highWaterMark: 4 * MiB })) {
        h.update(c);
        await out.write(c);
      }
    }
  } finally {
    await out.close();
  }
  for (const f of files) await fsp.rm(f, { force: true });
  multipartUploads.delete(uploadId);
  if (h.digest("hex") !== up.oid) {
    await fsp.rm(tmp, { force: true });
    return hubError(ctx, 400, null, `Bad request: the parts' SHA-256 does not match ${up.oid}`);
  }
  await fsp.rename(tmp, dest);
  storeBlob(up.oid, dest, up.size);
  repos.get(up.repoId)?.lfs.add(up.oid);
  return sendJson(ctx, 200, { ok: true });
}

// PUT (storage) /upload/{ns}/{name}/{oid}[?size] and /upload/{ns}/{name}/{oid}/part/{n}?uploadId
async function handleStoragePut(ctx, url) {
  const segs = url.pathname.split("/").slice(1);
  const isPart = segs.length === 6 && segs[4] === "part";
  if (!(segs.length === 4 || isPart) || !/^[0-9a-f]{64}$/.test(segs[3] ?? "")) {
    ctx.req.resume();
    return s3Error(ctx, 404, "NoSuchKey", "The specified key does not exist.");
  }
  if (ctx.req.headers.authorization !== undefined) {
    ctx.req.resume();
    return s3Error(ctx, 400, "InvalidArgument", "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified");
  }
  const oid = segs[3];
  const extra = isPart ? url.searchParams.get("uploadId") ?? "" : url.searchParams.get("size") ?? "";
  const bad = checkUploadSig(url, extra);
  if (bad) {
    ctx.req.resume();
    return s3Error(ctx, 403, "AccessDenied", bad);
  }
  await fsp.mkdir(path.join(dataDir, "lfs"), { recursive: true });
  await fsp.mkdir(path.join(dataDir, "parts"), { recursive: true });
  if (isPart) {
    const up = multipartUploads.get(extra);
    const n = Number(segs[5]);
    if (!up || up.oid !== oid || !Number.isInteger(n) || n < 1 || n > up.nParts) {
      ctx.req.resume();
      return s3Error(ctx, 404, "NoSuchUpload", "The specified upload does not exist.");
    }
    const file = path.join(dataDir, "parts", `${extra}.${n}`);
    let got;
    try {
      got = await receiveToFile(ctx, file, up.chunkSize);
    } catch (e) {
      await fsp.rm(file, { force: true });
      if (!ctx.res.destroyed && !ctx.res.headersSent) return s3Error(ctx, 400, "IncompleteBody", e.message);
      return;
    }
    const etag = `"${got.sha256.slice(0, 32)}"`;
    up.parts.set(n, { file, etag, size: got.size });
    return sendSmallCounted(ctx, 200, { ETag: etag }, "");
  }
  const size = Number(extra);
  const dest = path.join(dataDir, "lfs", oid);
  const tmp = `${dest}.${crypto.randomBytes(6).toString("hex")}.tmp`;
  let got;
  try {
    got = await receiveToFile(ctx, tmp, size);
  } catch (e) {
    await fsp.rm(tmp, { force: true });
    if (!ctx.res.destroyed && !ctx.res.headersSent) return s3Error(ctx, 400, "IncompleteBody", e.message);
    return;
  }
  if (got.size !== size || got.sha256 !== oid) {
    await fsp.rm(tmp, { force: true });
    return s3Error(ctx, 400, "BadDigest", `The uploaded ${got.size} bytes have SHA-256 ${got.sha256}; expected ${size} bytes with ${oid}.`);
  }
  await fsp.rename(tmp, dest);
  storeBlob(oid, dest, size);
  repos.get(`${safeDecode(segs[1])}/${safeDecode(segs[2])}`)?.lfs.add(oid);
  return sendSmallCounted(ctx, 200, { ETag: `"${got.sha256.slice(0, 32)}"` }, "");
}

// POST /api/models/{ns}/{name}/commit/{rev}  (application/x-ndjson)
async function handleCommit(ctx, repoId, rest) {
  let text;
  try {
    text = await readBody(ctx.req, 256 << 20);
  } catch (e) {
    return hubError(ctx, 413, null, e.message);
  }
  const repo = checkWrite(ctx, repoId);
  if (!repo) return;
  const rev = rest.length ? rest.map(safeDecode).join("/") : "main";
  const branch = rev.startsWith("refs/heads/") ? rev.slice(11) : rev;
  if (!repo.branches.has(branch)) {
    if (resolveRev(repo, rev)) return hubError(ctx, 400, null, `Invalid rev id: ${rev} is not a branch`);
    return revisionNotFound(ctx, rev);
  }
  let lines;
  try {
    lines = text.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l));
  } catch (e) {
    return hubError(ctx, 400, null, `Bad request: not NDJSON: ${e.message}`);
  }
  if (!lines.length || lines[0]?.key !== "header" || typeof lines[0].value?.summary !== "string" || !lines[0].value.summary.trim()) {
    return hubError(ctx, 400, null, "Bad request: the first line must be the header with a summary");
  }
  const header = lines[0].value;
  const head = repo.commits.get(repo.branches.get(branch));
  if (header.parentCommit !== undefined && header.parentCommit !== null) {
    const pc = String(header.parentCommit);
    if (!/^[0-9a-f]{7,40}$/.test(pc) || !head.id.startsWith(pc)) {
      return hubError(ctx, 412, null, "A commit has happened since. Please refresh and try again.");
    }
  }
  const files = new Map();
  for (const [p, f] of head.files) files.set(p, { ...f });
  const seen = new Set();
  for (const l of lines.slice(1)) {
    const v = l?.value;
    const p = v?.path;
    if (!safeRepoPath(p)) return hubError(ctx, 400, null, `Bad request: invalid path ${JSON.stringify(p)}`);
    if (seen.has(p)) return hubError(ctx, 400, null, `Bad request: ${p} appears twice in the commit`);
    seen.add(p);
    if (l.key === "file") {
      if (typeof v.content !== "string") return hubError(ctx, 400, null, `Bad request: ${p} has no content`);
      const buf = v.encoding === "base64" ? Buffer.from(v.content, "base64") : Buffer.from(v.content, "utf8");
      if (wantsLfs(p, buf.length, buf.subarray(0, 512))) {
        return hubError(ctx, 400, null, `Your push was rejected because ${p} must be stored with Git LFS (upload it as an lfsFile)`);
      }
      files.set(p, regularEntry(p, buf));
    } else if (l.key === "lfsFile") {
      if ((v.algo ?? "sha256") !== "sha256" || typeof v.oid !== "string" || !/^[0-9a-f]{64}$/.test(v.oid)) {
        return hubError(ctx, 400, null, `Bad request: ${p} needs algo sha256 and a 64-hex oid`);
      }
      const blob = repo.lfs.has(v.oid) ? storedBlob(v.oid) : null;
      if (!blob) return hubError(ctx, 422, null, `Your push was rejected because an LFS pointer for ${p} points to ${v.oid}, which was never uploaded`);
      if (v.size !== undefined && v.size !== blob.size) {
        return hubError(ctx, 422, null, `Your push was rejected: ${p} declares ${v.size} bytes, the LFS object ${v.oid} has ${blob.size}`);
      }
      files.set(p, lfsEntry(p, v.oid, blob));
    } else if (l.key === "deletedFile") {
      if (!files.delete(p)) return hubError(ctx, 404, "EntryNotFound", `Cannot delete ${p}: no such file`);
    } else {
      return hubError(ctx, 400, null, `Bad request: unknown key ${JSON.stringify(l?.key)}`);
    }
  }
  const message = header.summary + (header.description ? `\n\n${header.description}` : "");
  const createPr = ["1", "true"].includes(ctx.url.searchParams.get("create_pr") ?? "");
  if (createPr) {
    // The commit goes to a new refs/pr/N on top of the branch head (as the
    // Hub opens a pull request); the branch does not move.
    repo.prs = repo.prs ?? [];
    const num = repo.prs.length + 1;
    const ref = `refs/pr/${num}`;
    const commit = makeCommit(repo, ref, head, files, message);
    commit.title = header.summary;
    repo.prs.push({ num, ref, title: header.summary, description: header.description ?? "", commit: commit.id, base: branch });
    return sendJson(ctx, 200, {
      success: true,
      commitOid: commit.id,
      commitUrl: `${ctx.endpoint}/${repoId}/commit/${commit.id}`,
      pullRequestUrl: `${ctx.endpoint}/${repoId}/discussions/${num}`,
      hookOutput: "",
    });
  }
  const commit = makeCommit(repo, branch, head, files, message);
  commit.title = header.summary;
  return sendJson(ctx, 200, {
    success: true,
    commitOid: commit.id,
    commitUrl: `${ctx.endpoint}/${repoId}/commit/${commit.id}`,
    hookOutput: "",
  });
}

// POST /api/models/{ns}/{name}/branch/{branch} {startingPoint?}
async function handleCreateBranch(ctx, repoId, rest) {
  let body = {};
  try {
    const t = await readBody(ctx.req);
    body = t ? JSON.parse(t) : {};
  } catch (e) {
    return hubError(ctx, 400, null, `Bad request: ${e.message}`);
  }
  const repo = checkWrite(ctx, repoId);
  if (!repo) return;
  const branch = rest.map(safeDecode).join("/");
  if (!branch || isCommitHash(branch) || branch.startsWith("refs/")) return hubError(ctx, 400, null, `Invalid branch name: ${branch}`);
  if (repo.branches.has(branch)) return hubError(ctx, 409, null, `Reference already exists: refs/heads/${branch}`);
  const from = resolveRev(repo, body?.startingPoint ?? "main");
  if (!from) return revisionNotFound(ctx, body?.startingPoint ?? "main");
  repo.branches.set(branch, from.id);
  return sendJson(ctx, 200, {});
}

// POST /api/models/{ns}/{name}/tag/{revision} {tag, message?} (huggingface_hub's
// HfApi.create_tag: the revision URL-encoded in one segment). 409 when the
// tag exists (wherever it points), 404 RevisionNotFound for an unknown revision.
async function handleCreateTag(ctx, repoId, rest) {
  let body = {};
  try {
    const t = await readBody(ctx.req);
    body = t ? JSON.parse(t) : {};
  } catch (e) {
    return hubError(ctx, 400, null, `Bad request: ${e.message}`);
  }
  const repo = checkWrite(ctx, repoId);
  if (!repo) return;
  const tag = body?.tag;
  if (typeof tag !== "string" || !tag || isCommitHash(tag) || tag.startsWith("refs/") || /[\s~^:?*\[\\]|\.\.|^-/.test(tag)) {
    return hubError(ctx, 400, null, `Invalid tag name: ${JSON.stringify(tag)}`);
  }
  if (body.message !== undefined && typeof body.message !== "string") return hubError(ctx, 400, null, "Bad request: message must be a string");
  const rev = rest.map(safeDecode).join("/");
  const commit = resolveRev(repo, rev || "main");
  if (!commit) return revisionNotFound(ctx, rev);
  if (repo.tags.has(tag)) return hubError(ctx, 409, null, `Tag already exists: refs/tags/${tag}`);
  repo.tags.set(tag, commit.id);
  return sendJson(ctx, 200, {});
}

// -------------------------------------------------------------------- admin

async function handleAdmin(req, res, url) {
  const reply = (status, value) => {
    const buf = Buffer.from(JSON.stringify(value));
    res.writeHead(status, { "Content-Type": "application/json; charset=utf-8", "Content-Length": buf.length });
    res.end(buf);
  };
  try {
    const route = `${req.method} ${url.pathname}`;
    const jsonBody = async () => JSON.parse((await readBody(req, 16 << 20)) || "{}");
    switch (route) {
      case "POST /_admin/repos":
        return reply(200, await publish(await jsonBody()));
      case "GET /_admin/repos": {
        const out = {};
        for (const [id, r] of repos) {
          out[id] = {
            branches: Object.fromEntries(r.branches), tags: Object.fromEntries(r.tags), gated: r.gated, private: r.private,
            xet_enabled: r.xetEnabled, lfs: [...r.lfs], prs: r.prs ?? [],
          };
        }
        return reply(200, out);
      }
      case "POST /_admin/repo-settings": {
        const body = await jsonBody();
        const r = repos.get(body.repo);
        if (!r) throw new Error(`no repo ${body.repo}`);
        if (body.xet_enabled !== undefined) {
          if (body.xet_enabled !== null && typeof body.xet_enabled !== "boolean") throw new Error("xet_enabled must be a boolean or null");
          r.xetEnabled = body.xet_enabled;
        }
        return reply(200, { repo: r.id, xet_enabled: r.xetEnabled });
      }
      case "GET /_admin/log":
        await waitForPending(500);
        return reply(200, log);
      case "DELETE /_admin/log":
        log = [];
        return reply(200, { ok: true });
      case "POST /_admin/faults": {
        const body = await jsonBody();
        const rules = Array.isArray(body) ? body.map(validateFault) : [validateFault(body)];
        faults.push(...rules);
        return reply(200, { ok: true, faults });
      }
      case "GET /_admin/faults":
        return reply(200, faults);
      case "DELETE /_admin/faults":
        faults = [];
        return reply(200, { ok: true });
      case "POST /_admin/config": {
        const body = await jsonBody();
        if (body.token !== undefined) {
          if (body.token !== null && typeof body.token !== "string") throw new Error("token must be a string or null");
          config.token = body.token;
        }
        if (body.url_ttl_secs !== undefined) {
          if (!Number.isInteger(body.url_ttl_secs)) throw new Error("url_ttl_secs must be an integer");
          config.url_ttl_secs = body.url_ttl_secs;
        }
        if (body.reject_unknown_tokens !== undefined) config.reject_unknown_tokens = !!body.reject_unknown_tokens;
        if (body.resolve_cache_redirect !== undefined) config.resolve_cache_redirect = !!body.resolve_cache_redirect;
        if (body.read_token !== undefined) {
          if (body.read_token !== null && typeof body.read_token !== "string") throw new Error("read_token must be a string or null");
          config.read_token = body.read_token;
        }
        for (const k of ["multipart_chunk_size", "multipart_threshold"]) {
          if (body[k] !== undefined) {
            if (!Number.isInteger(body[k]) || body[k] < 1) throw new Error(`${k} must be a positive integer`);
            config[k] = body[k];
          }
        }
        for (const k of ["storage_conn_bytes_per_sec", "url_max_uses"]) {
          if (body[k] !== undefined) {
            if (!Number.isInteger(body[k]) || body[k] < 0) throw new Error(`${k} must be an integer >= 0 (0: off)`);
            config[k] = body[k];
          }
        }
        if (body.storage_ignore_range !== undefined) config.storage_ignore_range = !!body.storage_ignore_range;
        for (const k of ["xet_enabled", "xet_multi_range", "xet_global_dedupe"]) if (body[k] !== undefined) config[k] = !!body[k];
        for (const k of ["xet_token_ttl_secs", "xet_dedupe_expiry_secs", "xet_url_ttl_secs"]) {
          if (body[k] === undefined) continue;
          if (!(Number.isInteger(body[k]) || (k === "xet_url_ttl_secs" && body[k] === null))) throw new Error(`${k} must be an integer`);
          config[k] = body[k];
        }
        if (body.storage_same_origin !== undefined) config.storage_same_origin = !!body.storage_same_origin;
        if (body.verify_path !== undefined) {
          if (body.verify_path !== null && (typeof body.verify_path !== "string" || !body.verify_path.startsWith("/"))) {
            throw new Error("verify_path must be a path starting with / or null");
          }
          config.verify_path = body.verify_path;
        }
        return reply(200, config);
      }
      case "GET /_admin/config":
        return reply(200, config);
      case "DELETE /_admin/uploads": {
        // Forget every uploaded LFS object (benchmarks upload the same bytes again).
        for (const r of repos.values()) r.lfs.clear();
        for (const [sha, copies] of blobs) {
          const kept = copies.filter((b) => b.xet || !b.abs.startsWith(dataDir + path.sep + "lfs"));
          if (kept.length) blobs.set(sha, kept);
          else blobs.delete(sha);
        }
        await fsp.rm(path.join(dataDir, "lfs"), { recursive: true, force: true });
        return reply(200, { ok: true });
      }
      default: {
        if (url.pathname === "/_admin/xet" || url.pathname.startsWith("/_admin/xet/")) {
          const out = await cas.admin(route, url);
          if (out !== undefined) return reply(200, out);
        }
        return reply(404, { error: `no admin route ${route}` });
      }
    }
  } catch (e) {
    return reply(400, { error: e.message });
  }
}

// ---------------------------------------------------------------- listeners

function makeCtx(listener, req, res, url, endpoint) {
  const entry = startEntry(listener, req, url);
  res.on("close", () => finishEntry(entry, res));
  return { listener, req, res, url, entry, endpoint };
}

// The "endless" fault: a size that is a lie, and a body to match, bounded.
async function sendEndless(ctx, f) {
  const { req, res, entry } = ctx;
  res.writeHead(200, { ...baseHeaders(), ...f.headers, "Content-Length": String(req.method === "HEAD" ? f.head_size : f.size) });
  if (req.method === "HEAD") {
    res.end();
    return;
  }
  const chunk = Buffer.alloc(MiB, 0x20);
  let sent = 0;
  while (sent < f.max_bytes && !res.destroyed) {
    const c = chunk.subarray(0, Math.min(chunk.length, f.max_bytes - sent));
    if (!(await writeChunk(res, c))) break;
    sent += c.length;
    entry.bytes_sent += c.length;
  }
  const sock = res.socket;
  if (sock) sock.destroy();
  else res.destroy();
}

function applyStatusFault(ctx) {
  const f = takeFault(ctx.listener, ctx.entry, "request");
  if (!f) return false;
  ctx.req.resume();
  if (f.kind === "endless") {
    sendEndless(ctx, f);
    return true;
  }
  if (f.kind === "hang") {
    // A blackhole: the connection stays open and silent until the client
    // gives up (or 120 s pass: nothing here waits forever).
    const sock = ctx.req.socket;
    const t = setTimeout(() => sock?.destroy(), 120000);
    sock?.once("close", () => clearTimeout(t));
    return true;
  }
  sendSmallCounted(ctx, f.status, { "Content-Type": "application/json; charset=utf-8", ...f.headers }, f.body);
  return true;
}

async function hubHandler(req, res, endpoint) {
  const url = new URL(req.url, "http://127.0.0.1");
  if (url.pathname.startsWith("/_admin/")) return handleAdmin(req, res, url);
  if (config.storage_same_origin && ["/upload/", "/repos/", "/xorbs/"].some((p) => url.pathname.startsWith(p))) {
    return storageHandler(req, res);  // logged as listener "storage"
  }
  const ctx = makeCtx("hub", req, res, url, endpoint);
  if (applyStatusFault(ctx)) return;
  const segs = url.pathname.split("/").slice(1);
  // /api/resolve-cache/models/{ns}/{name}/{commit}/{path...}
  if (segs[0] === "api" && segs[1] === "resolve-cache" && segs[2] === "models" && segs.length >= 7) {
    return handleResolve(ctx, `${safeDecode(segs[3])}/${safeDecode(segs[4])}`, segs.slice(5), true);
  }
  if (req.method === "POST" && url.pathname === "/api/repos/create") return handleCreateRepo(ctx);
  if (url.pathname === "/api/whoami-v2") return handleWhoami(ctx);
  if (req.method === "POST" && url.pathname === "/api/complete_multipart") return handleCompleteMultipart(ctx, url);
  if (segs[0] === "api") return handleApi(ctx, segs.slice(1), url);
  // /{ns}/{name}.git/info/lfs/objects/{batch|verify}
  if (segs.length === 6 && segs[1].endsWith(".git") && segs[2] === "info" && segs[3] === "lfs" && segs[4] === "objects") {
    const repoId = `${safeDecode(segs[0])}/${safeDecode(segs[1]).slice(0, -4)}`;
    if (req.method === "POST" && segs[5] === "batch") return handleLfsBatch(ctx, repoId);
    if (req.method === "POST" && segs[5] === "verify") return handleLfsVerify(ctx, repoId);
  }
  // /datasets/{ns}/{name}/resolve/{rev}/{path...} (a dataset is the repo "datasets/{ns}/{name}")
  if (segs[0] === "datasets" && segs.length >= 5 && segs[3] === "resolve") {
    return handleResolve(ctx, `datasets/${safeDecode(segs[1])}/${safeDecode(segs[2])}`, segs.slice(4));
  }
  // /{ns}/{name}/resolve/{rev}/{path...}
  if (segs.length >= 4 && segs[2] === "resolve") {
    return handleResolve(ctx, `${safeDecode(segs[0])}/${safeDecode(segs[1])}`, segs.slice(3));
  }
  return hubError(ctx, 404, null, "Not Found");
}

function storageHandler(req, res) {
  const url = new URL(req.url, "http://127.0.0.1");
  const ctx = makeCtx("storage", req, res, url, null);
  if (applyStatusFault(ctx)) return;
  if (req.method === "PUT" && url.pathname.startsWith("/upload/")) return handleStoragePut(ctx, url);
  if ((req.method === "GET" || req.method === "HEAD") && url.pathname.startsWith("/xorbs/")) return cas.getXorbBytes(ctx, url);
  if (req.method !== "GET" && req.method !== "HEAD") return s3Error(ctx, 405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
  if (req.headers.authorization !== undefined) {
    return s3Error(ctx, 400, "InvalidArgument",
      "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified");
  }
  const expires = url.searchParams.get("expires") ?? "";
  const serial = url.searchParams.get("n") ?? "";
  const sig = url.searchParams.get("sig") ?? "";
  const want = crypto.createHmac("sha256", secret).update(`${url.pathname}\n${expires}\n${serial}`).digest();
  const got = /^[0-9a-f]{64}$/.test(sig) ? Buffer.from(sig, "hex") : Buffer.alloc(0);
  if (got.length !== want.length || !crypto.timingSafeEqual(got, want)) {
    return s3Error(ctx, 403, "AccessDenied", "The request signature we calculated does not match the signature you provided.");
  }
  if (!/^\d+$/.test(expires) || Number(expires) <= nowSecs()) return s3Error(ctx, 403, "AccessDenied", "Request has expired");
  const uses = (urlUses.get(sig) ?? 0) + 1;
  urlUses.set(sig, uses);
  if (config.url_max_uses > 0 && uses > config.url_max_uses) return s3Error(ctx, 403, "AccessDenied", "Request has expired");
  if (config.storage_ignore_range) delete ctx.req.headers.range;
  const sha = url.pathname.split("/").pop();
  // A copy whose directory a test has since removed no longer serves.
  const blob = storedBlob(sha);
  if (!blob) return s3Error(ctx, 404, "NoSuchKey", "The specified key does not exist.");
  const headers = {
    "Content-Type": "application/octet-stream",
    ETag: `"${sha}"`,
    "Accept-Ranges": "bytes",
    "Cache-Control": "public, max-age=604800, immutable",
  };
  const disp = url.searchParams.get("response-content-disposition");
  if (disp) headers["Content-Disposition"] = disp;
  return sendRanged(ctx, headers, blob.size, (start, end) => blobSource(blob, start, end));
}

function listen(server) {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve(server.address().port));
  });
}

const wrap = (fn) => (req, res) => {
  Promise.resolve(fn(req, res)).catch((err) => {
    process.stderr.write(`hub_standin: ${err.stack ?? err}\n`);
    if (!res.headersSent) {
      res.writeHead(500, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ error: String(err.message ?? err) }));
    } else {
      res.destroy();
    }
  });
};

let endpoint = "";
const hub = http.createServer(wrap((req, res) => hubHandler(req, res, endpoint)));
const storage = http.createServer(wrap(storageHandler));
const casServer = http.createServer(
  wrap((req, res) => {
    const url = new URL(req.url, "http://127.0.0.1");
    const ctx = makeCtx("cas", req, res, url, endpoint);
    if (applyStatusFault(ctx)) return;
    return cas.handle(ctx, url);
  }),
);
const hubPort = await listen(hub);
const storagePort = await listen(storage);
const casPort = await listen(casServer);
endpoint = `http://127.0.0.1:${hubPort}`;
storageBase = `http://127.0.0.1:${storagePort}`;
casBase = `http://127.0.0.1:${casPort}`;

process.on("SIGTERM", () => process.exit(0));
process.on("SIGINT", () => process.exit(0));
process.stdin.on("end", () => process.exit(0));
process.stdin.on("error", () => process.exit(0));
process.stdin.resume();

process.stdout.write(JSON.stringify({ endpoint, storage: storageBase, cas: casBase }) + "\n");
