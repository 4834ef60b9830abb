import type { AttributeValue, Attributes, HrTime, SpanContext } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';

/**
 * OTLP/protobuf of an export request (opentelemetry/proto/collector/trace/v1), written in one pass
 * straight from the SDK's spans. It writes the same bytes as the OTLP exporter's own serializer
 * (test/tracing/otlp-span-encoder.test.ts compares them), at about a third of its CPU: that one walks
 * every span twice (a size estimate, then the write) and allocates each id as an array. The export
 * runs on the event loop that serves requests, so its cost is the gateway's (docs/benchmarks.md).
 */
export function encodeSpans(spans: readonly ReadableSpan[]): Uint8Array {
  const writer = new ProtoWriter(spans.length * 512 + 1024);
  for (const [resource, scopes] of grouped(spans)) {
    writer.tag(1, LEN);
    const resourceSpans = writer.open();
    writer.tag(1, LEN);
    const resourceStart = writer.open();
    writeAttributes(writer, resource.attributes, 1);
    writer.tag(2, VARINT);
    writer.varint(0);
    writer.close(resourceStart);
    for (const scopeSpans of scopes.values()) {
      const scope = scopeSpans[0]!.instrumentationScope;
      writer.tag(2, LEN);
      const scopeSpansStart = writer.open();
      writer.tag(1, LEN);
      const scopeStart = writer.open();
      writer.tag(1, LEN);
      writer.string(scope.name);
      if (scope.version) {
        writer.tag(2, LEN);
        writer.string(scope.version);
      }
      writer.close(scopeStart);
      for (const span of scopeSpans) writeSpan(writer, span);
      if (scope.schemaUrl) {
        writer.tag(3, LEN);
        writer.string(scope.schemaUrl);
      }
      writer.close(scopeSpansStart);
    }
    if (resource.schemaUrl) {
      writer.tag(3, LEN);
      writer.string(resource.schemaUrl);
    }
    writer.close(resourceSpans);
  }
  return writer.bytes();
}

const VARINT = 0;
const I64 = 1;
const LEN = 2;
const I32 = 5;
/** Span flags (trace.proto): the W3C trace flags, and whether the parent's context came from another process. */
const HAS_IS_REMOTE = 0x100;
const IS_REMOTE = 0x200;
const TWO_TO_63 = 2 ** 63;

type Resource = ReadableSpan['resource'];
type Scope = ReadableSpan['instrumentationScope'];

/** Spans by resource, then by instrumentation scope, each in the order given. */
function grouped(spans: readonly ReadableSpan[]): Map<Resource, Map<Scope, ReadableSpan[]>> {
  const byResource = new Map<Resource, Map<Scope, ReadableSpan[]>>();
  for (const span of spans) {
    let byScope = byResource.get(span.resource);
    if (!byScope) byResource.set(span.resource, (byScope = new Map()));
    const list = byScope.get(span.instrumentationScope);
    if (list) list.push(span);
    else byScope.set(span.instrumentationScope, [span]);
  }
  return byResource;
}

