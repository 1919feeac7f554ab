// How users start the daemon, read from bin/blockspeaker.js's #! line (`#!/usr/bin/env -S [NAME=VALUE ...] node
// [--flag ...]`): the environment it sets and the node flags it passes. The benchmarks start the daemon with these
// (as users run it); test/deploy/node-flags.test.ts holds every other launcher (image, DaemonSets, systemd unit,
// Windows service) to the same.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Launcher {
  /** Environment variables the #! line sets (env -S NAME=VALUE). */
  env: Record<string, string>;
  /** Node flags, in order. */
  flags: string[];
}

/** Parse a `#!/usr/bin/env -S ...` line; throws when it is not one that runs node. */
export function parseShebang(line: string): Launcher {
  const m = /^#!\/usr\/bin\/env -S (.*)$/.exec(line.trimEnd());
  if (!m) throw new Error(`not an "#!/usr/bin/env -S" line: ${JSON.stringify(line)}`);
  const words = m[1]!.split(/\s+/).filter(Boolean);
  const env: Record<string, string> = {};
  let i = 0;
  for (; i < words.length && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[i]!); i++) {
    const w = words[i]!;
    env[w.slice(0, w.indexOf('='))] = w.slice(w.indexOf('=') + 1);
  }
  if (words[i] !== 'node') throw new Error(`the #! line runs ${JSON.stringify(words[i] ?? '')}, not node`);
  const flags = words.slice(i + 1);
  const bad = flags.find((f) => !f.startsWith('--'));
  if (bad !== undefined) throw new Error(`the #! line passes ${JSON.stringify(bad)} to node: only --flags belong there`);
  return { env, flags };
}

/** The launcher of the repository at `root` (its bin/blockspeaker.js). */
export function launcher(root: string): Launcher {
  return parseShebang(readFileSync(join(root, 'bin/blockspeaker.js'), 'utf8').split('\n')[0]!);
}
