// The steps of the transactions check (compat/README.md): KIP-98
// transactions and exactly-once consume-transform-produce, given a client's
// calls (TxnClient). Owns the order of the steps and the verdict; how a
// client commits its consumed offsets inside a transaction is the driver's.
package driver

import (
	"fmt"
	"time"
)

// The transactions check's topics, batches, transform and tags.
const (
	TxnParts     = 3
	TxnBatch     = 100    // records per consume-transform-produce transaction
	OutPrefix    = "out-" // the transform: each input value, prefixed
	AbortedTag   = "-aborted"
	SettleWindow = time.Second // read on this long after the count is reached, for extras
)

// TxnClient is what the transactions check needs of one client library.
type TxnClient interface {
	CreateTopic(topic string, partitions int32) error
	// NewTxnProducer is a transactional producer (acks=all) with a fresh
	// transactional id.
	NewTxnProducer() (TxnProducer, error)
	// TransformExactlyOnce copies in to out in transactions of up to
	// TxnBatch, each value prefixed OutPrefix, committing the group's
	// offsets in each, until n distinct input records were committed or a
	// stage timeout passed without progress: how many were, and how (the
	// client's API and its transactions, for the verdict's detail).
	TransformExactlyOnce(group, in, out string, n int) (int, string, error)
	// ReadIsolated reads all TxnParts partitions of topic from the start,
	// outside any group, read_committed or not, until want records and then
	// SettleWindow longer (so extra records show up as extras).
	ReadIsolated(topic string, committed bool, want int) ([]Record, error)
	// GroupOffsets are the group's committed offsets on topic (OffsetFetch)
	// and the topic's last stable offsets (ListOffsets, read_committed).
	GroupOffsets(group, topic string) (map[int32]int64, map[int32]int64, error)
}

// TxnProducer is one transactional producer.
type TxnProducer interface {
	// ProduceInTxn: begin, n keyed messages of tag to topic (every one
	// acknowledged before the end), then commit or abort.
	ProduceInTxn(topic, tag string, n int, commit bool) (map[int]Pos, []string, error)
	Close()
}

// Transactions passes when: n keyed messages committed in one transaction
// and n/2 more aborted in a second; the client's exactly-once
// consume-transform-produce copies the input to the output prefixed
// OutPrefix, committing the group's offsets in each transaction; then a
// read_committed read of the output has exactly the n transformed committed
// values once each, the input has n committed values read_committed and also
// the n/2 aborted ones read_uncommitted, and the group's committed offsets
// (OffsetFetch) lie past the last committed input record and at most at the
// last stable offset.
func Transactions(rep *Reporter, a Args, c TxnClient) error {
	in, out, group := Unique("compat-txn-in"), Unique("compat-txn-out"), Unique("compat-txn")
	for _, t := range []string{in, out} {
		if err := c.CreateTopic(t, TxnParts); err != nil {
			return err
		}
	}
	aborted := a.Messages / 2
	acks, problems, err := produceInputTxns(c, in, a.Messages, aborted)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		rep.Verdict("transactions", problems, "")
		return nil
	}
	copied, how, err := c.TransformExactlyOnce(group, in, out, a.Messages)
	if err != nil {
		return err
	}
	if copied < a.Messages {
		rep.Emit("transactions", "fail", fmt.Sprintf("consume-transform-produce committed %d of %d input "+
			"records within %s without progress (%s)", copied, a.Messages, a.Stage, how))
		return nil
	}

	outRecs, err := c.ReadIsolated(out, true, a.Messages)
	if err != nil {
		return err
	}
	problems = Prefixed("output read_committed", VerifyReadBack(OutPrefix+in, a.Messages, outRecs, nil))
	committedIn, err := c.ReadIsolated(in, true, a.Messages)
	if err != nil {
		return err
	}
	problems = append(problems, Prefixed("input read_committed",
		VerifyReadBack(in, a.Messages, committedIn, acks))...)
	allIn, err := c.ReadIsolated(in, false, a.Messages+aborted)
	if err != nil {
		return err
	}
	problems = append(problems, Prefixed("input read_uncommitted, aborted records",
		VerifyReadBack(in+AbortedTag, aborted, WithTag(in+AbortedTag, allIn), nil))...)

	committed, lso, err := c.GroupOffsets(group, in)
	if err != nil {
		return err
	}
	problems = append(problems, Prefixed("group offsets",
		VerifyTxnOffsets(committed, EndOf(WithTag(in, committedIn)), lso, TxnParts))...)
	rep.Verdict("transactions", problems, fmt.Sprintf(
		"%d committed + %d aborted in: read_committed %d, read_uncommitted %d; %s, "+
			"output read_committed %d once each; group offsets %v, last stable offsets %v",
		a.Messages, aborted, len(committedIn), len(allIn), how, len(outRecs), committed, lso))
	return nil
}

// Prefixed puts what before each problem.
func Prefixed(what string, problems []string) []string {
	for k, p := range problems {
		problems[k] = what + ": " + p
	}
	return problems
}

// produceInputTxns: one transactional producer commits n messages of tag
// topic, then aborts `aborted` messages of tag topic+AbortedTag. Returns the
// committed ones' positions, and problems with either transaction.
func produceInputTxns(c TxnClient, topic string, n, aborted int) (map[int]Pos, []string, error) {
	p, err := c.NewTxnProducer()
	if err != nil {
		return nil, nil, err
	}
	defer p.Close()
	acks, errs, err := p.ProduceInTxn(topic, topic, n, true)
	if err != nil {
		return nil, []string{"committed transaction: " + err.Error()}, nil
	}
	problems := Prefixed("committed transaction", VerifyAcks(n, acks, errs))
	abortAcks, errs, err := p.ProduceInTxn(topic, topic+AbortedTag, aborted, false)
	if err != nil {
		return nil, append(problems, "aborted transaction: "+err.Error()), nil
	}
	problems = append(problems, Prefixed("aborted transaction", VerifyAcks(aborted, abortAcks, errs))...)
	return acks, problems, nil
}
