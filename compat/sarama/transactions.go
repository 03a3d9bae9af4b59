// The transactions check's calls (compat/README.md): KIP-98 transactions and
// exactly-once consume-transform-produce with sarama's transactional
// AsyncProducer (BeginTxn / AddOffsetsToTxnWithGroupMetadata / CommitTxn)
// and a read_committed ConsumerGroup, the twin of compat/go/transactions.go.
// Owns only the sarama calls; the check's steps and verdict live in
// compat/driver (transactions.go).
package main

import (
	"errors"
	"fmt"
	"time"

	"chronik/compat/driver"
	"github.com/IBM/sarama"
)

// NewTxnProducer: acks=all, 5 ms linger, a fresh transactional id.
func (c client) NewTxnProducer() (driver.TxnProducer, error) {
	p, err := sarama.NewAsyncProducer([]string{c.a.Bootstrap},
		c.producerConfig(true, driver.Unique("compat-txn-producer")))
	if err != nil {
		return nil, err
	}
	return txnProducer{c, p}, nil
}

// txnProducer is a transactional sarama AsyncProducer.
type txnProducer struct {
	c client
	p sarama.AsyncProducer
}

// ProduceInTxn: BeginTxn, the messages (every one acknowledged before the
// end), CommitTxn or AbortTxn.
func (t txnProducer) ProduceInTxn(topic, tag string, n int, commit bool) (map[int]driver.Pos, []string, error) {
	if err := t.p.BeginTxn(); err != nil {
		return nil, nil, fmt.Errorf("BeginTxn: %w", err)
	}
	acks, errs := t.c.sendAll(t.p, keyedMessages(topic, tag, n))
	if err := t.c.endTxn(t.p, commit); err != nil {
		return nil, nil, err
	}
	return acks, errs, nil
}

func (t txnProducer) Close() { t.c.closeQuietly("close producer", t.p.Close) }

