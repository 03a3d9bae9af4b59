// The transactions check (compat/README.md): KIP-98 transactions and
// exactly-once consume-transform-produce with franz-go's own EOS API,
// kgo.GroupTransactSession. Owns only the franz-go calls; the checks on what
// came back live in verify.go.
package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	txnParts     = 3
	txnBatch     = 100    // records per consume-transform-produce transaction
	outPrefix    = "out-" // the transform: each input value, prefixed
	abortedTag   = "-aborted"
	settleWindow = time.Second // read on this long after the count is reached, for extras
)

// checkTransactions passes when: n keyed messages committed in one
// transaction and n/2 more aborted in a second; a GroupTransactSession
// (read_committed group consumer + transactional producer) copies the input
// to the output prefixed "out-", committing its offsets in each transaction;
// then a read_committed read of the output has exactly the n transformed
// committed values once each, the input has n committed values read_committed
// and also the n/2 aborted ones read_uncommitted, and the group's committed
// offsets (OffsetFetch) lie past the last committed input record and at most
// at the last stable offset.
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
	copied, aborts, err := transformExactlyOnce(a, group, in, out, a.messages)
	if err != nil {
		return err
	}
	if copied < a.messages {
		rep.emit("transactions", "fail", fmt.Sprintf("consume-transform-produce committed %d of %d input "+
			"records within %s without progress (%d transactions aborted)", copied, a.messages, a.stage, aborts))
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

	committed, lso, err := groupOffsets(a, group, in)
	if err != nil {
		return err
	}
	problems = append(problems, prefixed("group offsets",
		verifyTxnOffsets(committed, endOf(withTag(in, committedIn)), lso, txnParts))...)
	rep.verdict("transactions", problems, fmt.Sprintf(
		"%d committed + %d aborted in: read_committed %d, read_uncommitted %d; GroupTransactSession "+
			"copied %d in transactions of <=%d (%d aborted by rebalances), output read_committed %d once each; "+
			"group offsets %v, last stable offsets %v",
		a.messages, aborted, len(committedIn), len(allIn), copied, txnBatch, aborts, len(outRecs), committed, lso))
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
	cl, err := newClient(a, kgo.TransactionalID(unique("compat-txn-producer")),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	acks, errs, err := produceInTxn(a, cl, topic, topic, n, kgo.TryCommit)
	if err != nil {
		return nil, []string{"committed transaction: " + err.Error()}, nil
	}
	problems := prefixed("committed transaction", verifyAcks(n, acks, errs))
	abortAcks, errs, err := produceInTxn(a, cl, topic, topic+abortedTag, aborted, kgo.TryAbort)
	if err != nil {
		return nil, append(problems, "aborted transaction: "+err.Error()), nil
	}
	problems = append(problems, prefixed("aborted transaction", verifyAcks(aborted, abortAcks, errs))...)
	return acks, problems, nil
}

// produceInTxn: BeginTransaction, n keyed messages of tag, Flush (every one
// acknowledged before the end), EndTransaction(end).
func produceInTxn(a args, cl *kgo.Client, topic, tag string, n int, end kgo.TransactionEndTry) (map[int]pos, []string, error) {
	if err := cl.BeginTransaction(); err != nil {
		return nil, nil, fmt.Errorf("BeginTransaction: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.stage)
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

// transformExactlyOnce runs a GroupTransactSession over in -> out: poll up to
// txnBatch records, Begin, produce each value prefixed "out-" with its key,
// End(TryCommit) (which commits the group's offsets in the transaction).
// Stops once n distinct input records were committed, or after a stage
// timeout without progress. Returns how many were committed and how many
// transactions the session aborted.
func transformExactlyOnce(a args, group, in, out string, n int) (int, int, error) {
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(a.bootstrap),
		kgo.TransactionalID(unique("compat-txn-eos")), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RequireStableFetchOffsets(),
		kgo.DefaultProduceTopic(out))
	if err != nil {
		return 0, 0, err
	}
	defer closeBounded(a, sess.Client())
	done := map[pos]bool{}
	aborts := 0
	progress := time.Now()
	for len(done) < n && time.Since(progress) < a.stage {
		recs, committed, err := copyBatch(a, sess)
		if err != nil {
			return len(done), aborts, err
		}
		if len(recs) == 0 {
			continue
		}
		if !committed {
			aborts++
			logf("transaction of %d records aborted by the session (rebalance)", len(recs))
			continue
		}
		for _, r := range recs {
			done[pos{r.Partition, r.Offset}] = true
		}
		progress = time.Now()
	}
	logf("consume-transform-produce: %d input records committed, %d transactions aborted", len(done), aborts)
	return len(done), aborts, nil
}

// closeBounded leaves the group within a stage timeout (a plain Close waits
// for LeaveGroup as long as the broker takes), then closes.
func closeBounded(a args, cl *kgo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), a.stage)
	defer cancel()
	if err := cl.LeaveGroupContext(ctx); err != nil {
		logf("leave group: %v", err)
	}
	cl.Close()
}

// copyBatch polls up to txnBatch records (half a second at most) and copies
// them to the output in one transaction (transformBatch): the records, and
// whether that transaction committed. No records: nothing was done.
func copyBatch(a args, sess *kgo.GroupTransactSession) ([]*kgo.Record, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	fs := sess.PollRecords(ctx, txnBatch)
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
	ctx, cancel := context.WithTimeout(context.Background(), a.stage)
	defer cancel()
	var mu sync.Mutex
	var perr error
	for _, r := range recs {
		v := append([]byte(outPrefix), r.Value...)
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

// readIsolated reads all txnParts partitions of topic from the start, outside
// any group, read_committed or read_uncommitted, until want records and then
// settleWindow longer (so extra records show up as extras).
func readIsolated(a args, topic string, committed bool, want int) ([]record, error) {
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < txnParts; p++ {
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
	return pollUntil(cl, a.stage, func(rs []record) bool {
		if len(rs) < want {
			return false
		}
		if reached.IsZero() {
			reached = time.Now()
		}
		return time.Since(reached) >= settleWindow
	}, 0)
}

// groupOffsets: the group's committed offsets on topic (OffsetFetch) and the
// topic's last stable offsets (ListOffsets, read_committed).
func groupOffsets(a args, group, topic string) (map[int32]int64, map[int32]int64, error) {
	cl, err := newClient(a)
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), a.stage)
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
	for p := int32(0); p < txnParts; p++ {
		if o, ok := fetched.Lookup(topic, p); ok && o.At >= 0 {
			committed[p] = o.At
		}
		if l, ok := listed.Lookup(topic, p); ok {
			lso[p] = l.Offset
		}
	}
	return committed, lso, nil
}
