// The main job, tested as a user meets it: JupyterLab serves the notebooks,
// the smoke notebook runs in the vramlab kernel, and its outputs (Go text and
// an HTML display) appear in the page.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chartStates, launchBrowser, offlinePage, runAllCells, shotPath, startLab, waitForCharts } from './harness.mjs';

let lab, browser;
before(async () => { lab = await startLab(); browser = await launchBrowser(); });
after(async () => { await browser?.close(); await lab?.stop(); });

test('smoke notebook runs Go and shows HTML in JupyterLab', async () => {
  const { page, problems } = await offlinePage(browser, { allowHost: lab.host });
  await runAllCells(page, lab, '00-check-your-setup.ipynb');
  const outputs = page.locator('.jp-OutputArea-output');
  await outputs.filter({ hasText: 'VRAM Lab kernel OK: go1.' }).first().waitFor({ timeout: 30_000 });
  await page.locator('.jp-OutputArea-output #vramlab-smoke').waitFor({ timeout: 30_000 });
  assert.match(await page.locator('#vramlab-smoke').innerText(), /HTML output works/);
  const errors = await page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]').allInnerTexts();
  assert.deepEqual(errors.filter((t) => /error|panic/i.test(t)), []);
  await page.screenshot({ path: shotPath('00-check-your-setup.png'), fullPage: true });
  assert.deepEqual(problems.external, [], 'no request may leave the machine');
});

test('a tutorial draws its charts in JupyterLab', async () => {
  const { page, problems } = await offlinePage(browser, { allowHost: lab.host });
  await runAllCells(page, lab, '01-who-eats-the-memory.ipynb');
  await waitForCharts(page, 2, 60_000);
  const states = await chartStates(page);
  assert.equal(states.length, 2);
  states.forEach((s, i) => assert.ok(s.initialized && s.painted > 200, `chart ${i}: ${JSON.stringify(s)}`));
  await page.screenshot({ path: shotPath('01-who-eats-the-memory.png'), fullPage: true });
  assert.deepEqual(problems.external, []);
  assert.deepEqual(problems.consoleErrors.filter((e) => !/favicon/.test(e)), []);
});
