// LZ4 frames (https://github.com/lz4/lz4/blob/dev/doc/lz4_Frame_format.md)
// for the Xet stand-in: Xet chunk schemes 1 (LZ4) and 2 (byte grouping 4,
// then LZ4) hold one LZ4 *frame* each. Written here rather than imported so
// the stand-in's decoder is independent of the clients it checks (the
// official JS client compresses with lz4js; xet-core with lz4_flex).
//
// decodeFrame accepts what the frame format allows: linked or independent
// blocks, block and content checksums (verified), a content size (checked),
// uncompressed blocks; it refuses dictionary ids, a bad header checksum,
// reserved bits, trailing bytes and any output beyond `expectedSize`.
// encodeFrame writes one frame: independent blocks of at most 4 MiB, no
// checksums, each block stored raw when compression does not shrink it.

const MAGIC = 0x184d2204;
const PRIME1 = 2654435761;
const PRIME2 = 2246822519;
const PRIME3 = 3266489917;
const PRIME4 = 668265263;
const PRIME5 = 374761393;
const BLOCK_MAX = { 4: 1 << 16, 5: 1 << 18, 6: 1 << 20, 7: 1 << 22 };

const rotl = (x, r) => ((x << r) | (x >>> (32 - r))) >>> 0;
const mul = (a, b) => Math.imul(a, b) >>> 0;

// xxHash32, as the frame format uses it for its checksums.
export function xxh32(buf, seed = 0) {
  const len = buf.length;
  let i = 0;
  let h;
  const u32 = (p) => (buf[p] | (buf[p + 1] << 8) | (buf[p + 2] << 16) | (buf[p + 3] << 24)) >>> 0;
  if (len >= 16) {
    let v1 = (seed + PRIME1 + PRIME2) >>> 0;
    let v2 = (seed + PRIME2) >>> 0;
    let v3 = seed >>> 0;
    let v4 = (seed - PRIME1) >>> 0;
    const round = (v, x) => mul(rotl((v + mul(x, PRIME2)) >>> 0, 13), PRIME1);
    for (; i + 16 <= len; i += 16) {
      v1 = round(v1, u32(i));
      v2 = round(v2, u32(i + 4));
      v3 = round(v3, u32(i + 8));
      v4 = round(v4, u32(i + 12));
    }
    h = (rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18)) >>> 0;
  } else {
    h = (seed + PRIME5) >>> 0;
  }
  h = (h + len) >>> 0;
  for (; i + 4 <= len; i += 4) h = mul(rotl((h + mul(u32(i), PRIME3)) >>> 0, 17), PRIME4);
  for (; i < len; i++) h = mul(rotl((h + mul(buf[i], PRIME5)) >>> 0, 11), PRIME1);
  h = mul(h ^ (h >>> 15), PRIME2);
  h = mul(h ^ (h >>> 13), PRIME3);
  return (h ^ (h >>> 16)) >>> 0;
}

// Decodes one LZ4 block src[start, end) into out at *pos; `floor` is the
// lowest output position a match may reach back to. Returns the new position.
function decodeBlock(src, start, end, out, pos, floor) {
  let s = start;
  const fail = (why) => {
    throw new Error(`LZ4 block at frame byte ${start}: ${why}`);
  };
  for (;;) {
    if (s >= end) fail("ends before its last sequence");
    const token = src[s++];
    let lit = token >>> 4;
    if (lit === 15) {
      let b;
      do {
        if (s >= end) fail("literal length runs past the block");
        b = src[s++];
        lit += b;
      } while (b === 255);
    }
    if (s + lit > end) fail("literals run past the block");
    if (pos + lit > out.length) fail("decodes to more bytes than the chunk header says");
    if (lit < 32) {
      for (let k = 0; k < lit; k++) out[pos + k] = src[s + k];
    } else {
      src.copy(out, pos, s, s + lit);
    }
    s += lit;
    pos += lit;
    if (s === end) return pos; // the last sequence has no match
    if (s + 2 > end) fail("match offset runs past the block");
    const offset = src[s] | (src[s + 1] << 8);
    s += 2;
    if (offset === 0) fail("match offset 0");
    if (pos - offset < floor) fail(`match offset ${offset} reaches before the data`);
    let mlen = (token & 15) + 4;
    if ((token & 15) === 15) {
      let b;
      do {
        if (s >= end) fail("match length runs past the block");
        b = src[s++];
        mlen += b;
      } while (b === 255);
    }
    if (pos + mlen > out.length) fail("decodes to more bytes than the chunk header says");
    let from = pos - offset;
    if (offset >= mlen && mlen >= 32) {
      out.copyWithin(pos, from, from + mlen);
      pos += mlen;
    } else {
      for (let k = 0; k < mlen; k++) out[pos++] = out[from++];
    }
  }
}

