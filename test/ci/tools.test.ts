// Every system tool a test runs comes from a package that .ci/run installs on a fresh CI machine, and a missing tool
// is reported by name and package.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { missingTools, TOOLS, type Tool } from '../kit/tools.ts';

const ciRun = readFileSync(new URL('../../.ci/run', import.meta.url), 'utf8');

t.test('.ci/run installs the package of every tool the tests use', async (t) => {
  const m = /^PKGS=\(([^)]*)\)/m.exec(ciRun);
  t.ok(m, '.ci/run has a PKGS=(...) line');
  const pkgs = new Set((m?.[1] ?? '').split(/\s+/).filter(Boolean));
  for (const [tool, { pkg }] of Object.entries(TOOLS)) t.ok(pkgs.has(pkg), `${tool}: package ${pkg} is in .ci/run's PKGS`);
});

t.test('a missing tool is named with the package that has it', async (t) => {
  const saved = TOOLS.ping.paths;
  const savedPath = process.env.PATH;
  // Nowhere to be found: no usual path, empty PATH.
  (TOOLS.ping as { paths: readonly string[] }).paths = ['/nonexistent/ping'];
  process.env.PATH = '';
  try {
    t.same(missingTools(['ping' as Tool]), ['ping not found: apt-get install iputils-ping']);
  } finally {
    (TOOLS.ping as { paths: readonly string[] }).paths = saved;
    process.env.PATH = savedPath;
  }
});
