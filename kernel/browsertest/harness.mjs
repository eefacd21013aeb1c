// Shared pieces of the browser tests: a real JupyterLab server on loopback and
// Debian's chromium driven by playwright-core (never a downloaded browser).
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { cpSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const SHOTS = join(ROOT, '.artifacts', 'screenshots');
// GALLERY_CHARTS is how many charts examples/gallery draws: every kind, and
// the cases the layout test holds them to (a long title, two micro-batches).
export const GALLERY_CHARTS = 15;
mkdirSync(SHOTS, { recursive: true });

// Flags that keep chromium from calling home on a machine with no internet.
const CHROMIUM_ARGS = [
  '--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--disable-dev-shm-usage',
];

export async function launchBrowser() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: CHROMIUM_ARGS,
  });
}

// A page that refuses every request that leaves this machine, and records
// console errors and refused requests so tests can assert on them.
export async function offlinePage(browser, { allowHost } = {}) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const problems = { consoleErrors: [], external: [] };
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    const local = url.protocol === 'file:' || url.protocol === 'data:' ||
      (allowHost && url.host === allowHost);
    if (local) return route.continue();
    problems.external.push(url.href);
    return route.abort();
  });
  page.on('console', (msg) => { if (msg.type() === 'error') problems.consoleErrors.push(msg.text()); });
  page.on('pageerror', (err) => problems.consoleErrors.push(String(err)));
  return { page, problems };
}

// startLab serves JupyterLab from the project's .venv on a free loopback port
// with token authentication, the way `make lab` does. It serves a copy of
// notebooks/, so autosave never writes outputs into the committed notebooks.
export async function startLab({ notebookDir } = {}) {
  if (!notebookDir) {
    notebookDir = mkdtempSync(join(tmpdir(), 'vramlab-notebooks-'));
    cpSync(join(ROOT, 'notebooks'), notebookDir, { recursive: true });
  }
  // A port free when asked can be taken before the server binds it (a
  // kernel's ZMQ sockets pick ports too): only that refusal is retried,
  // each time on a new port the system hands out.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startLabOn(await freePort(), notebookDir);
    } catch (err) {
      if (!(err instanceof PortTaken) || attempt >= 5) throw err;
    }
  }
}

class PortTaken extends Error {}

// freePort asks the system for a loopback port no one holds right now.
export function freePort() {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolvePort(port));
    });
  });
}

