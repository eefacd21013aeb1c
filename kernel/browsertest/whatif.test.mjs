// The playground's what-if controls, as a reader uses them in JupyterLab:
// gonb widgets drive the plan, and the numbers and the chart change in place
// without re-running the cell.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chartTexts, launchBrowser, layoutProblems, offlinePage, runAllCells, shotPath, startLab, waitForIdle } from './harness.mjs';

// The three tests share one page and one run of the playground, as a reader
// would: the controls are moved, pushed to their ends, then ended. (Opening
// the playground anew for each test restarted its kernel between them; on
// CI the second start once never showed its widget in 420 s.)
let lab, browser, page, problems, box, before0, last;
before(async () => { lab = await startLab(); browser = await launchBrowser(); });
after(async () => { await browser?.close(); await lab?.stop(); });

// widgetReady waits for the what-if widget's controls. The cell first
// builds its Go program, which on a loaded 2-core machine can take minutes
// (two CI failures waited 180 s under load; alone it takes seconds), so the
// wait is long, but an error the cell prints ends it at once, with the
// text, as does the cell's own note that no browser answered its controls
// (charts.Controls.Probe: at 5 s it once gave up on a slow page, and the
// test waited its 420 s for controls that would never come).
async function widgetReady(page, box) {
  const done = box.getByRole('button', { name: 'done' });
  const failed = page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]', { hasText: /panic|exit status|undefined:|cannot find package/ })
    .or(page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]'))
    .or(page.getByText(/No browser answered the controls/)); // the cell gave up on the page
  const shown = done.waitFor({ timeout: 420_000 });
  const broke = failed.first().waitFor({ timeout: 420_000 });
  shown.catch(() => {}); // the one that loses the race times out later, unheeded
  broke.catch(() => {});
  await Promise.race([shown, broke]).catch(() => {});
  if (!(await done.isVisible())) {
    const errors = (await failed.allInnerTexts()).join('\n').slice(0, 2000);
    if (errors) assert.fail(`the what-if cell failed before its widget showed: ${errors}`);
    // Nothing printed: say where the notebook stood (each cell's prompt,
    // the kernel's status, the last outputs) so a failure can be read.
    const state = await page.evaluate(() => ({
      prompts: [...document.querySelectorAll('.jp-InputArea-prompt')].map((p) => p.textContent.trim()).join(' '),
      status: [...document.querySelectorAll('.jp-StatusBar-Widget')].map((w) => w.textContent.trim()).filter(Boolean).join(' | '),
      outputs: [...document.querySelectorAll('.jp-OutputArea-output')].map((o) => o.textContent.trim().slice(0, 200)).slice(-4),
    }));
    await page.screenshot({ path: shotPath('20-what-if-no-widget.png'), fullPage: false }).catch(() => {});
    assert.fail(`no what-if widget and no error after 420 s: ${JSON.stringify(state).slice(0, 2000)}`);
  }
}

// The result area as the reader sees it: the allocated peak it states, the
// text, and the total in the subtitle of the chart ECharts drew.
const readResult = (page) => page.evaluate(() => {
  const el = document.querySelector('.vramlab-whatif-result');
  if (!el) return null;
  const chart = el.querySelector('[_echarts_instance_]');
  const inst = chart && window.echarts.getInstanceByDom(chart);
  return { allocated: el.dataset.allocated, text: el.innerText, subtitle: inst ? inst.getOption().title[0].subtext : null };
});

