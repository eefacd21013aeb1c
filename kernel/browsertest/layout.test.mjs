// Charts read at a glance: every chart kind, drawn with ECharts' SVG renderer
// (so each label is a DOM element with a box), at a 1440 px wide screen and at
// the width of an A4 page, must have no two labels on top of each other and
// no label cut off at the chart's edge.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GALLERY_CHARTS, ROOT, launchBrowser, offlinePage, shotPath } from './harness.mjs';

let browser, file;
before(async () => {
  browser = await launchBrowser();
  file = join(mkdtempSync(join(tmpdir(), 'vramlab-layout-')), 'gallery.html');
  execFileSync('go', ['run', './examples/gallery', '-o', file, '-theme', 'light'], { cwd: ROOT, stdio: 'inherit' });
});
after(async () => { await browser?.close(); });

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
// each way, which glyph boxes' own padding can account for).
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

// 1440 px: a laptop screen. 794 px: an A4 page (210 mm at 96 px per inch).
for (const width of [1440, 794]) {
  test(`no chart label overlaps another or is cut off at ${width} px`, async () => {
    const { page, problems } = await offlinePage(browser);
    await page.setViewportSize({ width, height: 900 });
    await page.addInitScript(() => { window.vramlabRenderer = 'svg'; });
    await page.goto('file://' + file);
    await page.waitForFunction(() => {
      const cs = [...document.querySelectorAll('.vramlab-canvas')];
      return cs.length > 0 && cs.every((c) => c.querySelector('svg text'));
    }, null, { timeout: 30_000 });
    await page.waitForTimeout(1500); // ECharts' entry animations end
    const charts = await chartTexts(page);
    assert.equal(charts.length, GALLERY_CHARTS, 'every chart of the gallery');
    charts.forEach((c) => assert.ok(c.texts.length > 3, `${c.title} has labels`));
    await page.screenshot({ path: shotPath(`layout-${width}.png`), fullPage: true });
    const bad = [...layoutProblems(charts), ...await namesAlike(page)];
    assert.deepEqual(bad, [], bad.join('\n'));
    assert.deepEqual(problems.consoleErrors, []);
  });
}
