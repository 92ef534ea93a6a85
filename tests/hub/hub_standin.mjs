#!/usr/bin/env node
// A local stand-in for the Hugging Face Hub (huggingface.co) and for the
// storage (CDN / S3) that LFS downloads are redirected to, for tests and
// benchmarks. Node builtins only.
//
//   node tests/hub/hub_standin.mjs
//
// Listens on two ephemeral 127.0.0.1 ports and, once both listen, prints one
// line to stdout:
//   {"endpoint":"http://127.0.0.1:P1","storage":"http://127.0.0.1:P2"}
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
// Storage listener:
//   GET|HEAD /repos/{ns}/{name}/{sha256}?expires=<unix s>&sig=<hex HMAC-SHA256(secret, path "\n" expires)>
//     400 (S3 "InvalidArgument") when the request has an Authorization header;
//     403 (S3 "AccessDenied") for a bad signature or expires <= now;
//     Range bytes=N- / N-M / -N -> 206 + Content-Range, 416 when unsatisfiable;
//     200 otherwise. Files are streamed from where they were published.
//
// Admin API on the hub listener (never logged):
//   POST   /_admin/repos   {"repo":"ns/name","dir":"/abs","branch":"main","tags":[],
//                           "gated":false,"private":false,"message":"..."}
//          -> {"commit","files":[{path,size,sha256,lfs,oid}]}
//          gated/private are repo-wide and change only when given.
//   GET    /_admin/repos   -> {repo: {branches,tags,gated,private}}
//   GET    /_admin/log     -> [{listener,method,path,query,range,authorization,status,bytes_sent}]
//          (waits up to 500 ms for requests still being answered)
//   DELETE /_admin/log
//   POST   /_admin/faults  a rule {match, listener?, method?, kind, times?=1 (-1: forever), ...}
//            kind "status":  status, headers?, body? (answer instead of the real handler)
//            kind "cut":     after_bytes (send that many body bytes, then close the socket)
//            kind "corrupt": offset (flip the body byte at that offset)
//            kind "slow":    bytes_per_sec (throttle the body: keeps downloads in
//                            flight long enough for concurrency tests)
//          status rules are taken when a request arrives; cut/corrupt rules when
//          a 2xx body starts. Rules are tried in order; the first match is used.
//   GET    /_admin/faults, DELETE /_admin/faults
//   POST   /_admin/config  {"token":"hf_test","url_ttl_secs":3600,"reject_unknown_tokens":false,
//                           "resolve_cache_redirect":false}   (these are the defaults; any subset)
//   GET    /_admin/config
import http from "node:http";
import crypto from "node:crypto";
import fs from "node:fs";
import fsp from "node:fs/promises";
import path from "node:path";

const MiB = 1024 * 1024;
const LFS_THRESHOLD = MiB;

const config = { token: "hf_test", url_ttl_secs: 3600, reject_unknown_tokens: false, resolve_cache_redirect: false };
const secret = crypto.randomBytes(32);
const repos = new Map(); // "ns/name" -> Repo
const blobs = new Map(); // sha256 -> [{ abs, size }]: every published copy (content-addressed, like S3)
let log = [];
let faults = [];
let pending = 0;
let pendingWaiters = [];
let publishSeq = 0;
let storageBase = "";

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
  if (typeof repoId !== "string" || !/^[^/\s]+\/[^/\s]+$/.test(repoId)) throw new Error("repo must be ns/name");
  if (typeof body.dir !== "string" || !path.isAbsolute(body.dir)) throw new Error("dir must be an absolute path");
  const branch = body.branch ?? "main";
  const tags = body.tags ?? [];
  if (typeof branch !== "string" || !branch || isCommitHash(branch)) throw new Error("bad branch");
  if (!Array.isArray(tags) || tags.some((t) => typeof t !== "string" || !t)) throw new Error("bad tags");

  const found = await listFilesUnder(body.dir);
  let repo = repos.get(repoId);
  const parent = repo?.branches.get(branch) ? repo.commits.get(repo.branches.get(branch)) : null;

  const files = new Map();
  for (const f of found) {
    const lfs = f.rel.endsWith(".gguf") || f.size >= LFS_THRESHOLD;
    const { sha256, gitOid } = await hashFile(f.abs, f.size, !lfs);
    const entry = { path: f.rel, abs: f.abs, size: f.size, sha256, lfs, oid: gitOid, pointerSize: 0, lastCommit: null };
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

  const trees = treeOids(files);
  const seq = ++publishSeq;
  const secs = nowSecs();
  const title = typeof body.message === "string" && body.message ? body.message : `Publish ${seq}`;
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
    f.lastCommit = before && before.oid === f.oid ? before.lastCommit : self;
  }

  if (!repo) {
    repo = {
      id: repoId,
      _id: crypto.randomBytes(12).toString("hex"),
      createdAt: commit.date,
      gated: false,
      private: false,
      branches: new Map(),
      tags: new Map(),
      commits: new Map(),
    };
    repos.set(repoId, repo);
  }
  if (typeof body.gated === "boolean") repo.gated = body.gated;
  if (typeof body.private === "boolean") repo.private = body.private;
  repo.commits.set(id, commit);
  repo.branches.set(branch, id);
  for (const t of tags) repo.tags.set(t, id);
  return {
    commit: id,
    files: [...files.values()].map((f) => ({ path: f.path, size: f.size, sha256: f.sha256, lfs: f.lfs, oid: f.oid })),
  };
}

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
    status: 0,
    bytes_sent: 0,
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

