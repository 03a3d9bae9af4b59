// k6/lib/payload.js - request bodies for the ingestor, built at init.
//
// Owns: the JSON shape of a batch (`[{"key","value"[,"topic"]}, ...]`, the
// seed's `{"key": "sanity-1", "value": "..."}` shape) and of a single message;
// the shared pool of random values; the KEYS modes.
// Must not: build anything character by character in the hot loop.
//
// How it stays cheap: one pool of random values (random bytes,
// base64url-encoded: JSON-safe ASCII, so MESSAGE_SIZE characters are exactly
// MESSAGE_SIZE bytes on the wire and in Kafka) is drawn once for the whole
// test and held in a SharedArray (one copy, not one per VU). Each VU takes its
// values from it (rotated by the VU number, so VUs send different values) and
// serialises its batch once.
//
// KEYS=fixed (default): the body is serialised once into an ArrayBuffer and
// sent as is every iteration: no string work and no copy per request (k6
// hands an ArrayBuffer to the HTTP client without converting it). Keys are
// `<vu>-<index>`, so a VU's messages always land on the same partitions; the
// seeds' stress test sent a fixed payload too. The ingestor adds the
// verification envelope (producer id, sequence, send time, CRC) to every
// record, so repeated keys and values do not weaken the loss/duplicate checks.
//
// KEYS=fresh: keys `<slot>-<vu>-<index>` change every iteration (so key-hash
// partitioning moves): the batch is split where every key starts and an
// iteration joins it with its slot (a base-36 counter) - one native join and
// one string copy per request.

import encoding from 'k6/encoding';
import { SharedArray } from 'k6/data';

const MAX_RANDOM_CHUNK = 65536; // crypto.getRandomValues limit per call
export const KEY_MODES = ['fixed', 'fresh'];

// `length` random characters from [A-Za-z0-9_-].
export function randomAscii(length) {
  const nbytes = Math.ceil((length * 3) / 4) + 3;
  const bytes = new Uint8Array(nbytes);
  for (let off = 0; off < nbytes; off += MAX_RANDOM_CHUNK) {
    crypto.getRandomValues(bytes.subarray(off, Math.min(nbytes, off + MAX_RANDOM_CHUNK)));
  }
  return encoding.b64encode(bytes.buffer, 'rawurl').substring(0, length);
}

/**
 * The test's pool of `count` random values of `messageSize` characters, one
 * string in a SharedArray (drawn once, shared by every VU). Init context only
 * (k6 builds a SharedArray there).
 */
export function valuePool(count, messageSize) {
  const shared = new SharedArray(`chronik-values-${count}x${messageSize}`, () => [randomAscii(count * messageSize)]);
  return { text: shared[0], count, messageSize };
}

// An ASCII string as an ArrayBuffer, natively (no per-character JS loop).
function asciiBuffer(text) {
  return encoding.b64decode(encoding.b64encode(text, 'std'), 'std');
}

/**
 * The request bodies of one VU.
 *   vu:          the VU's id in the test (keys stay unique across VUs)
 *   batchSize:   messages per request
 *   messageSize: bytes of every value
 *   topic:       optional "topic" field of every message (else the ingestor's --topic)
 *   keys:        'fixed' (default) or 'fresh' (see the header)
 *   pool:        valuePool(batchSize, messageSize), else drawn for this VU
 */
export class BatchTemplate {
  constructor({ vu, batchSize, messageSize, topic, keys = 'fixed', pool }) {
    if (!KEY_MODES.includes(keys)) throw new Error(`KEYS=${keys}: expected one of ${KEY_MODES.join(', ')}`);
    const values = pool && pool.count === batchSize && pool.messageSize === messageSize
      ? pool.text : randomAscii(batchSize * messageSize);
    const value = (i) => {
      const at = ((i + vu) % batchSize) * messageSize;
      return values.substring(at, at + messageSize);
    };
    const topicField = topic === undefined ? '' : `,"topic":${JSON.stringify(topic)}`;
    const parts = new Array(batchSize + 1);
    parts[0] = '[{"key":"';
    for (let i = 0; i < batchSize; i++) {
      const next = i + 1 < batchSize ? ',{"key":"' : ']';
      parts[i + 1] = `-${vu}-${i}","value":"${value(i)}"${topicField}}${next}`;
    }
    const singleParts = ['{"key":"', `-${vu}-s","value":"${value(0)}"${topicField}}`];
    this.keys = keys;
    this.batchSize = batchSize;
    this.messageSize = messageSize;
    this.slot = 0;
    if (keys === 'fixed') {
      // `<vu>-<index>`: the fresh layout without its slot and first dash.
      this.batchBody = asciiBuffer(parts.join('').replace(/"key":"-/g, '"key":"'));
      this.singleBody = asciiBuffer(singleParts.join('').replace('"key":"-', '"key":"'));
    } else {
      this.parts = parts;
      this.singleParts = singleParts;
    }
  }

  // The next batch body: an ArrayBuffer (fixed keys) or a string (fresh keys).
  nextBatch() {
    if (this.keys === 'fixed') return this.batchBody;
    this.slot += 1;
    return this.parts.join(this.slot.toString(36));
  }

  // The next single-message body (POST /produce).
  nextSingle() {
    if (this.keys === 'fixed') return this.singleBody;
    this.slot += 1;
    return this.singleParts.join(this.slot.toString(36));
  }
}

// A body as text (tests, logs): strings as they are, ArrayBuffers decoded.
export function bodyText(body) {
  return typeof body === 'string' ? body : encoding.b64decode(encoding.b64encode(body, 'std'), 'std', 's');
}
