// Publishing files Xet-backed from the stand-in's admin API (POST
// /_admin/repos with "xet"): each file is chunked with xet-core's chunker,
// new chunks are packed into xorbs (at most 64 MiB of chunk bytes and 8192
// chunks, xet-core's footer appended) and one shard registers the files, all
// through the same checks a client's upload goes through (storeXorb,
// registerShard), so the files' chunks enter the global dedupe index.
// Chunks already packed in this call are referenced, not stored twice.
import crypto from "node:crypto";
import fs from "node:fs";
import {
  MiB, MAX_XORB_BYTES, MAX_XORB_CHUNKS, newChunker, encodeChunk, xorbHash, fileHash, verificationHash,
  buildXorbFooter, buildShard, hashToHex, hexToHash,
} from "./xet_format.mjs";

// list: [{path, abs, size}]; opts: {compression, repo}. Returns the
// registered file records (cas_standin's shape) in list order.
export async function publishThroughXet(list, opts, { storeXorb, registerShard }) {
  const compression = opts.compression ?? "auto";
  const done = []; // sealed xorbs: {hash, chunks: [{hash, size}], bytes}
  const known = new Map(); // chunk hex -> {xorb: open or sealed record, index}
  let open = null;
  const newXorb = () => ({ parts: [], chunks: [], bytes: 0, hash: null });

  async function seal() {
    if (!open || !open.chunks.length) return;
    const hash = xorbHash(open.chunks);
    const body = Buffer.concat([...open.parts, buildXorbFooter(open.chunks, hash)]);
    await storeXorb(hashToHex(hash), body, "publish");
    open.hash = hash;
    open.parts = null;
    done.push(open);
    open = null;
  }

  async function add(data, chunk, fileChunks) {
    const hex = hashToHex(chunk.hash);
    let at = known.get(hex);
    if (!at) {
      const { bytes } = encodeChunk(data, compression);
      if (open && (open.bytes + bytes.length > MAX_XORB_BYTES || open.chunks.length === MAX_XORB_CHUNKS)) await seal();
      open ??= newXorb();
      at = { xorb: open, index: open.chunks.length };
      open.parts.push(bytes);
      open.chunks.push({ hash: chunk.hash, size: chunk.size, end: open.bytes + bytes.length });
      open.bytes += bytes.length;
      known.set(hex, at);
    }
    fileChunks.push({ ...at, hash: chunk.hash, size: chunk.size });
  }

  const perFile = [];
  for (const f of list) {
    const chunker = newChunker();
    const sha = crypto.createHash("sha256");
    const fileChunks = [];
    let pending = [];
    let pendingBytes = 0;
    const take = (n) => {
      const out = Buffer.allocUnsafe(n);
      let o = 0;
      while (o < n) {
        const b = pending[0];
        const k = Math.min(b.length, n - o);
        b.copy(out, o, 0, k);
        o += k;
        if (k === b.length) pending.shift();
        else pending[0] = b.subarray(k);
      }
      pendingBytes -= n;
      return out;
    };
    let seen = 0;
    for await (const buf of fs.createReadStream(f.abs, { highWaterMark: 4 * MiB })) {
      sha.update(buf);
      seen += buf.length;
      pending.push(buf);
      pendingBytes += buf.length;
      for (const c of chunker.feed(buf)) await add(take(c.size), c, fileChunks);
    }
    for (const c of chunker.finish()) await add(take(c.size), c, fileChunks);
    if (seen !== f.size || pendingBytes !== 0) throw new Error(`${f.abs} changed while being chunked`);
    perFile.push({ f, fileChunks, sha256: hexToHash(sha.digest("hex")) }); // stored in hash-string order
  }
  await seal();

  const files = perFile.map(({ fileChunks, sha256 }) => {
    const terms = [];
    const verification = [];
    for (let i = 0; i < fileChunks.length; ) {
      let j = i + 1;
      while (j < fileChunks.length && fileChunks[j].xorb === fileChunks[i].xorb && fileChunks[j].index === fileChunks[j - 1].index + 1) j++;
      const run = fileChunks.slice(i, j);
      terms.push({ xorb: run[0].xorb.hash, start: run[0].index, end: run[0].index + run.length, size: run.reduce((n, c) => n + c.size, 0) });
      verification.push(verificationHash(run.map((c) => c.hash)));
      i = j;
    }
    return { hash: fileHash(fileChunks), terms, verification, sha256 };
  });
  const xorbs = done.map((x) => {
    let off = 0;
    const chunks = x.chunks.map((c) => {
      const e = { hash: c.hash, offset: off, size: c.size };
      off += c.size;
      return e;
    });
    return { hash: x.hash, size: off, onDisk: x.bytes, chunks };
  });
  const reg = await registerShard(buildShard({ files, xorbs }), opts.repo ?? null, "publish");
  return reg.files;
}