test('moving a what-if slider updates the numbers and the chart in place', async () => {
  ({ page, problems } = await offlinePage(browser, { allowHost: lab.host }));
  // SVG, so that the terabytes test below can read every label as text.
  await page.addInitScript(() => { window.vramlabRenderer = 'svg'; });
  await runAllCells(page, lab, '20-what-if-playground.ipynb', { wait: false });
  box = page.locator('.vramlab-whatif');
  await widgetReady(page, box);
  const sliders = box.locator('input[type=range]');
  assert.equal(await sliders.count(), 2, 'sequence length and micro-batch');
  assert.equal(await box.locator('select').count(), 5, 'model, precision, optimizer, checkpointing, GPU');

  before0 = await readResult(page);
  assert.ok(before0 && before0.subtitle, `a drawn result: ${JSON.stringify(before0)}`);
  assert.match(before0.text, /micro-batch 2/);

  // The micro-batch slider moves in powers of two: step 3 is 8, as a drag
  // ends there (input, then change).
  await sliders.nth(1).evaluate((el) => {
    el.value = '3';
    el.dispatchEvent(new Event('input'));
    el.dispatchEvent(new Event('change'));
  });
  await page.waitForFunction((a) => {
    const el = document.querySelector('.vramlab-whatif-result');
    return el && el.dataset.allocated !== a && /micro-batch 8/.test(el.innerText) && el.querySelector('[_echarts_instance_]');
  }, before0.allocated, { timeout: 60_000 });
  await page.waitForFunction(() => {
    const c = document.querySelector('.vramlab-whatif-result [_echarts_instance_]');
    return c && window.echarts.getInstanceByDom(c);
  }, null, { timeout: 30_000 });
  const after = await readResult(page);
  assert.ok(Number(after.allocated) > Number(before0.allocated), `a bigger micro-batch needs more: ${before0.allocated} → ${after.allocated}`);
  assert.notEqual(after.subtitle, before0.subtitle, 'the chart was redrawn with the new total');
  const shown = after.text.match(/tensors live at the peak \(the chart\)\s+([\d.,]+ GiB)/);
  assert.ok(shown && after.subtitle.includes(shown[1]), `the chart's total ${after.subtitle} is the stated peak ${shown && shown[1]}`);
  assert.equal(await box.locator('output').nth(1).innerText(), '8', 'the slider shows its value');

  // A select: the GPU. The verdict names the card chosen.
  await box.locator('select').last().selectOption({ label: 'RTX-4090' });
  await page.waitForFunction(() => /verdict on RTX-4090\s+does not fit/.test(document.querySelector('.vramlab-whatif-result')?.innerText || ''),
    null, { timeout: 60_000 });
  // The keyboard: one arrow press is one step (8 → 16).
  await sliders.nth(1).press('ArrowRight');
  await page.waitForFunction(() => /micro-batch 16/.test(document.querySelector('.vramlab-whatif-result')?.innerText || ''),
    null, { timeout: 60_000 });
  assert.equal(await box.locator('output').nth(1).innerText(), '16', 'the slider shows the value the key chose');
  await page.waitForFunction(() => {
    const c = document.querySelector('.vramlab-whatif-result [_echarts_instance_]');
    return c && window.echarts.getInstanceByDom(c) && /micro-batch 16/.test(document.querySelector('.vramlab-whatif-result').innerText);
  }, null, { timeout: 30_000 });
  await box.scrollIntoViewIfNeeded();
  await page.screenshot({ path: shotPath('20-what-if-controls.png'), fullPage: false });
});

// As a newcomer pushes every control to its end: the largest model, fp32,
// no checkpointing, the longest sequence and the largest micro-batch make
// a plan of terabytes; its chart's axis and labels still read, on a wide
// screen and on a laptop's (JupyterLab's panels leave the notebook less).
test('the playground at terabytes: no chart label overlaps another or is cut off', async () => {
  assert.ok(box, 'the slider test above opened the playground');
  const selects = box.locator('select');
  await selects.nth(0).selectOption({ label: 'qwen3-32b' });
  await selects.nth(1).selectOption({ label: 'fp32' });
  await selects.nth(3).selectOption({ label: 'none' });
  const sliders = box.locator('input[type=range]');
  for (const [i, top] of [[0, '8'], [1, '6']]) {
    await sliders.nth(i).evaluate((el, v) => {
      el.value = v;
      el.dispatchEvent(new Event('input'));
      el.dispatchEvent(new Event('change'));
    }, top);
  }
  await page.waitForFunction(() => /micro-batch 64/.test(document.querySelector('.vramlab-whatif-result')?.innerText || '') &&
    /TiB/.test(document.querySelector('.vramlab-whatif-result')?.innerText || ''), null, { timeout: 120_000 });
  await page.waitForFunction(() => document.querySelector('.vramlab-whatif-result .vramlab-canvas svg text'), null, { timeout: 30_000 });
  for (const width of [1440, 1100]) {
    await page.setViewportSize({ width, height: 900 });
    await page.waitForTimeout(1500); // the chart resizes, its animations end
    const charts = (await chartTexts(page)).filter((c) => c.texts.length > 3);
    assert.ok(charts.length >= 1, 'the result chart is drawn');
    const bad = layoutProblems(charts);
    assert.deepEqual(bad, [], `at ${width} px:\n${bad.join('\n')}`);
  }
  await box.scrollIntoViewIfNeeded();
  await page.screenshot({ path: shotPath('20-what-if-terabytes.png'), fullPage: false });
  last = await readResult(page);
});

// done: the cell ends, the controls give way to the settings they ended at,
// and the cells below follow the controls.
test('done ends the controls with their settings as code, and the cells below draw the plan they ended at', async () => {
  assert.ok(last, 'the tests above moved the controls');
  await box.getByRole('button', { name: 'done' }).click();
  await waitForIdle(page, 180_000);
  const ended = await page.locator('.jp-OutputArea-output', { hasText: 'what-if ended' }).first().innerText();
  assert.match(ended, /micro_batch 64/);
  assert.match(ended, /GPU RTX-4090/);
  assert.match(ended, /MicroBatch: 64,/, 'the changed fields as code to paste');
  // The breakdown cell, queued behind the controls, draws the plan they
  // ended at, not the plan as written.
  const below = await page.evaluate(() => [...document.querySelectorAll('[_echarts_instance_]')]
    .map((el) => window.echarts.getInstanceByDom(el).getOption().title[0])
    .filter((t) => t.text === 'Peak allocated memory per GPU').map((t) => t.subtext));
  assert.notEqual(last.subtitle, before0.subtitle);
  assert.deepEqual(below, [last.subtitle], `the next cell's breakdown (${below}) is the controls' last (${last.subtitle}), not the plan's (${before0.subtitle})`);
  assert.deepEqual(problems.external, [], 'no request may leave the machine');
});
