// Reads what `run` left in its results directory and prints the summary: per scenario, how many
// runs passed through the proxy, beside the same scenario against the server itself, then the
// failing checks. Exits 1 when the proxy changed a server scenario's result (see below), or a
// client scenario failed in any run (or did not run).
//
//   node summarize.mjs <results directory>
//
// Layout (written by `run` and by the suite's --output-dir):
//   server-scenarios.txt                        the suite's server scenarios, one a line
//   client-scenarios.txt                        the client scenarios run through stdio
//   runs                                        N
//   server/everything-<direct|proxy>/run-<i>/server-<scenario>-<time>/checks.json
//   client/run-<i>/<scenario>-<time>/{checks.json,stderr.txt}, client/run-<i>/<scenario>.rc
import fs from 'node:fs';
import path from 'node:path';

const results = process.argv[2];
if (!results) {
  console.error('usage: node summarize.mjs <results directory>');
  process.exit(2);
}

const read = (file) => fs.readFileSync(path.join(results, file), 'utf8');
const lines = (file) =>
  fs.existsSync(path.join(results, file))
    ? read(file).split('\n').map((l) => l.trim()).filter(Boolean)
    : [];
const runs = Number(read('runs').trim());
const serverScenarios = lines('server-scenarios.txt');
const clientScenarios = lines('client-scenarios.txt');
const STAMP = /-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$/;

