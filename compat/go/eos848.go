// The eos-848 check (compat/README.md): exactly-once consume-transform-produce
// with kgo.GroupTransactSession in a KIP-848 group (the broker assigns,
// ConsumerGroupHeartbeat), while members come and go: one member starts, a
// second and a third join mid-run, the second leaves. compat/run.sh runs it on
// a broker with one fetch-session slot, and a neighbour (a plain consumer of
// another topic with more partitions) starts fetching early in the run: a
// member whose fetch session is evicted or refused must be served when it
// starts over (franz-go's own TestTxnEtl hung in every KIP-848 variant when
// it was not), and a consumer must not take a live session's slot.
// Owns only the franz-go calls and the schedule; the checks on what came back
// live in compat/driver (verify.go).
package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"chronik/compat/driver"
	"github.com/twmb/franz-go/pkg/kgo"
)

// eosNeighbourAt: the share of the input committed when the neighbour starts.
const eosNeighbourAt = 0.1

// eosNeighbourParts: the neighbour's topic, more partitions than a member owns.
const eosNeighbourParts = 6

// eosPause: after each committed transaction, so that the members overlap.
const eosPause = 20 * time.Millisecond

// eosMembers: the members of the run, and when (the share of the input
// committed so far) each joins or leaves.
var eosMembers = []struct {
	name        string
	join, leave float64 // leave 1: stays to the end
}{
	{"first", 0, 1},
	{"second", 0.25, 0.75},
	{"third", 0.5, 1},
}

// checkEOS848 passes when every one of n committed input records is copied
// to the output exactly once (read_committed), and the group's committed
// offsets lie past the last input record and at most at the last stable
// offset, with the members joining and leaving as eosMembers says.
func checkEOS848(rep *driver.Reporter, a args) error {
	in, out, group := driver.Unique("compat-eos848-in"), driver.Unique("compat-eos848-out"), driver.Unique("compat-eos848")
	for _, t := range []string{in, out} {
		if err := createTopic(a, t, driver.TxnParts); err != nil {
			return err
		}
	}
	neighbourTopic := driver.Unique("compat-eos848-neighbour")
	if err := createTopic(a, neighbourTopic, eosNeighbourParts); err != nil {
		return err
	}
	producer, err := franz{a}.NewTxnProducer()
	if err != nil {
		return err
	}
	acks, errs, err := producer.ProduceInTxn(in, in, a.Messages, true)
	producer.Close()
	if err != nil {
		return err
	}
	if problems := driver.VerifyAcks(a.Messages, acks, errs); len(problems) > 0 {
		rep.Verdict("eos-848", driver.Prefixed("input transaction", problems), "")
		return nil
	}

	run := &eosRun{a: a, group: group, in: in, out: out, neighbourTopic: neighbourTopic, n: a.Messages,
		done: map[driver.Pos]bool{}}
	copied, aborts, memberErr := run.churn()
	if memberErr != nil {
		rep.Emit("eos-848", "fail", fmt.Sprintf("a member failed: %v", memberErr))
		return nil
	}
	if copied < a.Messages {
		rep.Emit("eos-848", "fail", fmt.Sprintf("the KIP-848 members committed %d of %d input records "+
			"within %s without progress (%d transactions aborted)", copied, a.Messages, a.Stage, aborts))
		return nil
	}
	outRecs, err := readIsolated(a, out, true, a.Messages)
	if err != nil {
		return err
	}
	problems := driver.Prefixed("output read_committed", driver.VerifyReadBack(driver.OutPrefix+in, a.Messages, outRecs, nil))
	committedIn, err := readIsolated(a, in, true, a.Messages)
	if err != nil {
		return err
	}
	committed, lso, err := groupOffsets(a, group, in)
	if err != nil {
		return err
	}
	problems = append(problems, driver.Prefixed("group offsets",
		driver.VerifyTxnOffsets(committed, driver.EndOf(driver.WithTag(in, committedIn)), lso, driver.TxnParts))...)
	rep.Verdict("eos-848", problems, fmt.Sprintf(
		"%d committed in; KIP-848 GroupTransactSession members %d (joining at 0, 1/4, 1/2 of the input, "+
			"the second leaving at 3/4; a neighbour consumer of %d partitions from 1/10) copied them in transactions of <=%d (%d aborted by rebalances), "+
			"output read_committed %d once each; group offsets %v, last stable offsets %v",
		a.Messages, len(eosMembers), eosNeighbourParts, driver.TxnBatch, aborts, len(outRecs), committed, lso))
	return nil
}

