//! The native producer's accumulator: per partition, the batches waiting to
//! be sent, each built as messages arrive.
//!
//! Owns: choosing a message's partition (the one asked for; else Kafka's
//! murmur2 of the key; else one partition per request, rotating), appending
//! each record's encoding to its partition's open batch (so sending a batch
//! costs one header, one CRC and, if asked, one compression), the queue
//! bounds, and each partition's producer identity and next sequence.
//! A partition has at most one batch in flight; it is sealed (stamped with
//! the identity and base sequence) when taken, and keeps those bytes while
//! it is retried, so a retry is the same batch to the broker.
//! Must not: do I/O, or wait.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use rdkafka::error::RDKafkaErrorCode;

use super::metadata::Snapshot;
use super::records::{self, BatchShape, RecordRef, Stamp};
use super::settings::Settings;
use crate::producer::BatchWaiter;

/// One message of a batch: its ledger sequence and its index in its request.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub sequence: u64,
    pub index: u32,
}

/// A batch of one partition.
#[derive(Debug)]
pub struct Batch {
    body: Vec<u8>,
    pub shape: BatchShape,
    pub entries: Vec<Entry>,
    /// (first entry, its request's waiter): runs of entries of one request.
    pub waiters: Vec<(usize, Option<Arc<BatchWaiter>>)>,
    pub created: Instant,
    /// Set when taken: the bytes sent, and who they say wrote them.
    pub sealed: Option<(Bytes, Stamp)>,
    /// It reached a broker at least once (its outcome may be "written").
    pub sent: bool,
}

impl Batch {
    fn new(now: Instant, timestamp: i64, capacity: usize) -> Batch {
        Batch {
            body: Vec::with_capacity(capacity),
            shape: BatchShape {
                count: 0,
                base_timestamp: timestamp,
                max_timestamp: timestamp,
            },
            entries: Vec::new(),
            waiters: Vec::new(),
            created: now,
            sealed: None,
            sent: false,
        }
    }
}

/// A producer identity a partition writes under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    pub producer_id: i64,
    pub epoch: i16,
}

#[derive(Debug)]
pub struct PartitionQueue {
    pub topic: Arc<str>,
    pub partition: i32,
    pub batches: VecDeque<Batch>,
    pub in_flight: bool,
    pub retry_at: Option<Instant>,
    /// None: needs one (the shared first one, or a fresh one after a reset).
    pub identity: Option<Identity>,
    /// This partition gave up an identity: the next must be its own.
    pub needs_fresh_identity: bool,
    pub next_sequence: i32,
    /// The size the last batch reached: the next one starts with that room.
    last_batch_bytes: usize,
}

/// Kafka's sequence arithmetic: wraps to 0 after i32::MAX.
pub fn add_sequence(base: i32, n: i32) -> i32 {
    if base > i32::MAX - n {
        n - (i32::MAX - base) - 1
    } else {
        base + n
    }
}

/// Kafka's murmur2 (the Java client's default partitioner for keyed records).
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let chunks = data.chunks_exact(4);
    let tail = chunks.remainder();
    for c in chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    match tail.len() {
        3 => {
            h ^= u32::from(tail[2]) << 16;
            h ^= u32::from(tail[1]) << 8;
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(M);
        }
        2 => {
            h ^= u32::from(tail[1]) << 8;
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(M);
        }
        1 => {
            h ^= u32::from(tail[0]);
            h = h.wrapping_mul(M);
        }
        _ => {}
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of a keyed record: `toPositive(murmur2(key)) % partitions`.
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partitions.max(1)
}

/// One message to append.
pub struct Incoming<'a> {
    pub topic: &'a str,
    pub partition: Option<i32>,
    pub record: RecordRef<'a>,
    pub entry: Entry,
}

/// Why a message was not appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The queue bounds are reached: try again later.
    Full,
    /// This message can never be sent.
    Error(RDKafkaErrorCode),
}

#[derive(Debug, Default)]
pub struct Queues {
    /// Per topic, indexed by partition.
    parts: Vec<(Arc<str>, Vec<PartitionQueue>)>,
    /// Where each topic is in `parts`.
    index: HashMap<Arc<str>, usize>,
    /// The topic appended to last (a request's messages mostly share one).
    last: usize,
    pub messages: usize,
    pub bytes: usize,
    /// The next partition for keyless records, per topic (rotates per request).
    sticky: HashMap<Arc<str>, i32>,
    /// The identity partitions start under (None until InitProducerId answered).
    pub initial: Option<Identity>,
}

