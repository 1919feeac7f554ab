// The BGP-4 wire codec: pure message decode/encode, stream framing and a JSON view. No I/O.
export * from './messages.ts';
export * from './errors.ts';
export * from './nlri.ts';
export * from './decode.ts';
export { DecodeScratch, type AttrProblem, type DecodeOptions } from './decode-state.ts';
export { reconstructAsPath } from './decode-attrs.ts';
export * from './encode.ts';
export * from './framer.ts';
export * from './open.ts';
export * from './json.ts';
export * from './updates.ts';
export * from './next-hop-self.ts';