function writeSpan(writer: ProtoWriter, span: ReadableSpan): void {
  const context = span.spanContext();
  const parent = span.parentSpanContext;
  writer.tag(2, LEN);
  const start = writer.open();
  writeContext(writer, context);
  if (parent?.spanId) {
    writer.tag(4, LEN);
    writer.hexId(parent.spanId);
  }
  writer.tag(5, LEN);
  writer.string(span.name);
  // OTLP counts kinds from 1 (0 is unspecified); the API's SpanKind from 0.
  writer.tag(6, VARINT);
  writer.varint(span.kind + 1);
  writer.tag(7, I64);
  writer.time(span.startTime);
  writer.tag(8, I64);
  writer.time(span.endTime);
  writeAttributes(writer, span.attributes, 9);
  writer.tag(10, VARINT);
  writer.varint(span.droppedAttributesCount);
  for (const event of span.events) {
    writer.tag(11, LEN);
    const eventStart = writer.open();
    writer.tag(1, I64);
    writer.time(event.time);
    writer.tag(2, LEN);
    writer.string(event.name);
    if (event.attributes) writeAttributes(writer, event.attributes, 3);
    writer.tag(4, VARINT);
    writer.varint(event.droppedAttributesCount ?? 0);
    writer.close(eventStart);
  }
  writer.tag(12, VARINT);
  writer.varint(span.droppedEventsCount);
  for (const link of span.links) {
    writer.tag(13, LEN);
    const linkStart = writer.open();
    writeContext(writer, link.context);
    if (link.attributes) writeAttributes(writer, link.attributes, 4);
    writer.tag(5, VARINT);
    writer.varint(link.droppedAttributesCount ?? 0);
    writer.tag(6, I32);
    writer.fixed32(flagsOf(link.context.traceFlags, link.context.isRemote));
    writer.close(linkStart);
  }
  writer.tag(14, VARINT);
  writer.varint(span.droppedLinksCount);
  writer.tag(15, LEN);
  const status = writer.open();
  if (span.status.message) {
    writer.tag(2, LEN);
    writer.string(span.status.message);
  }
  writer.tag(3, VARINT);
  writer.varint(span.status.code);
  writer.close(status);
  writer.tag(16, I32);
  writer.fixed32(flagsOf(context.traceFlags, parent?.isRemote));
  writer.close(start);
}

/** A span context's trace id, span id and trace state: fields 1 to 3 of a Span and of a Link alike. */
function writeContext(writer: ProtoWriter, context: SpanContext): void {
  writer.tag(1, LEN);
  writer.hexId(context.traceId);
  writer.tag(2, LEN);
  writer.hexId(context.spanId);
  const traceState = context.traceState?.serialize();
  if (traceState) {
    writer.tag(3, LEN);
    writer.string(traceState);
  }
}

const flagsOf = (traceFlags: number, isRemote: boolean | undefined) => (traceFlags & 0xff) | HAS_IS_REMOTE | (isRemote ? IS_REMOTE : 0);

/** Repeated KeyValue at `field`. */
function writeAttributes(writer: ProtoWriter, attributes: Attributes, field: number): void {
  for (const key in attributes) {
    if (!Object.hasOwn(attributes, key)) continue;
    writer.tag(field, LEN);
    const keyValue = writer.open();
    writer.tag(1, LEN);
    writer.string(key);
    writer.tag(2, LEN);
    const value = writer.open();
    writeAnyValue(writer, attributes[key]);
    writer.close(value);
    writer.close(keyValue);
  }
}

/** An AnyValue's one field (common.proto); nothing for null or undefined. */
function writeAnyValue(writer: ProtoWriter, value: AttributeValue | Attributes | Uint8Array | null | undefined): void {
  if (typeof value === 'string') {
    writer.tag(1, LEN);
    writer.string(value);
  } else if (typeof value === 'boolean') {
    writer.tag(2, VARINT);
    writer.varint(value ? 1 : 0);
  } else if (typeof value === 'number') {
    if (Number.isInteger(value) && value >= -TWO_TO_63 && value < TWO_TO_63) {
      writer.tag(3, VARINT);
      writer.varint(value);
    } else {
      writer.tag(4, I64);
      writer.double(value);
    }
  } else if (value instanceof Uint8Array) {
    writer.tag(7, LEN);
    writer.raw(value);
  } else if (Array.isArray(value)) {
    writer.tag(5, LEN);
    const array = writer.open();
    for (const item of value) {
      writer.tag(1, LEN);
      const itemStart = writer.open();
      writeAnyValue(writer, item);
      writer.close(itemStart);
    }
    writer.close(array);
  } else if (typeof value === 'object' && value !== null) {
    writer.tag(6, LEN);
    const list = writer.open();
    writeAttributes(writer, value as Attributes, 1);
    writer.close(list);
  }
}

/**
 * Protobuf's wire format into one growing buffer. A length-delimited field reserves one byte for
 * its length; the rare longer one (128 bytes or more) moves its body along when closed.
 */
class ProtoWriter {
  private buffer: Buffer;
  private pos = 0;

  constructor(size: number) {
    this.buffer = Buffer.allocUnsafe(size);
  }

  bytes(): Uint8Array {
    return this.buffer.subarray(0, this.pos);
  }

