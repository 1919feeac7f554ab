// Stand-in for src/hns/worker.ps1 (no PowerShell on Linux): the same JSON-lines protocol. A script containing
// HANG is never answered, DIE exits the worker; any other script is answered with the HNS state line the read
// script prints (and an ok line per op of an apply script), an echo of the script's first line (UTF-8 round trip) and this worker's pid.
import { createInterface } from 'node:readline';

const rl = createInterface({ input: process.stdin });
process.stdout.write('worker starting (chatter that is not a reply)\n');
rl.on('line', (line) => {
  if (!line.trim()) return;
  const req = JSON.parse(line);
  if (req.script.includes('HANG')) return;
  if (req.script.includes('DIE')) process.exit(7);
  const state = { Networks: [{ Name: 'n', Type: 'L2Bridge', ID: 'id-1' }], Endpoints: [], HostRoutes: [] };
  // An apply script: report every op ("# [i] ..." comments) as done, as worker.ps1 relays the script's own lines.
  const oks = [...req.script.matchAll(/^# \[(\d+)\]/gm)].map((m) => `##blockspeaker ok ${m[1]}`);
  const stdout = [...oks, `##blockspeaker state ${JSON.stringify(state)}`, `echo ${req.script.split('\n')[0]}`, `pid ${process.pid}`].join('\r\n');
  process.stdout.write(JSON.stringify({ id: req.id, code: 0, stdout, stderr: '' }) + '\n');
});
