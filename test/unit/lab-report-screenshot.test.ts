/**
 * The lab's HTML report as a reader sees it: rendered by headless Chromium, the page opens with
 * the summary and the targets (each miss with its cause), and the charts draw, with the
 * governor's band and the lines that equal it both visible. Skips cleanly where Chromium is absent
 * (CHROMIUM=/path overrides /usr/bin/chromium).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inflateSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runBench } from '../../lab/bench.js';
import { renderHtml } from '../../lab/charts.js';
import { checkTargets } from '../../lab/report.js';
import { parseTrace } from '../../lab/trace.js';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const HAS_CHROMIUM = existsSync(CHROMIUM);
const WIDTH = 1240;
const HEIGHT = 2400;
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--no-first-run',
  '--disable-component-update',
  '--disable-sync',
  '--hide-scrollbars',
  // Let the inlined ECharts run before the page is captured.
  '--virtual-time-budget=5000',
];

interface Image {
  width: number;
  height: number;
  /** RGBA, 4 bytes a pixel. */
  pixels: Uint8Array;
}

/** Decodes an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium writes). */
function decodePng(file: Buffer): Image {
  let offset = 8;
  let width = 0;
  let height = 0;
  let channels = 0;
  const data: Buffer[] = [];
  while (offset < file.length) {
    const length = file.readUInt32BE(offset);
    const type = file.toString('ascii', offset + 4, offset + 8);
    const body = file.subarray(offset + 8, offset + 8 + length);
    if (type === 'IHDR') {
      width = body.readUInt32BE(0);
      height = body.readUInt32BE(4);
      const [depth, colour, , , interlace] = [body[8], body[9], body[10], body[11], body[12]];
      if (depth !== 8 || interlace !== 0 || (colour !== 2 && colour !== 6))
        throw new Error(`unsupported PNG: depth ${depth}, colour type ${colour}, interlace ${interlace}`);
      channels = colour === 6 ? 4 : 3;
    } else if (type === 'IDAT') data.push(body);
    offset += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(data));
  const stride = width * channels;
  const rows = new Uint8Array(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    for (let x = 0; x < stride; x++) {
      const value = raw[y * (stride + 1) + 1 + x] ?? 0;
      const left = x >= channels ? (rows[y * stride + x - channels] ?? 0) : 0;
      const up = y > 0 ? (rows[(y - 1) * stride + x] ?? 0) : 0;
      const upLeft = y > 0 && x >= channels ? (rows[(y - 1) * stride + x - channels] ?? 0) : 0;
      let predicted = 0;
      if (filter === 1) predicted = left;
      else if (filter === 2) predicted = up;
      else if (filter === 3) predicted = (left + up) >> 1;
      else if (filter === 4) {
        const p = left + up - upLeft;
        const [pa, pb, pc] = [Math.abs(p - left), Math.abs(p - up), Math.abs(p - upLeft)];
        predicted = pa <= pb && pa <= pc ? left : pb <= pc ? up : upLeft;
      }
      rows[y * stride + x] = (value + predicted) & 0xff;
    }
  }
  const pixels = new Uint8Array(width * height * 4);
  for (let i = 0; i < width * height; i++) {
    for (let c = 0; c < 3; c++) pixels[i * 4 + c] = rows[i * channels + c] ?? 0;
    pixels[i * 4 + 3] = channels === 4 ? (rows[i * channels + 3] ?? 0) : 255;
  }
  return { width, height, pixels };
}

/** Pixels within `tolerance` of the colour on each channel. */
function countColour(image: Image, [r, g, b]: [number, number, number], tolerance = 24): number {
  let count = 0;
  for (let i = 0; i < image.pixels.length; i += 4) {
    const p = image.pixels;
    if (
      Math.abs((p[i] ?? 0) - r) <= tolerance &&
      Math.abs((p[i + 1] ?? 0) - g) <= tolerance &&
      Math.abs((p[i + 2] ?? 0) - b) <= tolerance
    )
      count++;
  }
  return count;
}

