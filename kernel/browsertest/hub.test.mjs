// VRAM Lab as a team runs it: a real JupyterHub (pinned from PyPI, in .venv)
// with configurable-http-proxy (pinned from npm), on loopback, with a dummy
// authenticator and a local-process spawner whose command is the container's
// entry point (kernel/scripts/start.sh), as the Helm values in kernel/README.md set
// it. A user logs in through the hub's login page in the browser, the hub
// spawns their server, a tutorial runs through the hub's proxy with the
// vramlab kernel, and everything the test started is stopped.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, chartStates, freePort, launchBrowser, offlinePage, runAllCells, shotPath, stopProcess, waitForCharts } from './harness.mjs';

// Three ports the system hands out: the proxy's public one, the hub's, the
// proxy's API.
const [port, hubPort, proxyApiPort] = [await freePort(), await freePort(), await freePort()];
const base = `http://127.0.0.1:${port}`;
const dir = mkdtempSync(join(tmpdir(), 'vramlab-hub-'));
const user = 'ada';
const password = 'vramlab-' + Math.random().toString(36).slice(2);
let hub;
let log = '';
let browser;
let proxyPid;

function alive(pid) {
  try { process.kill(pid, 0); return true; } catch { return false; }
}

// Processes whose command line mentions this test's folder: the hub, the
// proxy and the user's server (its notebook folder is under dir).
function ours() {
  const out = execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' });
  return out.split('\n').filter((l) => l.includes(dir) && !l.includes(' ps ')).map((l) => l.trim());
}

before(async () => {
  const config = join(dir, 'jupyterhub_config.py');
  writeFileSync(config, `
c = get_config()  # noqa
c.JupyterHub.ip = '127.0.0.1'
c.JupyterHub.port = ${port}
c.JupyterHub.hub_ip = '127.0.0.1'
c.JupyterHub.hub_port = ${hubPort}
c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:${proxyApiPort}'
c.ConfigurableHTTPProxy.command = [${JSON.stringify(join(ROOT, 'kernel', 'browsertest', 'node_modules', '.bin', 'configurable-http-proxy'))}]
c.ConfigurableHTTPProxy.pid_file = ${JSON.stringify(join(dir, 'proxy.pid'))}
c.JupyterHub.db_url = 'sqlite:///' + ${JSON.stringify(join(dir, 'hub.sqlite'))}
c.JupyterHub.cookie_secret_file = ${JSON.stringify(join(dir, 'cookie_secret'))}
c.JupyterHub.authenticator_class = 'dummy'
c.DummyAuthenticator.password = ${JSON.stringify(password)}
c.Authenticator.allow_all = True
c.JupyterHub.spawner_class = 'simple'
c.SimpleLocalProcessSpawner.home_dir_template = ${JSON.stringify(join(dir, 'home', '{username}'))}
# The container's entry point: with the hub's token it runs
# jupyterhub-singleuser on the user's copy of the tutorials.
c.Spawner.cmd = [${JSON.stringify(join(ROOT, 'kernel', 'scripts', 'start.sh'))}]
c.Spawner.default_url = '/lab'
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
c.JupyterHub.cleanup_servers = True
c.JupyterHub.cleanup_proxy = True
`);
  hub = spawn(join(ROOT, '.venv', 'bin', 'jupyterhub'), ['-f', config], {
    cwd: dir, env: { ...process.env, PATH: `${join(ROOT, '.venv', 'bin')}:${process.env.PATH}` }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  hub.stdout.on('data', (d) => { log += d; });
  hub.stderr.on('data', (d) => { log += d; });
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (hub.exitCode !== null) throw new Error(`jupyterhub exited:\n${log}`);
    try {
      const r = await fetch(`${base}/hub/api/`);
      if (r.ok) break;
    } catch { /* not up yet */ }
    if (Date.now() > deadline) throw new Error(`jupyterhub did not start in 90s:\n${log}`);
    await new Promise((r) => setTimeout(r, 500));
  }
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  if (hub && hub.exitCode === null) {
    await stopProcess(hub); // the hub stops the user's server and the proxy it started
  }
  rmSync(dir, { recursive: true, force: true });
});

test('a user logs in through the hub, gets a server from the image entry point, and runs a tutorial through the proxy', async () => {
  const { page, problems } = await offlinePage(browser, { allowHost: `127.0.0.1:${port}` });
  await page.goto(`${base}/hub/login`);
  await page.fill('#username_input', user);
  await page.fill('#password_input', password);
  await page.click('#login_submit');
  // The hub spawns the server and sends the browser to it.
  await page.waitForURL(new RegExp(`/user/${user}/lab`), { timeout: 180_000 });
  const home = join(dir, 'home', user, 'vramlab');
  assert.ok(existsSync(join(home, '01-who-eats-the-memory.ipynb')), 'start.sh copied the tutorials into the user\'s folder');

  const viaHub = { url: (path) => `${base}/user/${user}${path}` };
  await runAllCells(page, viaHub, '01-who-eats-the-memory.ipynb');
  await waitForCharts(page, 1, 60_000);
  const states = await chartStates(page);
  assert.ok(states.some((s) => s.initialized && s.painted > 200), `a chart drew through the proxy: ${JSON.stringify(states)}`);
  const failures = await page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]', { hasText: /panic|exit status|undefined:/ }).count();
  assert.equal(failures, 0, 'no cell failed');
  const errors = await page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]').count();
  assert.equal(errors, 0, 'no error outputs');
  const kernel = await page.locator('.jp-StatusBar-Widget', { hasText: 'Go (VRAM Lab)' }).count();
  assert.ok(kernel > 0, 'the notebook ran on the vramlab kernel');
  await page.screenshot({ path: shotPath('hub-tutorial.png'), fullPage: true });

  // The hub's REST API sees the server as the user's.
  const cookies = await page.context().cookies();
  const xsrf = cookies.find((c) => c.name === '_xsrf')?.value;
  const r = await page.request.get(`${base}/hub/api/user`, { headers: xsrf ? { 'X-XSRFToken': xsrf } : {} });
  if (r.ok()) {
    const me = await r.json();
    assert.equal(me.name, user);
    assert.ok(me.servers?.[''] || me.server, 'the user has a running server');
  }
  assert.deepEqual(problems.external, []);
});

test('stopping the hub stops everything the test started', async () => {
  assert.ok(ours().length > 0, 'the hub and the user server were running');
  proxyPid = Number(readFileSync(join(dir, 'proxy.pid'), 'utf8'));
  assert.ok(proxyPid > 0 && alive(proxyPid), 'the proxy was running');
  const graceful = await stopProcess(hub, { grace: 60_000 });
  assert.ok(graceful, `the hub stops on SIGTERM within 60 s; its log ends:\n${log.split('\n').slice(-40).join('\n')}`);
  const deadline = Date.now() + 30_000;
  while (ours().length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 500));
  assert.deepEqual(ours(), [], `no process of this test is left; the hub's log ends:\n${log.split('\n').slice(-40).join('\n')}`);
  let up = true;
  try { await fetch(`${base}/hub/api/`); } catch { up = false; }
  assert.equal(up, false, 'nothing listens on the hub port any more');
  assert.equal(alive(proxyPid), false, 'the proxy is gone');
});
