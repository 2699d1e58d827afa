/**
 * The types every contract's decoder shares: what decoding one record value gives (`DecodeResult`:
 * a message or a rejection), the read-only message a schema outputs (`MessageOf`) and the `Decoder`
 * itself. decode.ts builds one per contract; a pipeline's definition holds its own.
 */
import type { z } from 'zod';
import type { Rejection } from '../records.js';

/** The outcome of decoding one record's value: a message, or a rejection. Never throws. */
export type DecodeResult<T> = { readonly ok: true; readonly message: T } | { readonly ok: false; readonly rejection: Rejection };

/** A field of a decoded message: arrays and objects read-only, strings (branded too) as they are. */
type ReadonlyField<T> = T extends string ? T : T extends readonly (infer Item)[] ? readonly Item[] : T extends object ? Readonly<T> : T;

/**
 * What a contract's schema outputs, read-only (a message is never changed after decoding):
 * optional fields absent or null are `null`, timestamps are UtcTimestamp, `price` is exact decimal
 * text (`"4.99"`).
 */
export type MessageOf<Schema extends z.ZodType> = { readonly [Field in keyof z.output<Schema>]: ReadonlyField<z.output<Schema>[Field]> };

/** Decodes one record value (raw bytes or null) into a message of type `T`. */
export type Decoder<T> = (value: Buffer | null) => DecodeResult<T>;
