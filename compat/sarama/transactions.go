// The transactions check (compat/README.md): KIP-98 transactions and
// exactly-once consume-transform-produce with sarama's transactional
// AsyncProducer (BeginTxn / AddOffsetsToTxnWithGroupMetadata / CommitTxn)
// and a read_committed ConsumerGroup, the twin of compat/go/transactions.go.
// Owns only the sarama calls; the checks on what came back live in verify.go.
package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

const (
	txnParts     = 3
	txnBatch     = 100    // records per consume-transform-produce transaction
	outPrefix    = "out-" // the transform: each input value, prefixed
	abortedTag   = "-aborted"
	settleWindow = time.Second // read on this long after the count is reached, for extras
)

// checkTransactions passes when: n keyed messages committed in one
// transaction and n/2 more aborted in a second; a read_committed group member
// and a transactional producer copy the input to the output prefixed "out-",
// committing the member's offsets (with its generation and member id) in each
// transaction; then a read_committed read of the output has exactly the n
// transformed committed values once each, the input has n committed values
// read_committed and also the n/2 aborted ones read_uncommitted, and the
// group's committed offsets (OffsetFetch) lie past the last committed input
// record and at most at the last stable offset.
func checkTransactions(rep *reporter, a args) error {
	in, out, group := unique("compat-txn-in"), unique("compat-txn-out"), unique("compat-txn")
	for _, t := range []string{in, out} {
		if err := createTopic(a, t, txnParts); err != nil {
			return err
		}
	}
	aborted := a.messages / 2
	acks, problems, err := produceInputTxns(a, in, a.messages, aborted)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		rep.verdict("transactions", problems, "")
		return nil
	}
	copied, txns, err := transformExactlyOnce(a, group, in, out, a.messages)
	if err != nil {
		return err
	}
	if copied < a.messages {
		rep.emit("transactions", "fail", fmt.Sprintf("consume-transform-produce committed %d of %d input "+
			"records (%d transactions) within %s without progress", copied, a.messages, txns, a.stage))
		return nil
	}

	outRecs, err := readIsolated(a, out, true, a.messages)
	if err != nil {
		return err
	}
	problems = prefixed("output read_committed", verifyReadBack(outPrefix+in, a.messages, outRecs, nil))
	committedIn, err := readIsolated(a, in, true, a.messages)
	if err != nil {
		return err
	}
	problems = append(problems, prefixed("input read_committed",
		verifyReadBack(in, a.messages, committedIn, acks))...)
	allIn, err := readIsolated(a, in, false, a.messages+aborted)
	if err != nil {
		return err
	}
	problems = append(problems, prefixed("input read_uncommitted, aborted records",
		verifyReadBack(in+abortedTag, aborted, withTag(in+abortedTag, allIn), nil))...)

	committed, err := fetchOffsets(a, group, in, txnParts)
	if err != nil {
		return err
	}
	lso, err := lastStableOffsets(a, in)
	if err != nil {
		return err
	}
	problems = append(problems, prefixed("group offsets",
		verifyTxnOffsets(committed, endOf(withTag(in, committedIn)), lso, txnParts))...)
	rep.verdict("transactions", problems, fmt.Sprintf(
		"%d committed + %d aborted in: read_committed %d, read_uncommitted %d; read_committed ConsumerGroup + "+
			"transactional producer copied %d in %d transactions of <=%d (AddOffsetsToTxnWithGroupMetadata), "+
			"output read_committed %d once each; group offsets %v, last stable offsets %v",
		a.messages, aborted, len(committedIn), len(allIn), copied, txns, txnBatch, len(outRecs), committed, lso))
	return nil
}

func prefixed(what string, problems []string) []string {
	for k, p := range problems {
		problems[k] = what + ": " + p
	}
	return problems
}

// produceInputTxns: one transactional producer commits n messages of tag
// topic, then aborts `aborted` messages of tag topic+"-aborted". Returns the
// committed ones' positions, and problems with either transaction.
func produceInputTxns(a args, topic string, n, aborted int) (map[int]pos, []string, error) {
	p, err := sarama.NewAsyncProducer([]string{a.bootstrap},
		producerConfig(a, true, unique("compat-txn-producer")))
	if err != nil {
		return nil, nil, err
	}
	defer closeQuietly(a, "close producer", p.Close)
	acks, errs, err := produceInTxn(a, p, keyedMessages(topic, topic, n), true)
	if err != nil {
		return nil, []string{"committed transaction: " + err.Error()}, nil
	}
	problems := prefixed("committed transaction", verifyAcks(n, acks, errs))
	abortAcks, errs, err := produceInTxn(a, p, keyedMessages(topic, topic+abortedTag, aborted), false)
	if err != nil {
		return nil, append(problems, "aborted transaction: "+err.Error()), nil
	}
	problems = append(problems, prefixed("aborted transaction", verifyAcks(aborted, abortAcks, errs))...)
	return acks, problems, nil
}

// produceInTxn: BeginTxn, msgs (every one acknowledged before the end),
// CommitTxn or AbortTxn.
func produceInTxn(a args, p sarama.AsyncProducer, msgs []*sarama.ProducerMessage, commit bool) (map[int]pos, []string, error) {
	if err := p.BeginTxn(); err != nil {
		return nil, nil, fmt.Errorf("BeginTxn: %w", err)
	}
	acks, errs := sendAll(a, p, msgs)
	if err := endTxn(a, p, commit); err != nil {
		return nil, nil, err
	}
	return acks, errs, nil
}

