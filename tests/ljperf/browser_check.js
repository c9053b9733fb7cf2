// Opens an ljperf flamegraph.html in headless Chromium (Debian's, through
// playwright-core) and checks what a user would do with it.
//
//   node browser_check.js HTML SCREENSHOT.png EXPECT_JSON
//
// EXPECT_JSON: {"names": {"fib_lua": "lua", ...}}: frame name prefixes that
// must be drawn, with the kind each must be coloured as. Or, for a page of
// `ljperf diff`, {"diff": {"frames": [...]}} (see diffChecks). Either may
// add {"text": {"#meta": ["total 1.2 MiB"], ...}}: substrings the elements
// must show (for a page with few frames, "text" alone: only that checked).
// Environment: LJPERF_NODE_MODULES (where playwright-core is), CHROMIUM
// (default /usr/bin/chromium). Prints PASS:/FAIL: lines; exit 1 on failure.
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");

const [html, shot, expectJson] = process.argv.slice(2);
const expect = JSON.parse(expectJson || "{}");
const nm = process.env.LJPERF_NODE_MODULES;
let playwright;
try {
  playwright = require(nm ? path.join(nm, "playwright-core") : "playwright-core");
} catch (e) {
  console.log("FAIL: playwright-core not installed (" + (nm || "no LJPERF_NODE_MODULES") +
              "): build the project (npm ci runs at build time)");
  process.exit(1);
}
const chromium = process.env.CHROMIUM || "/usr/bin/chromium";

let failed = 0;
function check(ok, msg) {
  console.log((ok ? "PASS: " : "FAIL: ") + msg);
  if (!ok) failed++;
  return ok;
}

