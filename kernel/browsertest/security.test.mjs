// No label, plan name, model name or path runs as script anywhere a user
// meets it: every chart kind with hostile labels (every tooltip opened), the
// report exported from a hostile plan (HTML and PDF, within its time
// limit), and that report's trusted notebook opened in JupyterLab.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  PAYLOAD, ROOT, chartStates, hoverEverything, launchBrowser, offlinePage, shotPath, startLab,
  waitForCharts, watchScripts,
} from './harness.mjs';

let browser;
before(async () => { browser = await launchBrowser(); });
after(async () => { await browser?.close(); });

test('every chart kind with hostile labels: nothing runs, the labels read as text', async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'vramlab-hostile-')), 'hostile.html');
  execFileSync('go', ['run', './examples/gallery', '-o', file, '-label', PAYLOAD], { cwd: ROOT, stdio: 'inherit' });
  const { page, problems } = await offlinePage(browser);
  const watch = watchScripts(page);
  await page.goto('file://' + file);
  await waitForCharts(page, 11);
  const states = await chartStates(page);
  assert.equal(states.length, 11, 'eleven chart kinds');
  states.forEach((s, i) => assert.ok(s.initialized && s.painted > 200, `chart ${i}: ${JSON.stringify(s)}`));
  const tips = await hoverEverything(page);
  assert.ok(tips.length >= 20, `tooltips opened: ${tips.length}`);
  assert.ok(tips.some((t) => t.includes('onerror="window.__pwned')), 'a tooltip shows the hostile label as text');
  assert.deepEqual(await watch.report(), { dialogs: [], pwned: 0, injectedImages: 0 });
  // Without scripts, the fallback tables show the labels as text too.
  const ctx = await browser.newContext({ javaScriptEnabled: false });
  const plain = await ctx.newPage();
  await plain.goto('file://' + file);
  assert.match(await plain.locator('table.vramlab-fallback').first().innerText(), /onerror=/);
  assert.equal(await plain.locator('img[src="x"]').count(), 0);
  await ctx.close();
  await page.screenshot({ path: shotPath('hostile-gallery.png'), fullPage: true });
  assert.deepEqual(problems.external, []);
});

// A plan whose every free-text field is hostile: its name, its file name,
// the config.json it names (file name and _name_or_path).
function hostilePlan() {
  const dir = mkdtempSync(join(tmpdir(), 'vramlab-hostile-plan-'));
  const cfgName = `<img src=x onerror=alert(3)>'".config.json`;
  const cfg = JSON.parse(readFileSync(join(ROOT, 'vram', 'testdata', 'hf', 'gpt2.json'), 'utf8'));
  cfg._name_or_path = PAYLOAD;
  writeFileSync(join(dir, cfgName), JSON.stringify(cfg));
  const plan = join(dir, `<img src=x onerror=alert(4)> plan.json`);
  writeFileSync(plan, JSON.stringify({
    name: PAYLOAD, model: { hf_config: cfgName },
    train: { seq_len: 256, micro_batch: 2, precision: 'bf16' }, gpu: 'A100-80GB',
  }));
  return plan;
}

