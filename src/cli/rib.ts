// `blockspeaker rib ...`: routing table tools. For now `lpm`: longest-prefix match of addresses against a table.
import { once } from 'node:events';
import { AddressError, parseIP } from '../net/ip.ts';
import { readPrefixFile, forEachLine, fastParseIP } from '../rib/tableio.ts';
import { Trie } from '../rib/trie.ts';
import { CliError, parse, required } from './args.ts';

const HELP = `usage: blockspeaker rib lpm --table FILE [--echo]

  Loads the prefixes in FILE (one per line, "#" comments, gzip allowed), then reads addresses from stdin, one per
  line, and prints for each the longest matching prefix, or "-" when no prefix matches. With --echo each output
  line is "ADDRESS PREFIX". Blank and "#" lines on stdin are skipped. A line that is not an address is reported on
  stderr with its line number and produces no output; the exit status is then 1.
  A table with bad lines is reported (file:line: message) and nothing is looked up (exit status 1).
`;

export async function run(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (!sub || sub === '--help' || sub === '-h' || sub === 'help') {
    process.stdout.write(HELP);
    return sub ? 0 : 2;
  }
  if (sub === 'lpm') return lpm(rest);
  throw new CliError(`rib: unknown command "${sub}" (try: lpm)`);
}

async function lpm(argv: string[]): Promise<number> {
  const { values } = parse('rib lpm', argv, {
    table: { type: 'string' },
    echo: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  });
  if (values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const file = required('rib lpm', values, 'table');
  let table;
  try {
    table = await readPrefixFile(file, { maxErrors: 20 });
  } catch (e) {
    throw new CliError(`rib lpm: cannot read table "${file}": ${(e as Error).message}`);
  }
  if (table.errorCount > 0) {
    for (const err of table.errors) process.stderr.write(`blockspeaker: ${file}:${err.line}: ${err.message}\n`);
    if (table.errorCount > table.errors.length) {
      process.stderr.write(`blockspeaker: ${file}: ${table.errorCount - table.errors.length} more bad lines\n`);
    }
    return 1;
  }

  // Values in the tries are indexes into the table's prefix lists.
  const { v4, v6 } = table;
  const t4 = new Trie(4, { expectedSize: v4.count });
  for (let i = 0; i < v4.count; i++) t4.insertWords(v4.words[i], 0, 0, 0, v4.lens[i], i);
  const t6 = new Trie(6, { expectedSize: v6.count });
  for (let i = 0; i < v6.count; i++) {
    const b = i * 4;
    t6.insertWords(v6.words[b], v6.words[b + 1], v6.words[b + 2], v6.words[b + 3], v6.lens[i], i);
  }

  let bad = 0;
  // A reader that went away (| head) ends the command quietly, like any Unix filter.
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(bad > 0 ? 1 : 0);
    throw e;
  });
  const echo = values.echo === true;
  const words = new Uint32Array(5);
  let out = '';
  await forEachLine(
    process.stdin,
    (buf, s, e, lineNo) => {
      let fam = fastParseIP(buf, s, e, words);
      if (fam === 0) {
        const text = Buffer.from(buf.buffer, buf.byteOffset + s, e - s).toString('utf8');
        try {
          const ip = parseIP(text);
          words[0] = ip.w0;
          words[1] = ip.w1;
          words[2] = ip.w2;
          words[3] = ip.w3;
          fam = ip.family;
        } catch (err) {
          if (!(err instanceof AddressError)) throw err;
          bad++;
          process.stderr.write(`blockspeaker: stdin line ${lineNo}: ${err.message}\n`);
          return;
        }
      }
      let match = '-';
      if (fam === 4) {
        const i = t4.lpm4(words[0]);
        if (i >= 0) match = v4.format(i);
      } else {
        const i = t6.lpm6(words[0], words[1], words[2], words[3]);
        if (i >= 0) match = v6.format(i);
      }
      if (echo) out += `${Buffer.from(buf.buffer, buf.byteOffset + s, e - s).toString('utf8')} ${match}\n`;
      else out += match + '\n';
    },
    async () => {
      // Flush after every input chunk and respect backpressure, so output memory stays bounded.
      if (out.length === 0) return;
      const ok = process.stdout.write(out);
      out = '';
      if (!ok) await once(process.stdout, 'drain');
    },
  );
  if (out.length > 0) process.stdout.write(out);
  return bad > 0 ? 1 : 0;
}
