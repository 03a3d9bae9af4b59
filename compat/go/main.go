// Command franz-go-driver: the compatibility driver for Go franz-go
// (compat/README.md). One check per invocation against -bootstrap; prints its
// JSON result line(s) on stdout, logs on stderr. Owns only the franz-go calls;
// verification lives in verify.go, the transactions and security checks in
// transactions.go and security.go.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type args struct {
	bootstrap, check, assignor, phase, state string
	messages                                 int
	stage                                    time.Duration
	sec                                      securityArgs
	extra                                    []kgo.Opt // every client's options (security: TLS, SASL)
}

func main() {
	var a args
	flag.StringVar(&a.bootstrap, "bootstrap", "", "host:port of the broker")
	flag.StringVar(&a.check, "check", "", "produce-fetch | group | commit-resume | idempotent | transactions | eos-848 | admin | security")
	flag.StringVar(&a.assignor, "assignor", "default", "default | range | roundrobin | cooperative-sticky")
	flag.StringVar(&a.phase, "phase", "", "commit-resume phase: a | b")
	flag.StringVar(&a.state, "state", "", "commit-resume state file")
	flag.IntVar(&a.messages, "messages", 1000, "messages per check")
	stage := flag.Float64("stage-timeout", 60, "seconds one wait may take")
	flag.StringVar(&a.sec.saslBootstrap, "sasl-bootstrap", "", "security: host:port of the SASL_SSL listener")
	flag.StringVar(&a.sec.sslBootstrap, "ssl-bootstrap", "", "security: host:port of the SSL listener")
	flag.StringVar(&a.sec.ca, "ssl-ca", "", "security: PEM CA file")
	flag.StringVar(&a.sec.cert, "ssl-cert", "", "security: PEM client certificate")
	flag.StringVar(&a.sec.key, "ssl-key", "", "security: PEM key of -ssl-cert")
	flag.StringVar(&a.sec.username, "sasl-username", "", "security: SCRAM user")
	flag.StringVar(&a.sec.password, "sasl-password", "", "security: its password")
	flag.StringVar(&a.sec.topicPrefix, "topic-prefix", "", "security: topic prefix both principals may use")
	flag.StringVar(&a.sec.groupPrefix, "group-prefix", "", "security: group prefix both principals may use")
	flag.StringVar(&a.sec.deniedTopic, "denied-topic", "", "security: a topic neither principal has an ACL on")
	flag.Parse()
	a.stage = time.Duration(*stage * float64(time.Second))

	rep := &reporter{client: "franz-go", version: franzVersion(), emitted: map[string]bool{}}
	checks := map[string]func(*reporter, args) error{
		"produce-fetch": checkProduceFetch, "group": checkGroup,
		"commit-resume": checkCommitResume, "idempotent": checkIdempotent,
		"transactions": checkTransactions, "eos-848": checkEOS848, "admin": checkAdmin,
		"security": checkSecurity,
	}
	run, ok := checks[a.check]
	if !ok || a.bootstrap == "" {
		fmt.Fprintln(os.Stderr, "usage: franz-go-driver -bootstrap HOST:PORT -check CHECK [...]")
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

func franzVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/twmb/franz-go" {
				return d.Version
			}
		}
	}
	return "unknown"
}

func newClient(a args, opts ...kgo.Opt) (*kgo.Client, error) {
	base := append([]kgo.Opt{kgo.SeedBrokers(a.bootstrap)}, a.extra...)
	return kgo.NewClient(append(base, opts...)...)
}

func createTopic(a args, topic string, partitions int32) error {
	cl, err := newClient(a)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), a.stage)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Error()
	}
	return err
}

// produce sends n keyed messages with the client's defaults (acks=all,
// idempotent) and returns where each landed.
func produce(a args, topic string, n int) (map[int]pos, []string, error) {
	cl, err := newClient(a, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), a.stage)
	defer cancel()
	acks, errs, err := produceAll(ctx, cl, topic, topic, n)
	if err != nil {
		errs = append(errs, "flush: "+err.Error())
	}
	return acks, errs, nil
}

