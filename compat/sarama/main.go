// Command sarama-driver: the compatibility driver for Go IBM/sarama
// (compat/README.md), the twin of compat/go (franz-go). One check per
// invocation against -bootstrap; prints its JSON result line(s) on stdout,
// logs (its own and sarama's) on stderr. Owns only the sarama calls;
// verification lives in verify.go. Build (from this directory):
//
//	GOTOOLCHAIN=local GOFLAGS=-buildvcs=false go build -o ../../target/compat/sarama-driver .
//
// Assignors: default = sarama's default (range), range, roundrobin, and
// cooperative-sticky, which sarama >= 1.61 runs with the cooperative
// (incremental) rebalance protocol.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

type args struct {
	bootstrap, check, assignor, phase, state string
	messages                                 int
	stage                                    time.Duration
}

func main() {
	var a args
	flag.StringVar(&a.bootstrap, "bootstrap", "", "host:port of the broker")
	flag.StringVar(&a.check, "check", "", "produce-fetch | group | commit-resume | idempotent | transactions | admin")
	flag.StringVar(&a.assignor, "assignor", "default", "default | range | roundrobin | cooperative-sticky")
	flag.StringVar(&a.phase, "phase", "", "commit-resume phase: a | b")
	flag.StringVar(&a.state, "state", "", "commit-resume state file")
	flag.IntVar(&a.messages, "messages", 1000, "messages per check")
	stage := flag.Float64("stage-timeout", 60, "seconds one wait may take")
	flag.Parse()
	a.stage = time.Duration(*stage * float64(time.Second))
	sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Ltime)

	rep := &reporter{client: "sarama", version: saramaVersion(), emitted: map[string]bool{}}
	checks := map[string]func(*reporter, args) error{
		"produce-fetch": checkProduceFetch, "group": checkGroup,
		"commit-resume": checkCommitResume, "idempotent": checkIdempotent,
		"transactions": checkTransactions, "admin": checkAdmin,
	}
	run, ok := checks[a.check]
	if !ok || a.bootstrap == "" {
		fmt.Fprintln(os.Stderr, "usage: sarama-driver -bootstrap HOST:PORT -check CHECK [...]")
		os.Exit(2)
	}
	if err := run(rep, a); err != nil {
		logf("driver error: %v", err)
		pending := []string{groupCheckName(a)}
		if a.check != "group" {
			pending = []string{a.check}
		}
		if a.check == "produce-fetch" {
			pending = []string{"produce", "fetch"}
		}
		for _, c := range pending {
			if !rep.emitted[c] {
				rep.emit(c, "fail", fmt.Sprintf("driver error: %v", err))
			}
		}
		os.Exit(1)
	}
}

func groupCheckName(a args) string {
	if a.assignor == "default" {
		return "group"
	}
	return "group:" + a.assignor
}

func saramaVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/IBM/sarama" {
				return d.Version
			}
		}
	}
	return "unknown"
}

// newConfig: sarama's defaults, except the protocol version (sarama's default
// is 2.8; the newest it knows enables everything, and each request is capped
// at what the broker's ApiVersions offers) and errors returned, not just logged.
func newConfig(a args) *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = "chronik-compat-sarama"
	c.Version = sarama.MaxVersion
	c.Admin.Timeout = a.stage
	c.Net.DialTimeout = min(c.Net.DialTimeout, a.stage)
	c.Consumer.Return.Errors = true
	return c
}

// bounded runs f, giving up (it keeps running) after the stage timeout.
func bounded(a args, what string, f func() error) error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	select {
	case err := <-ch:
		return err
	case <-time.After(a.stage):
		return fmt.Errorf("%s: no return within %s", what, a.stage)
	}
}

func closeQuietly(a args, what string, f func() error) {
	if err := bounded(a, what, f); err != nil {
		logf("%s: %v", what, err)
	}
}

func createTopic(a args, topic string, partitions int32) error {
	adm, err := sarama.NewClusterAdmin([]string{a.bootstrap}, newConfig(a))
	if err != nil {
		return err
	}
	defer closeQuietly(a, "close admin", adm.Close)
	return adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false)
}

