// A newcomer's first minutes, as README's first screen tells them: `make
// lab`, open the URL it prints, no toast in the way, run 00 and then 01.
// The picture of 01 this test takes is README's picture
// (kernel/browsertest/front-door.png), so it shows what the code draws now.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, chartStates, freePort, launchBrowser, offlinePage, runAllCells, stopProcess, waitForCharts } from './harness.mjs';

export const FRONT_DOOR = join(ROOT, 'kernel', 'browsertest', 'front-door.png');

let proc, lab, browser;

// makeLab runs `make lab` on a port of its own and a fresh working copy,
// and waits for the URL with its token that Jupyter prints.
async function makeLab() {
  const port = await freePort();
  const work = mkdtempSync(join(tmpdir(), 'vramlab-newcomer-'));
  proc = spawn('make', ['-s', 'lab'], {
    cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LAB_PORT: String(port), VRAMLAB_WORK: join(work, 'notebooks'),
      JUPYTER_RUNTIME_DIR: mkdtempSync(join(tmpdir(), 'vramlab-rt-')) },
  });
  let log = '';
  proc.stdout.on('data', (d) => { log += d; });
  proc.stderr.on('data', (d) => { log += d; });
  const deadline = Date.now() + 240_000;
  let m;
  while (!(m = log.match(/http:\/\/127\.0\.0\.1:(\d+)\/lab\?token=([0-9a-f]+)/))) {
    if (proc.exitCode !== null) throw new Error(`make lab exited:\n${log}`);
    if (Date.now() > deadline) throw new Error(`make lab printed no URL in 240 s:\n${log}`);
    await new Promise((r) => setTimeout(r, 300));
  }
  const [, p, token] = m;
  assert.equal(p, String(port));
  const base = `http://127.0.0.1:${p}`;
  return { base, token, host: `127.0.0.1:${p}`, log: () => log,
    url: (path) => `${base}${path}${path.includes('?') ? '&' : '?'}token=${token}` };
}

before(async () => { lab = await makeLab(); browser = await launchBrowser(); });
after(async () => {
  await browser?.close();
  if (proc && proc.exitCode === null) {
    await stopProcess(proc, { group: true }); // make, the setup shell and jupyter
  }
});

test('a newcomer: make lab prints the URL, no toast, 00 then 01 run, and 01 is README\'s picture', async () => {
  const { page, problems } = await offlinePage(browser, { allowHost: lab.host });
  await page.setViewportSize({ width: 1280, height: 900 });
  await runAllCells(page, lab, '00-check-your-setup.ipynb');
  await page.locator('.jp-OutputArea-output', { hasText: 'VRAM Lab kernel OK' }).first().waitFor({ timeout: 60_000 });
  await runAllCells(page, lab, '01-who-eats-the-memory.ipynb');
  await waitForCharts(page, 2, 90_000);
  const states = await chartStates(page);
  states.forEach((s, i) => assert.ok(s.initialized && s.painted > 200, `chart ${i}: ${JSON.stringify(s)}`));
  // JupyterLab asks about its news feed in a toast unless the server turns
  // the feed off, as make lab does.
  const toasts = await page.locator('.Toastify__toast').allInnerTexts();
  assert.deepEqual(toasts.filter((t) => /news/i.test(t)), [], `the "Jupyter news?" toast: ${JSON.stringify(toasts)}`);
  const errors = await page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]').allInnerTexts();
  assert.deepEqual(errors.filter((t) => /error|panic/i.test(t)), []);
  // The picture is the notebook: the file browser (whose "modified" times
  // change every run) folded away.
  await page.keyboard.press('Control+b');
  await page.locator('.vramlab-canvas').first().scrollIntoViewIfNeeded();
  // Printed lines break at word boundaries (charts.Setup's style), not
  // mid-word as JupyterLab's output area does by default.
  const wrap = await page.evaluate(() => {
    const pre = document.querySelector('.jp-OutputArea-output pre');
    return pre ? getComputedStyle(pre).wordBreak : 'no printed output';
  });
  assert.equal(wrap, 'normal', 'printed lines wrap at word boundaries');
  await page.screenshot({ path: FRONT_DOOR });
  assert.deepEqual(problems.external, [], 'no request may leave the machine');
});
