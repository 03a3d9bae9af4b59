// The transactions check's calls (compat/README.md): KIP-98 transactions and
// exactly-once consume-transform-produce with franz-go's own EOS API,
// kgo.GroupTransactSession. Owns only the franz-go calls; the check's steps
// and verdict live in compat/driver (transactions.go).
package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"chronik/compat/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// NewTxnProducer: acks=all, 5 ms linger, a fresh transactional id.
func (f franz) NewTxnProducer() (driver.TxnProducer, error) {
	cl, err := newClient(f.a, kgo.TransactionalID(driver.Unique("compat-txn-producer")),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return nil, err
	}
	return txnProducer{f.a, cl}, nil
}

// txnProducer is a transactional franz-go client.
type txnProducer struct {
	a  args
	cl *kgo.Client
}

func (p txnProducer) ProduceInTxn(topic, tag string, n int, commit bool) (map[int]driver.Pos, []string, error) {
	end := kgo.TryAbort
	if commit {
		end = kgo.TryCommit
	}
	return produceInTxn(p.a, p.cl, topic, tag, n, end)
}

func (p txnProducer) Close() { p.cl.Close() }

// produceInTxn: BeginTransaction, n keyed messages of tag, Flush (every one
// acknowledged before the end), EndTransaction(end).
func produceInTxn(a args, cl *kgo.Client, topic, tag string, n int, end kgo.TransactionEndTry) (map[int]driver.Pos, []string, error) {
	if err := cl.BeginTransaction(); err != nil {
		return nil, nil, fmt.Errorf("BeginTransaction: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.Stage)
	defer cancel()
	acks, errs, err := produceAll(ctx, cl, topic, tag, n)
	if err != nil {
		return nil, nil, fmt.Errorf("flush: %w", err)
	}
	if err := cl.EndTransaction(ctx, end); err != nil {
		return nil, nil, fmt.Errorf("EndTransaction(commit=%v): %w", bool(end), err)
	}
	return acks, errs, nil
}

// TransformExactlyOnce runs a GroupTransactSession over in -> out: poll up
// to TxnBatch records, Begin, produce each value prefixed OutPrefix with its
// key, End(TryCommit) (which commits the group's offsets in the
// transaction). Stops once n distinct input records were committed, or after
// a stage timeout without progress. Returns how many were committed, and how
// many transactions the session aborted.
func (f franz) TransformExactlyOnce(group, in, out string, n int) (int, string, error) {
	a := f.a
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(a.Bootstrap),
		kgo.TransactionalID(driver.Unique("compat-txn-eos")), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RequireStableFetchOffsets(),
		kgo.DefaultProduceTopic(out))
	if err != nil {
		return 0, "", err
	}
	defer closeBounded(a, sess.Client())
	done := map[driver.Pos]bool{}
	aborts := 0
	progress := time.Now()
	for len(done) < n && time.Since(progress) < a.Stage {
		recs, committed, err := copyBatch(a, sess)
		if err != nil {
			return len(done), "", err
		}
		if len(recs) == 0 {
			continue
		}
		if !committed {
			aborts++
			driver.Logf("transaction of %d records aborted by the session (rebalance)", len(recs))
			continue
		}
		for _, r := range recs {
			done[driver.Pos{P: r.Partition, O: r.Offset}] = true
		}
		progress = time.Now()
	}
	driver.Logf("consume-transform-produce: %d input records committed, %d transactions aborted", len(done), aborts)
	return len(done), fmt.Sprintf("GroupTransactSession copied %d in transactions of <=%d (%d aborted by rebalances)",
		len(done), driver.TxnBatch, aborts), nil
}

// closeBounded leaves the group within a stage timeout (a plain Close waits
// for LeaveGroup as long as the broker takes), then closes.
func closeBounded(a args, cl *kgo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), a.Stage)
	defer cancel()
	if err := cl.LeaveGroupContext(ctx); err != nil {
		driver.Logf("leave group: %v", err)
	}
	cl.Close()
}

// copyBatch polls up to driver.TxnBatch records (half a second at most) and copies
// them to the output in one transaction (transformBatch): the records, and
// whether that transaction committed. No records: nothing was done.
func copyBatch(a args, sess *kgo.GroupTransactSession) ([]*kgo.Record, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	fs := sess.PollRecords(ctx, driver.TxnBatch)
	cancel()
	if ferr := fetchError(fs); ferr != nil {
		return nil, false, ferr
	}
	recs := fs.Records()
	if len(recs) == 0 {
		return nil, false, nil
	}
	committed, err := transformBatch(a, sess, recs)
	return recs, committed, err
}

// transformBatch: one transaction writing recs transformed; true if committed.
func transformBatch(a args, sess *kgo.GroupTransactSession, recs []*kgo.Record) (bool, error) {
	if err := sess.Begin(); err != nil {
		return false, fmt.Errorf("Begin: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.Stage)
	defer cancel()
	var mu sync.Mutex
	var perr error
	for _, r := range recs {
		v := append([]byte(driver.OutPrefix), r.Value...)
		sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: v}, func(_ *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil && perr == nil {
				perr = err
			}
		})
	}
	end := kgo.TryCommit
	if err := sess.Client().Flush(ctx); err != nil {
		return false, fmt.Errorf("flush: %w", err)
	}
	mu.Lock()
	if perr != nil {
		end = kgo.TryAbort
	}
	mu.Unlock()
	committed, err := sess.End(ctx, end)
	if err != nil {
		return false, fmt.Errorf("End(commit=%v): %w", bool(end), err)
	}
	if perr != nil {
		return false, fmt.Errorf("produce to the output: %w (transaction aborted)", perr)
	}
	return committed, nil
}

// readIsolated reads all driver.TxnParts partitions of topic from the start, outside
// any group, read_committed or read_uncommitted, until want records and then
// driver.SettleWindow longer (so extra records show up as extras).
func (f franz) ReadIsolated(topic string, committed bool, want int) ([]driver.Record, error) {
	return readIsolated(f.a, topic, committed, want)
}

func readIsolated(a args, topic string, committed bool, want int) ([]driver.Record, error) {
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < driver.TxnParts; p++ {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	level := kgo.ReadUncommitted()
	if committed {
		level = kgo.ReadCommitted()
	}
	cl, err := newClient(a, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(level))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var reached time.Time
	return pollUntil(cl, a.Stage, func(rs []driver.Record) bool {
		if len(rs) < want {
			return false
		}
		if reached.IsZero() {
			reached = time.Now()
		}
		return time.Since(reached) >= driver.SettleWindow
	}, 0)
}

// groupOffsets: the group's committed offsets on topic (OffsetFetch) and the
// topic's last stable offsets (ListOffsets, read_committed).
func (f franz) GroupOffsets(group, topic string) (map[int32]int64, map[int32]int64, error) {
	return groupOffsets(f.a, group, topic)
}

func groupOffsets(a args, group, topic string) (map[int32]int64, map[int32]int64, error) {
	cl, err := newClient(a)
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), a.Stage)
	defer cancel()
	fetched, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = fetched.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("OffsetFetch: %w", err)
	}
	listed, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("ListOffsets read_committed: %w", err)
	}
	committed, lso := map[int32]int64{}, map[int32]int64{}
	for p := int32(0); p < driver.TxnParts; p++ {
		if o, ok := fetched.Lookup(topic, p); ok && o.At >= 0 {
			committed[p] = o.At
		}
		if l, ok := listed.Lookup(topic, p); ok {
			lso[p] = l.Offset
		}
	}
	return committed, lso, nil
}
