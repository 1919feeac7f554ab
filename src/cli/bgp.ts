// `blockspeaker bgp ...`: BGP debugging tools. For now `decode`: BGP messages (hex or raw) -> JSON.
import { readFileSync } from 'node:fs';
import { describeStream, parseHex } from '../bgp/codec/json.ts';
import { CliError, parse } from './args.ts';

const HELP = `usage: blockspeaker bgp decode [HEX...] [--file FILE | -] [--binary] [--pretty]
                              [--two-octet-as] [--extended-message] [--ebgp]

  Decodes BGP messages (marker and header included) and prints one JSON object per message, one per line:
    {"action":"ok","message":{"type":"UPDATE",...}}
  Input: the HEX arguments, else FILE, else stdin ("-" or no input argument). Hex text may hold several messages
  back to back, split by whitespace or newlines or not at all; "0x", ":" and "#" comments are ignored. --binary
  reads FILE or stdin as raw octets (e.g. a capture of a TCP stream).
  A malformed message is printed as the decode result: the NOTIFICATION a speaker would send
  ({"action":"notification","code":3,"subcode":1,...}) or the RFC 7606 action (treat-as-withdraw,
  attribute-discard) with its reasons; a header error ends the stream. Exit status 1 when anything was malformed
  or truncated, 2 on bad usage, else 0.

  Session options the decoding depends on:
    --two-octet-as       the session did not negotiate 4-octet AS numbers (AS_PATH with 2-octet ASNs)
    --extended-message   the session negotiated extended messages (RFC 8654: up to 65535 octets)
    --ebgp               the peer is external (LOCAL_PREF, ORIGINATOR_ID, CLUSTER_LIST are discarded)
`;

export async function run(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (!sub || sub === '--help' || sub === '-h' || sub === 'help') {
    process.stdout.write(HELP);
    return sub ? 0 : 2;
  }
  if (sub === 'decode') return decode(rest);
  throw new CliError(`bgp: unknown command "${sub}" (try: decode)`);
}

async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

function hexToBytes(text: string, where: string): Buffer {
  const noComments = text.replace(/#.*$/gm, '');
  try {
    return parseHex(noComments);
  } catch {
    const bad = /[^0-9a-fA-F\s:x]/.exec(noComments.replace(/0x/gi, ''));
    const why = bad ? `unexpected character ${JSON.stringify(bad[0])}` : 'odd number of hex digits';
    throw new CliError(`bgp decode: ${where} is not hex (${why}); use --binary for raw octets`);
  }
}

async function decode(argv: string[]): Promise<number> {
  const { values, positionals } = parse('bgp decode', argv, {
    file: { type: 'string', short: 'f' },
    binary: { type: 'boolean' },
    pretty: { type: 'boolean' },
    'two-octet-as': { type: 'boolean' },
    'extended-message': { type: 'boolean' },
    ebgp: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  }, true);
  if (values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const stdinRequested = positionals.length === 1 && positionals[0] === '-';
  if (values.file !== undefined && positionals.length > 0 && !stdinRequested) {
    throw new CliError('bgp decode: give HEX arguments or --file, not both');
  }
  if (values.binary && positionals.length > 0 && !stdinRequested) {
    throw new CliError('bgp decode: --binary reads --file or stdin, not HEX arguments');
  }

  let bytes: Buffer;
  if (positionals.length > 0 && !stdinRequested) {
    bytes = Buffer.concat(positionals.map((h, i) => hexToBytes(h, `argument ${i + 1}`)));
  } else {
    let raw: Buffer;
    const where = values.file !== undefined && values.file !== '-' ? values.file : 'stdin';
    try {
      raw = where === 'stdin' ? await readStdin() : readFileSync(where);
    } catch (e) {
      throw new CliError(`bgp decode: cannot read ${where}: ${(e as Error).message}`);
    }
    bytes = values.binary ? raw : hexToBytes(raw.toString('latin1'), where);
  }
  if (bytes.length === 0) throw new CliError('bgp decode: no input (give HEX, --file FILE, or data on stdin)');

  const results = describeStream(bytes, {
    fourOctetAs: !values['two-octet-as'],
    extendedMessage: !!values['extended-message'],
    external: !!values.ebgp,
  });
  let malformed = false;
  for (const r of results) {
    const o = r as { action?: string; problems?: { error?: string }[] };
    // eBGP LOCAL_PREF & co. are discarded without being an error; everything else that is not "ok" is malformed.
    if (o.action !== 'ok' && !(o.action === 'attribute-discard' && o.problems?.every((p) => p.error === undefined))) {
      malformed = true;
    }
    process.stdout.write(JSON.stringify(r, null, values.pretty ? 2 : undefined) + '\n');
  }
  return malformed ? 1 : 0;
}
