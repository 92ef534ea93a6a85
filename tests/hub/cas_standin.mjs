// The Xet CAS half of the local Hub stand-in (tests/hub/hub_standin.mjs owns
// the listeners, the log, the faults and the Hub-side endpoints; this module
// owns what the CAS stores and answers). Formats: tests/hub/xet_format.mjs.
//
// CAS listener (the casUrl the token endpoints hand out). Every route needs
// "Authorization: Bearer <accessToken>" from xet-read-token / xet-write-token
// (or the LFS batch's X-Xet-Access-Token): none or unknown -> 401, expired
// (exp <= now, or tokens expired by the admin) -> 401 {"error":"... expired"},
// a read token on a write route -> 403. {prefix} is "default" or
// "default-merkledb" (both accepted everywhere; anything else -> 400).
// Errors are JSON {"error": message}.
//   POST /v1/xorbs/{prefix}/{xorb hash}  body: the serialized xorb (with or
//       without xet-core's footer). Every chunk is decoded (none / LZ4 frame /
//       BG4 + LZ4 frame) and hashed, the xorb hash recomputed and the footer
//       checked; 400 naming the first problem. -> {"was_inserted": bool}
//       (false: already stored, body not examined).
//   HEAD /v1/xorbs/{prefix}/{xorb hash}  -> 200 with Content-Length | 404
//   POST /v1/shards  body: a shard (footer optional). Checked before anything
//       is registered: every CAS info block against the stored xorb (chunk
//       hashes, sizes, offsets); every file info: verification entries and the
//       sha256 metadata extension present, terms within stored xorbs, each
//       term's unpacked size and verification hash, the file hash over all its
//       chunks, then the file rebuilt from its terms and its SHA-256 compared.
//       -> {"result": 1} | 400 {"error"}. A registered file becomes an LFS
//       object of the token's repository (its sha256), so a commit's lfsFile
//       line can name it; its chunks enter the global dedupe index (the first
//       chunk of each file, chunks whose hash % 1024 == 0 and chunks flagged
//       1<<31 in the CAS info, for the xorbs the shard's CAS info lists).
//   POST /v2/shards  the same; 200 application/x-ndjson: {"type":"validating",
//       "verified":0,"total":N}, {"type":"validating","verified":N,"total":N},
//       {"type":"committing","stage":"uploading"}, {"type":"committing",
//       "stage":"syncing"}, {"type":"result","result":1}; a refusal ends the
//       stream with {"type":"error","message":...,"retryable":false} instead.
//   GET /v1/chunks/{prefix}/{chunk hash}  global dedupe: 404 unless the chunk is
//       in the index (never with config xet_global_dedupe false); else 200 application/octet-stream: a shard with no file
//       info, the CAS info of every xorb listed by the shard that indexed the
//       chunk, each chunk hash replaced by keyed-BLAKE3(key, hash) (xet-core's
//       "HMAC"), eligible chunks flagged 1<<31, and the 200-byte footer with the
//       key (fresh per answer) and key expiry (now + xet_dedupe_expiry_secs).
//   GET /v2/reconstructions/{file hash}  [Range: bytes=a-b | a- | -n]
//       -> {"offset_into_first_range", "terms": [{"hash", "unpacked_length",
//       "range": {"start","end"}}], "xorbs": {xorb: [{"url", "ranges":
//       [{"chunks": {"start","end"}, "bytes": {"start","end"}}]}]}} as xet-core
//       computes it (terms trimmed to the chunks the range touches, a xorb's
//       ranges merged where they touch; bytes end-inclusive). 404 unknown file,
//       416 when the range starts at or past the end. With config
//       xet_multi_range false each range gets its own entry and URL.
//   GET /v1/reconstructions/{file hash}  the same terms; "fetch_info": {xorb:
//       [{"range": {"start","end"}, "url", "url_range": {"start","end"}}]}.
//   HEAD /v1/files/{file hash}  -> 200 with Content-Length (the file's size) | 404
// Storage listener (and the Hub's origin with storage_same_origin):
//   GET|HEAD /xorbs/default/{xorb}?X-Xet-Signed-Range=bytes%3Da-b%2Cc-d&Expires=T&n=N&Signature=S
//       Signed by the CAS for exactly those ranges. 400 with an Authorization
//       header; 403 AccessDenied for a bad signature, an expired URL (also
//       after config url_max_uses requests on it), no Range header, or a
//       Range outside the signed set. One range -> 206 with
//       Content-Range; several -> 206 multipart/byteranges (each part with
//       Content-Type and Content-Range), unless a fault refuses it.
//
// Fault kinds (rules of POST /_admin/faults, matched as the others are):
//   xet_expired_token (cas): 401 "token expired" however fresh the token.
//   xet_refuse_shard (cas, message?, retryable?): the shard is refused (v1: 400;
//       v2: a terminal error event).
//   xet_bad_terms (cas, mode: unpacked_length | chunk_range | unknown_xorb |
//       missing_fetch | offset): the reconstruction lies in that way (first term).
//   xet_wrong_bytes (storage): each served range has the byte after its first
//       chunk header flipped (a clean HTTP answer with wrong content).
//   xet_short_read (storage, drop_bytes? = 1000): each served range is shorter
//       by that many bytes, Content-Range and Content-Length agreeing.
//   xet_refuse_multirange (storage): 403 for a Range with more than one range.
// Admin (on the Hub listener): GET|DELETE /_admin/xet (counters and what was
// received), GET|DELETE /_admin/xet/store (what is stored / forget it all),
// POST /_admin/xet/expire-tokens. GET /_admin/xet/store?chunks=1 adds each
// xorb's chunk_list [{hash, size, start, end}] (start/end: serialized bytes).
import crypto from "node:crypto";
import fsp from "node:fs/promises";
import path from "node:path";
import {
  KiB, MiB, MAX_XORB_BYTES, MAX_XORB_CHUNKS, MAX_SHARD_BYTES, SCHEME_NAMES, XetFormatError,
  hashToHex, hexToHash, isDedupEligibleHash, loadXetWasm, verifyXorb, decodeChunk, parseShard, buildShard,
  fileHash, verificationHash, hmacHash, globalDedupFlag,
} from "./xet_format.mjs";
import { publishThroughXet } from "./xet_publish.mjs";