// Hue of an "hsl(h,s%,l%)" or "rgb(...)" fill, or null.
function hueOf(fill) {
  const m = /^hsl\(\s*([-\d.]+)/.exec(fill || "");
  return m ? Number(m[1]) : null;
}
const HUES = {   // ranges the page's palette draws each kind in
  lua: [100, 125], trace: [170, 195], builtin: [45, 60], vm: [260, 280],
  c: [-1, 13], kernel: [28, 36], root: [0, 0], unknown: [0, 0],
};

// The page ljperf record writes: kinds, colours, tooltip, zoom, search.
async function recordChecks(page, shot) {
  // Frames drawn, with their kind and fill.
  const frames = await page.$$eval("#chart svg g.frame", (gs) => gs.map((g) => {
    const d = g.__data__;
    const r = g.querySelector("rect");
    return { name: g.getAttribute("name"), kind: d && d.data.k, depth: d && d.depth,
             fill: r && r.getAttribute("fill"), width: r ? Number(r.getAttribute("width")) : 0 };
  }));
  check(frames.length > 10, "the chart draws frames (" + frames.length + ")");
  const names = expect.names || {};
  for (const prefix of Object.keys(names)) {
    const hit = frames.filter((f) => f.name === prefix || f.name.startsWith(prefix + "@") ||
                                     f.name.startsWith(prefix + "_["));
    if (!check(hit.length > 0, "frame " + prefix + " is drawn")) continue;
    const want = names[prefix];
    const kinds = [...new Set(hit.map((f) => f.kind))];
    check(kinds.includes(want) || (want === "lua" && kinds.includes("trace")),
          prefix + " is a " + want + " frame (got " + kinds.join(",") + ")");
    const f = hit.find((x) => x.kind === want) || hit[0];
    const h = hueOf(f.fill), range = HUES[f.kind];
    check(h !== null && range && h >= range[0] && h <= range[1],
          prefix + " is coloured as " + f.kind + " (" + f.fill + ")");
  }
  const legend = await page.$$eval("#legend li[data-kind]", (lis) => lis.map(
    (li) => [li.getAttribute("data-kind"), li.textContent]));
  const lk = legend.map((x) => x[0]);
  check(lk.includes("lua") && lk.includes("c") && lk.includes("root"),
        "legend lists the kinds: " + legend.map((x) => x[1]).join(" | "));

  // Hover: the tooltip shows the full name and the share of the samples.
  const svgWidth = await page.$eval("#chart svg", (s) => Number(s.getAttribute("width")));
  const target = frames.filter((f) => f.name === "fib_c" && f.width > 20 && f.width < 0.9 * svgWidth)
    .sort((a, b) => a.depth - b.depth)[0] ||
    frames.filter((f) => f.depth > 2 && f.width > 20 && f.width < 0.9 * svgWidth)
      .sort((a, b) => b.width - a.width)[0];
  if (!check(!!target, "a frame narrower than the chart to hover and click")) throw new Error("no target");
  await page.$$eval("#chart svg g.frame", (gs, t) => {
    const g = gs.find((x) => x.getAttribute("name") === t.name && x.__data__.depth === t.depth &&
                      Math.abs(Number(x.querySelector("rect").getAttribute("width")) - t.width) < 0.01);
    g.setAttribute("data-test", "target");
  }, target);
  const loc = page.locator('g[data-test="target"] rect');
  await loc.hover({ position: { x: 5, y: 5 } });
  await page.waitForTimeout(400);
  const tip = await page.$eval(".d3-flame-graph-tip", (t) => ({
    text: t.textContent, shown: getComputedStyle(t).display !== "none" }));
  check(tip.shown && tip.text.includes(target.name), "hover: tooltip shows the full name " + target.name);
  check(/\d+(\.\d+)?% of all/.test(tip.text), "hover: tooltip shows the sample share (" +
        tip.text.split("\n")[1] + ")");
  const details = await page.$eval("#details", (d) => d.textContent);
  check(details.includes(target.name) && details.includes("%"), "hover: details line: " + details);

  // Click: the frame zooms to the full width, the page says so; Reset zoom undoes it.
  await loc.click({ position: { x: 5, y: 5 } });
  await page.waitForTimeout(1200);
  const after = await page.$eval('g[data-test="target"] rect', (r) => Number(r.getAttribute("width")));
  check(target.width < 0.9 * svgWidth && Math.abs(after - svgWidth) < 1.5,
        "click zooms: width " + target.width.toFixed(1) + " -> " + after.toFixed(1) +
        " of " + svgWidth);
  const zoomAttr = await page.$eval("body", (b) => b.getAttribute("data-zoom"));
  check(zoomAttr === target.name, "zoom state names the clicked frame (" + zoomAttr + ")");
  const zoomText = await page.$eval("#zoom", (z) => z.textContent);
  check(zoomText.startsWith("Zoomed into " + target.name), "zoom line: " + zoomText.slice(0, 100));
  await page.screenshot({ path: shot.replace(/\.png$/, "-zoomed.png"), fullPage: true });
  await page.click("#reset");
  await page.waitForTimeout(1000);
  const reset = await page.$eval('g[data-test="target"] rect', (r) => Number(r.getAttribute("width")));
  check(Math.abs(reset - target.width) < 1.5, "Reset zoom restores the width (" + reset.toFixed(1) + ")");

  // Search: matches turn magenta, the details line gives their share.
  await page.fill("#search", "c_work");
  await page.press("#search", "Enter");
  await page.waitForTimeout(800);
  const hl = await page.$$eval("#chart svg g.frame", (gs) => gs.filter(
    (g) => g.querySelector("rect").getAttribute("fill") === "#e600e6").map((g) => g.getAttribute("name")));
  check(hl.length > 0 && hl.every((n) => n.toLowerCase().includes("c_work")),
        "search highlights only matching frames (" + hl.length + ")");
  const sd = await page.$eval("#details", (d) => d.textContent);
  check(/search .c_work.: \d+ frames?, [\d.]+% of all/.test(sd), "search summary: " + sd);
  await page.click("#clear");
  await page.waitForTimeout(600);
  await page.mouse.move(0, 0);
  await page.waitForTimeout(400);
  await page.screenshot({ path: shot, fullPage: true });
  check(fs.existsSync(shot), "screenshot " + shot);
}

// The page ljperf diff writes. WANT: {frames: [{path: [names from "all"],
// colour: "red"|"blue", tip: [substrings of its tooltip]}]}.
async function diffChecks(page, want, shot) {
  const legend = await page.$$eval("#legend li[data-kind]", (lis) => lis.map(
    (li) => li.getAttribute("data-kind")));
  check(legend.join(",") === "grown,shrunk,same", "legend: grown, shrunk, unchanged (" +
        legend.join(",") + ")");
  for (const f of want.frames) {
    const label = f.path.slice(-2).join(" > ");
    const found = await page.$$eval("#chart svg g.frame", (gs, p) => {
      const g = gs.find((x) => {
        const names = [];
        for (let d = x.__data__; d; d = d.parent) names.unshift(d.data.n);
        return names.length === p.length && names.every((n, i) => n === p[i]);
      });
      if (!g) return null;
      g.setAttribute("data-test", "target");
      const r = g.querySelector("rect");
      return { fill: r.getAttribute("fill"), width: Number(r.getAttribute("width")) };
    }, f.path);
    if (!check(!!found, "frame " + label + " is drawn")) continue;
    const m = /^hsl\(\s*([-\d.]+)\s*,\s*([\d.]+)%/.exec(found.fill || "");
    const hue = m ? Number(m[1]) : null, sat = m ? Number(m[2]) : 0;
    const red = hue === 0 && sat > 0, blue = hue === 220 && sat > 0;
    check(f.colour === "red" ? red : blue, label + " is " + f.colour + " (" + found.fill + ")");
    const loc = page.locator('g[data-test="target"] rect');
    await loc.hover({ position: { x: Math.min(3, found.width / 2), y: 5 } });
    await page.waitForTimeout(300);
    const tip = await page.$eval(".d3-flame-graph-tip", (t) => t.textContent);
    for (const s of f.tip || [])
      check(tip.includes(s), label + ": tooltip has \u201c" + s + "\u201d (" +
            tip.split("\n").slice(1).join(" | ") + ")");
    await page.$eval('g[data-test="target"]', (g) => g.removeAttribute("data-test"));
  }
  await page.mouse.move(0, 0);
  await page.screenshot({ path: shot, fullPage: true });
  check(fs.existsSync(shot), "screenshot " + shot);
}

(async () => {
  if (!fs.existsSync(chromium)) {
    console.log("FAIL: " + chromium + " not found (Debian package chromium)");
    process.exit(1);
  }
  // a new empty profile directory (--user-data-dir) for each run
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "ljperf-chromium-"));
  let browser = null;
  try {
    browser = await playwright.chromium.launchPersistentContext(profile, {
      executablePath: chromium,
      headless: true,
      viewport: { width: 1400, height: 900 },
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    const page = await browser.newPage();
    const errors = [];
    const requests = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
    page.on("request", (r) => { if (!r.url().startsWith("file:")) requests.push(r.url()); });
    await page.goto("file://" + path.resolve(html));
    await page.waitForSelector("#chart svg g.frame", { timeout: 15000 });
    await page.waitForTimeout(1200);          // d3 transitions settle
    check(errors.length === 0, "no script errors" + (errors.length ? ": " + errors.join(" | ") : ""));
    check(requests.length === 0, "self-contained: no network requests" +
          (requests.length ? ": " + requests.join(" ") : ""));

    for (const sel of Object.keys(expect.text || {})) {
      const shown = await page.$eval(sel, (e) => e.textContent);
      for (const sub of expect.text[sel])
        check(shown.includes(sub), sel + " shows \u201c" + sub + "\u201d (" + shown + ")");
    }
    if (expect.diff) await diffChecks(page, expect.diff, shot);
    else if (expect.names || !expect.text) await recordChecks(page, shot);
  } finally {
    if (browser) await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  process.exit(failed ? 1 : 0);
})().catch((e) => {
  console.log("FAIL: " + (e && e.message ? e.message.split("\n")[0] : e));
  process.exit(1);
});
