// The report as a team receives it: `make report` on an example plan, the
// exported HTML opened offline, and the PDF turned into pixels.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, chartStates, launchBrowser, offlinePage, shotPath, waitForCharts } from './harness.mjs';

const out = join(ROOT, '.artifacts', 'reports', 'llama3-8b-lora');
let browser;
before(async () => {
  // As a user runs it: setup included (make test's other reports skip it).
  const env = { ...process.env };
  delete env.VRAMLAB_SET_UP;
  execFileSync('make', ['-s', 'report', 'PLAN=examples/plans/llama3-8b-lora.json'], { cwd: ROOT, stdio: 'inherit', env });
  browser = await launchBrowser();
});
after(async () => { await browser?.close(); });

test('the exported HTML is self-contained and every chart draws offline', async () => {
  const html = readFileSync(join(out, 'llama3-8b-lora.html'), 'utf8');
  assert.doesNotMatch(html, /<script[^>]+src=["']https?:/i, 'no external scripts');
  assert.doesNotMatch(html, /<link[^>]+href=["']https?:/i, 'no external stylesheets');
  const { page, problems } = await offlinePage(browser);
  await page.goto('file://' + join(out, 'llama3-8b-lora.html'));
  await waitForCharts(page, 2);
  const states = await chartStates(page);
  assert.ok(states.length >= 2, `report has charts (${states.length})`);
  states.forEach((s, i) => assert.ok(s.initialized && s.painted > 200, `chart ${i}: ${JSON.stringify(s)}`));
  // Code is hidden until asked for.
  const codeVisible = () => page.locator('.jp-CodeCell .jp-Cell-inputWrapper').first().isVisible();
  assert.equal(await codeVisible(), false, 'code hidden by default');
  await page.click('#vramlab-toggle-code');
  assert.equal(await codeVisible(), true, 'code shown on request');
  await page.screenshot({ path: shotPath('report-html.png'), fullPage: true });
  assert.deepEqual(problems.external, []);
  assert.deepEqual(problems.consoleErrors, []);
});

test('the PDF has its pages and the charts are painted', () => {
  const pdf = join(out, 'llama3-8b-lora.pdf');
  assert.ok(existsSync(pdf));
  const info = execFileSync('pdfinfo', [pdf], { encoding: 'utf8' });
  const pages = Number(/Pages:\s+(\d+)/.exec(info)[1]);
  assert.ok(pages >= 3 && pages <= 8, `report PDF has ${pages} pages`);
  const dir = mkdtempSync(join(tmpdir(), 'vramlab-pdf-'));
  execFileSync('pdftoppm', ['-r', '40', pdf, join(dir, 'p')]); // PPM pages
  // Count pixels of the category colors (parameters #5470c6, activations
  // #ee6666) across the pages: the charts were drawn before printing.
  let colored = 0;
  for (const f of readdirSync(dir)) {
    const buf = readFileSync(join(dir, f));
    // P6 header: "P6\n<w> <h>\n255\n"
    let off = 0; let nl = 0;
    while (nl < 3) { if (buf[off++] === 10) nl++; }
    for (let i = off; i + 2 < buf.length; i += 3) {
      const [r, g, b] = [buf[i], buf[i + 1], buf[i + 2]];
      if ((Math.abs(r - 0x54) < 20 && Math.abs(g - 0x70) < 20 && Math.abs(b - 0xc6) < 20) ||
          (Math.abs(r - 0xee) < 20 && Math.abs(g - 0x66) < 20 && Math.abs(b - 0x66) < 20)) colored++;
    }
  }
  assert.ok(colored > 2000, `chart colors in the PDF: ${colored} pixels`);
});

test('the report notebook renders its charts in JupyterLab', async () => {
  const { startLab, runAllCells } = await import('./harness.mjs');
  const lab = await startLab();
  try {
    const { page, problems } = await offlinePage(browser, { allowHost: lab.host });
    await runAllCells(page, lab, '30-training-plan-report.ipynb');
    await waitForCharts(page, 2, 60_000);
    const states = await chartStates(page);
    assert.ok(states.filter((s) => s.initialized).length >= 2);
    await page.screenshot({ path: shotPath('report-lab.png'), fullPage: true });
    assert.deepEqual(problems.external, []);
  } finally {
    await lab.stop();
  }
});

test('the report reads as one: verdict first, no template instructions, no empty notes', () => {
  const html = readFileSync(join(out, 'llama3-8b-lora.html'), 'utf8');
  assert.doesNotMatch(html, /How to use this template/, 'the template instructions are left out');
  assert.doesNotMatch(html, /Write your annotations here/, 'an unwritten Notes section is left out');
  const verdict = html.indexOf('Verdict on A100-80GB');
  assert.ok(verdict > 0, 'the verdict on the plan’s GPU');
  assert.ok(verdict < html.indexOf('>Assumptions<'), 'the verdict comes before the detail');
  // A section that does not apply to a training plan is left out, heading and all.
  assert.doesNotMatch(html, /<h2[^>]*>Serving</, 'no empty serving section in a training report');
  assert.match(html, /<h2[^>]*>Training plan: /, 'the title says what the plan runs');
  assert.doesNotMatch(html, /no serving section/);
  assert.match(html, /<h2[^>]*>Over one training step/);
});

// A training plan that does not fit its card, so "What to change" has rows
// that do not fit either (their "fits" cell says no, never nothing).
test('every cell of every table is filled, and the assumptions are the resolved settings', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vramlab-tight-'));
  const plan = join(dir, 'llama3-8b-full-on-a-4090.json');
  writeFileSync(plan, JSON.stringify({ name: 'Llama-3-8B full fine-tune on an RTX 4090', model: 'llama-3-8b',
    train: { seq_len: 2048, micro_batch: 2, precision: 'bf16', optimizer: 'adamw', attention: 'sdpa' }, gpu: 'RTX-4090' }));
  execFileSync('make', ['-s', 'report', `PLAN=${plan}`, `REPORT_DIR=${dir}`], { cwd: ROOT, stdio: 'pipe' });
  const tight = readFileSync(join(dir, 'llama3-8b-full-on-a-4090', 'llama3-8b-full-on-a-4090.html'), 'utf8');
  const i = tight.indexOf('fits RTX-4090');
  assert.ok(i > 0 && /<td[^>]*>no, [\d.]+ [KMG]iB over<\/td>/.test(tight.slice(i)), 'a change that does not fit says no, and by how much');
  const html = readFileSync(join(out, 'llama3-8b-lora.html'), 'utf8') + tight;
  const empty = [...html.matchAll(/<tr>(?:(?!<\/tr>).)*<td[^>]*>\s*<\/td>(?:(?!<\/tr>).)*<\/tr>/gs)].map((m) => m[0].replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' '));
  assert.deepEqual(empty, [], 'rows with an empty cell');
  assert.doesNotMatch(html, /<td[^>]*>\(default\)<\/td>/, 'an assumption left as "(default)"');
  assert.match(html, /precision<\/td><td[^>]*>bf16: weights bf16, compute bf16</, 'the precision with the dtypes it resolved to');
  assert.match(html, />attention<\/td><td[^>]*>sdpa</);
});

// What the PDF is printed from: the HTML laid out for print at an A4 page's
// text width (186 mm); and the PDF's own text.
test('the printed report has no scrollbar, no chart cut at the edge and no word broken', async () => {
  const { page } = await offlinePage(browser);
  await page.setViewportSize({ width: Math.round(186 / 25.4 * 96), height: 1100 });
  await page.goto('file://' + join(out, 'llama3-8b-lora.html'));
  await waitForCharts(page, 2);
  const screenWords = new Set((await page.locator('main').innerText()).split(/\s+/).filter(Boolean));
  await page.emulateMedia({ media: 'print' });
  const bad = await page.evaluate(() => {
    const out = [];
    const main = document.querySelector('main').getBoundingClientRect();
    for (const el of document.querySelectorAll('main *')) {
      const cs = getComputedStyle(el);
      if (cs.display === 'none' || el.closest('.vramlab-fallback')) continue;
      const scrolls = /(auto|scroll)/.test(cs.overflowX) && el.scrollWidth > el.clientWidth + 1;
      if (scrolls) out.push(`scrolls sideways: <${el.tagName.toLowerCase()} class="${el.className}"> ${el.scrollWidth} > ${el.clientWidth}`);
    }
    for (const c of document.querySelectorAll('.vramlab-canvas canvas')) {
      const r = c.getBoundingClientRect();
      if (r.right > main.right + 1 || r.left < main.left - 1) out.push(`chart cut at the page edge: ${r.left}–${r.right} in ${main.left}–${main.right}`);
    }
    return out;
  });
  assert.deepEqual(bad, [], bad.join('\n'));

  // A word broken across lines shows in the PDF's text as two pieces that
  // are not words of the report but join into one (a break after a hyphen
  // is a normal break).
  const text = execFileSync('pdftotext', [join(out, 'llama3-8b-lora.pdf'), '-'], { encoding: 'utf8' });
  const tokens = text.split(/\s+/).filter(Boolean);
  const broken = [];
  for (let i = 0; i + 1 < tokens.length; i++) {
    const [a, b] = [tokens[i], tokens[i + 1]];
    if (/^[\p{L}\p{N}]/u.test(b) && !a.endsWith('-') && !screenWords.has(a) && !screenWords.has(b) && screenWords.has(a + b)) broken.push(`${a}|${b}`);
  }
  assert.deepEqual(broken, [], `words broken across lines in the PDF: ${broken.join(', ')}`);
  assert.ok(tokens.length > 300 && screenWords.has('Verdict'), 'the PDF has the report’s text');
});

// Page 1 answers: the verdict and the breakdown of the peak, with its
// chart, before any detail.
test('page 1 of the PDF holds the verdict and the breakdown, and is not left half empty', () => {
  const page1 = execFileSync('pdftotext', ['-f', '1', '-l', '1', join(out, 'llama3-8b-lora.pdf'), '-'], { encoding: 'utf8' });
  // The assumptions begin under the breakdown: their table runs on to page 2
  // rather than leaving a third of page 1 blank.
  for (const want of ['Verdict on A100-80GB', 'Memory at the peak', 'Peak allocated memory per GPU:', 'Assumptions', 'sequence length']) {
    assert.ok(page1.includes(want), `page 1 lacks "${want}":\n${page1}`);
  }
  const images = execFileSync('pdfimages', ['-f', '1', '-l', '1', '-list', join(out, 'llama3-8b-lora.pdf')], { encoding: 'utf8' });
  assert.ok(images.trim().split('\n').length > 2, `page 1 has no chart:\n${images}`);
});

test('a post-training plan\'s report: its phases, its resolved settings, and no section of a plain training or serving plan', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vramlab-grpo-'));
  execFileSync('make', ['-s', 'report', `PLAN=${join(ROOT, 'examples', 'plans', 'qwen2.5-7b-grpo-trl.json')}`, `REPORT_DIR=${dir}`], { cwd: ROOT, stdio: 'pipe' });
  const html = readFileSync(join(dir, 'qwen2.5-7b-grpo-trl', 'qwen2.5-7b-grpo-trl.html'), 'utf8');
  const text = html.replace(/<style[\s\S]*?<\/style>/g, '').replace(/<script[\s\S]*?<\/script>/g, '').replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ');
  assert.match(text, /Verdict on H100-80GB \(the post-training phases\): fits: the largest phase, generation, takes/);
  assert.match(text, /Device memory per GPU, phase by phase/, 'the phases chart');
  assert.match(text, /framework trl/);
  assert.match(text, /gpu_memory_utilization \/ sleep \/ TP 0\.3 \/ none \/ 1/, 'the rollout as the framework resolved it');
  assert.match(text, /no: vLLM would not start/, 'a card too small for vLLM beside the trainer');
  for (const h of ['Over one training step', 'Allocated, reserved and what', 'Serving<']) {
    assert.doesNotMatch(html, new RegExp(`<h2[^>]*>${h}`), `no "${h}" section in a post-training report`);
  }
  assert.match(html, /<h2[^>]*>Post-training plan: /);
  const empty = [...html.matchAll(/<tr>(?:(?!<\/tr>).)*<td[^>]*>\s*<\/td>(?:(?!<\/tr>).)*<\/tr>/gs)];
  assert.equal(empty.length, 0, 'rows with an empty cell');
});

test('a serving plan too large for its card: the report gives vLLM\'s refusal in its words and no negative size', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vramlab-oversized-'));
  const plan = join(dir, 'gpt-oss-on-a-t4.json');
  writeFileSync(plan, JSON.stringify({ name: 'gpt-oss-120b on a T4 with vLLM', model: 'gpt-oss-120b',
    inference: { batch: 1, prompt_tokens: 1024, new_tokens: 256 }, gpu: 'T4', vllm: {} }));
  execFileSync('make', ['-s', 'report', `PLAN=${plan}`, `REPORT_DIR=${dir}`], { cwd: ROOT, stdio: 'pipe' });
  const html = readFileSync(join(dir, 'gpt-oss-on-a-t4', 'gpt-oss-on-a-t4.html'), 'utf8');
  const text = html.replace(/<style[\s\S]*?<\/style>/g, '').replace(/<script[\s\S]*?<\/script>/g, '').replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ');
  assert.match(text, /Verdict on T4 \(vLLM\): does not fit: vLLM would not start: ValueError: The quantization method mxfp4 is not supported for the current GPU\. Minimum capability: 80\. Current capability: 75\./);
  assert.match(text, /weights as released: routed experts in mxfp4/);
  // A serving report is a serving report: its title, its serving section
  // and none of a training step's; its figures are vLLM's, judged on
  // vLLM's share of the card.
  assert.match(html, /<h2[^>]*>Serving plan: gpt-oss-120b on a T4 with vLLM/);
  assert.match(html, /<h2[^>]*>Serving</);
  const printed = execFileSync('pdftotext', [join(dir, 'gpt-oss-on-a-t4', 'gpt-oss-on-a-t4.pdf'), '-'], { encoding: 'utf8' }).replace(/\s+/g, ' ');
  assert.match(printed, /vLLM would not start on T4 \(14\.6 GiB\): ValueError/);
  assert.doesNotMatch(printed, /transformers' generate/, 'no figure of an engine that does not run the plan');
  assert.match(printed, /fits \(vLLM's share\)/);
  assert.doesNotMatch(printed, /5 % kept free\)/, 'a served plan is judged on its engine\'s share, not with 5 % kept free');
  assert.doesNotMatch(html, /<h2[^>]*>Over one training step/, 'no empty training section in a serving report');
  assert.doesNotMatch(text, /(^|[\s(=:,])[-−]\s?\d[\d.,]*\s?(B|KiB|MiB|GiB|TiB)\b/, 'no negative size in the report');
});

// make report reads what the plan command reads: a trainer's config, with
// the GPU it leaves to the launch, and says in one line what is wrong.
test('make report on an axolotl config, and a failure said in one line', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vramlab-axolotl-'));
  const config = join(ROOT, 'vram', 'importer', 'testdata', 'configs', 'axolotl', 'llama-3__qlora.yml');
  execFileSync('make', ['-s', 'report', `PLAN=${config}`, 'GPU=RTX-4090', `REPORT_DIR=${dir}`], { cwd: ROOT, stdio: 'pipe' });
  const html = readFileSync(join(dir, 'llama-3__qlora', 'llama-3__qlora.html'), 'utf8');
  const text = html.replace(/<style[\s\S]*?<\/style>/g, '').replace(/<script[\s\S]*?<\/script>/g, '').replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ');
  assert.match(text, /Training plan: llama-3__qlora\.yml/);
  assert.match(text, /Read from axolotl's config llama-3__qlora\.yml/);
  assert.match(text, /Verdict on RTX-4090 \(the allocator replay\): does not fit/);
  assert.match(text, /axolotl's settings/, 'the changes in axolotl\'s keys');
  const bad = join(dir, 'not-a-config.yaml');
  writeFileSync(bad, 'colour: blue\n');
  let stderr = '';
  try {
    execFileSync('make', ['-s', 'report', `PLAN=${bad}`, `REPORT_DIR=${dir}`], { cwd: ROOT, stdio: 'pipe', encoding: 'utf8' });
    assert.fail('make report on a file that is no config succeeded');
  } catch (e) {
    stderr = String(e.stderr);
  }
  const lines = stderr.split('\n').filter((l) => l.startsWith('report:'));
  assert.equal(lines.length, 1, `one line says why:\n${stderr}`);
  assert.match(lines[0], /not a config the importer knows/);
  assert.doesNotMatch(stderr, /Traceback|PapermillExecutionError/, 'no papermill traceback');
});