func endTxn(a args, p sarama.AsyncProducer, commit bool) error {
	end, name := p.AbortTxn, "AbortTxn"
	if commit {
		end, name = p.CommitTxn, "CommitTxn"
	}
	if err := bounded(a, name, end); err != nil {
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
// records to this loop, which takes up to txnBatch at a time and in one
// transaction produces each value prefixed "out-" (same key) to out and adds
// the member's next offsets with its group metadata (generation, member id).
// Stops once n distinct input records were committed, or after a stage
// timeout without progress. A failed transaction is aborted and ends the
// check (a lone member sees no rebalance that would explain it). Returns how
// many input records were committed, in how many transactions.
func transformExactlyOnce(a args, group, in, out string, n int) (int, int, error) {
	p, err := sarama.NewAsyncProducer([]string{a.bootstrap}, producerConfig(a, true, unique("compat-txn-eos")))
	if err != nil {
		return 0, 0, err
	}
	defer closeQuietly(a, "close producer", p.Close)
	c := groupConfig(a, "default")
	c.Consumer.IsolationLevel = sarama.ReadCommitted
	recs := make(chan consumed)
	m, err := startMember(a, c, group, in, func(s sarama.ConsumerGroupSession, msg *sarama.ConsumerMessage) {
		select {
		case recs <- consumed{s, msg}:
		case <-s.Context().Done():
		}
	})
	if err != nil {
		return 0, 0, err
	}
	defer m.close(a)
	done := map[pos]bool{}
	txns := 0
	progress := time.Now()
	for len(done) < n && time.Since(progress) < a.stage {
		batch := takeBatch(recs, m.errs)
		if len(batch) == 0 {
			continue
		}
		if err := transformBatch(a, p, group, out, batch); err != nil {
			return len(done), txns, err
		}
		txns++
		for _, r := range batch {
			done[pos{r.msg.Partition, r.msg.Offset}] = true
		}
		progress = time.Now()
	}
	logf("consume-transform-produce: %d input records committed in %d transactions", len(done), txns)
	return len(done), txns, nil
}

// takeBatch: the records the member hands over within 500 ms, up to txnBatch.
func takeBatch(recs <-chan consumed, errs <-chan error) []consumed {
	var batch []consumed
	timeout := time.After(500 * time.Millisecond)
	for len(batch) < txnBatch {
		select {
		case r := <-recs:
			batch = append(batch, r)
			if len(batch) == 1 { // once one came, only wait briefly for more
				timeout = time.After(50 * time.Millisecond)
			}
		case err := <-errs:
			logf("group member: %v", err)
		case <-timeout:
			return batch
		}
	}
	return batch
}

// transformBatch: one transaction writing batch transformed to out, with the
// group's offsets past each partition's last record; committed, or aborted
// and an error.
func transformBatch(a args, p sarama.AsyncProducer, group, out string, batch []consumed) error {
	if err := p.BeginTxn(); err != nil {
		return fmt.Errorf("BeginTxn: %w", err)
	}
	msgs := make([]*sarama.ProducerMessage, len(batch))
	next := map[int32]int64{}
	for k, r := range batch {
		v := append([]byte(outPrefix), r.msg.Value...)
		msgs[k] = &sarama.ProducerMessage{Topic: out, Key: sarama.ByteEncoder(r.msg.Key),
			Value: sarama.ByteEncoder(v), Metadata: k}
		if r.msg.Offset+1 > next[r.msg.Partition] {
			next[r.msg.Partition] = r.msg.Offset + 1
		}
	}
	acks, errs := sendAll(a, p, msgs)
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
		return endTxn(a, p, true)
	}
	if err := endTxn(a, p, false); err != nil {
		return errors.Join(failure, err)
	}
	return fmt.Errorf("%w (transaction aborted)", failure)
}

// readIsolated reads all txnParts partitions of topic from the start, outside
// any group, read_committed or read_uncommitted, until want records and then
// settleWindow longer (so extra records show up as extras).
func readIsolated(a args, topic string, committed bool, want int) ([]record, error) {
	level := sarama.ReadUncommitted
	if committed {
		level = sarama.ReadCommitted
	}
	var reached time.Time
	return readParts(a, topic, txnParts, level, func(rs []record) bool {
		if len(rs) < want {
			return false
		}
		if reached.IsZero() {
			reached = time.Now()
		}
		return time.Since(reached) >= settleWindow
	})
}

// lastStableOffsets: ListOffsets(latest, read_committed) for each partition
// of topic, asked of its leader.
func lastStableOffsets(a args, topic string) (map[int32]int64, error) {
	c := newConfig(a)
	cl, err := sarama.NewClient([]string{a.bootstrap}, c)
	if err != nil {
		return nil, err
	}
	defer closeQuietly(a, "close client", cl.Close)
	lso := map[int32]int64{}
	for p := int32(0); p < txnParts; p++ {
		leader, err := cl.Leader(topic, p)
		if err != nil {
			return nil, err
		}
		req := sarama.NewOffsetRequest(c.Version)
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