describe.skipIf(!HAS_CHROMIUM)('lab report in headless Chromium', () => {
  let dir: string;
  let image: Image;
  let dom: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'lab-report-'));
    // Prepare: a short trace with neighbours on the key (so targets miss), and a steady one on
    // which the governor and lambda-fixed trace exactly the same lines.
    const neighbours = shortTrace('short-neighbours', [
      { at: 0, threads: 0 },
      { at: 300, threads: 8 },
      { at: 900, threads: 0 },
    ]);
    const steady = shortTrace('short-steady', [{ at: 0, threads: 0 }]);

    // Act: each page as Chromium draws it, and the first one's DOM after its scripts ran.
    const withMisses = writeReport('misses', neighbours);
    dom = spawnSync(CHROMIUM, [...FLAGS, '--dump-dom', withMisses], {
      timeout: 60_000,
      maxBuffer: 64 << 20,
    }).stdout.toString();
    image = screenshot(writeReport('equal', steady));
  }, 120_000);

  function shortTrace(name: string, foreignThreads: { at: number; threads: number }[]) {
    const input = {
      name,
      durationSeconds: 1200,
      fleet: { planThreads: 20 },
      arrivals: [{ at: 0, perSecond: 1 }],
      methods: [{ method: 'userrecaptcha', share: 1, medianSeconds: 12, p95Seconds: 25 }],
      foreignThreads,
    };
    return parseTrace(input, 'test');
  }

  /** Renders the report of one trace under four policies; returns its file URL. */
  function writeReport(name: string, trace: ReturnType<typeof parseTrace>): string {
    const bench = runBench({
      traces: [trace],
      policies: ['governor', 'thread-pool', 'lambda-fixed', 'oracle'],
      seed: 1,
    });
    const page = join(dir, `${name}.html`);
    writeFileSync(page, renderHtml(bench, checkTargets(bench), { seed: 1, generatedAt: 'test' }));
    return `file://${page}`;
  }

  function screenshot(url: string): Image {
    const shot = join(dir, 'report.png');
    const capture = spawnSync(CHROMIUM, [...FLAGS, `--window-size=${WIDTH},${HEIGHT}`, `--screenshot=${shot}`, url], {
      timeout: 60_000,
    });
    if (!existsSync(shot)) throw new Error(`Chromium wrote no screenshot: ${capture.stderr?.toString().slice(-500)}`);
    if (process.env.LAB_SCREENSHOT_COPY) writeFileSync(process.env.LAB_SCREENSHOT_COPY, readFileSync(shot));
    return decodePng(readFileSync(shot));
  }

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('captures the page at the size asked, not blank', () => {
    // Assess
    expect([image.width, image.height]).toEqual([WIDTH, HEIGHT]);
    const white = countColour(image, [255, 255, 255], 4);
    expect(white).toBeLessThan(WIDTH * HEIGHT * 0.97);
  });

  it('opens with the summary, then the targets, each miss followed by its cause', () => {
    // Assess: headings in reading order; every MISS item carries a "Why" line.
    const headings = [...dom.matchAll(/<h2[^>]*>([^<]+)<\/h2>/g)].map((m) => m[1]);
    expect(headings.slice(0, 2)).toEqual(['Summary', 'Targets (governor)']);
    const misses = [...dom.matchAll(/<li class="miss">(.*?)<\/li>/g)].map((m) => m[1] ?? '');
    expect(misses.length).toBeGreaterThan(0);
    for (const miss of misses) expect(miss).toMatch(/class="why">Why: .{20,}/);
  });

  it('keeps a line that equals the governor visible: the band and the dashed lambda-fixed line over it', () => {
    // Assess: on the steady trace the two policies draw the same values; the governor's
    // translucent red band (#d62728 at 45 % over white) and lambda-fixed's brown (#8c564b) both
    // show, lambda-fixed well beyond its legend swatch.
    expect(dom).toMatch(/<canvas/);
    const band = countColour(image, [236, 158, 158], 20);
    const brown = countColour(image, [140, 86, 75], 30);
    expect(band).toBeGreaterThan(2000);
    expect(brown).toBeGreaterThan(1500);
  });
});
