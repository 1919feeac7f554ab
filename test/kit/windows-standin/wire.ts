// The stand-in server's side of the wire: a reply as the text lines the DLLs read, and the refusal that turns into
// a Windows error code. Shared by the dispatch and every part of the state that can refuse a call.

export interface Reply {
  code: number;
  out?: string;
  err?: string;
  id?: string;
  rows?: string[];
}

export class Refusal extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

export const refuse = (code: number, message: string): never => {
  throw new Refusal(code, message);
};

const oneLine = (s: string): string => s.replace(/[\r\n]/g, ' ');

export function encode(r: Reply): string {
  let s = `${r.code >>> 0}\n`;
  if (r.out !== undefined) s += `O ${oneLine(r.out)}\n`;
  if (r.err !== undefined) s += `E ${oneLine(r.err)}\n`;
  if (r.id !== undefined) s += `I ${r.id}\n`;
  for (const row of r.rows ?? []) s += `R ${oneLine(row)}\n`;
  return s;
}

export const bigintJson = (_k: string, v: unknown) => (typeof v === 'bigint' ? v.toString() : v);