// Decodes a whole LZ4 frame that must yield exactly `expectedSize` bytes.
export function decodeFrame(src, expectedSize) {
  const fail = (why) => {
    throw new Error(`LZ4 frame: ${why}`);
  };
  if (src.length < 7) fail(`${src.length} bytes are too few for a frame header`);
  if (src.readUInt32LE(0) !== MAGIC) fail(`bad magic number 0x${src.readUInt32LE(0).toString(16)}`);
  const flg = src[4];
  const bd = src[5];
  if (flg >>> 6 !== 1) fail(`unsupported frame version ${flg >>> 6}`);
  if (flg & 0x02) fail("reserved FLG bit set");
  if (flg & 0x01) fail("dictionary ids are not supported");
  if (bd & 0x8f) fail("reserved BD bits set");
  const blockMax = BLOCK_MAX[(bd >>> 4) & 7];
  if (!blockMax) fail(`invalid block maximum size code ${(bd >>> 4) & 7}`);
  const independent = (flg & 0x20) !== 0;
  const blockSums = (flg & 0x10) !== 0;
  const contentSize = (flg & 0x08) !== 0;
  const contentSum = (flg & 0x04) !== 0;
  let s = 6;
  let declared = null;
  if (contentSize) {
    if (src.length < s + 8 + 1) fail("truncated content size");
    declared = Number(src.readBigUInt64LE(s));
    s += 8;
  }
  const hc = (xxh32(src.subarray(4, s)) >>> 8) & 0xff;
  if (src[s] !== hc) fail(`header checksum 0x${src[s].toString(16)} should be 0x${hc.toString(16)}`);
  s++;
  const out = Buffer.allocUnsafe(expectedSize);
  let pos = 0;
  for (;;) {
    if (s + 4 > src.length) fail("truncated before the end mark");
    const word = src.readUInt32LE(s);
    s += 4;
    if (word === 0) break;
    const raw = (word & 0x80000000) !== 0;
    const size = word & 0x7fffffff;
    if (size > blockMax) fail(`block of ${size} bytes exceeds the frame's ${blockMax}-byte maximum`);
    if (s + size + (blockSums ? 4 : 0) > src.length) fail("truncated block");
    if (blockSums && xxh32(src.subarray(s, s + size)) !== src.readUInt32LE(s + size)) fail("block checksum mismatch");
    const blockStart = pos;
    if (raw) {
      if (pos + size > out.length) fail("decodes to more bytes than the chunk header says");
      src.copy(out, pos, s, s + size);
      pos += size;
    } else {
      pos = decodeBlock(src, s, s + size, out, pos, independent ? blockStart : 0);
    }
    if (pos - blockStart > blockMax) fail("a block decodes to more than the frame's block maximum");
    s += size + (blockSums ? 4 : 0);
  }
  if (contentSum) {
    if (s + 4 > src.length) fail("truncated content checksum");
    if (xxh32(out.subarray(0, pos)) !== src.readUInt32LE(s)) fail("content checksum mismatch");
    s += 4;
  }
  if (s !== src.length) fail(`${src.length - s} bytes after the frame`);
  if (declared !== null && declared !== pos) fail(`declares ${declared} content bytes, holds ${pos}`);
  if (pos !== expectedSize) fail(`decodes to ${pos} bytes, the chunk header says ${expectedSize}`);
  return out;
}

const MIN_MATCH = 4;
const LAST_LITERALS = 5;
const MF_LIMIT = 12;
const HASH_BITS = 14;
// Positions are stored as base + p, so entries left by earlier calls (below
// base) read as empty without clearing the table for every chunk.
const table = new Int32Array(1 << HASH_BITS);
let base = 0;