// eosRun: what the members of one run share.
type eosRun struct {
	a                              args
	group, in, out, neighbourTopic string
	n                              int

	mu       sync.Mutex
	done     map[driver.Pos]bool // input records copied in a committed transaction
	aborts   int
	progress time.Time
	failed   error
}

func (r *eosRun) share() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return float64(len(r.done)) / float64(r.n)
}

// over: every record copied, a member failed, or no progress for a stage.
func (r *eosRun) over() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.done) >= r.n || r.failed != nil || time.Since(r.progress) >= r.a.Stage
}

// churn runs the members on their schedule until the run is over.
func (r *eosRun) churn() (int, int, error) {
	r.progress = time.Now()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for r.share() < eosNeighbourAt && !r.over() {
			time.Sleep(20 * time.Millisecond)
		}
		r.neighbour()
	}()
	for _, m := range eosMembers {
		for r.share() < m.join && !r.over() {
			time.Sleep(20 * time.Millisecond)
		}
		if r.over() {
			break
		}
		driver.Logf("%s joins at %.0f%% of the input", m.name, 100*r.share())
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.member(m.name, m.leave); err != nil {
				r.mu.Lock()
				if r.failed == nil {
					r.failed = fmt.Errorf("%s: %w", m.name, err)
				}
				r.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.done), r.aborts, r.failed
}

// member: one GroupTransactSession in the KIP-848 group, copying until the
// run is over or the share of the input reaches leave.
func (r *eosRun) member(name string, leave float64) error {
	sess, err := kgo.NewGroupTransactSession(append([]kgo.Opt{kgo.SeedBrokers(r.a.Bootstrap),
		kgo.TransactionalID(driver.Unique("compat-eos848-" + name)), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ConsumerGroup(r.group), kgo.ConsumeTopics(r.in), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.RequireStableFetchOffsets(),
		kgo.DefaultProduceTopic(r.out), kgo.ServerSideBalancer(), kgo.ClientID(name)}, r.a.extra...)...)
	if err != nil {
		return err
	}
	defer func() {
		driver.Logf("%s leaves at %.0f%% of the input", name, 100*r.share())
		closeBounded(r.a, sess.Client())
	}()
	for !r.over() && (leave >= 1 || r.share() < leave) {
		recs, committed, err := copyBatch(r.a, sess)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			continue
		}
		r.mu.Lock()
		if committed {
			for _, rec := range recs {
				r.done[driver.Pos{P: rec.Partition, O: rec.Offset}] = true
			}
			r.progress = time.Now()
		} else {
			r.aborts++
		}
		r.mu.Unlock()
		time.Sleep(eosPause)
	}
	return nil
}

// neighbour: a plain consumer of another topic, fetching until the run is
// over; with one session slot, its larger session would evict a member's if
// a consumer could evict a live session.
func (r *eosRun) neighbour() {
	if r.over() {
		return
	}
	cl, err := newClient(r.a, kgo.ConsumeTopics(r.neighbourTopic), kgo.ClientID("neighbour"),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		driver.Logf("neighbour: %v", err)
		return
	}
	defer cl.Close()
	driver.Logf("the neighbour starts at %.0f%% of the input", 100*r.share())
	for !r.over() {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		cl.PollFetches(ctx)
		cancel()
	}
}