/// The partitions the sticky rotation moves over, once per request.
pub struct RequestPlacement {
    sticky: HashMap<String, i32>,
    /// The last topic's partition count.
    count: Option<(String, i32)>,
}

impl RequestPlacement {
    pub fn new() -> RequestPlacement {
        RequestPlacement {
            sticky: HashMap::new(),
            count: None,
        }
    }
}

impl Queues {
    fn topic_slot(&mut self, topic: &str) -> usize {
        if self
            .parts
            .get(self.last)
            .is_some_and(|(t, _)| &**t == topic)
        {
            return self.last;
        }
        let slot = match self.index.get(topic) {
            Some(&i) => i,
            None => {
                let name: Arc<str> = Arc::from(topic);
                self.parts.push((name.clone(), Vec::new()));
                self.index.insert(name, self.parts.len() - 1);
                self.parts.len() - 1
            }
        };
        self.last = slot;
        slot
    }

    fn queue(&mut self, topic: &str, partition: i32) -> &mut PartitionQueue {
        let slot = self.topic_slot(topic);
        let initial = self.initial;
        let (name, list) = &mut self.parts[slot];
        let at = usize::try_from(partition).unwrap_or(0);
        while list.len() <= at {
            list.push(PartitionQueue {
                topic: name.clone(),
                partition: i32::try_from(list.len()).unwrap_or(i32::MAX),
                batches: VecDeque::new(),
                in_flight: false,
                retry_at: None,
                identity: initial,
                needs_fresh_identity: false,
                next_sequence: 0,
                last_batch_bytes: 0,
            });
        }
        &mut list[at]
    }

    fn all(&self) -> impl Iterator<Item = &PartitionQueue> {
        self.parts.iter().flat_map(|(_, list)| list)
    }

