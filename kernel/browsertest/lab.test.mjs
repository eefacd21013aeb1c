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
  const smoke = page.locator('.jp-OutputArea-output #vramlab-smoke');
  await smoke.waitFor({ timeout: 30_000 }).catch(async () => {
    // Twice in CI every cell had run ([1]–[3]) and the HTML box of the last
    // never showed; the next runs passed. Run the cells once more, and say,
    // if the box is still missing, which cells ran and what each printed.
    console.log('the smoke notebook ran without its HTML box: running its cells again');
    await page.getByRole('menuitem', { name: 'Run', exact: true }).click();
    await page.getByRole('menuitem', { name: /^Run All Cells/ }).click();
    await smoke.waitFor({ timeout: 60_000 }).catch(async (e) => {
      const prompts = await page.locator('.jp-InputArea-prompt').allInnerTexts();
      const outputs = await page.locator('.jp-OutputArea-output').allInnerTexts();
      throw new Error(`${e.message}\nprompts: ${JSON.stringify(prompts)}\noutputs: ${JSON.stringify(outputs)}`);
    });
  });
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

test('the snapshot tutorial draws the real run over the prediction in JupyterLab', async () => {
  const { page, problems } = await offlinePage(browser, { allowHost: lab.host });
  await runAllCells(page, lab, '11-check-it-against-your-run.ipynb');
  await waitForCharts(page, 3, 90_000);
  const states = await chartStates(page);
  assert.equal(states.length, 3, 'the overlay, the two runs diffed and the NVML readings');
  states.forEach((s, i) => assert.ok(s.initialized && s.painted > 200, `chart ${i}: ${JSON.stringify(s)}`));
  // The overlay: the real run and the prediction, both drawn, one axis of phases.
  const overlay = await page.evaluate(() => {
    const o = [...document.querySelectorAll('[_echarts_instance_]')]
      .map((el) => window.echarts.getInstanceByDom(el).getOption())
      .find((x) => x.series.some((s) => s.name === 'real allocated'));
    return o && { names: o.series.map((s) => s.name), points: o.series.map((s) => s.data.length),
      areas: (o.series[0].markArea?.data || []).map((a) => a[0].name) };
  });
  assert.ok(overlay, 'an overlay chart');
  assert.deepEqual(overlay.names, ['real allocated', 'predicted allocated']);
  assert.ok(overlay.points[0] > 1000 && overlay.points[1] > 20, `points ${overlay.points}`);
  assert.deepEqual(overlay.areas, ['setup', 'forward 1', 'backward 1', 'optimizer 1', 'forward 2', 'backward 2', 'optimizer 2']);
  // The two example runs diffed: checkpointing takes the activations first.
  const diff = await page.evaluate(() => [...document.querySelectorAll('[_echarts_instance_]')]
    .map((el) => window.echarts.getInstanceByDom(el).getOption())
    .filter((o) => /at the allocated peak/.test(o.title[0].text))
    .map((o) => ({ title: o.title[0].text, first: o.yAxis[0].data[0], value: o.series[0].data[0].value })));
  assert.equal(diff.length, 1, 'one diff chart');
  assert.equal(diff[0].first, 'activations');
  assert.ok(diff[0].value < -40, `activations −45 MiB, got ${diff[0].value}`);
  // JupyterLab renders only the cells in view: the outputs are read from the
  // notebook as saved.
  // A save the page drops (once in CI, the saved outputs were empty after
  // 10 s) is asked for again every 5 s, for up to a minute.
  await page.locator('.jp-Notebook >> visible=true').first().click();
  let saved = '';
  for (let i = 0; i < 240 && !/closest to your run/.test(saved); i++) {
    if (i % 20 === 0) await page.keyboard.press('Control+s');
    await new Promise((r) => setTimeout(r, 250));
    const r = await fetch(`${lab.base}/api/contents/11-check-it-against-your-run.ipynb?token=${lab.token}`);
    // The text the cells printed (streams and errors), not their sources.
    saved = (await r.json()).content.cells.flatMap((c) => c.outputs || [])
      .map((o) => [].concat(o.text || [], o.traceback || [], o.ename || []).join('')).join('\n');
  }
  assert.match(saved, /allocated peak: prediction -0\.0 % of your run's/);
  assert.match(saved, /closest to your run: as planned/);
  assert.match(saved, /"what":"allocated_peak"/, 'the calibration line');
  assert.doesNotMatch(saved, /panic|check failed/, 'no cell failed');
  await page.screenshot({ path: shotPath('11-check-it-against-your-run.png'), fullPage: true });
  assert.deepEqual(problems.external, []);
});

test('the post-training tutorial draws one GRPO step phase by phase in JupyterLab', async () => {
  const { page, problems } = await offlinePage(browser, { allowHost: lab.host });
  await runAllCells(page, lab, '13-post-training-grpo.ipynb');
  await waitForCharts(page, 1, 90_000);
  const first = await page.evaluate(() => {
    const o = window.echarts.getInstanceByDom(document.querySelector('.vramlab-canvas')).getOption();
    return { title: o.title[0].text, phases: o.xAxis[0].data, series: o.series.map((s) => s.name) };
  });
  assert.equal(first.title, 'Device memory per GPU, phase by phase');
  // Each of the tutorial's charts says which run it is.
  const subtitles = await page.evaluate(() => [...document.querySelectorAll('.vramlab-canvas')]
    .map((c) => window.echarts.getInstanceByDom(c)?.getOption().title[0].subtext).filter(Boolean));
  assert.equal(new Set(subtitles).size, subtitles.length, `charts that read alike: ${JSON.stringify(subtitles)}`);
  // Long code lines wrap inside their cell (JupyterLab's codeCellConfig
  // lineWrap, which make lab sets): none runs past the cell's edge.
  const wide = await page.evaluate(() => [...document.querySelectorAll('.jp-CodeCell .cm-content')]
    .filter((c) => c.scrollWidth > c.parentElement.clientWidth + 2).length);
  assert.equal(wide, 0, `${wide} code cells run past their edge`);
  assert.deepEqual(first.phases, ['→ weight sync', 'generation', 'old log-probs', 'training step']);
  assert.ok(first.series.includes('rollout engine') && first.series.includes('policy and optimizer'), JSON.stringify(first.series));
  const [state] = await chartStates(page);
  assert.ok(state.initialized && state.painted > 200, JSON.stringify(state));
  const errors = await page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]').allTextContents();
  assert.deepEqual(errors.filter((t) => /error|panic|check failed/i.test(t)), []);
  await page.locator('.vramlab-canvas').first().scrollIntoViewIfNeeded();
  await page.screenshot({ path: shotPath('13-post-training-grpo.png') });
  assert.deepEqual(problems.external, []);
  assert.deepEqual(problems.consoleErrors.filter((e) => !/favicon/.test(e)), []);
});

