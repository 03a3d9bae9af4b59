// k6/lib/payload.js - request bodies for the ingestor, built once per VU.
//
// Owns: the JSON shape of a batch (`[{"key","value"[,"topic"]}, ...]`, the
// seed's `{"key": "sanity-1", "value": "..."}` shape) and of a single message.
// Must not: build anything character by character in the hot loop.
//
// How it stays cheap: at init each VU draws its random values once (random
// bytes, base64url-encoded: JSON-safe ASCII, so MESSAGE_SIZE characters are
// exactly MESSAGE_SIZE bytes on the wire and in Kafka) and serialises the whole
// batch once, split at the spot where every message's key starts. An
// iteration then makes its body with a single native `parts.join(slot)`, which
// puts the iteration's slot (a base-36 counter) at the front of every key, so
// keys - and with them librdkafka's key-hash partitioning - change every
// iteration while values stay the same bytes.
//
// Keys look like `<slot>-<vu>-<index>`: unique per VU, index and iteration.

import encoding from 'k6/encoding';

const MAX_RANDOM_CHUNK = 65536; // crypto.getRandomValues limit per call

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
 * A batch body template for one VU.
 *   vu:          the VU's id in the test (keys stay unique across VUs)
 *   batchSize:   messages per request
 *   messageSize: bytes of every value
 *   topic:       optional "topic" field of every message (else the ingestor's --topic)
 */
export class BatchTemplate {
  constructor({ vu, batchSize, messageSize, topic }) {
    const pool = randomAscii(batchSize * messageSize);
    const topicField = topic === undefined ? '' : `,"topic":${JSON.stringify(topic)}`;
    const parts = new Array(batchSize + 1);
    parts[0] = '[{"key":"';
    for (let i = 0; i < batchSize; i++) {
      const value = pool.substring(i * messageSize, (i + 1) * messageSize);
      const next = i + 1 < batchSize ? ',{"key":"' : ']';
      parts[i + 1] = `-${vu}-${i}","value":"${value}"${topicField}}${next}`;
    }
    this.parts = parts;
    this.singleParts = ['{"key":"', `-${vu}-s","value":"${pool.substring(0, messageSize)}"${topicField}}`];
    this.batchSize = batchSize;
    this.messageSize = messageSize;
    this.slot = 0;
  }

  // The next batch body: same values, fresh keys.
  nextBatch() {
    this.slot += 1;
    return this.parts.join(this.slot.toString(36));
  }

  // The next single-message body (POST /produce).
  nextSingle() {
    this.slot += 1;
    return this.singleParts.join(this.slot.toString(36));
  }
}