// produceAll sends n keyed messages of tag (messageKey, messageValue) to
// topic and flushes: the acks (i -> partition/offset), the delivery errors
// and Flush's error.
func produceAll(ctx context.Context, cl *kgo.Client, topic, tag string, n int) (map[int]pos, []string, error) {
	var mu sync.Mutex
	acks := map[int]pos{}
	var errs []string
	for i := 0; i < n; i++ {
		i := i
		rec := &kgo.Record{Topic: topic, Key: messageKey(i), Value: messageValue(tag, i)}
		cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Sprintf("i=%d: %v", i, err))
				return
			}
			acks[i] = pos{r.Partition, r.Offset}
		})
	}
	err := cl.Flush(ctx)
	mu.Lock()
	defer mu.Unlock()
	return acks, errs, err
}

// readAssigned reads partitions 0..parts-1 from the start until n records.
func readAssigned(a args, topic string, parts int32, n int) ([]record, error) {
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < parts; p++ {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := newClient(a, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return pollUntil(cl, a.stage, func(rs []record) bool { return len(rs) >= n }, 0)
}

// fetchError is the first error of a poll's fetches, the poll's own
// deadline (no records in time) aside; nil if none.
func fetchError(fs kgo.Fetches) error {
	var ferr error
	fs.EachError(func(t string, p int32, err error) {
		if err != context.DeadlineExceeded && ferr == nil {
			ferr = fmt.Errorf("fetch %s[%d]: %w", t, p, err)
		}
	})
	return ferr
}

// pollUntil polls until done(records) or timeout; max > 0 caps the records taken.
func pollUntil(cl *kgo.Client, timeout time.Duration, done func([]record) bool, max int) ([]record, error) {
	var recs []record
	deadline := time.Now().Add(timeout)
	for !done(recs) && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		want := -1
		if max > 0 {
			want = max - len(recs)
		}
		fs := cl.PollRecords(ctx, want)
		cancel()
		if ferr := fetchError(fs); ferr != nil {
			return recs, ferr
		}
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, record{r.Partition, r.Offset, r.Value}) })
	}
	return recs, nil
}

func checkProduceFetch(rep *reporter, a args) error {
	topic := unique("compat-produce")
	if err := createTopic(a, topic, produceParts); err != nil {
		return err
	}
	acks, errs, err := produce(a, topic, a.messages)
	if err != nil {
		return err
	}
	rep.verdict("produce", verifyAcks(a.messages, acks, errs),
		fmt.Sprintf("%d acked (acks=all, client defaults: idempotent)", a.messages))
	recs, err := readAssigned(a, topic, produceParts, a.messages)
	if err != nil {
		return err
	}
	rep.verdict("fetch", verifyReadBack(topic, a.messages, recs, acks),
		fmt.Sprintf("%d read back via ConsumePartitions, per partition %s, order and offsets as acked",
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
	// franz-go is idempotent unless DisableIdempotentWrite is given
	acks, errs, err := produce(a, topic, a.messages)
	if err != nil {
		return err
	}
	problems := verifyAcks(a.messages, acks, errs)
	if len(problems) == 0 {
		recs, err := readAssigned(a, topic, produceParts, a.messages)
		if err != nil {
			return err
		}
		problems = verifyReadBack(topic, a.messages, recs, acks)
	}
	rep.verdict("idempotent", problems,
		fmt.Sprintf("idempotent producer (franz-go default): %d acked and read back once, in order", a.messages))
	return nil
}

func balancer(name string) []kgo.Opt {
	switch name {
	case "range":
		return []kgo.Opt{kgo.Balancers(kgo.RangeBalancer())}
	case "roundrobin":
		return []kgo.Opt{kgo.Balancers(kgo.RoundRobinBalancer())}
	case "cooperative-sticky":
		return []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}
	}
	return nil // franz-go's default: cooperative-sticky
}

// member is one group consumer polling on its own goroutine; its assignment
// is kept from the assigned/revoked/lost callbacks (incremental for
// cooperative balancers, whole for eager ones: add/remove fits both).
type member struct {
	cl       *kgo.Client
	mu       sync.Mutex
	assigned map[int32]bool
	stop     context.CancelFunc
	done     chan struct{}
	closed   bool
}

func startMember(a args, group, topic string) (*member, error) {
	m := &member{assigned: map[int32]bool{}, done: make(chan struct{})}
	update := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range parts[topic] {
				if add {
					m.assigned[p] = true
				} else {
					delete(m.assigned, p)
				}
			}
		}
	}
	opts := append([]kgo.Opt{kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(update(true)), kgo.OnPartitionsRevoked(update(false)),
		kgo.OnPartitionsLost(update(false))}, balancer(a.assignor)...)
	cl, err := newClient(a, opts...)
	if err != nil {
		return nil, err
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	return m, nil
}

