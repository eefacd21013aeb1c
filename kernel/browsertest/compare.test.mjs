// Reports the ecosystem's way: papermill fills the template's parameters,
// `make report PLANS=…` puts candidate plans side by side in one report
// (offline HTML and PDF, opened and checked here), and `make reports` writes
// one report per plan in parallel with a line per plan and a summary.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, chartStates, launchBrowser, offlinePage, shotPath, waitForCharts } from './harness.mjs';

const plans = ['llama3-8b-lora', 'llama3-8b-qlora', 'llama2-7b-full-fp32'];
const name = 'compare-' + plans.join('-');
const out = join(ROOT, '.artifacts', 'reports', name);
let browser;
before(async () => {
  execFileSync('make', ['-s', 'report', `PLANS=${plans.map((p) => `examples/plans/${p}.json`).join(' ')}`], { cwd: ROOT, stdio: 'inherit' });
  browser = await launchBrowser();
});
after(async () => { await browser?.close(); });

test('papermill runs the report template with -p plan', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vramlab-papermill-'));
  const nb = join(dir, 'out.ipynb');
  execFileSync(join(ROOT, '.venv', 'bin', 'papermill'), ['--no-progress-bar', '--kernel', 'vramlab',
    'notebooks/30-training-plan-report.ipynb', nb, '-p', 'plan', 'examples/plans/llama3-8b-qlora.json'], { cwd: ROOT, stdio: 'pipe' });
  const cells = JSON.parse(readFileSync(nb, 'utf8')).cells;
  const injected = cells.find((c) => (c.metadata.tags || []).includes('injected-parameters'));
  assert.ok(injected, 'papermill injected a parameters cell');
  assert.match(injected.source.join(''), /var plan = "examples\/plans\/llama3-8b-qlora\.json"/);
  const html = cells.flatMap((c) => c.outputs || []).map((o) => (o.data?.['text/html'] || []).join('')).join('\n');
  assert.match(html, /Llama-3-8B QLoRA/, 'the report describes the plan given, not the template default');
  assert.doesNotMatch(html, /LoRA fine-tune on one A100 80GB/);
});