// Greedy LZ4 block compression of src into dst (sized by the caller for the
// worst case); returns the compressed length.
function encodeBlock(src, dst) {
  const n = src.length;
  let d = 0;
  let anchor = 0;
  const emit = (litEnd, offset, mlen) => {
    const lit = litEnd - anchor;
    const tokenPos = d++;
    let token = (lit >= 15 ? 15 : lit) << 4;
    if (lit >= 15) {
      let r = lit - 15;
      for (; r >= 255; r -= 255) dst[d++] = 255;
      dst[d++] = r;
    }
    if (lit < 64) {
      for (let k = anchor; k < litEnd; k++) dst[d++] = src[k];
    } else {
      src.copy(dst, d, anchor, litEnd);
      d += lit;
    }
    if (offset) {
      dst[d++] = offset & 0xff;
      dst[d++] = offset >>> 8;
      const m = mlen - MIN_MATCH;
      token |= m >= 15 ? 15 : m;
      if (m >= 15) {
        let r = m - 15;
        for (; r >= 255; r -= 255) dst[d++] = 255;
        dst[d++] = r;
      }
    }
    dst[tokenPos] = token;
  };
  if (n >= MF_LIMIT + 1) {
    if (base + n + 1 > 0x3fffffff) {
      table.fill(0);
      base = 0;
    }
    base += 1; // every stored position is >= base, so 0 (and older entries) mean "none"
    const limit = n - MF_LIMIT;
    const matchEnd = n - LAST_LITERALS;
    const u32 = (p) => src[p] | (src[p + 1] << 8) | (src[p + 2] << 16) | (src[p + 3] << 24);
    let p = 0;
    let misses = 0;
    while (p < limit) {
      const word = u32(p);
      const h = Math.imul(word, 2654435761) >>> (32 - HASH_BITS);
      const cand = table[h] - base;
      table[h] = base + p;
      if (cand >= 0 && p - cand <= 65535 && u32(cand) === word) {
        let len = MIN_MATCH;
        while (p + len < matchEnd && src[cand + len] === src[p + len]) len++;
        let start = p;
        let from = cand;
        while (start > anchor && from > 0 && src[start - 1] === src[from - 1]) {
          start--;
          from--;
          len++;
        }
        emit(start, start - from, len);
        p = start + len;
        anchor = p;
        misses = 0;
      } else {
        p += 1 + (misses++ >>> 6); // skip faster through incompressible data
      }
    }
  }
  base += n;
  emit(n, 0, 0);
  return d;
}

// One LZ4 frame holding `data`.
export function encodeFrame(data) {
  const parts = [];
  const header = Buffer.from([0x04, 0x22, 0x4d, 0x18, 0x60, 0x70, 0]);
  header[6] = (xxh32(header.subarray(4, 6)) >>> 8) & 0xff;
  parts.push(header);
  const blockMax = BLOCK_MAX[7];
  for (let off = 0; off < data.length; off += blockMax) {
    const block = data.subarray(off, Math.min(data.length, off + blockMax));
    const dst = Buffer.allocUnsafe(block.length + Math.ceil(block.length / 255) + 16);
    const n = encodeBlock(block, dst);
    const size = Buffer.allocUnsafe(4);
    if (n < block.length) {
      size.writeUInt32LE(n);
      parts.push(size, dst.subarray(0, n));
    } else {
      size.writeUInt32LE((0x80000000 | block.length) >>> 0);
      parts.push(size, block);
    }
  }
  parts.push(Buffer.alloc(4));
  return Buffer.concat(parts);
}

// Byte grouping 4 (Xet scheme 2): byte 4m+k goes to group k; groups are
// concatenated in order (the first n % 4 groups are one byte longer).
function groupStarts(n) {
  const q = n >>> 2;
  const r = n & 3;
  const s1 = q + (r > 0 ? 1 : 0);
  const s2 = s1 + q + (r > 1 ? 1 : 0);
  const s3 = s2 + q + (r > 2 ? 1 : 0);
  return [q, r, s1, s2, s3];
}

export function bg4Split(data) {
  const n = data.length;
  const src = new Uint8Array(data.buffer, data.byteOffset, n);
  const out = new Uint8Array(n);
  const [q, r, s1, s2, s3] = groupStarts(n);
  for (let i = 0, j = 0; i < q; i++, j += 4) {
    out[i] = src[j];
    out[s1 + i] = src[j + 1];
    out[s2 + i] = src[j + 2];
    out[s3 + i] = src[j + 3];
  }
  const starts = [0, s1, s2];
  for (let k = 0; k < r; k++) out[starts[k] + q] = src[4 * q + k];
  return Buffer.from(out.buffer, 0, n);
}

export function bg4Regroup(data) {
  const n = data.length;
  const src = new Uint8Array(data.buffer, data.byteOffset, n);
  const out = new Uint8Array(n);
  const [q, r, s1, s2, s3] = groupStarts(n);
  for (let i = 0, j = 0; i < q; i++, j += 4) {
    out[j] = src[i];
    out[j + 1] = src[s1 + i];
    out[j + 2] = src[s2 + i];
    out[j + 3] = src[s3 + i];
  }
  const starts = [0, s1, s2];
  for (let k = 0; k < r; k++) out[4 * q + k] = src[starts[k] + q];
  return Buffer.from(out.buffer, 0, n);
}