func (m *member) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ps []int32
	for p := range m.assigned {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

// close stops polling and leaves the group (Close sends LeaveGroup).
func (m *member) close() {
	if m.closed {
		return
	}
	m.closed = true
	m.stop()
	<-m.done
	m.cl.Close()
}

func checkGroup(rep *reporter, a args) error {
	topic, group := unique("compat-group"), unique("compat-group")
	if err := createTopic(a, topic, groupParts); err != nil {
		return err
	}
	var members []*member
	defer func() {
		for _, m := range members {
			m.close()
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
				m, err := startMember(a, group, topic)
				if err != nil {
					return err
				}
				members = append(members, m)
			}
		case "leave":
			members[0].close()
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

func groupConsumer(a args, group, topic string) (*kgo.Client, error) {
	return newClient(a, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
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
	cl, err := groupConsumer(a, s.Group, s.Topic)
	if err != nil {
		return err
	}
	recs, err := pollUntil(cl, a.stage, s.resumeDone, 0)
	cl.Close()
	if err != nil {
		return err
	}
	rep.verdict("commit-resume", verifyResume(&s, recs),
		fmt.Sprintf("resumed after broker restart at %v, read the other %d", s.Committed, len(recs)))
	return nil
}

func resumePhaseA(rep *reporter, a args) error {
	topic, group := unique("compat-resume"), unique("compat-resume")
	if err := createTopic(a, topic, produceParts); err != nil {
		return err
	}
	acks, errs, err := produce(a, topic, a.messages)
	if err != nil {
		return err
	}
	if p := verifyAcks(a.messages, acks, errs); len(p) > 0 {
		rep.emit("commit-resume", "fail", fmt.Sprintf("phase a produce: %v", p))
		return nil
	}
	half := a.messages / 2
	cl, err := groupConsumer(a, group, topic)
	if err != nil {
		return err
	}
	defer cl.Close()
	recs, err := pollUntil(cl, a.stage, func(rs []record) bool { return len(rs) >= half }, half)
	if err != nil {
		return err
	}
	if len(recs) != half {
		rep.emit("commit-resume", "fail", fmt.Sprintf("phase a consumed %d of %d", len(recs), half))
		return nil
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
	offsets := map[string]map[int32]kgo.EpochOffset{topic: {}}
	for p, o := range s.Committed {
		offsets[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.stage)
	defer cancel()
	var commitErr error
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		if err == nil {
			commitErr = commitResponseError(resp)
		}
	})
	if commitErr != nil {
		rep.emit("commit-resume", "fail", "phase a commit: "+commitErr.Error())
		return nil
	}
	fetched, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		return err
	}
	for p, o := range s.Committed {
		got, ok := fetched.Lookup(topic, p)
		if !ok || got.Err != nil || got.At != o {
			rep.emit("commit-resume", "fail", fmt.Sprintf("committed %v, OffsetFetch says %+v", s.Committed, fetched))
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

func commitResponseError(resp *kmsg.OffsetCommitResponse) error {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("%s[%d]: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}
