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
import { GALLERY_CHARTS, ROOT, chartTexts, launchBrowser, layoutProblems, namesAlike, offlinePage, shotPath } from './harness.mjs';

// TOTALS_CHARTS is how many charts examples/gallery -totals draws: four
// kinds for each of four plans, and their comparison.
const TOTALS_CHARTS = 17;

let browser, file, totals;
before(async () => {
  browser = await launchBrowser();
  const dir = mkdtempSync(join(tmpdir(), 'vramlab-layout-'));
  file = join(dir, 'gallery.html');
  execFileSync('go', ['run', './examples/gallery', '-o', file, '-theme', 'light'], { cwd: ROOT, stdio: 'inherit' });
  // Every chart with a memory axis for plans of 1 GiB to 2 TiB.
  totals = join(dir, 'totals.html');
  execFileSync('go', ['run', './examples/gallery', '-o', totals, '-theme', 'light', '-totals'], { cwd: ROOT, stdio: 'inherit' });
});
after(async () => { await browser?.close(); });

// 1440 px: a laptop screen. 794 px: an A4 page (210 mm at 96 px per inch).
// 703 px: a report's printed column (186 mm).
for (const [width, which] of [[1440, 'gallery'], [794, 'gallery'], [703, 'gallery'], [1440, 'totals'], [794, 'totals'], [703, 'totals']]) {
  test(`no chart label overlaps another or is cut off at ${width} px (${which})`, async () => {
    const { page, problems } = await offlinePage(browser);
    await page.setViewportSize({ width, height: 900 });
    await page.addInitScript(() => { window.vramlabRenderer = 'svg'; });
    await page.goto('file://' + (which === 'gallery' ? file : totals));
    await page.waitForFunction(() => {
      const cs = [...document.querySelectorAll('.vramlab-canvas')];
      return cs.length > 0 && cs.every((c) => c.querySelector('svg text'));
    }, null, { timeout: 30_000 });
    await page.waitForTimeout(1500); // ECharts' entry animations end
    const charts = await chartTexts(page);
    assert.equal(charts.length, which === 'gallery' ? GALLERY_CHARTS : TOTALS_CHARTS, `every chart of the ${which} page`);
    charts.forEach((c) => assert.ok(c.texts.length > 3, `${c.title} has labels`));
    await page.screenshot({ path: shotPath(`layout-${which}-${width}.png`), fullPage: true });
    const bad = [...layoutProblems(charts), ...await namesAlike(page)];
    assert.deepEqual(bad, [], bad.join('\n'));
    assert.deepEqual(problems.consoleErrors, []);
  });
}