test('a comparison of three plans exports to offline HTML whose tables and charts compare them', async () => {
  const html = readFileSync(join(out, name + '.html'), 'utf8');
  assert.doesNotMatch(html, /<script[^>]+src=["']https?:/i, 'no external scripts');
  const { page, problems } = await offlinePage(browser);
  await page.goto('file://' + join(out, name + '.html'));
  await waitForCharts(page, 4);
  const states = await chartStates(page);
  assert.ok(states.length >= 4, `the breakdowns and three timelines (${states.length} charts)`);
  states.forEach((s, i) => assert.ok(s.initialized && s.painted > 200, `chart ${i}: ${JSON.stringify(s)}`));
  const text = await page.locator('body').innerText();
  assert.match(text, /3 candidate plans on 2 GPUs/);
  assert.match(text, /Which plan for which GPU/);
  // The QLoRA plan is the one that fits a 24 GB card, and the table says why.
  assert.match(text, /RTX-4090\s+23\.6 GiB\s+Llama-3-8B QLoRA[^\n]*\s+[^\n]*only training plan that fits/);
  for (const p of ['Llama-3-8B LoRA fine-tune', 'Llama-3-8B QLoRA', 'Llama-2-7B full fine-tune']) assert.ok(text.includes(p), p);
  assert.match(text, /does not fit/);
  // Each plan's throughput bound on each GPU, and the pick's reason gives it.
  assert.match(text, /How fast each can run/);
  assert.equal((text.match(/≤ [\d,]+ tokens\/s \((compute|bandwidth)-bound/g) || []).length, 6, 'a bound for 3 plans on 2 GPUs');
  assert.match(text, /at most [\d,]+ tokens\/s on this GPU/);
  // The timelines share one scale.
  const maxima = await page.evaluate(() => [...document.querySelectorAll('[_echarts_instance_]')]
    .map((el) => window.echarts.getInstanceByDom(el).getOption())
    .filter((o) => o.title?.[0]?.subtext?.startsWith('peak'))
    .map((o) => o.yAxis[0].max));
  assert.equal(maxima.length, 3, `three timelines (${maxima})`);
  assert.ok(maxima.every((m) => m === maxima[0] && m >= 125), `one scale for all: ${maxima}`);
  await page.screenshot({ path: shotPath('compare-html.png'), fullPage: true });
  assert.deepEqual(problems.external, []);
  assert.deepEqual(problems.consoleErrors, []);
});

test('the comparison PDF has its pages and painted charts', () => {
  const pdf = join(out, name + '.pdf');
  const info = execFileSync('pdfinfo', [pdf], { encoding: 'utf8' });
  const pages = Number(/Pages:\s+(\d+)/.exec(info)[1]);
  assert.ok(pages >= 2 && pages <= 10, `comparison PDF has ${pages} pages`);
  const text = execFileSync('pdftotext', [pdf, '-'], { encoding: 'utf8' });
  assert.match(text, /Which plan for which GPU/);
  const dir = mkdtempSync(join(tmpdir(), 'vramlab-pdf-'));
  execFileSync('pdftoppm', ['-r', '40', pdf, join(dir, 'p')]);
  let colored = 0;
  for (const f of readdirSync(dir)) {
    const buf = readFileSync(join(dir, f));
    let off = 0; let nl = 0;
    while (nl < 3) { if (buf[off++] === 10) nl++; }
    for (let i = off; i + 2 < buf.length; i += 3) {
      const [r, g, b] = [buf[i], buf[i + 1], buf[i + 2]];
      if ((Math.abs(r - 0x54) < 20 && Math.abs(g - 0x70) < 20 && Math.abs(b - 0xc6) < 20) ||
          (Math.abs(r - 0xfa) < 20 && Math.abs(g - 0xc8) < 20 && Math.abs(b - 0x58) < 20)) colored++; // parameters, optimizer states
    }
  }
  assert.ok(colored > 2000, `chart colors in the PDF: ${colored} pixels`);
});

test('make reports writes a report per plan in parallel, a line for each, and a summary; a bad plan fails it; a plan with a search section is reported on its fastest layout', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vramlab-reports-'));
  const bad = join(dir, 'broken-plan.json');
  writeFileSync(bad, '{"model": "gpt2", "train": {"seq_len": 0, "micro_batch": 1}}');
  const r = spawnSync('make', ['-s', 'reports', `PLANS=examples/plans/llama3-8b-qlora.json ${bad} examples/plans/llama3-8b-serve.json examples/search/llama3.1-405b-h100.json`],
    { cwd: ROOT, encoding: 'utf8', timeout: 900_000 });
  assert.notEqual(r.status, 0, 'a failed report fails the run');
  assert.match(r.stdout, /4 reports, \d+ at a time/);
  for (const p of ['llama3-8b-qlora.json', 'broken-plan.json', 'llama3-8b-serve.json', 'llama3.1-405b-h100.json']) {
    assert.match(r.stdout, new RegExp(`\\[\\d/4\\] (ok|FAILED)\\s+\\S*${p.replaceAll('.', '\\.')} \\(\\d+s\\)`), p);
  }
  assert.match(r.stdout, /FAILED\s+\S*broken-plan\.json:\n[\s\S]*seq_len/);
  assert.match(r.stdout, /reports: 3 of 4 written in \d+s/);
  for (const p of ['llama3-8b-qlora', 'llama3-8b-serve', 'llama3.1-405b-h100']) {
    assert.ok(existsSync(join(ROOT, '.artifacts', 'reports', p, p + '.pdf')), p);
  }
  // The layout search: a section of its own, the fastest layout launched,
  // which the other sections describe; a plan without one has no such
  // section.
  const searched = readFileSync(join(ROOT, '.artifacts', 'reports', 'llama3.1-405b-h100', 'llama3.1-405b-h100.html'), 'utf8');
  assert.match(searched, /<h2[^>]*>Layouts/);
  assert.match(searched, /8184 layouts on 1024 × H100-80GB/);
  assert.match(searched, /--parallelism\.tensor_parallel_degree/);
  const plain = readFileSync(join(ROOT, '.artifacts', 'reports', 'llama3-8b-qlora', 'llama3-8b-qlora.html'), 'utf8');
  assert.doesNotMatch(plain, /<h2[^>]*>Layouts/);
});

test('file names as a file system allows them: outside the BMP, not UTF-8, newline-separated with spaces, an output path with # and ?', () => {
  // The plans' names reach papermill as UTF-8 text (a link stands in for a
  // name that is not UTF-8), PLANS splits at newlines when it holds one, and
  // chromium prints from a file URL with the path percent-encoded.
  const script = `set -e
d=$(mktemp -d "\${TMPDIR:-/tmp}/vramlab #names?XXXX")
cp examples/plans/llama3-8b-qlora.json "$d/plan 😀 one.json"
bad="$d/$(printf 'bad-\\xff\\xfe').json"
cp examples/plans/llama3-8b-lora.json "$bad"
export PLANS="$d/plan 😀 one.json
$bad"
REPORT_DIR="$d/out #1" make -s report`;
  const r = spawnSync('bash', ['-c', script], { cwd: ROOT, encoding: 'utf8', timeout: 600_000 });
  assert.equal(r.status, 0, `make report exited ${r.status}:\n${r.stdout}\n${r.stderr}`);
  const m = /report: (.+\.html) and (.+\.pdf)$/m.exec(r.stdout);
  assert.ok(m, r.stdout);
  const [html, pdf] = [m[1], m[2]];
  assert.match(html, /vramlab #names\?.{4}\/out #1\/compare-plan______one-bad-__\/compare-plan______one-bad-__\.html$/);
  const text = execFileSync('pdftotext', [pdf, '-'], { encoding: 'utf8' });
  assert.match(text, /Which plan for which GPU/);
  for (const p of ['Llama-3-8B QLoRA', 'Llama-3-8B LoRA fine-tune']) assert.ok(text.includes(p), `${p} in the PDF`);
  assert.match(readFileSync(html, 'utf8'), /2 candidate plans/);
});