    /// Appends one message, or says why not.
    pub fn append(
        &mut self,
        settings: &Settings,
        snapshot: &Snapshot,
        placement: &mut RequestPlacement,
        m: &Incoming<'_>,
        waiter: Option<&Arc<BatchWaiter>>,
        now: Instant,
    ) -> Result<(), Refused> {
        let count = match &placement.count {
            Some((t, n)) if t == m.topic => *n,
            _ => {
                let Some(n) = snapshot.partition_count(m.topic) else {
                    return Err(Refused::Error(RDKafkaErrorCode::UnknownTopic));
                };
                placement.count = Some((m.topic.to_owned(), n));
                n
            }
        };
        let partition = match (m.partition, m.record.key) {
            (Some(p), _) if p >= count => {
                return Err(Refused::Error(RDKafkaErrorCode::UnknownPartition))
            }
            (Some(p), _) => p,
            (None, Some(key)) => partition_for_key(key, count),
            (None, None) => match placement.sticky.get(m.topic) {
                Some(&p) => p,
                None => {
                    let next = self.sticky.entry(Arc::from(m.topic)).or_insert(0);
                    let p = *next % count;
                    *next = (p + 1) % count;
                    placement.sticky.insert(m.topic.to_owned(), p);
                    p
                }
            },
        };
        let alone = records::encoded_len(&m.record, 0, 0);
        if alone + records::BATCH_HEADER_LEN > settings.batch_bytes {
            return Err(Refused::Error(RDKafkaErrorCode::MessageSizeTooLarge));
        }
        if self.messages >= settings.queue_max_messages
            || self.bytes + alone > settings.queue_max_bytes
        {
            return Err(Refused::Full);
        }
        let (batch_records, batch_bytes) = (settings.batch_records, settings.batch_bytes);
        let q = self.queue(m.topic, partition);
        let open = q.batches.back().is_some_and(|b| {
            b.sealed.is_none()
                && (b.shape.count as usize) < batch_records
                && b.body.len() + alone + records::BATCH_HEADER_LEN + 16 <= batch_bytes
        });
        if !open {
            let room = (q.last_batch_bytes + q.last_batch_bytes / 8).clamp(4096, batch_bytes);
            q.batches
                .push_back(Batch::new(now, m.record.timestamp_ms, room));
        }
        let batch = q.batches.back_mut().unwrap_or_else(|| unreachable!());
        let before = batch.body.len();
        let delta = m.record.timestamp_ms - batch.shape.base_timestamp;
        records::encode_record(&mut batch.body, &m.record, batch.shape.count, delta);
        batch.shape.count += 1;
        batch.shape.max_timestamp = batch.shape.max_timestamp.max(m.record.timestamp_ms);
        let same_waiter = batch
            .waiters
            .last()
            .is_some_and(|(_, w)| match (w, waiter) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            });
        if !same_waiter {
            batch.waiters.push((batch.entries.len(), waiter.cloned()));
        }
        batch.entries.push(m.entry);
        let added = batch.body.len() - before;
        self.messages += 1;
        self.bytes += added;
        Ok(())
    }

    /// Partitions led by `broker` whose front batch can go now (sealed and
    /// marked in flight), and when the next one will be able to.
    /// Partitions that need a producer identity first are skipped.
    pub fn take_ready(
        &mut self,
        settings: &Settings,
        snapshot: &Snapshot,
        broker: i32,
        now: Instant,
        flushing: bool,
        max_request_bytes: usize,
    ) -> (Vec<Taken>, Option<Instant>) {
        let mut taken = Vec::new();
        let mut next_due: Option<Instant> = None;
        let mut request_bytes = 0;
        for q in self.parts.iter_mut().flat_map(|(_, list)| list) {
            if q.in_flight
                || q.batches.is_empty()
                || snapshot.leader(&q.topic, q.partition) != Some(broker)
            {
                continue;
            }
            if settings.idempotence && q.identity.is_none() {
                continue;
            }
            if let Some(at) = q.retry_at {
                if at > now {
                    next_due = Some(next_due.map_or(at, |d| d.min(at)));
                    continue;
                }
            }
            let front = &q.batches[0];
            let full = q.batches.len() > 1
                || front.shape.count as usize >= settings.batch_records
                || front.body.len() + 1024 >= settings.batch_bytes;
            let due = front.created + settings.linger;
            if !(full || flushing || front.sealed.is_some() || due <= now) {
                next_due = Some(next_due.map_or(due, |d| d.min(due)));
                continue;
            }
            if request_bytes > 0 && request_bytes + front.body.len() > max_request_bytes {
                next_due = Some(now);
                continue;
            }
            let stamp = match (settings.idempotence, q.identity) {
                (true, Some(id)) => Stamp {
                    producer_id: id.producer_id,
                    producer_epoch: id.epoch,
                    base_sequence: q.next_sequence,
                },
                _ => Stamp::NONE,
            };
            let batch = &mut q.batches[0];
            let bytes = match &batch.sealed {
                Some((bytes, s)) if *s == stamp => bytes.clone(),
                Some((bytes, _)) => records::restamp(bytes, stamp),
                None => {
                    match records::seal(&batch.body, batch.shape, settings.compression, stamp) {
                        Ok(b) => b,
                        Err(e) => {
                            tracing::error!(error = %e, "compressing a batch failed; sending it uncompressed");
                            match records::seal(
                                &batch.body,
                                batch.shape,
                                crate::config::Compression::None,
                                stamp,
                            ) {
                                Ok(b) => b,
                                Err(_) => continue,
                            }
                        }
                    }
                }
            };
            q.last_batch_bytes = batch.body.len();
            batch.sealed = Some((bytes.clone(), stamp));
            request_bytes += bytes.len();
            q.in_flight = true;
            taken.push(Taken {
                topic: q.topic.clone(),
                partition: q.partition,
                bytes,
            });
        }
        (taken, next_due)
    }

    pub fn get_mut(&mut self, topic: &str, partition: i32) -> Option<&mut PartitionQueue> {
        let slot = *self.index.get(topic)?;
        self.parts[slot].1.get_mut(usize::try_from(partition).ok()?)
    }

    /// Removes the front batch of a partition, settled as `how`.
    pub fn finish_front(&mut self, topic: &str, partition: i32, how: Settled) -> Option<Batch> {
        let q = self.get_mut(topic, partition)?;
        q.in_flight = false;
        q.retry_at = None;
        let batch = q.batches.pop_front()?;
        match how {
            Settled::Delivered => {
                q.next_sequence = add_sequence(q.next_sequence, batch.shape.count)
            }
            // The broker did not advance this identity's sequence: the next
            // batch takes this one's.
            Settled::NotWritten => {}
            Settled::Unknown if !batch.sent => {}
            Settled::Unknown => {
                // Maybe written, maybe not: the next batch cannot know which
                // sequence follows. Start over under a new identity.
                q.identity = None;
                q.needs_fresh_identity = true;
                q.next_sequence = 0;
            }
        }
        let (n, b) = (batch.entries.len(), batch.body.len());
        self.messages -= n;
        self.bytes -= b;
        Some(batch)
    }

    /// Puts a partition's front batch back for another try at `at`;
    /// `sent`: it may have reached the broker.
    pub fn retry_front(
        &mut self,
        topic: &str,
        partition: i32,
        at: Instant,
        sent: bool,
        new_identity: bool,
    ) {
        if let Some(q) = self.get_mut(topic, partition) {
            q.in_flight = false;
            q.retry_at = Some(at);
            if let Some(b) = q.batches.front_mut() {
                b.sent |= sent;
            }
            if new_identity {
                q.identity = None;
                q.needs_fresh_identity = true;
                q.next_sequence = 0;
            }
        }
    }

    /// Gives a partition the identity it waited for.
    pub fn set_identity(&mut self, topic: &str, partition: i32, identity: Identity) {
        if let Some(q) = self.get_mut(topic, partition) {
            if q.identity.is_none() {
                q.identity = Some(identity);
                q.needs_fresh_identity = false;
                q.next_sequence = 0;
            }
        }
    }

    /// Partitions (not in flight) whose front batch is older than the
    /// message timeout: removed, to be failed.
    pub fn expire(&mut self, settings: &Settings, now: Instant) -> Vec<(Arc<str>, i32, Batch)> {
        let mut out = Vec::new();
        let keys: Vec<(Arc<str>, i32)> = self
            .all()
            .filter(|q| {
                !q.in_flight
                    && q.batches
                        .front()
                        .is_some_and(|b| now.duration_since(b.created) >= settings.message_timeout)
            })
            .map(|q| (q.topic.clone(), q.partition))
            .collect();
        for (topic, partition) in keys {
            loop {
                let expired = self
                    .get_mut(&topic, partition)
                    .and_then(|q| q.batches.front())
                    .is_some_and(|b| now.duration_since(b.created) >= settings.message_timeout);
                if !expired {
                    break;
                }
                if let Some(b) = self.finish_front(&topic, partition, Settled::Unknown) {
                    out.push((topic.clone(), partition, b));
                }
            }
        }
        out
    }

    /// Partitions waiting for a producer identity: (topic, partition, needs a fresh one).
    pub fn needing_identity(&self) -> Vec<(Arc<str>, i32, bool)> {
        self.all()
            .filter(|q| q.identity.is_none() && !q.batches.is_empty())
            .map(|q| (q.topic.clone(), q.partition, q.needs_fresh_identity))
            .collect()
    }

    /// Partitions with batches but no known leader.
    pub fn leaderless(&self, snapshot: &Snapshot) -> bool {
        self.all()
            .any(|q| !q.batches.is_empty() && snapshot.leader(&q.topic, q.partition).is_none())
    }

    /// Topics with something queued or known (what a metadata refresh asks for).
    pub fn topics(&self) -> Vec<String> {
        let mut t: Vec<String> = self.parts.iter().map(|(t, _)| t.to_string()).collect();
        t.sort();
        t
    }
}

/// How a batch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    Delivered,
    /// The broker refused it: not written.
    NotWritten,
    /// Timed out: written if it was ever sent and the broker took it.
    Unknown,
}

/// A batch taken for sending.
#[derive(Debug)]
pub struct Taken {
    pub topic: Arc<str>,
    pub partition: i32,
    pub bytes: Bytes,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_kafkas_partitioner() {
        // Kafka's Utils.murmur2 test vectors.
        assert_eq!(murmur2(b"21"), -973_932_308);
        assert_eq!(murmur2(b"foobar"), -790_332_482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985_981_536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1_486_304_829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58_897_971
        );
        assert_eq!(murmur2(b"abc"), 479_470_107);
    }

    #[test]
    fn sequences_wrap_as_kafkas() {
        assert_eq!(add_sequence(5, 3), 8);
        assert_eq!(add_sequence(i32::MAX, 1), 0);
        assert_eq!(add_sequence(i32::MAX - 1, 3), 1);
    }
}