function takeFault(listener, entry, phase) {
  for (let i = 0; i < faults.length; i++) {
    const r = faults[i];
    const isStatus = r.kind === "status";
    if ((phase === "request") !== isStatus) continue;
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
  if (!["status", "cut", "corrupt", "slow"].includes(r.kind)) throw new Error("kind must be status, cut, corrupt or slow");
  if (r.listener !== undefined && !["hub", "storage"].includes(r.listener)) throw new Error("listener must be hub or storage");
  if (r.match !== undefined && typeof r.match !== "string") throw new Error("match must be a string");
  const times = r.times ?? 1;
  if (!Number.isInteger(times) || times === 0 || times < -1) throw new Error("times must be a positive integer or -1");
  const rule = { match: r.match ?? "", listener: r.listener ?? null, method: r.method ?? null, kind: r.kind, times };
  if (r.kind === "status") {
    if (!Number.isInteger(r.status) || r.status < 100 || r.status > 599) throw new Error("status must be an HTTP status");
    rule.status = r.status;
    rule.headers = r.headers ?? {};
    rule.body = r.body ?? JSON.stringify({ error: `injected fault: HTTP ${r.status}` });
  } else if (r.kind === "cut") {
    if (!Number.isInteger(r.after_bytes) || r.after_bytes < 0) throw new Error("after_bytes must be >= 0");
    rule.after_bytes = r.after_bytes;
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

// Sends a 2xx body from a Buffer or a file range, applying cut/corrupt faults
// and counting the body bytes handed to the socket.
async function sendBody(ctx, status, headers, source) {
  const { req, res, entry } = ctx;
  const length = Buffer.isBuffer(source) ? source.length : source.end - source.start + 1;
  res.writeHead(status, { ...baseHeaders(), ...headers, "Content-Length": length });
  if (req.method === "HEAD" || length === 0) {
    res.end();
    return;
  }
  const fault = status >= 200 && status < 300 ? takeFault(ctx.listener, entry, "body") : null;
  const slow = fault?.kind === "slow" ? fault.bytes_per_sec : 0;
  const chunks = Buffer.isBuffer(source)
    ? [source]
    : fs.createReadStream(source.abs, {
        start: source.start,
        end: source.end,
        highWaterMark: slow ? Math.max(1, Math.min(MiB, Math.floor(slow / 20))) : MiB,
      });
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
      if (!(await writeChunk(res, chunk))) break;
      off += chunk.length;
      entry.bytes_sent += chunk.length;
    }
    if (!res.destroyed) res.end();
  } catch (err) {
    process.stderr.write(`hub_standin: body error: ${err.message}\n`);
    res.destroy();
  } finally {
    if (!Buffer.isBuffer(chunks)) chunks.destroy?.();
  }
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
  const valid = token !== null && token === config.token;
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
  const sig = crypto.createHmac("sha256", secret).update(`${p}\n${expires}`).digest("hex");
  const base = path.posix.basename(f.path);
  const disp = `inline; filename*=UTF-8''${encodeURIComponent(base)}; filename="${base}";`;
  return `${storageBase}${p}?response-content-disposition=${encodeURIComponent(disp)}&expires=${expires}&sig=${sig}`;
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
    const location = signStorageUrl(repoId, f);
    return sendSmallCounted(
      ctx,
      302,
      {
        Location: location,
        "Content-Type": "text/plain; charset=utf-8",
        ETag: `"${f.oid}"`,
        "X-Linked-Etag": `"${f.sha256}"`,
        "X-Linked-Size": String(f.size),
        Vary: "Origin, Accept",
        ...commitHeader,
      },
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

function treeEntry(commit, p, expand) {
  const f = commit.files.get(p);
  let e;
  if (f) {
    e = { type: "file", oid: f.oid, size: f.size, path: f.path };
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
  // segs: ["models", ns, name, ...]
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
      const e = treeEntry(commit, p.replace(/^\/+|\/+$/g, ""), body.expand);
      if (e) out.push(e);
    }
    return sendJson(ctx, 200, out);
  }

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
    const out = childrenOf(commit, dir, recursive).map((p) => treeEntry(commit, p, expand));
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
          out[id] = { branches: Object.fromEntries(r.branches), tags: Object.fromEntries(r.tags), gated: r.gated, private: r.private };
        }
        return reply(200, out);
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
        return reply(200, config);
      }
      case "GET /_admin/config":
        return reply(200, config);
      default:
        return reply(404, { error: `no admin route ${route}` });
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

function applyStatusFault(ctx) {
  const f = takeFault(ctx.listener, ctx.entry, "request");
  if (!f) return false;
  ctx.req.resume();
  sendSmallCounted(ctx, f.status, { "Content-Type": "application/json; charset=utf-8", ...f.headers }, f.body);
  return true;
}

async function hubHandler(req, res, endpoint) {
  const url = new URL(req.url, "http://127.0.0.1");
  if (url.pathname.startsWith("/_admin/")) return handleAdmin(req, res, url);
  const ctx = makeCtx("hub", req, res, url, endpoint);
  if (applyStatusFault(ctx)) return;
  const segs = url.pathname.split("/").slice(1);
  // /api/resolve-cache/models/{ns}/{name}/{commit}/{path...}
  if (segs[0] === "api" && segs[1] === "resolve-cache" && segs[2] === "models" && segs.length >= 7) {
    return handleResolve(ctx, `${safeDecode(segs[3])}/${safeDecode(segs[4])}`, segs.slice(5), true);
  }
  if (segs[0] === "api") return handleApi(ctx, segs.slice(1), url);
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
  if (req.method !== "GET" && req.method !== "HEAD") return s3Error(ctx, 405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
  if (req.headers.authorization !== undefined) {
    return s3Error(ctx, 400, "InvalidArgument",
      "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified");
  }
  const expires = url.searchParams.get("expires") ?? "";
  const sig = url.searchParams.get("sig") ?? "";
  const want = crypto.createHmac("sha256", secret).update(`${url.pathname}\n${expires}`).digest();
  const got = /^[0-9a-f]{64}$/.test(sig) ? Buffer.from(sig, "hex") : Buffer.alloc(0);
  if (got.length !== want.length || !crypto.timingSafeEqual(got, want)) {
    return s3Error(ctx, 403, "AccessDenied", "The request signature we calculated does not match the signature you provided.");
  }
  if (!/^\d+$/.test(expires) || Number(expires) <= nowSecs()) return s3Error(ctx, 403, "AccessDenied", "Request has expired");
  const sha = url.pathname.split("/").pop();
  // A copy whose directory a test has since removed no longer serves.
  const blob = (blobs.get(sha) ?? []).find((b) => fs.existsSync(b.abs));
  if (!blob) return s3Error(ctx, 404, "NoSuchKey", "The specified key does not exist.");
  const headers = {
    "Content-Type": "application/octet-stream",
    ETag: `"${sha}"`,
    "Accept-Ranges": "bytes",
    "Cache-Control": "public, max-age=604800, immutable",
  };
  const disp = url.searchParams.get("response-content-disposition");
  if (disp) headers["Content-Disposition"] = disp;
  return sendRanged(ctx, headers, blob.size, (start, end) => ({ abs: blob.abs, start, end }));
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
const hubPort = await listen(hub);
const storagePort = await listen(storage);
endpoint = `http://127.0.0.1:${hubPort}`;
storageBase = `http://127.0.0.1:${storagePort}`;

process.on("SIGTERM", () => process.exit(0));
process.on("SIGINT", () => process.exit(0));
process.stdin.on("end", () => process.exit(0));
process.stdin.on("error", () => process.exit(0));
process.stdin.resume();

process.stdout.write(JSON.stringify({ endpoint, storage: storageBase }) + "\n");