  private room(bytes: number): void {
    if (this.pos + bytes <= this.buffer.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.pos + bytes));
    this.buffer.copy(grown, 0, 0, this.pos);
    this.buffer = grown;
  }

  tag(field: number, wireType: number): void {
    this.varint((field << 3) | wireType);
  }

  /** A varint; a negative integer as int64's ten bytes of two's complement. */
  varint(value: number): void {
    this.room(10);
    const buffer = this.buffer;
    if (value >= 0 && value <= 0xffffffff) {
      let rest = value >>> 0;
      while (rest > 0x7f) {
        buffer[this.pos++] = (rest & 0x7f) | 0x80;
        rest >>>= 7;
      }
      buffer[this.pos++] = rest;
      return;
    }
    let rest = BigInt.asUintN(64, BigInt(value));
    while (rest > 0x7fn) {
      buffer[this.pos++] = Number(rest & 0x7fn) | 0x80;
      rest >>= 7n;
    }
    buffer[this.pos++] = Number(rest);
  }

  fixed32(value: number): void {
    this.room(4);
    this.pos = this.buffer.writeUInt32LE(value >>> 0, this.pos);
  }

  double(value: number): void {
    this.room(8);
    this.pos = this.buffer.writeDoubleLE(value, this.pos);
  }

  /**
   * An HrTime ([seconds, nanoseconds]) as fixed64 nanoseconds since the epoch, in two 32-bit halves:
   * the product is past 2^53, so it is built from seconds' high and low 16 bits, each product exact.
   */
  time([seconds, nanoseconds]: HrTime): void {
    this.room(8);
    const high = Math.floor(seconds / 0x10000) * 1e9; // times 2^16 below: its low 16 bits shift into the low word
    const low = (seconds % 0x10000) * 1e9 + nanoseconds + (high % 0x10000) * 0x10000;
    this.pos = this.buffer.writeUInt32LE(low % 0x100000000, this.pos);
    this.pos = this.buffer.writeUInt32LE(Math.floor(high / 0x10000) + Math.floor(low / 0x100000000), this.pos);
  }

  /** A trace or span id, given in hex, as its bytes (length-delimited). */
  hexId(hex: string): void {
    const length = hex.length >>> 1;
    this.room(length + 1);
    this.buffer[this.pos++] = length;
    this.pos += this.buffer.write(hex, this.pos, length, 'hex');
  }

  raw(bytes: Uint8Array): void {
    this.varint(bytes.length);
    this.room(bytes.length);
    this.buffer.set(bytes, this.pos);
    this.pos += bytes.length;
  }

  /**
   * A string as UTF-8 (length-delimited). Nearly every string here is ASCII and short: written byte
   * by byte after a one-byte length, and rewritten through Buffer if it turns out not to be.
   */
  string(text: string): void {
    const length = text.length;
    if (length >= 0x80) return this.utf8(text);
    this.room(length + 1);
    const buffer = this.buffer;
    const start = this.pos;
    buffer[start] = length;
    for (let i = 0; i < length; i++) {
      const code = text.charCodeAt(i);
      if (code > 0x7f) return this.utf8(text);
      buffer[start + 1 + i] = code;
    }
    this.pos = start + 1 + length;
  }

  private utf8(text: string): void {
    const length = Buffer.byteLength(text);
    this.varint(length);
    this.room(length);
    this.pos += this.buffer.write(text, this.pos, length, 'utf8');
  }

  /** Reserves a length-delimited field's length byte; returns where it is, for close. */
  open(): number {
    this.room(1);
    return this.pos++;
  }

  close(at: number): void {
    const length = this.pos - at - 1;
    if (length < 0x80) {
      this.buffer[at] = length;
      return;
    }
    let size = 1;
    for (let rest = length >>> 7; rest > 0; rest >>>= 7) size++;
    this.room(size - 1);
    this.buffer.copy(this.buffer, at + size, at + 1, this.pos);
    this.pos += size - 1;
    let rest = length;
    for (let i = at; i < at + size - 1; i++) {
      this.buffer[i] = (rest & 0x7f) | 0x80;
      rest >>>= 7;
    }
    this.buffer[at + size - 1] = rest;
  }
}