func (c client) endTxn(p sarama.AsyncProducer, commit bool) error {
	end, name := p.AbortTxn, "AbortTxn"
	if commit {
		end, name = p.CommitTxn, "CommitTxn"
	}
	if err := c.bounded(name, end); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// consumed is one input record and the group session that delivered it.
type consumed struct {
	sess sarama.ConsumerGroupSession
	msg  *sarama.ConsumerMessage
}

// transformExactlyOnce: a read_committed group member on in hands its
// records to this loop, which takes up to driver.TxnBatch at a time and in one
// transaction produces each value prefixed "out-" (same key) to out and adds
// the member's next offsets with its group metadata (generation, member id).
// Stops once n distinct input records were committed, or after a stage
// timeout without progress. A failed transaction is aborted and ends the
// check (a lone member sees no rebalance that would explain it). Returns how
// many input records were committed, in how many transactions.
func (c client) TransformExactlyOnce(group, in, out string, n int) (int, string, error) {
	p, err := sarama.NewAsyncProducer([]string{c.a.Bootstrap}, c.producerConfig(true, driver.Unique("compat-txn-eos")))
	if err != nil {
		return 0, "", err
	}
	defer c.closeQuietly("close producer", p.Close)
	conf := c.groupConfig("default")
	conf.Consumer.IsolationLevel = sarama.ReadCommitted
	recs := make(chan consumed)
	m, err := c.startMember(conf, group, in, func(s sarama.ConsumerGroupSession, msg *sarama.ConsumerMessage) {
		select {
		case recs <- consumed{s, msg}:
		case <-s.Context().Done():
		}
	})
	if err != nil {
		return 0, "", err
	}
	defer m.Close()
	done := map[driver.Pos]bool{}
	txns := 0
	progress := time.Now()
	for len(done) < n && time.Since(progress) < c.a.Stage {
		batch := takeBatch(recs, m.errs)
		if len(batch) == 0 {
			continue
		}
		if err := c.transformBatch(p, group, out, batch); err != nil {
			return len(done), "", err
		}
		txns++
		for _, r := range batch {
			done[driver.Pos{P: r.msg.Partition, O: r.msg.Offset}] = true
		}
		progress = time.Now()
	}
	driver.Logf("consume-transform-produce: %d input records committed in %d transactions", len(done), txns)
	return len(done), fmt.Sprintf("read_committed ConsumerGroup + transactional producer copied %d in %d "+
		"transactions of <=%d (AddOffsetsToTxnWithGroupMetadata)", len(done), txns, driver.TxnBatch), nil
}

// takeBatch: the records the member hands over within 500 ms, up to driver.TxnBatch.
func takeBatch(recs <-chan consumed, errs <-chan error) []consumed {
	var batch []consumed
	timeout := time.After(500 * time.Millisecond)
	for len(batch) < driver.TxnBatch {
		select {
		case r := <-recs:
			batch = append(batch, r)
			if len(batch) == 1 { // once one came, only wait briefly for more
				timeout = time.After(50 * time.Millisecond)
			}
		case err := <-errs:
			driver.Logf("group member: %v", err)
		case <-timeout:
			return batch
		}
	}
	return batch
}

// transformBatch: one transaction writing batch transformed to out, with the
// group's offsets past each partition's last record; committed, or aborted
// and an error.
func (c client) transformBatch(p sarama.AsyncProducer, group, out string, batch []consumed) error {
	if err := p.BeginTxn(); err != nil {
		return fmt.Errorf("BeginTxn: %w", err)
	}
	msgs := make([]*sarama.ProducerMessage, len(batch))
	next := map[int32]int64{}
	for k, r := range batch {
		v := append([]byte(driver.OutPrefix), r.msg.Value...)
		msgs[k] = &sarama.ProducerMessage{Topic: out, Key: sarama.ByteEncoder(r.msg.Key),
			Value: sarama.ByteEncoder(v), Metadata: k}
		if r.msg.Offset+1 > next[r.msg.Partition] {
			next[r.msg.Partition] = r.msg.Offset + 1
		}
	}
	acks, errs := c.sendAll(p, msgs)
	var failure error
	if len(errs) > 0 || len(acks) != len(msgs) {
		failure = fmt.Errorf("produce to the output: %d of %d acked, errors %v", len(acks), len(msgs), errs)
	} else {
		offsets := map[string][]*sarama.PartitionOffsetMetadata{}
		topic := batch[0].msg.Topic
		for part, o := range next {
			offsets[topic] = append(offsets[topic], &sarama.PartitionOffsetMetadata{Partition: part, Offset: o})
		}
		// the session of the batch's last record: its generation is the newest
		meta := sarama.NewConsumerGroupMetadataFromSession(batch[len(batch)-1].sess, group, nil)
		if err := p.AddOffsetsToTxnWithGroupMetadata(offsets, meta); err != nil {
			failure = fmt.Errorf("AddOffsetsToTxnWithGroupMetadata: %w", err)
		}
	}
	if failure == nil {
		return c.endTxn(p, true)
	}
	if err := c.endTxn(p, false); err != nil {
		return errors.Join(failure, err)
	}
	return fmt.Errorf("%w (transaction aborted)", failure)
}

// readIsolated reads all driver.TxnParts partitions of topic from the start, outside
// any group, read_committed or read_uncommitted, until want records and then
// driver.SettleWindow longer (so extra records show up as extras).
func (c client) ReadIsolated(topic string, committed bool, want int) ([]driver.Record, error) {
	level := sarama.ReadUncommitted
	if committed {
		level = sarama.ReadCommitted
	}
	var reached time.Time
	return c.readParts(topic, driver.TxnParts, level, func(rs []driver.Record) bool {
		if len(rs) < want {
			return false
		}
		if reached.IsZero() {
			reached = time.Now()
		}
		return time.Since(reached) >= driver.SettleWindow
	})
}

// GroupOffsets: the group's committed offsets (CommittedOffsets) and the
// last stable offsets.
func (c client) GroupOffsets(group, topic string) (map[int32]int64, map[int32]int64, error) {
	committed, err := c.CommittedOffsets(group, topic, driver.TxnParts)
	if err != nil {
		return nil, nil, err
	}
	lso, err := c.lastStableOffsets(topic)
	return committed, lso, err
}

// lastStableOffsets: ListOffsets(latest, read_committed) for each partition
// of topic, asked of its leader.
func (c client) lastStableOffsets(topic string) (map[int32]int64, error) {
	conf := c.newConfig()
	cl, err := sarama.NewClient([]string{c.a.Bootstrap}, conf)
	if err != nil {
		return nil, err
	}
	defer c.closeQuietly("close client", cl.Close)
	lso := map[int32]int64{}
	for p := int32(0); p < driver.TxnParts; p++ {
		leader, err := cl.Leader(topic, p)
		if err != nil {
			return nil, err
		}
		req := sarama.NewOffsetRequest(conf.Version)
		req.IsolationLevel = sarama.ReadCommitted
		req.AddBlock(topic, p, sarama.OffsetNewest, 1)
		resp, err := leader.GetAvailableOffsets(req)
		if err != nil {
			return nil, fmt.Errorf("ListOffsets read_committed: %w", err)
		}
		b := resp.GetBlock(topic, p)
		if b == nil || !errors.Is(b.Err, sarama.ErrNoError) {
			return nil, fmt.Errorf("ListOffsets read_committed %s[%d]: %+v", topic, p, b)
		}
		lso[p] = b.Offset
	}
	return lso, nil
}