test('a hostile plan: make report finishes in time, and neither the HTML nor the trusted notebook runs its text', async () => {
  const plan = hostilePlan();
  const started = Date.now();
  const r = spawnSync('make', ['-s', 'report', `PLAN=${plan}`], { cwd: ROOT, encoding: 'utf8', timeout: 600_000 });
  assert.equal(r.status, 0, `make report exited ${r.status}:\n${r.stdout}\n${r.stderr}`);
  const seconds = (Date.now() - started) / 1000;
  // The report's name is the plan's file name, made safe for a path and a title.
  const out = join(ROOT, '.artifacts', 'reports', '_img_src_x_onerror_alert_4___plan');
  for (const ext of ['ipynb', 'html', 'pdf']) {
    assert.ok(existsSync(join(out, `_img_src_x_onerror_alert_4___plan.${ext}`)), `${ext} written (${seconds}s)`);
  }
  const html = readFileSync(join(out, '_img_src_x_onerror_alert_4___plan.html'), 'utf8');
  assert.doesNotMatch(html, /<img src=x/i, 'no raw payload in the exported HTML');

  const { page, problems } = await offlinePage(browser);
  const watch = watchScripts(page);
  await page.goto('file://' + join(out, '_img_src_x_onerror_alert_4___plan.html'));
  await waitForCharts(page, 2);
  assert.match(await page.locator('h2').first().innerText(), /onerror="window.__pwned/, 'the plan name shows as text');
  await hoverEverything(page);
  assert.deepEqual(await watch.report(), { dialogs: [], pwned: 0, injectedImages: 0 });
  await page.screenshot({ path: shotPath('hostile-report.png'), fullPage: true });
  assert.deepEqual(problems.external, []);

  // The trusted notebook, opened in JupyterLab: its outputs render (trusted,
  // so the chart scripts run) and none of the plan's text does.
  const nbDir = mkdtempSync(join(tmpdir(), 'vramlab-hostile-lab-'));
  cpSync(join(out, '_img_src_x_onerror_alert_4___plan.ipynb'), join(nbDir, 'hostile.ipynb'));
  const lab = await startLab({ notebookDir: nbDir });
  try {
    const { page: lp, problems: lprob } = await offlinePage(browser, { allowHost: lab.host });
    const lwatch = watchScripts(lp);
    await lp.goto(lab.url('/lab/tree/hostile.ipynb?reset'), { waitUntil: 'domcontentloaded' });
    await waitForCharts(lp, 2, 60_000);
    await hoverEverything(lp);
    assert.deepEqual(await lwatch.report(), { dialogs: [], pwned: 0, injectedImages: 0 });
    await lp.screenshot({ path: shotPath('hostile-report-lab.png'), fullPage: true });
    const outs = await lp.locator('.jp-OutputArea-output').allTextContents();
    assert.ok(outs.some((t) => t.includes('onerror="window.__pwned')),
      'the plan name shows as text in JupyterLab');
    await lp.screenshot({ path: shotPath('hostile-report-lab.png'), fullPage: true });
    assert.deepEqual(lprob.external, []);
  } finally {
    await lab.stop();
  }
});

test('make report on an invalid plan fails with a clear message and a non-zero exit', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vramlab-bad-plan-'));
  const plan = join(dir, 'bad.json');
  writeFileSync(plan, '{"model": "gpt2", "train": {"seq_len": 0, "micro_batch": 1}}');
  const r = spawnSync('make', ['-s', 'report', `PLAN=${plan}`], { cwd: ROOT, encoding: 'utf8', timeout: 600_000 });
  assert.notEqual(r.status, 0, 'a failed report must not exit 0');
  const said = r.stderr.split('\n').filter((l) => l.startsWith('report:'));
  assert.equal(said.length, 1, `one line says why:\n${r.stderr}`);
  assert.match(said[0], /report: the notebook stopped: .*seq_len/);
  assert.doesNotMatch(r.stderr, /Traceback/);
  assert.ok(!existsSync(join(ROOT, '.artifacts', 'reports', 'bad', 'bad.pdf')), 'no PDF named for a failed report');
});

test('make report past its time limit exits non-zero, names the step, and leaves no temporary files', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'vramlab-report-tmp-'));
  const r = spawnSync('make', ['-s', 'report', 'PLAN=examples/plans/llama3-8b-lora.json'], {
    cwd: ROOT, encoding: 'utf8', timeout: 300_000, env: { ...process.env, REPORT_TIMEOUT: '1', TMPDIR: tmp },
  });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /report: executing the report notebook did not finish within 1s/);
  const left = readdirSync(tmp).filter((n) => n.startsWith('tmp.'));
  assert.deepEqual(left, [], 'report.sh removes its temporary folder (the chromium profile among them)');
});