const PREFIXES = new Set(["default", "default-merkledb"]);
const nowSecs = () => Math.floor(Date.now() / 1000);
const RANGES_PER_URL = 128;

export function createCas(host) {
  const xorbDir = path.join(host.dataDir, "xorbs");
  const xorbs = new Map(); // hex -> {hash, abs, size, chunks: [{hash, size, start, end}]}
  const files = new Map(); // hex -> {hash, size, sha256 (hex), terms: [{xorb (hex), start, end, size}]}
  const bySha = new Map(); // sha256 hex -> file hex (the latest registration)
  let shards = []; // {xorbs: [hex], files: [hex], route}
  const dedupe = new Map(); // chunk hex -> index into shards
  const tokens = new Map(); // accessToken -> {repo, rev, scope, exp}
  let stats = freshStats();
  let wasmError = null;
  const ready = loadXetWasm().catch((e) => {
    wasmError = e.message;
  });

  function freshStats() {
    return {
      bytes: { xorb_upload: 0, shard_upload: 0, lfs_upload: 0, xorb_download: 0, dedupe_answered: 0 },
      xorbs: [],
      shards: [],
      dedupe_queries: [],
      reconstructions: [],
      chunk_schemes: { none: 0, lz4: 0, bg4_lz4: 0 },
      tokens_issued: { read: 0, write: 0 },
      sessions: [],
    };
  }

  // ------------------------------------------------------------- tokens

  function issueToken(repo, rev, scope) {
    const accessToken = `xet_${crypto.randomBytes(24).toString("hex")}`;
    const exp = nowSecs() + Number(host.config.xet_token_ttl_secs);
    tokens.set(accessToken, { repo, rev, scope, exp });
    stats.tokens_issued[scope]++;
    return { accessToken, exp, casUrl: host.casBase() };
  }

  function casError(ctx, status, message) {
    host.sendSmallCounted(ctx, status, { "Content-Type": "application/json; charset=utf-8" }, JSON.stringify({ error: message }));
  }

  // The token's record, or null once the request has been answered.
  function authorize(ctx, scope) {
    const h = ctx.req.headers.authorization ?? "";
    const m = /^Bearer\s+(\S+)$/i.exec(h.trim());
    if (!m) return casError(ctx, 401, "Missing Authorization: Bearer <xet access token>"), null;
    const t = tokens.get(m[1]);
    if (!t) return casError(ctx, 401, "Invalid xet access token"), null;
    if (t.exp <= nowSecs() || host.takeFault(ctx.listener, ctx.entry, "xet", "xet_expired_token")) {
      return casError(ctx, 401, "Xet access token expired; refresh it"), null;
    }
    if (scope === "write" && t.scope !== "write") {
      return casError(ctx, 403, `This xet token has the read scope; ${ctx.req.method} ${ctx.entry.path} needs write`), null;
    }
    const session = ctx.req.headers["x-xet-session-id"];
    if (session && !stats.sessions.includes(session)) stats.sessions.push(session);
    return t;
  }

  // ------------------------------------------------------------- xorbs

  async function storeXorb(hex, body, via) {
    if (xorbs.has(hex)) return false;
    const parsed = verifyXorb(body, hexToHash(hex));
    await fsp.mkdir(xorbDir, { recursive: true });
    const abs = path.join(xorbDir, hex);
    const tmp = `${abs}.${crypto.randomBytes(6).toString("hex")}.tmp`;
    await fsp.writeFile(tmp, body);
    await fsp.rename(tmp, abs);
    const chunks = parsed.chunks.map(({ hash, size, start, end }) => ({ hash, size, start, end }));
    const schemes = { none: 0, lz4: 0, bg4_lz4: 0 };
    for (const c of parsed.chunks) schemes[SCHEME_NAMES[c.scheme]]++;
    xorbs.set(hex, { hash: hexToHash(hex), abs, size: body.length, chunks, schemes });
    if (via === "upload") for (const k of Object.keys(schemes)) stats.chunk_schemes[k] += schemes[k];
    return { chunks: chunks.length, schemes };
  }

  async function postXorb(ctx, prefix, hex) {
    if (!authorize(ctx, "write")) return;
    let body;
    try {
      body = await host.readBodyBuffer(ctx, MAX_XORB_BYTES + MAX_XORB_CHUNKS * 40 + KiB);
    } catch (e) {
      if (!ctx.res.headersSent && !ctx.res.destroyed) casError(ctx, 400, `xorb ${hex}: ${e.message}`);
      return;
    }
    stats.bytes.xorb_upload += body.length;
    const rec = { hash: hex, bytes: body.length, prefix, status: "exists" };
    stats.xorbs.push(rec);
    try {
      const stored = await storeXorb(hex, body, "upload");
      if (stored) Object.assign(rec, { status: "stored" }, stored);
      return host.sendJson(ctx, 200, { was_inserted: !!stored });
    } catch (e) {
      if (!(e instanceof XetFormatError)) throw e;
      rec.status = "refused";
      rec.error = e.message;
      return casError(ctx, 400, `xorb ${hex}: ${e.message}`);
    }
  }

  async function readRange(abs, start, end) {
    const fh = await fsp.open(abs, "r");
    try {
      const buf = Buffer.allocUnsafe(end - start);
      const { bytesRead } = await fh.read(buf, 0, buf.length, start);
      if (bytesRead !== buf.length) throw new Error(`${abs}: short read`);
      return buf;
    } finally {
      await fh.close();
    }
  }

  // The decoded bytes of file `rec` in [from, to), as a stream of Buffers.
  async function* fileBytes(rec, from = 0, to = rec.size) {
    let off = 0;
    for (const t of rec.terms) {
      const termEnd = off + t.size;
      if (off >= to) return;
      if (termEnd > from) {
        const x = xorbs.get(t.xorb);
        if (!x) throw new Error(`xorb ${t.xorb} is no longer stored`);
        let c = t.start;
        let cOff = off;
        while (c < t.end && cOff + x.chunks[c].size <= from) cOff += x.chunks[c++].size;
        while (c < t.end && cOff < to) {
          const base = x.chunks[c].start;
          let last = c;
          while (last + 1 < t.end && x.chunks[last + 1].end - base <= 8 * MiB) last++;
          const raw = await readRange(x.abs, base, x.chunks[last].end);
          for (; c <= last && cOff < to; c++) {
            const ch = x.chunks[c];
            const { data } = decodeChunk(raw.subarray(ch.start - base, ch.end - base), `xorb ${t.xorb} chunk ${c}`);
            const lo = Math.max(0, from - cOff);
            const hi = Math.min(data.length, to - cOff);
            if (hi > lo) yield lo === 0 && hi === data.length ? data : data.subarray(lo, hi);
            cOff += data.length;
          }
        }
      }
      off = termEnd;
    }
  }

  // ------------------------------------------------------------- shards

  // Checks a shard against the store and registers its files and xorbs;
  // throws XetFormatError naming the first problem (nothing is registered then).
  async function registerShard(body, repo, route) {
    const shard = parseShard(body);
    if (shard.footer && !shard.footer.hmacKey.equals(Buffer.alloc(32))) {
      throw new XetFormatError("an uploaded shard's chunk hashes must not be keyed (its footer has an HMAC key)");
    }
    const listed = [];
    for (const [i, b] of shard.xorbs.entries()) {
      const hex = hashToHex(b.hash);
      const where = `CAS info ${i} (xorb ${hex})`;
      const x = xorbs.get(hex);
      if (!x) throw new XetFormatError(`${where}: the xorb was never uploaded`);
      if (b.chunks.length !== x.chunks.length) throw new XetFormatError(`${where}: lists ${b.chunks.length} chunks, the xorb holds ${x.chunks.length}`);
      let off = 0;
      for (const [k, c] of b.chunks.entries()) {
        const s = x.chunks[k];
        if (!c.hash.equals(s.hash)) throw new XetFormatError(`${where} chunk ${k}: hash ${hashToHex(c.hash)} is not the stored chunk's ${hashToHex(s.hash)}`);
        if (c.size !== s.size) throw new XetFormatError(`${where} chunk ${k}: ${c.size} bytes, the stored chunk has ${s.size}`);
        if (c.offset !== off) throw new XetFormatError(`${where} chunk ${k}: unpacked offset ${c.offset}, expected ${off}`);
        off += s.size;
      }
      if (b.size !== off) throw new XetFormatError(`${where}: says ${b.size} unpacked bytes, the chunks hold ${off}`);
      listed.push({ hex, flagged: b.chunks.map((c) => (c.flags & globalDedupFlag) !== 0) });
    }
    const fileRecs = [];
    for (const [i, f] of shard.files.entries()) {
      const fhex = hashToHex(f.hash);
      const where = `file info ${i} (file ${fhex})`;
      if (!f.verification) throw new XetFormatError(`${where}: no verification entries (uploads must carry them)`);
      if (!f.sha256) throw new XetFormatError(`${where}: no sha256 metadata extension (a git repository needs the file's SHA-256)`);
      const all = [];
      const terms = [];
      for (const [k, t] of f.terms.entries()) {
        const xhex = hashToHex(t.xorb);
        const x = xorbs.get(xhex);
        if (!x) throw new XetFormatError(`${where} term ${k}: xorb ${xhex} was never uploaded`);
        if (t.end > x.chunks.length) throw new XetFormatError(`${where} term ${k}: chunks [${t.start}, ${t.end}) of xorb ${xhex}, which holds ${x.chunks.length}`);
        const chunks = x.chunks.slice(t.start, t.end);
        const size = chunks.reduce((n, c) => n + c.size, 0);
        if (size !== t.size) throw new XetFormatError(`${where} term ${k}: says ${t.size} unpacked bytes, chunks [${t.start}, ${t.end}) of xorb ${xhex} hold ${size}`);
        if (!verificationHash(chunks.map((c) => c.hash)).equals(f.verification[k])) {
          throw new XetFormatError(`${where} term ${k}: the verification hash does not match chunks [${t.start}, ${t.end}) of xorb ${xhex}`);
        }
        all.push(...chunks);
        terms.push({ xorb: xhex, start: t.start, end: t.end, size });
      }
      if (!fileHash(all).equals(f.hash)) throw new XetFormatError(`${where}: its chunks hash to file ${hashToHex(fileHash(all))}`);
      const rec = { hash: fhex, size: all.reduce((n, c) => n + c.size, 0), sha256: hashToHex(f.sha256), terms };
      const h = crypto.createHash("sha256");
      for await (const b of fileBytes(rec)) h.update(b);
      const got = h.digest("hex");
      if (got !== rec.sha256) throw new XetFormatError(`${where}: the rebuilt ${rec.size} bytes have SHA-256 ${got}, the metadata extension says ${rec.sha256}`);
      fileRecs.push(rec);
    }
    // Everything checked: register.
    const index = shards.length;
    shards.push({ xorbs: listed.map((l) => l.hex), files: fileRecs.map((r) => r.hash), route, repo });
    const starts = new Set(fileRecs.filter((r) => r.terms.length).map((r) => `${r.terms[0].xorb}:${r.terms[0].start}`));
    for (const { hex, flagged } of listed) {
      for (const [k, c] of xorbs.get(hex).chunks.entries()) {
        if (flagged[k] || isDedupEligibleHash(c.hash) || starts.has(`${hex}:${k}`)) dedupe.set(hashToHex(c.hash), index);
      }
    }
    for (const rec of fileRecs) {
      files.set(rec.hash, rec);
      bySha.set(rec.sha256, rec.hash);
      host.onFileRegistered(repo, rec);
    }
    return { files: fileRecs, xorbs: listed.map((l) => l.hex) };
  }

  async function postShard(ctx, version) {
    const token = authorize(ctx, "write");
    if (!token) return;
    let body;
    try {
      body = await host.readBodyBuffer(ctx, MAX_SHARD_BYTES);
    } catch (e) {
      if (!ctx.res.headersSent && !ctx.res.destroyed) casError(ctx, 400, `shard: ${e.message}`);
      return;
    }
    stats.bytes.shard_upload += body.length;
    const rec = { route: `v${version}`, bytes: body.length, status: "refused", repo: token.repo };
    stats.shards.push(rec);
    let error = null;
    const refusal = host.takeFault(ctx.listener, ctx.entry, "xet", "xet_refuse_shard");
    if (refusal) {
      error = refusal.message ?? "shard refused (injected fault)";
    } else {
      try {
        const done = await registerShard(body, token.repo, rec.route);
        rec.status = "registered";
        rec.files = done.files.map((f) => ({ hash: f.hash, sha256: f.sha256, size: f.size }));
        rec.xorbs = done.xorbs;
      } catch (e) {
        if (!(e instanceof XetFormatError)) throw e;
        error = `shard: ${e.message}`;
      }
    }
    if (error) rec.error = error;
    if (version === 1) return error ? casError(ctx, 400, error) : host.sendJson(ctx, 200, { result: 1 });
    const events = [{ type: "validating", verified: 0, total: 1 }];
    if (error) {
      events.push({ type: "error", message: error, retryable: refusal?.retryable ?? false });
    } else {
      events.push({ type: "validating", verified: 1, total: 1 }, { type: "committing", stage: "uploading" },
        { type: "committing", stage: "syncing" }, { type: "result", result: 1 });
    }
    const text = events.map((e) => JSON.stringify(e) + "\n").join("");
    return host.sendBody(ctx, 200, { "Content-Type": "application/x-ndjson", "Cache-Control": "no-cache" }, Buffer.from(text));
  }

  // ------------------------------------------------------------- dedupe

  async function getChunk(ctx, hex) {
    if (!authorize(ctx, "read")) return;
    const index = host.config.xet_global_dedupe === false ? undefined : dedupe.get(hex);
    const q = { chunk: hex, found: index !== undefined };
    stats.dedupe_queries.push(q);
    if (index === undefined) return casError(ctx, 404, `chunk ${hex} is not in the global dedupe index`);
    const shard = shards[index];
    const starts = new Set();
    for (const f of shard.files) {
      const t = files.get(f)?.terms[0];
      if (t) starts.add(`${t.xorb}:${t.start}`);
    }
    const key = crypto.randomBytes(32);
    const listed = shard.xorbs.map((xhex) => {
      const x = xorbs.get(xhex);
      let off = 0;
      const chunks = x.chunks.map((c, k) => {
        const flags = isDedupEligibleHash(c.hash) || starts.has(`${xhex}:${k}`) ? globalDedupFlag : 0;
        const e = { hash: hmacHash(c.hash, key), offset: off, size: c.size, flags };
        off += c.size;
        return e;
      });
      return { hash: x.hash, size: off, onDisk: x.size, chunks };
    });
    const body = buildShard({ xorbs: listed, footer: { hmacKey: key, expiry: nowSecs() + Number(host.config.xet_dedupe_expiry_secs) } });
    q.xorbs = shard.xorbs;
    stats.bytes.dedupe_answered += body.length;
    return host.sendBody(ctx, 200, { "Content-Type": "application/octet-stream" }, body);
  }

  // ------------------------------------------------------ reconstruction

  // xet-core's reconstruction (xorb_utils.rs compute_reconstruction_ranges):
  // terms trimmed to the chunks [from, to) touches, and per xorb the chunk
  // ranges to fetch, merged where they overlap or touch.
  function reconstruct(rec, from, to) {
    const terms = [];
    const ranges = new Map();
    let off = 0;
    let firstStart = null;
    for (const t of rec.terms) {
      if (off >= to) break;
      const termEnd = off + t.size;
      if (termEnd <= from) {
        off = termEnd;
        continue;
      }
      const x = xorbs.get(t.xorb);
      let start = t.start;
      let end = t.end;
      let size = t.size;
      let cOff = off;
      while (cOff + x.chunks[start].size <= from) {
        cOff += x.chunks[start].size;
        size -= x.chunks[start++].size;
      }
      if (firstStart === null) firstStart = cOff;
      while (cOff + size - x.chunks[end - 1].size >= to) size -= x.chunks[--end].size;
      terms.push({ hash: t.xorb, unpacked_length: size, range: { start, end } });
      if (!ranges.has(t.xorb)) ranges.set(t.xorb, []);
      ranges.get(t.xorb).push({ start, end });
      off = termEnd;
    }
    const merged = new Map();
    for (const [xhex, list] of ranges) {
      const x = xorbs.get(xhex);
      list.sort((a, b) => a.start - b.start);
      const out = [];
      for (const r of list) {
        const last = out[out.length - 1];
        if (last && r.start <= last.end) last.end = Math.max(last.end, r.end);
        else out.push({ ...r });
      }
      merged.set(xhex, out.map((r) => ({ chunks: r, bytes: { start: x.chunks[r.start].start, end: x.chunks[r.end - 1].end - 1 } })));
    }
    return { offset: from - (firstStart ?? from), terms, merged };
  }

  let urlSerial = 0;
  function signXorbUrl(xhex, byteRanges) {
    const p = `/xorbs/default/${xhex}`;
    const signed = `bytes=${byteRanges.map((r) => `${r.start}-${r.end}`).join(",")}`;
    const expires = nowSecs() + Number(host.config.xet_url_ttl_secs ?? host.config.url_ttl_secs);
    const n = ++urlSerial; // every URL signed is a URL of its own (url_max_uses counts per URL)
    const sig = crypto.createHmac("sha256", host.secret).update(`${p}\n${signed}\n${expires}\n${n}`).digest("hex");
    return `${host.storageBase()}${p}?X-Xet-Signed-Range=${encodeURIComponent(signed)}&Expires=${expires}&n=${n}&Signature=${sig}`;
  }

  // Range -> [from, to) within `size`, "unsatisfiable", or "bad".
  function fileRange(h, size) {
    if (h === undefined) return [0, size];
    const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(h);
    if (!m || (m[1] === "" && m[2] === "")) return "bad";
    let from;
    let to;
    if (m[1] === "") {
      from = Math.max(0, size - Number(m[2]));
      to = size;
    } else {
      from = Number(m[1]);
      to = m[2] === "" ? size : Number(m[2]) + 1;
      if (to <= from) return "bad";
    }
    if (from >= size && !(size === 0 && from === 0)) return "unsatisfiable";
    return [from, Math.min(to, size)];
  }

  function getReconstruction(ctx, version, hex) {
    if (!authorize(ctx, "read")) return;
    const rec = files.get(hex);
    const q = { file: hex, version, range: ctx.req.headers.range ?? null, status: 200 };
    stats.reconstructions.push(q);
    if (!rec) return (q.status = 404), casError(ctx, 404, `file ${hex} not found`);
    const r = fileRange(ctx.req.headers.range, rec.size);
    if (r === "bad") return (q.status = 416), casError(ctx, 416, `invalid Range header ${ctx.req.headers.range}`);
    if (r === "unsatisfiable") return (q.status = 416), casError(ctx, 416, `range starts at or past the end of the ${rec.size}-byte file`);
    const { offset, terms, merged } = reconstruct(rec, r[0], r[1]);
    const lie = host.takeFault(ctx.listener, ctx.entry, "xet", "xet_bad_terms");
    let offsetOut = offset;
    if (lie && terms.length) {
      const t = terms[0];
      if (lie.mode === "unpacked_length") t.unpacked_length += 1;
      else if (lie.mode === "chunk_range") t.range = { start: t.range.start, end: t.range.end + 1 };
      else if (lie.mode === "unknown_xorb") t.hash = crypto.randomBytes(32).toString("hex");
      else if (lie.mode === "missing_fetch") merged.delete(t.hash);
      else if (lie.mode === "offset") offsetOut = t.unpacked_length + 1;
    }
    const body = { offset_into_first_range: offsetOut, terms };
    if (version === 2) {
      body.xorbs = {};
      for (const [xhex, list] of merged) {
        const groups = [];
        const per = host.config.xet_multi_range ? RANGES_PER_URL : 1;
        for (let i = 0; i < list.length; i += per) groups.push(list.slice(i, i + per));
        body.xorbs[xhex] = groups.map((g) => ({ url: signXorbUrl(xhex, g.map((d) => d.bytes)), ranges: g }));
      }
    } else {
      body.fetch_info = {};
      for (const [xhex, list] of merged) {
        body.fetch_info[xhex] = list.map((d) => ({ range: d.chunks, url: signXorbUrl(xhex, [d.bytes]), url_range: d.bytes }));
      }
    }
    return host.sendJson(ctx, 200, body);
  }

  // ------------------------------------------------------------- storage

  // GET|HEAD /xorbs/{prefix}/{hash}?X-Xet-Signed-Range&Expires&Signature
  function getXorbBytes(ctx, url) {
    const s3 = (status, code, msg) => host.s3Error(ctx, status, code, msg);
    if (ctx.req.headers.authorization !== undefined) {
      return s3(400, "InvalidArgument", "Only one auth mechanism allowed; the signed URL is the authorization");
    }
    const segs = url.pathname.split("/");
    const xhex = segs[3] ?? "";
    const signed = url.searchParams.get("X-Xet-Signed-Range") ?? "";
    const expires = url.searchParams.get("Expires") ?? "";
    const sig = url.searchParams.get("Signature") ?? "";
    const serial = url.searchParams.get("n") ?? "";
    const want = crypto.createHmac("sha256", host.secret).update(`/xorbs/default/${xhex}\n${signed}\n${expires}\n${serial}`).digest();
    const got = /^[0-9a-f]{64}$/.test(sig) ? Buffer.from(sig, "hex") : Buffer.alloc(0);
    if (segs.length !== 4 || !PREFIXES.has(segs[2]) || got.length !== 32 || !crypto.timingSafeEqual(got, want)) {
      return s3(403, "AccessDenied", "The request signature we calculated does not match the signature you provided.");
    }
    if (!/^\d+$/.test(expires) || Number(expires) <= nowSecs()) return s3(403, "AccessDenied", "Request has expired");
    if (host.urlUsedUp(sig)) return s3(403, "AccessDenied", "Request has expired");
    const parse = (h) => {
      const m = /^bytes=(.*)$/.exec(h ?? "");
      if (!m) return null;
      const out = [];
      for (const part of m[1].split(",")) {
        const r = /^\s*(\d+)-(\d+)\s*$/.exec(part);
        if (!r || Number(r[2]) < Number(r[1])) return null;
        out.push({ start: Number(r[1]), end: Number(r[2]) });
      }
      return out;
    };
    const allowed = parse(signed) ?? [];
    const asked = parse(ctx.req.headers.range);
    if (!asked) return s3(403, "AccessDenied", `a signed xorb URL needs a Range header within ${signed}`);
    for (const r of asked) {
      if (!allowed.some((a) => a.start <= r.start && r.end <= a.end)) {
        return s3(403, "AccessDenied", `Range bytes=${r.start}-${r.end} is outside the signed ${signed}`);
      }
    }
    if (asked.length > 1 && host.takeFault(ctx.listener, ctx.entry, "xet", "xet_refuse_multirange")) {
      return s3(403, "AccessDenied", "multi-range requests are not supported by this storage");
    }
    const x = xorbs.get(xhex);
    if (!x) return s3(404, "NoSuchKey", "The specified key does not exist.");
    if (asked.some((r) => r.end >= x.size)) return s3(416, "InvalidRange", "The requested range is not satisfiable");
    const wrong = host.takeFault(ctx.listener, ctx.entry, "xet", "xet_wrong_bytes");
    const short = host.takeFault(ctx.listener, ctx.entry, "xet", "xet_short_read");
    const pieces = asked.map((r) => {
      const end = short ? Math.max(r.start, r.end - (short.drop_bytes ?? 1000)) : r.end;
      return { start: r.start, end, source: wrong ? { abs: x.abs, start: r.start, end, flip: 8 } : { abs: x.abs, start: r.start, end } };
    });
    const headers = { "Accept-Ranges": "bytes", ETag: `"${xhex}"` };
    if (pieces.length === 1) {
      const p = pieces[0];
      stats.bytes.xorb_download += ctx.req.method === "HEAD" ? 0 : p.end - p.start + 1;
      return host.sendBody(ctx, 206, { ...headers, "Content-Type": "application/octet-stream", "Content-Range": `bytes ${p.start}-${p.end}/${x.size}` }, p.source);
    }
    const boundary = `xet-standin-${crypto.randomBytes(8).toString("hex")}`;
    const parts = [];
    for (const p of pieces) {
      parts.push(Buffer.from(`--${boundary}\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes ${p.start}-${p.end}/${x.size}\r\n\r\n`));
      parts.push(p.source, Buffer.from("\r\n"));
      stats.bytes.xorb_download += ctx.req.method === "HEAD" ? 0 : p.end - p.start + 1;
    }
    parts.push(Buffer.from(`--${boundary}--\r\n`));
    return host.sendBody(ctx, 206, { ...headers, "Content-Type": `multipart/byteranges; boundary=${boundary}` }, { parts });
  }

  // ------------------------------------------------------------ routing

  async function handle(ctx, url) {
    await ready;
    if (wasmError) return casError(ctx, 501, `the Xet stand-in cannot run: ${wasmError}`);
    const segs = url.pathname.split("/").slice(1);
    const m = ctx.req.method;
    const hashOk = (h) => /^[0-9a-f]{64}$/.test(h ?? "");
    const route = `${segs[0]}/${segs[1]}`;
    const badPrefix = (p) => !PREFIXES.has(p);
    if (route === "v1/xorbs" && segs.length === 4) {
      if (badPrefix(segs[2]) || !hashOk(segs[3])) return drain(ctx), casError(ctx, 400, `bad xorb key ${segs[2]}/${segs[3]}`);
      if (m === "POST") return postXorb(ctx, segs[2], segs[3]);
      if (m === "HEAD") {
        if (!authorize(ctx, "read")) return;
        const x = xorbs.get(segs[3]);
        // (a HEAD answer: the length is announced, nothing is read)
        return x ? host.sendBody(ctx, 200, {}, { stream: [], length: x.size }) : casError(ctx, 404, "xorb not found");
      }
    }
    if ((route === "v1/shards" || route === "v2/shards") && segs.length === 2 && m === "POST") return postShard(ctx, route === "v1/shards" ? 1 : 2);
    if (route === "v1/chunks" && segs.length === 4 && m === "GET") {
      if (badPrefix(segs[2]) || !hashOk(segs[3])) return casError(ctx, 400, `bad chunk key ${segs[2]}/${segs[3]}`);
      return getChunk(ctx, segs[3]);
    }
    if ((route === "v1/reconstructions" || route === "v2/reconstructions") && segs.length === 3 && m === "GET") {
      if (!hashOk(segs[2])) return casError(ctx, 400, `bad file id ${segs[2]}`);
      return getReconstruction(ctx, route === "v1/reconstructions" ? 1 : 2, segs[2]);
    }
    if (route === "v1/files" && segs.length === 3 && m === "HEAD") {
      if (!authorize(ctx, "read")) return;
      const f = files.get(segs[2]);
      return f ? host.sendBody(ctx, 200, {}, { stream: [], length: f.size }) : casError(ctx, 404, "file not found");
    }
    drain(ctx);
    return casError(ctx, 404, `no CAS route ${m} ${url.pathname}`);
  }

  const drain = (ctx) => ctx.req.resume();

  // -------------------------------------------------------------- admin

  async function admin(route, url) {
    switch (route) {
      case "GET /_admin/xet":
        return { ...stats, bytes: { ...stats.bytes, lfs_upload: host.lfsBytesReceived() } };
      case "DELETE /_admin/xet":
        stats = freshStats();
        host.resetLfsBytes();
        return { ok: true };
      case "GET /_admin/xet/store":
        return {
          xorbs: [...xorbs].map(([hex, x]) => ({
            hash: hex, bytes: x.size, chunks: x.chunks.length, unpacked: x.chunks.reduce((n, c) => n + c.size, 0), schemes: x.schemes,
            ...(url.searchParams.get("chunks") === "1" ? { chunk_list: x.chunks.map((c) => ({ hash: hashToHex(c.hash), size: c.size, start: c.start, end: c.end })) } : {}),
          })),
          files: [...files.values()],
          shards,
        };
      case "DELETE /_admin/xet/store":
        for (const x of xorbs.values()) await fsp.rm(x.abs, { force: true });
        xorbs.clear();
        files.clear();
        bySha.clear();
        dedupe.clear();
        shards = [];
        return { ok: true };
      case "POST /_admin/xet/expire-tokens": {
        const now = nowSecs();
        for (const t of tokens.values()) t.exp = Math.min(t.exp, now);
        return { expired: tokens.size };
      }
      default:
        return undefined;
    }
  }

  async function publish(list, opts) {
    await ready;
    if (wasmError) throw new Error(`cannot publish through Xet: ${wasmError}`);
    return publishThroughXet(list, opts, { storeXorb, registerShard });
  }

  return {
    handle, getXorbBytes, admin, issueToken, publish, fileBytes,
    fileForSha256: (sha) => files.get(bySha.get(sha)) ?? null,
    hasFile: (hex) => files.has(hex),
    fileRecord: (hex) => files.get(hex) ?? null,
  };
}