// producerConfig: acks=all, 5 ms linger, successes returned. Sarama's default
// producer is not idempotent; idempotent and transactional ones also need
// one request in flight per broker.
func producerConfig(a args, idempotent bool, txnID string) *sarama.Config {
	c := newConfig(a)
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Flush.Frequency = 5 * time.Millisecond
	c.Producer.Return.Successes = true
	if idempotent || txnID != "" {
		c.Producer.Idempotent = true
		c.Net.MaxOpenRequests = 1
	}
	if txnID != "" {
		c.Producer.Transaction.ID = txnID
	}
	return c
}

// sendAll puts msgs on the producer's input and collects every result (or
// gives up after the stage timeout); msg.Metadata is the message's index.
func sendAll(a args, p sarama.AsyncProducer, msgs []*sarama.ProducerMessage) (map[int]pos, []string) {
	deadline := time.After(a.stage)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for _, m := range msgs {
			select {
			case p.Input() <- m:
			case <-stop:
				return
			}
		}
	}()
	acks := map[int]pos{}
	var errs []string
	for got := 0; got < len(msgs); got++ {
		select {
		case m := <-p.Successes():
			acks[m.Metadata.(int)] = pos{m.Partition, m.Offset}
		case e := <-p.Errors():
			errs = append(errs, fmt.Sprintf("i=%v: %v", e.Msg.Metadata, e.Err))
		case <-deadline:
			errs = append(errs, fmt.Sprintf("%d of %d without a result within %s", len(msgs)-got, len(msgs), a.stage))
			return acks, errs
		}
	}
	return acks, errs
}

func keyedMessages(topic, tag string, n int) []*sarama.ProducerMessage {
	msgs := make([]*sarama.ProducerMessage, n)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(messageKey(i)),
			Value: sarama.ByteEncoder(messageValue(tag, i)), Metadata: i}
	}
	return msgs
}

// produce sends n keyed messages (acks=all) and returns where each landed.
func produce(a args, topic string, n int, idempotent bool) (map[int]pos, []string, error) {
	p, err := sarama.NewAsyncProducer([]string{a.bootstrap}, producerConfig(a, idempotent, ""))
	if err != nil {
		return nil, nil, err
	}
	defer closeQuietly(a, "close producer", p.Close)
	acks, errs := sendAll(a, p, keyedMessages(topic, topic, n))
	return acks, errs, nil
}

// readParts reads partitions 0..parts-1 of topic from the oldest offset with
// a plain (group-less) consumer until done(records) or the stage timeout.
func readParts(a args, topic string, parts int32, level sarama.IsolationLevel, done func([]record) bool) ([]record, error) {
	c := newConfig(a)
	c.Consumer.IsolationLevel = level
	cons, err := sarama.NewConsumer([]string{a.bootstrap}, c)
	if err != nil {
		return nil, err
	}
	defer closeQuietly(a, "close consumer", cons.Close)
	msgs, errs := make(chan *sarama.ConsumerMessage), make(chan error)
	stop := make(chan struct{})
	defer close(stop)
	for p := int32(0); p < parts; p++ {
		pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, fmt.Errorf("ConsumePartition %s[%d]: %w", topic, p, err)
		}
		go forward(pc, msgs, errs, stop)
	}
	return collect(a, msgs, errs, done)
}

// forward fans one partition consumer into msgs/errs until stop.
func forward(pc sarama.PartitionConsumer, msgs chan<- *sarama.ConsumerMessage, errs chan<- error, stop <-chan struct{}) {
	defer pc.AsyncClose()
	for {
		select {
		case m := <-pc.Messages():
			select {
			case msgs <- m:
			case <-stop:
				return
			}
		case e := <-pc.Errors():
			select {
			case errs <- e:
			case <-stop:
				return
			}
		case <-stop:
			return
		}
	}
}