async function startLabOn(port, notebookDir) {
  const token = Math.random().toString(36).slice(2) + Math.random().toString(36).slice(2);
  const runtime = mkdtempSync(join(tmpdir(), 'vramlab-lab-'));
  const proc = spawn(join(ROOT, '.venv', 'bin', 'jupyter'), [
    'lab', '--no-browser', '--ip=127.0.0.1', `--port=${port}`, `--IdentityProvider.token=${token}`,
    `--ServerApp.root_dir=${notebookDir}`, '--ServerApp.port_retries=0',
    '--LabApp.news_url=', '--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate',
    `--LabApp.workspaces_dir=${mkdtempSync(join(tmpdir(), 'vramlab-ws-'))}`,
    ...(process.getuid?.() === 0 ? ['--allow-root'] : []),
  ], { env: { ...process.env, JUPYTER_RUNTIME_DIR: runtime }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let log = '';
  proc.stdout.on('data', (d) => { log += d; });
  proc.stderr.on('data', (d) => { log += d; });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (proc.exitCode !== null) {
      const Err = /port \d+ is not available/.test(log) ? PortTaken : Error;
      throw new Err(`jupyter lab exited:\n${log}`);
    }
    try {
      const r = await fetch(`${base}/api/status?token=${token}`);
      if (r.ok) break;
    } catch { /* not up yet */ }
    if (Date.now() > deadline) throw new Error(`jupyter lab did not start in 60s:\n${log}`);
    await new Promise((r) => setTimeout(r, 300));
  }
  return {
    base, token, host: `127.0.0.1:${port}`,
    url: (path) => `${base}${path}${path.includes('?') ? '&' : '?'}token=${token}`,
    log: () => log,
    async stop() { await stopProcess(proc, { group: true }); },
  };
}

// stopProcess sends SIGTERM (to the process group with group: true, for a
// process spawned detached) and waits up to grace ms for it to exit; one that
// is still running then gets SIGKILL, so a server that hangs on shutdown
// fails a test rather than holding the test run until CI's limit. It says
// whether the process stopped on SIGTERM.
export async function stopProcess(proc, { group = false, grace = 20_000 } = {}) {
  if (proc.exitCode !== null || proc.signalCode !== null) return true;
  const exited = new Promise((r) => proc.once('exit', () => r(true)));
  const send = (sig) => { try { process.kill(group ? -proc.pid : proc.pid, sig); } catch { /* gone */ } };
  send('SIGTERM');
  const within = (ms) => Promise.race([exited, new Promise((r) => setTimeout(() => r(false), ms).unref())]);
  if (await within(grace)) return true;
  send('SIGKILL');
  await within(10_000);
  return false;
}

// runAllCells opens a notebook in JupyterLab and runs every cell through the
// menu, as a person would; it waits until the kernel is idle again.
// With wait: false it returns once the cells are queued (for a cell that
// keeps running, such as the what-if controls); waitForIdle waits for them.
// closeSessions shuts down every kernel session of the lab, so that the
// next page opening a notebook starts a kernel of its own rather than
// joining one an earlier test's page still holds (its widgets' messages
// would go to that page).
export async function closeSessions(lab) {
  const sessions = await (await fetch(lab.url('/api/sessions'))).json();
  for (const s of sessions) await fetch(lab.url(`/api/sessions/${s.id}`), { method: 'DELETE' });
}

export async function runAllCells(page, lab, notebook, { timeout = 240_000, wait = true } = {}) {
  // ?reset: start from an empty workspace, so only this notebook is open.
  await page.goto(lab.url(`/lab/tree/${notebook}?reset`), { waitUntil: 'domcontentloaded' });
  await page.locator('.jp-Notebook >> visible=true').first().waitFor({ timeout: 60_000 });
  // gonb reports its status only around executions, so the status bar says
  // "Go (VRAM Lab) | Unknown" until the first cell runs: wait for the session,
  // then run all cells, and retry the menu while nothing got queued (a click
  // before the kernel connection is ready is dropped).
  await page.locator('.jp-StatusBar-Widget', { hasText: 'Go (VRAM Lab) |' }).first().waitFor({ timeout: 90_000 });
  const started = () => page.evaluate(() => [...document.querySelectorAll('.jp-InputArea-prompt')]
    .some((p) => /\[(\*|\d+)\]/.test(p.textContent)));
  for (let attempt = 0; attempt < 5 && !(await started()); attempt++) {
    await page.getByRole('menuitem', { name: 'Run', exact: true }).click();
    await page.getByRole('menuitem', { name: /^Run All Cells/ }).click();
    await page.waitForFunction(() => [...document.querySelectorAll('.jp-InputArea-prompt')]
      .some((p) => /\[(\*|\d+)\]/.test(p.textContent)), null, { timeout: 15_000 }).catch(() => {});
  }
  if (wait) await waitForIdle(page, timeout);
}

// waitForIdle waits until no cell is queued or running ("[*]") any more.
export async function waitForIdle(page, timeout = 240_000) {
  await page.waitForFunction(() => {
    const prompts = [...document.querySelectorAll('.jp-InputArea-prompt')].map((p) => p.textContent);
    return prompts.length > 0 && !prompts.some((t) => t.includes('*')) &&
      prompts.some((t) => /\[\d+\]/.test(t));
  }, null, { timeout });
}

export function shotPath(name) { return join(SHOTS, name); }

// chartStates reports, for every VRAM Lab chart on the page, whether ECharts
// initialized it and how many non-transparent pixels its canvas has.
export async function chartStates(page) {
  return page.evaluate(() => [...document.querySelectorAll('.vramlab-canvas')].map((el) => {
    const inst = window.echarts && window.echarts.getInstanceByDom(el);
    const canvas = el.querySelector('canvas');
    let painted = 0;
    if (canvas) {
      const ctx = canvas.getContext('2d');
      const d = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
      for (let i = 3; i < d.length; i += 16) if (d[i] > 0) painted++;
    }
    return { initialized: !!inst, painted, hidden: el.offsetParent === null };
  }));
}

// waitForCharts waits until n charts are initialized (or the timeout).
export async function waitForCharts(page, n, timeout = 30_000) {
  await page.waitForFunction((n) => window.echarts &&
    [...document.querySelectorAll('.vramlab-canvas')].filter((el) => window.echarts.getInstanceByDom(el)).length >= n,
  n, { timeout });
  await page.waitForTimeout(1500); // let the first frame paint (animations off-screen too)
}

// The payload the security tests put in every label a user can type: a
// script-tag break-out, an event handler, quotes, a line separator that ends
// a JavaScript string literal, and an entity. Each way it could run bumps
// window.__pwned or opens a dialog.
export const PAYLOAD = `</script><script>window.__pwned=(window.__pwned||0)+1;alert(1)</script>` +
  `<img src=x onerror="window.__pwned=(window.__pwned||0)+1;alert(2)">"'\u2028&lt;`;

// watchScripts fails closed: it records every dialog (and dismisses it, so
// nothing hangs) and reads window.__pwned; report() says what ran.
export function watchScripts(page) {
  const dialogs = [];
  page.on('dialog', async (d) => { dialogs.push(d.message()); await d.dismiss().catch(() => {}); });
  return {
    async report() {
      const pwned = await page.evaluate(() => window.__pwned || 0);
      const imgs = await page.evaluate(() => document.querySelectorAll('img[src="x"]').length);
      return { dialogs, pwned, injectedImages: imgs };
    },
  };
}

// hoverEverything opens the tooltip of every data point of every chart on
// the page, twice over: through ECharts' showTip action for each series and
// data index, and with the real mouse swept over each chart in a grid. It
// returns the text of the tooltips it saw.
export async function hoverEverything(page) {
  const texts = await page.evaluate(async () => {
    const seen = [];
    const wait = () => new Promise((r) => setTimeout(r, 0));
    for (const el of document.querySelectorAll('.vramlab-canvas')) {
      const ch = window.echarts && window.echarts.getInstanceByDom(el);
      if (!ch) continue;
      const opt = ch.getOption();
      for (let s = 0; s < opt.series.length; s++) {
        const n = ch.getModel().getSeriesByIndex(s)?.getData().count() ?? 0;
        for (let i = 0; i < n; i++) {
          ch.dispatchAction({ type: 'showTip', seriesIndex: s, dataIndex: i });
          await wait();
          const tip = el.querySelector('.vramlab-tip');
          if (tip) seen.push(tip.textContent);
        }
      }
      ch.dispatchAction({ type: 'hideTip' });
    }
    return seen;
  });
  for (const box of await page.locator('.vramlab-canvas').all()) {
    await box.scrollIntoViewIfNeeded();
    const b = await box.boundingBox();
    if (!b) continue;
    for (let y = 0.1; y < 1; y += 0.2) {
      for (let x = 0.05; x < 1; x += 0.06) {
        await page.mouse.move(b.x + b.width * x, b.y + b.height * y);
      }
    }
  }
  await page.mouse.move(0, 0);
  return texts;
}

// The layout checks of every chart on a page (layout.test.mjs, and the
// playground at large totals in whatif.test.mjs): labels drawn with the SVG
// renderer (window.vramlabRenderer = 'svg'), each with its box.
// Every visible text of each chart's SVG, with its box relative to the chart.
export async function chartTexts(page) {
  return page.evaluate(() => [...document.querySelectorAll('.vramlab-chart')].map((root) => {
    const box = root.querySelector('.vramlab-canvas').getBoundingClientRect();
    const title = root.querySelector('.vramlab-fallback caption')?.textContent || root.id;
    const texts = [...root.querySelectorAll('.vramlab-canvas svg text')].filter((t) => {
      if (!t.textContent.trim()) return false;
      for (let e = t; e && e.tagName !== 'svg'; e = e.parentElement) {
        const cs = getComputedStyle(e);
        if (cs.display === 'none' || cs.visibility === 'hidden' || Number(cs.opacity) === 0) return false;
        if (e.getAttribute('opacity') === '0' || e.getAttribute('fill-opacity') === '0') return false;
      }
      return true;
    }).map((t) => {
      // A text's box is taller than its glyphs (the em box plus leading);
      // the glyphs span about one font size around its middle, so lines of
      // one multi-line label, a font size apart, do not count as touching.
      const r = t.getBoundingClientRect();
      const fs = parseFloat(getComputedStyle(t).fontSize) || r.height;
      const h = Math.min(r.height, fs);
      return { text: t.textContent, x: r.left - box.left, y: r.top - box.top + (r.height - h) / 2, w: r.width, h };
    });
    return { title, width: box.width, height: box.height, texts };
  }));
}

// A label overlaps another when their boxes share more than a sliver (1.5 px
// each way, which glyph boxes' own padding can account for), and runs into
// another on its line when less than 2 px separate them.
export function layoutProblems(charts) {
  const out = [];
  for (const c of charts) {
    const ts = c.texts;
    for (const t of ts) {
      if (/(…|\.\.\.)$/.test(t.text)) out.push(`${c.title}: "${t.text}" is truncated`);
      if (t.x < -1 || t.y < -1 || t.x + t.w > c.width + 1 || t.y + t.h > c.height + 1) {
        out.push(`${c.title}: "${t.text}" is cut off (box ${t.x.toFixed(0)},${t.y.toFixed(0)} ${t.w.toFixed(0)}×${t.h.toFixed(0)} in ${c.width.toFixed(0)}×${c.height.toFixed(0)})`);
      }
    }
    for (let i = 0; i < ts.length; i++) {
      for (let j = i + 1; j < ts.length; j++) {
        const a = ts[i], b = ts[j];
        const ox = Math.min(a.x + a.w, b.x + b.w) - Math.max(a.x, b.x);
        const oy = Math.min(a.y + a.h, b.y + b.h) - Math.max(a.y, b.y);
        if (ox > 1.5 && oy > 1.5) out.push(`${c.title}: "${a.text}" overlaps "${b.text}" (${ox.toFixed(1)}×${oy.toFixed(1)} px)`);
        // Two labels on one line with under 2 px between them read as one
        // ("10 GiB15 GiB").
        else if (oy > 0.6 * Math.min(a.h, b.h) && ox > -2 && a.text.trim() && b.text.trim()) out.push(`${c.title}: "${a.text}" runs into "${b.text}" (${(-ox).toFixed(1)} px apart)`);
      }
    }
  }
  return out;
}

// namesAlike lists, per chart, the category axis names and the phase
// bands' names (a timeline's marked areas) that appear twice: two bars or
// two humps that read alike, which is which?
export async function namesAlike(page) {
  return page.evaluate(() => [...document.querySelectorAll('.vramlab-chart')].flatMap((root) => {
    const o = window.echarts.getInstanceByDom(root.querySelector('.vramlab-canvas')).getOption();
    const title = root.querySelector('.vramlab-fallback caption')?.textContent || root.id;
    const lists = (o.xAxis || []).filter((a) => a.type === 'category').map((a) => (a.data || []).map((d) => (typeof d === 'object' ? d.value : d)));
    for (const s of o.series || []) {
      if (s.markArea?.data) lists.push(s.markArea.data.map((a) => a[0].name).filter(Boolean));
    }
    const out = [];
    for (const names of lists) {
      const seen = new Set();
      for (const n of names) {
        if (seen.has(n)) out.push(`${title}: two labels read "${n}"`);
        seen.add(n);
      }
    }
    return out;
  }));
}