test('a Chinese tutorial draws its charts in Chinese in JupyterLab', async () => {
  const { page, problems } = await offlinePage(browser, { allowHost: lab.host });
  await runAllCells(page, lab, 'zh/01-who-eats-the-memory.ipynb');
  await waitForCharts(page, 2, 60_000);
  // The kernel learns the notebook's language from its path (JPY_SESSION_NAME).
  const titles = await page.evaluate(() => [...document.querySelectorAll('.vramlab-canvas')]
    .map((el) => window.echarts.getInstanceByDom(el).getOption())
    .map((o) => ({ title: o.title[0].text, series: (o.series || []).map((s) => s.name) })));
  assert.equal(titles.length, 2);
  assert.equal(titles[0].title, 'Llama-2-7B，bf16 AdamW：峰值时刻存活的显存');
  assert.ok(titles[0].series.includes('参数') && titles[0].series.includes('优化器状态'), JSON.stringify(titles[0].series));
  assert.match(titles[1].title, /fp32 与纯 bf16/);
  assert.match(await page.locator('.jp-MarkdownOutput h1').first().textContent(), /显存被谁吃掉了/);
  await page.locator('.vramlab-canvas').first().scrollIntoViewIfNeeded();
  await page.screenshot({ path: shotPath('zh-01-who-eats-the-memory.png') });
  assert.deepEqual(problems.external, []);
});
