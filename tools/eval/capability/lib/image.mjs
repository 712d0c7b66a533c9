// Pixel statistics of the renderer's screenshots: a small PNG decoder (Chromium writes 8-bit
// RGB or RGBA, not interlaced), the share of pixels that differ from the page's background,
// and the share that changed between two frames. Pure functions, no browser needed.
import { inflateSync } from "node:zlib";

// Returns { width, height, channels, data } with data row-major, `channels` bytes a pixel.
export function decodePng(buf) {
  const bytes = Buffer.from(buf);
  const signature = "89504e470d0a1a0a";
  if (bytes.subarray(0, 8).toString("hex") !== signature) throw new Error("not a PNG file");
  let pos = 8;
  let width = 0, height = 0, channels = 0;
  const idat = [];
  while (pos + 8 <= bytes.length) {
    const len = bytes.readUInt32BE(pos);
    const type = bytes.toString("latin1", pos + 4, pos + 8);
    const body = bytes.subarray(pos + 8, pos + 8 + len);
    if (type === "IHDR") {
      width = body.readUInt32BE(0);
      height = body.readUInt32BE(4);
      const depth = body[8], colour = body[9], interlace = body[12];
      if (depth !== 8 || interlace !== 0 || (colour !== 2 && colour !== 6)) {
        throw new Error(`unsupported PNG (bit depth ${depth}, colour type ${colour}, interlace ${interlace})`);
      }
      channels = colour === 6 ? 4 : 3;
    } else if (type === "IDAT") {
      idat.push(body);
    } else if (type === "IEND") {
      break;
    }
    pos += 12 + len;
  }
  if (!width || !height) throw new Error("PNG without IHDR");
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  if (raw.length < height * (stride + 1)) throw new Error("PNG data too short");
  const out = Buffer.alloc(height * stride);
  // Undo the per-row filters (PNG spec, section 9): each row starts with its filter type.
  for (let y = 0; y < height; ++y) {
    const filter = raw[y * (stride + 1)];
    const src = y * (stride + 1) + 1;
    const dst = y * stride;
    for (let x = 0; x < stride; ++x) {
      const a = x >= channels ? out[dst + x - channels] : 0;
      const b = y > 0 ? out[dst - stride + x] : 0;
      const c = x >= channels && y > 0 ? out[dst - stride + x - channels] : 0;
      let v = raw[src + x];
      switch (filter) {
        case 0: break;
        case 1: v += a; break;
        case 2: v += b; break;
        case 3: v += (a + b) >> 1; break;
        case 4: {
          const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
          v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default: throw new Error(`bad PNG filter ${filter}`);
      }
      out[dst + x] = v & 255;
    }
  }
  return { width, height, channels, data: out };
}

// A pixel "differs" when |ΔR| + |ΔG| + |ΔB| exceeds this: above anti-aliasing and JPEG-like
// noise of gradients, below any visible stroke.
const PIXEL_DELTA = 24;

// The background is the most common colour (quantised to 4 bits a channel, so a slight
// gradient still counts as one colour). Returns { background: [r,g,b], nonBackground: share of
// pixels that differ from it, stdev: of the luminance }.
export function frameStats(img) {
  const { data, channels } = img;
  const n = img.width * img.height;
  const counts = new Map();
  let sum = 0, sum2 = 0;
  for (let i = 0; i < n; ++i) {
    const o = i * channels;
    const r = data[o], g = data[o + 1], b = data[o + 2];
    const key = ((r >> 4) << 8) | ((g >> 4) << 4) | (b >> 4);
    counts.set(key, (counts.get(key) || 0) + 1);
    const l = 0.2126 * r + 0.7152 * g + 0.0722 * b;
    sum += l;
    sum2 += l * l;
  }
  let bestKey = 0, best = -1;
  for (const [k, c] of counts) if (c > best) { best = c; bestKey = k; }
  // The exact background colour: the mean of the pixels in the winning bucket.
  let br = 0, bg = 0, bb = 0, m = 0;
  for (let i = 0; i < n; ++i) {
    const o = i * channels;
    const key = ((data[o] >> 4) << 8) | ((data[o + 1] >> 4) << 4) | (data[o + 2] >> 4);
    if (key === bestKey) { br += data[o]; bg += data[o + 1]; bb += data[o + 2]; ++m; }
  }
  const background = [br / m, bg / m, bb / m];
  let other = 0;
  for (let i = 0; i < n; ++i) {
    const o = i * channels;
    const d = Math.abs(data[o] - background[0]) + Math.abs(data[o + 1] - background[1]) + Math.abs(data[o + 2] - background[2]);
    if (d > PIXEL_DELTA) ++other;
  }
  const mean = sum / n;
  return {
    background: background.map((v) => Math.round(v)),
    nonBackground: other / n,
    stdev: Math.sqrt(Math.max(0, sum2 / n - mean * mean)),
  };
}

// Share of pixels that changed between two frames of the same size.
export function frameDiff(a, b) {
  if (a.width !== b.width || a.height !== b.height) return 1;
  const n = a.width * a.height;
  let changed = 0;
  for (let i = 0; i < n; ++i) {
    const oa = i * a.channels, ob = i * b.channels;
    const d = Math.abs(a.data[oa] - b.data[ob]) + Math.abs(a.data[oa + 1] - b.data[ob + 1]) +
              Math.abs(a.data[oa + 2] - b.data[ob + 2]);
    if (d > PIXEL_DELTA) ++changed;
  }
  return changed / n;
}
