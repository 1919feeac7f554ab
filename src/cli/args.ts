// Small helpers for the CLI's argument handling (node:util parseArgs underneath).
import { parseArgs, type ParseArgsConfig } from 'node:util';

/** Bad command-line input. Printed as one line on stderr, exit status 2. */
export class CliError extends Error {
  override name = 'CliError';
}

type Options = NonNullable<ParseArgsConfig['options']>;

/** parseArgs with errors turned into CliError that name the command. */
export function parse<O extends Options>(command: string, argv: string[], options: O, allowPositionals = false) {
  try {
    return parseArgs({ args: argv, options, allowPositionals, strict: true });
  } catch (e) {
    throw new CliError(`${command}: ${(e as Error).message}`);
  }
}

export function required(command: string, values: Record<string, unknown>, name: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v === '') throw new CliError(`${command}: --${name} is required`);
  return v;
}

export function intOption(command: string, name: string, text: string | undefined, min: number, max: number): number | undefined {
  if (text === undefined) return undefined;
  if (!/^-?\d+$/.test(text)) throw new CliError(`${command}: --${name} must be a whole number, got "${text}"`);
  const n = Number(text);
  if (n < min || n > max) throw new CliError(`${command}: --${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

export function boolOption(command: string, name: string, text: string | undefined): boolean | undefined {
  if (text === undefined) return undefined;
  if (text === 'true') return true;
  if (text === 'false') return false;
  throw new CliError(`${command}: --${name} must be true or false, got "${text}"`);
}

export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value) + '\n');
}