// collect takes records from msgs until done(records) or the stage timeout;
// the first error from errs ends it with that error.
func collect(a args, msgs <-chan *sarama.ConsumerMessage, errs <-chan error, done func([]record) bool) ([]record, error) {
	var recs []record
	deadline := time.Now().Add(a.stage)
	for !done(recs) && time.Now().Before(deadline) {
		select {
		case m := <-msgs:
			recs = append(recs, record{m.Partition, m.Offset, m.Value})
		case err := <-errs:
			return recs, fmt.Errorf("consume: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return recs, nil
}

func atLeast(n int) func([]record) bool { return func(rs []record) bool { return len(rs) >= n } }

func checkProduceFetch(rep *reporter, a args) error {
	topic := unique("compat-produce")
	if err := createTopic(a, topic, produceParts); err != nil {
		return err
	}
	acks, errs, err := produce(a, topic, a.messages, false)
	if err != nil {
		return err
	}
	rep.verdict("produce", verifyAcks(a.messages, acks, errs),
		fmt.Sprintf("%d acked (acks=all, client defaults: not idempotent)", a.messages))
	recs, err := readParts(a, topic, produceParts, sarama.ReadUncommitted, atLeast(a.messages))
	if err != nil {
		return err
	}
	rep.verdict("fetch", verifyReadBack(topic, a.messages, recs, acks),
		fmt.Sprintf("%d read back via ConsumePartition, per partition %s, order and offsets as acked",
			len(recs), partitionCounts(recs)))
	return nil
}

// checkAdmin: n/a, the admin APIs have their own row.
func checkAdmin(rep *reporter, _ args) error {
	rep.emit("admin", "n/a", "admin APIs are checked with Kafka's own CLI tools (the kafka-cli row)")
	return nil
}

func checkIdempotent(rep *reporter, a args) error {
	topic := unique("compat-idempotent")
	if err := createTopic(a, topic, produceParts); err != nil {
		return err
	}
	acks, errs, err := produce(a, topic, a.messages, true)
	if err != nil {
		return err
	}
	problems := verifyAcks(a.messages, acks, errs)
	if len(problems) == 0 {
		recs, err := readParts(a, topic, produceParts, sarama.ReadUncommitted, atLeast(a.messages))
		if err != nil {
			return err
		}
		problems = verifyReadBack(topic, a.messages, recs, acks)
	}
	rep.verdict("idempotent", problems, fmt.Sprintf("idempotent producer (Producer.Idempotent, "+
		"Net.MaxOpenRequests=1, acks=all): %d acked and read back once, in order", a.messages))
	return nil
}

// strategy: sarama's balance strategy for an assignor name; default = none
// configured, i.e. sarama's default (range). Cooperative-sticky runs
// sarama's cooperative rebalance protocol (incremental, one session).
func strategy(name string) []sarama.BalanceStrategy {
	switch name {
	case "range":
		return []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	case "roundrobin":
		return []sarama.BalanceStrategy{sarama.NewBalanceStrategyRoundRobin()}
	case "cooperative-sticky":
		return []sarama.BalanceStrategy{sarama.NewBalanceStrategyCooperativeSticky()}
	}
	return nil
}

// groupConfig: a group member's config; offsets only committed explicitly,
// from the oldest when the group has none.
func groupConfig(a args, assignor string) *sarama.Config {
	c := newConfig(a)
	if s := strategy(assignor); s != nil {
		c.Consumer.Group.Rebalance.GroupStrategies = s
	}
	c.Consumer.Offsets.AutoCommit.Enable = false
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	return c
}

// member is one consumer-group member running Consume in a loop on its own
// goroutine (an eager rebalance ends a session, a cooperative one updates
// it). Its assignment is the live session's Claims(); onMessage (optional)
// sees every message its claims deliver.
type member struct {
	cg        sarama.ConsumerGroup
	topic     string
	onMessage func(sarama.ConsumerGroupSession, *sarama.ConsumerMessage)
	mu        sync.Mutex
	sess      sarama.ConsumerGroupSession
	errs      chan error
	stop      context.CancelFunc
	done      chan struct{}
	closed    bool
}

func (m *member) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sess = s
	return nil
}

func (m *member) Cleanup(sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sess = nil
	return nil
}

func (m *member) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			if m.onMessage != nil {
				m.onMessage(s, msg)
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

func startMember(a args, c *sarama.Config, group, topic string,
	onMessage func(sarama.ConsumerGroupSession, *sarama.ConsumerMessage)) (*member, error) {
	cg, err := sarama.NewConsumerGroup([]string{a.bootstrap}, group, c)
	if err != nil {
		return nil, err
	}
	m := &member{cg: cg, topic: topic, onMessage: onMessage, errs: make(chan error, 16), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	go func() {
		for err := range cg.Errors() {
			logf("group %s: %v", group, err)
			select {
			case m.errs <- err:
			default:
			}
		}
	}()
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, m); err != nil {
				logf("Consume: %v", err)
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	return m, nil
}

// session: the live session, nil between eager sessions.
func (m *member) session() sarama.ConsumerGroupSession {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sess
}

func (m *member) partitions() []int32 {
	var ps []int32
	if s := m.session(); s != nil {
		ps = append(ps, s.Claims()[m.topic]...)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

// close ends the session and leaves the group (Close sends LeaveGroup),
// each bounded by the stage timeout.
func (m *member) close(a args) {
	if m.closed {
		return
	}
	m.closed = true
	m.stop()
	closeQuietly(a, "end session", func() error { <-m.done; return nil })
	closeQuietly(a, "close consumer group", m.cg.Close)
}

func checkGroup(rep *reporter, a args) error {
	topic, group := unique("compat-group"), unique("compat-group")
	if err := createTopic(a, topic, groupParts); err != nil {
		return err
	}
	var members []*member
	defer func() {
		for _, m := range members {
			m.close(a)
		}
	}()
	var stages, problems []string
	for _, st := range []struct {
		label  string
		per    int
		change string
	}{{"3 members", 2, "join3"}, {"1 left", 3, "leave"}, {"1 joined", 2, "join"}} {
		switch st.change {
		case "join3", "join":
			n := 1
			if st.change == "join3" {
				n = 3
			}
			for k := 0; k < n; k++ {
				m, err := startMember(a, groupConfig(a, a.assignor), group, topic, nil)
				if err != nil {
					return err
				}
				members = append(members, m)
			}
		case "leave":
			members[0].close(a)
			members = members[1:]
		}
		split := func() [][]int32 {
			out := make([][]int32, len(members))
			for k, m := range members {
				out[k] = m.partitions()
			}
			return out
		}
		t0 := time.Now()
		ok := waitStable(func() bool { return splitOK(split(), st.per, groupParts) }, a.stage, time.Second)
		stages = append(stages, fmt.Sprintf("%s: %s after %.1fs", st.label, describeSplit(split()),
			time.Since(t0).Seconds()))
		logf("%s", stages[len(stages)-1])
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: wanted %d each within %s, have %s",
				st.label, st.per, a.stage, describeSplit(split())))
			break
		}
	}
	detail := ""
	for k, s := range stages {
		if k > 0 {
			detail += "; "
		}
		detail += s
	}
	rep.verdict(groupCheckName(a), problems, detail)
	return nil
}

func checkCommitResume(rep *reporter, a args) error {
	if a.phase == "a" {
		return resumePhaseA(rep, a)
	}
	raw, err := os.ReadFile(a.state)
	if err != nil {
		return err
	}
	var s resumeState
	if err := json.Unmarshal(raw, &s); err != nil {
		return err
	}
	msgs := make(chan *sarama.ConsumerMessage)
	m, err := startMember(a, groupConfig(a, "default"), s.Group, s.Topic,
		func(sess sarama.ConsumerGroupSession, msg *sarama.ConsumerMessage) {
			select {
			case msgs <- msg:
			case <-sess.Context().Done():
			}
		})
	if err != nil {
		return err
	}
	recs, err := collect(a, msgs, m.errs, s.resumeDone)
	m.close(a)
	if err != nil {
		return err
	}
	rep.verdict("commit-resume", verifyResume(&s, recs),
		fmt.Sprintf("resumed after broker restart at %v, read the other %d", s.Committed, len(recs)))
	return nil
}

// resumePhaseA: a group member takes the first half of the messages (a
// prefix of each partition: its claims deliver in order) and marks each;
// then session.Commit() commits them synchronously, checked with OffsetFetch.
func resumePhaseA(rep *reporter, a args) error {
	topic, group := unique("compat-resume"), unique("compat-resume")
	if err := createTopic(a, topic, produceParts); err != nil {
		return err
	}
	acks, errs, err := produce(a, topic, a.messages, false)
	if err != nil {
		return err
	}
	if p := verifyAcks(a.messages, acks, errs); len(p) > 0 {
		rep.emit("commit-resume", "fail", fmt.Sprintf("phase a produce: %v", p))
		return nil
	}
	half := a.messages / 2
	var mu sync.Mutex
	var recs []record
	var sess sarama.ConsumerGroupSession
	reached := make(chan struct{})
	m, err := startMember(a, groupConfig(a, "default"), group, topic,
		func(s sarama.ConsumerGroupSession, msg *sarama.ConsumerMessage) {
			mu.Lock()
			defer mu.Unlock()
			if len(recs) >= half {
				return // taken past the half, never marked
			}
			recs = append(recs, record{msg.Partition, msg.Offset, msg.Value})
			s.MarkOffset(msg.Topic, msg.Partition, msg.Offset+1, "")
			if len(recs) == half {
				sess = s
				close(reached)
			}
		})
	if err != nil {
		return err
	}
	defer m.close(a)
	select {
	case <-reached:
	case <-time.After(a.stage):
		mu.Lock()
		defer mu.Unlock()
		rep.emit("commit-resume", "fail", fmt.Sprintf("phase a consumed %d of %d within %s", len(recs), half, a.stage))
		return nil
	}
	drainErrors(m.errs)
	if err := bounded(a, "session.Commit", func() error { sess.Commit(); return nil }); err != nil {
		return err
	}
	select {
	case err := <-m.errs:
		rep.emit("commit-resume", "fail", "phase a commit: "+err.Error())
		return nil
	default:
	}
	s := resumeState{Topic: topic, Group: group, Committed: map[int32]int64{}, EndOffsets: map[int32]int64{}}
	for _, r := range recs {
		s.Committed[r.p] = r.o + 1
		s.Consumed = append(s.Consumed, [2]int64{int64(r.p), r.o})
	}
	for _, at := range acks {
		if at.o+1 > s.EndOffsets[at.p] {
			s.EndOffsets[at.p] = at.o + 1
		}
	}
	fetched, err := fetchOffsets(a, group, topic, produceParts)
	if err != nil {
		return err
	}
	for p, o := range s.Committed {
		if fetched[p] != o {
			rep.emit("commit-resume", "fail", fmt.Sprintf("committed %v, OffsetFetch says %v", s.Committed, fetched))
			return nil
		}
	}
	raw, _ := json.Marshal(s)
	if err := os.WriteFile(a.state, raw, 0o644); err != nil {
		return err
	}
	logf("phase a: consumed %d, committed %v", len(recs), s.Committed)
	return nil
}

// drainErrors drops (they are logged) the errors a member reported so far.
func drainErrors(errs chan error) {
	for {
		select {
		case <-errs:
		default:
			return
		}
	}
}

// fetchOffsets: the group's committed offsets on partitions 0..parts-1 of
// topic (OffsetFetch through the ClusterAdmin); none committed = absent.
func fetchOffsets(a args, group, topic string, parts int32) (map[int32]int64, error) {
	adm, err := sarama.NewClusterAdmin([]string{a.bootstrap}, newConfig(a))
	if err != nil {
		return nil, err
	}
	defer closeQuietly(a, "close admin", adm.Close)
	ps := make([]int32, parts)
	for p := range ps {
		ps[p] = int32(p)
	}
	resp, err := adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: ps})
	if err != nil {
		return nil, fmt.Errorf("OffsetFetch: %w", err)
	}
	if !errors.Is(resp.Err, sarama.ErrNoError) {
		return nil, fmt.Errorf("OffsetFetch: %w", resp.Err)
	}
	out := map[int32]int64{}
	for _, p := range ps {
		b := resp.GetBlock(topic, p)
		if b == nil {
			continue
		}
		if !errors.Is(b.Err, sarama.ErrNoError) {
			return nil, fmt.Errorf("OffsetFetch %s[%d]: %w", topic, p, b.Err)
		}
		if b.Offset >= 0 {
			out[p] = b.Offset
		}
	}
	return out, nil
}
