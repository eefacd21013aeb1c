// Charts as people see them: the gallery page (every chart kind) opened from
// disk with the network blocked, in light and dark themes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GALLERY_CHARTS, ROOT, chartStates, launchBrowser, offlinePage, shotPath, waitForCharts } from './harness.mjs';

let browser;
before(async () => { browser = await launchBrowser(); });
after(async () => { await browser?.close(); });

for (const theme of ['light', 'dark']) {
  test(`every chart kind renders offline (${theme})`, async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'vramlab-gallery-')), 'gallery.html');
    execFileSync('go', ['run', './examples/gallery', '-o', file, '-theme', theme], { cwd: ROOT, stdio: 'inherit' });
    const { page, problems } = await offlinePage(browser);
    await page.goto('file://' + file);
    await waitForCharts(page, GALLERY_CHARTS);
    const states = await chartStates(page);
    assert.equal(states.length, GALLERY_CHARTS, 'every chart of the gallery');
    states.forEach((s, i) => {
      assert.ok(s.initialized, `chart ${i} initialized`);
      assert.ok(s.painted > 200, `chart ${i} has pixels (${s.painted})`);
    });
    const tables = await page.locator('.vramlab-fallback').evaluateAll((ts) => ts.filter((t) => t.style.display !== 'none').length);
    assert.equal(tables, 0, 'fallback tables hide once charts draw');
    await page.screenshot({ path: shotPath(`gallery-${theme}.png`), fullPage: true });
    assert.deepEqual(problems.consoleErrors, []);
    assert.deepEqual(problems.external, [], 'no request may leave the machine');
  });
}

test('without scripts the data tables show', async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'vramlab-gallery-')), 'gallery.html');
  execFileSync('go', ['run', './examples/gallery', '-o', file], { cwd: ROOT, stdio: 'inherit' });
  const context = await browser.newContext({ javaScriptEnabled: false });
  const page = await context.newPage();
  await page.goto('file://' + file);
  const visible = await page.locator('table.vramlab-fallback').evaluateAll((ts) => ts.filter((t) => t.offsetParent !== null).length);
  assert.equal(visible, GALLERY_CHARTS, 'one readable table per chart');
  assert.match(await page.locator('table.vramlab-fallback').first().innerText(), /parameters/);
  await page.screenshot({ path: shotPath('gallery-noscript.png'), fullPage: true });
  await context.close();
});