// The suite's result directories under dir: scenario name -> checks.
function checksIn(dir, prefix) {
  const found = new Map();
  const walk = (d, rel) => {
    if (!fs.existsSync(d)) return;
    for (const entry of fs.readdirSync(d, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      const full = path.join(d, entry.name);
      const name = rel ? `${rel}/${entry.name}` : entry.name;
      if (fs.existsSync(path.join(full, 'checks.json')) && STAMP.test(entry.name)) {
        const scenario = name.replace(STAMP, '').slice(prefix.length);
        found.set(scenario, {
          checks: JSON.parse(fs.readFileSync(path.join(full, 'checks.json'), 'utf8')),
          dir: full
        });
      } else {
        walk(full, name);
      }
    }
  };
  walk(dir, '');
  return found;
}

// A scenario's outcome from its checks: FAIL on a FAILURE check; the server suite passes
// warnings (its exit code ignores them), the client suite fails them (so does its exit code).
function outcome(entry, { warningsFail }) {
  if (!entry) return { status: 'MISSING', failures: ['the suite left no result (it crashed, or ran out of time)'] };
  const failed = entry.checks.filter((c) => c.status === 'FAILURE');
  const warned = entry.checks.filter((c) => c.status === 'WARNING');
  const describe = (c) =>
    `${c.status} ${c.id}: ${c.errorMessage ?? c.description}` +
    (c.details && c.status === 'FAILURE' ? ` ${JSON.stringify(c.details).slice(0, 300)}` : '');
  if (failed.length || (warningsFail && warned.length)) {
    return { status: 'FAIL', failures: [...failed, ...(warningsFail ? warned : [])].map(describe), dir: entry.dir };
  }
  return { status: 'PASS', failures: [], warnings: warned.map(describe), dir: entry.dir };
}

const out = [];
const say = (s = '') => out.push(s);
let passed = 0;
let failed = 0;
const failures = [];

// ---- server scenarios -------------------------------------------------------------------------
// One server, @modelcontextprotocol/server-everything, the suite run against it alone ("direct")
// and through agentcore-mcp-proxy --listen ("proxy"). The suite's scenarios call tools, prompts and
// resources of fixed names that server-everything has only some of, so the measure of the proxy is
// that it never changes a scenario's result:
// - a scenario that passes directly in every run must pass through the proxy in every run;
// - a scenario that fails directly in every run is not applicable to this server: it must fail
//   through the proxy too (a proxy that made it pass would have changed the answer), and every
//   run of it must have left a result (a crashed or timed-out pass is a failure, not "n/a");
// - a scenario that passes directly in some runs only gives nothing stable to compare: failed;
// - dns-rebinding-protection is the proxy's own check (its --listen endpoint checks Host and
//   Origin; server-everything does not): it must pass through the proxy in every run.
const OWN_CHECKS = new Set(['dns-rebinding-protection']);
const serverResults = {};
for (const mode of ['direct', 'proxy']) {
  const perRun = [];
  for (let i = 1; i <= runs; i++) {
    perRun.push(checksIn(path.join(results, 'server', `everything-${mode}`, `run-${i}`), 'server-'));
  }
  serverResults[mode] = perRun;
}

const count = (perRun, scenario, opts) => {
  let ok = 0;
  const bad = [];
  perRun.forEach((found, i) => {
    const o = outcome(found.get(scenario), opts);
    if (o.status === 'PASS') ok++;
    else bad.push({ run: i + 1, ...o });
  });
  return { ok, bad };
};

let notApplicable = 0;
say(`Server scenarios: the suite (conformance --suite all) against @modelcontextprotocol/server-everything,`);
say(`${runs} run(s) each; "direct" is the server alone, "proxy" is agentcore-mcp-proxy --listen in front of it.`);
say('');
const width = Math.max(...serverScenarios.map((s) => s.length), 10);
say(`${'scenario'.padEnd(width)}  direct  proxy   verdict`);
for (const scenario of serverScenarios) {
  const d = count(serverResults.direct, scenario, { warningsFail: false });
  const p = count(serverResults.proxy, scenario, { warningsFail: false });
  let verdict;
  let listed = [];
  if (OWN_CHECKS.has(scenario)) {
    verdict = p.ok === runs ? 'ok (the proxy\'s own check)' : `FAIL (the proxy's own check: ${p.ok}/${runs})`;
    listed = [['via proxy', p]];
  } else if (d.ok === runs) {
    verdict = p.ok === runs ? 'ok' : `FAIL (the proxy changed the result: ${p.ok}/${runs} through it, ${runs}/${runs} directly)`;
    listed = [['via proxy', p]];
  } else if (d.ok === 0) {
    const missing = [...d.bad, ...p.bad].filter((b) => b.status === 'MISSING').length;
    if (missing) {
      // A run that left no result (the suite crashed, or ran out of time) tells nothing.
      verdict = `FAIL (${missing} run(s) left no result)`;
      listed = [['direct', d], ['via proxy', p]].map(([l, r]) => [l, { bad: r.bad.filter((b) => b.status === 'MISSING') }]);
    } else if (p.ok === 0) {
      verdict = 'not applicable to this server (fails directly)';
    } else {
      verdict = `FAIL (the proxy changed the result: ${p.ok}/${runs} through it, 0/${runs} directly)`;
    }
  } else {
    verdict = `FAIL (the server alone passed ${d.ok}/${runs}: no stable result to compare)`;
    listed = [['direct', d], ['via proxy', p]];
  }
  if (verdict.startsWith('FAIL')) failed++;
  else if (verdict.startsWith('not applicable')) notApplicable++;
  else passed++;
  say(`${scenario.padEnd(width)}  ${`${d.ok}/${runs}`.padEnd(6)}  ${`${p.ok}/${runs}`.padEnd(6)}  ${verdict}`);
  // Listed: the failing runs that decide a verdict (never the failures of a scenario that is
  // not applicable: those are tools, prompts or resources server-everything does not have).
  for (const [label, r] of listed) {
    for (const b of r.bad) failures.push({ what: `server ${scenario}, ${label}, run ${b.run}`, ...b });
  }
}

// ---- client scenarios -------------------------------------------------------------------------
say('');
say(`Client scenarios: the suite's client mode, the client being stdio-client.mjs (official SDK) over`);
say(`stdio to agentcore-mcp-proxy --url <the scenario's server>; ${runs} run(s) each.`);
say('');
const cwidth = Math.max(...clientScenarios.map((s) => s.length), 10);
say(`${'scenario'.padEnd(cwidth)}  passed  proxy exit slow  verdict`);
for (const scenario of clientScenarios) {
  let ok = 0;
  let slow = 0;
  for (let i = 1; i <= runs; i++) {
    const runDir = path.join(results, 'client', `run-${i}`);
    const found = checksIn(runDir, '');
    const entry = found.get(scenario);
    const rcFile = path.join(runDir, `${scenario.replaceAll('/', '_')}.rc`);
    const rc = fs.existsSync(rcFile) ? fs.readFileSync(rcFile, 'utf8').trim() : 'none';
    const o = outcome(entry, { warningsFail: true });
    const stderr = entry && fs.existsSync(path.join(entry.dir, 'stderr.txt'))
      ? fs.readFileSync(path.join(entry.dir, 'stderr.txt'), 'utf8')
      : '';
    if (stderr.includes('PROXY-SLOW-EXIT')) slow++;
    if (o.status === 'PASS' && rc === '0') {
      ok++;
    } else {
      const why = [...o.failures];
      if (rc !== '0') why.push(`the suite exited ${rc} (the client failed, timed out, or a check failed)`);
      const tail = stderr.split('\n').filter((l) => /failed|error|Error|WARN|ERROR/.test(l)).slice(0, 8);
      failures.push({ what: `client ${scenario}, run ${i}`, failures: [...why, ...tail.map((t) => `  stderr: ${t.slice(0, 300)}`)], dir: o.dir });
    }
  }
  const verdict = ok === runs ? 'ok' : `FAIL (${ok}/${runs})`;
  if (ok === runs) passed++;
  else failed++;
  say(`${scenario.padEnd(cwidth)}  ${`${ok}/${runs}`.padEnd(6)}  ${`${slow}/${runs}`.padEnd(15)}  ${verdict}`);
}
say('');
say('"proxy exit slow": runs in which the proxy was still running 2 s after its standard input closed,');
say('so that the SDK client signalled it (see README.md); not a failure of the scenario.');

// ---- failures ---------------------------------------------------------------------------------
if (failures.length) {
  say('');
  say('Failures (every failing run; each with the suite\'s failing checks):');
  for (const f of failures) {
    say(`- ${f.what}: ${f.status ?? 'FAIL'}${f.dir ? `  [${path.relative(results, f.dir)}]` : ''}`);
    for (const line of f.failures) say(`    ${line}`);
  }
}

say('');
say(`conformance: ${passed} passed, ${failed} failed, ${notApplicable} not applicable to server-everything`);
const text = out.join('\n');
console.log(text);
fs.writeFileSync(path.join(results, 'summary.txt'), `${text}\n`);
process.exit(failed ? 1 : 0);
