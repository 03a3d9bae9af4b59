// Command franz-go-driver: the compatibility driver for Go franz-go
// (compat/README.md). One check per invocation against -bootstrap; prints its
// JSON result line(s) on stdout, logs on stderr. Owns only the franz-go calls:
// the skeleton, the checks' steps and verification live in the shared module
// compat/driver, the transactions, eos-848, security and share calls in
// transactions.go, eos848.go, security.go and share.go.
package main

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"time"

	"chronik/compat/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type args struct {
	driver.Args
	sec   securityArgs
	extra []kgo.Opt // every client's options (security: TLS, SASL)
}

func main() {
	var sec securityArgs
	flag.StringVar(&sec.saslBootstrap, "sasl-bootstrap", "", "security: host:port of the SASL_SSL listener")
	flag.StringVar(&sec.sslBootstrap, "ssl-bootstrap", "", "security: host:port of the SSL listener")
	flag.StringVar(&sec.ca, "ssl-ca", "", "security: PEM CA file")
	flag.StringVar(&sec.cert, "ssl-cert", "", "security: PEM client certificate")
	flag.StringVar(&sec.key, "ssl-key", "", "security: PEM key of -ssl-cert")
	flag.StringVar(&sec.username, "sasl-username", "", "security: SCRAM user")
	flag.StringVar(&sec.password, "sasl-password", "", "security: its password")
	flag.StringVar(&sec.topicPrefix, "topic-prefix", "", "security: topic prefix both principals may use")
	flag.StringVar(&sec.groupPrefix, "group-prefix", "", "security: group prefix both principals may use")
	flag.StringVar(&sec.deniedTopic, "denied-topic", "", "security: a topic neither principal has an ACL on")
	own := func(a driver.Args) args { return args{Args: a, sec: sec} }
	checks := driver.Checks(func(a driver.Args) driver.Client { return franz{own(a)} })
	checks["eos-848"] = func(rep *driver.Reporter, a driver.Args) error { return checkEOS848(rep, own(a)) }
	checks["security"] = func(rep *driver.Reporter, a driver.Args) error { return checkSecurity(rep, own(a)) }
	checks["share"] = func(rep *driver.Reporter, a driver.Args) error { return checkShare(rep, own(a)) }
	driver.Main("franz-go", "github.com/twmb/franz-go", checks)
}

// franz is the shared checks' client: franz-go with a's options.
type franz struct{ a args }

func (f franz) Describe() driver.Description {
	return driver.Description{Defaults: "idempotent", ReadVia: "ConsumePartitions",
		Idempotent: "idempotent producer (franz-go default)"}
}

func (f franz) CreateTopic(topic string, partitions int32) error {
	return createTopic(f.a, topic, partitions)
}

func newClient(a args, opts ...kgo.Opt) (*kgo.Client, error) {
	base := append([]kgo.Opt{kgo.SeedBrokers(a.Bootstrap)}, a.extra...)
	return kgo.NewClient(append(base, opts...)...)
}

func createTopic(a args, topic string, partitions int32) error {
	cl, err := newClient(a)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), a.Stage)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Error()
	}
	return err
}

// Produce: franz-go's producer is idempotent unless DisableIdempotentWrite
// is given, so idempotent asks for nothing more.
func (f franz) Produce(topic string, n int, _ bool) (map[int]driver.Pos, []string, error) {
	cl, err := newClient(f.a, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), f.a.Stage)
	defer cancel()
	acks, errs, err := produceAll(ctx, cl, topic, topic, n)
	if err != nil {
		errs = append(errs, "flush: "+err.Error())
	}
	return acks, errs, nil
}

// produceAll sends n keyed messages of tag (MessageKey, MessageValue) to
// topic and flushes: the acks (i -> partition/offset), the delivery errors
// and Flush's error.
func produceAll(ctx context.Context, cl *kgo.Client, topic, tag string, n int) (map[int]driver.Pos, []string, error) {
	var mu sync.Mutex
	acks := map[int]driver.Pos{}
	var errs []string
	for i := 0; i < n; i++ {
		i := i
		rec := &kgo.Record{Topic: topic, Key: driver.MessageKey(i), Value: driver.MessageValue(tag, i)}
		cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Sprintf("i=%d: %v", i, err))
				return
			}
			acks[i] = driver.Pos{P: r.Partition, O: r.Offset}
		})
	}
	err := cl.Flush(ctx)
	mu.Lock()
	defer mu.Unlock()
	return acks, errs, err
}

// ReadBack reads partitions 0..parts-1 from the start until n records.
func (f franz) ReadBack(topic string, parts int32, n int) ([]driver.Record, error) {
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < parts; p++ {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := newClient(f.a, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return pollUntil(cl, f.a.Stage, func(rs []driver.Record) bool { return len(rs) >= n }, 0)
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
func pollUntil(cl *kgo.Client, timeout time.Duration, done func([]driver.Record) bool, max int) ([]driver.Record, error) {
	var recs []driver.Record
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
		fs.EachRecord(func(r *kgo.Record) {
			recs = append(recs, driver.Record{P: r.Partition, O: r.Offset, V: r.Value})
		})
	}
	return recs, nil
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
}

func (f franz) StartMember(group, topic string) (driver.Member, error) {
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
		kgo.OnPartitionsLost(update(false))}, balancer(f.a.Assignor)...)
	cl, err := newClient(f.a, opts...)
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

func (m *member) Partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ps []int32
	for p := range m.assigned {
		ps = append(ps, p)
	}
	return ps
}

// Close stops polling and leaves the group (Close sends LeaveGroup).
func (m *member) Close() {
	m.stop()
	<-m.done
	m.cl.Close()
}

func groupConsumer(a args, group, topic string) (*kgo.Client, error) {
	return newClient(a, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
}

func (f franz) Resume(group, topic string, done func([]driver.Record) bool) ([]driver.Record, error) {
	cl, err := groupConsumer(f.a, group, topic)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return pollUntil(cl, f.a.Stage, done, 0)
}

// ConsumeAndCommit: a group consumer polls exactly n records and commits
// past them with CommitOffsetsSync.
func (f franz) ConsumeAndCommit(group, topic string, n int) ([]driver.Record, string, error) {
	cl, err := groupConsumer(f.a, group, topic)
	if err != nil {
		return nil, "", err
	}
	defer cl.Close()
	recs, err := pollUntil(cl, f.a.Stage, func(rs []driver.Record) bool { return len(rs) >= n }, n)
	if err != nil {
		return nil, "", err
	}
	if len(recs) != n {
		return nil, fmt.Sprintf("phase a consumed %d of %d", len(recs), n), nil
	}
	offsets := map[string]map[int32]kgo.EpochOffset{topic: {}}
	for p, o := range driver.EndOf(recs) {
		offsets[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.a.Stage)
	defer cancel()
	var commitErr error
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		if err == nil {
			commitErr = commitResponseError(resp)
		}
	})
	if commitErr != nil {
		return nil, "phase a commit: " + commitErr.Error(), nil
	}
	return recs, "", nil
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

// CommittedOffsets: OffsetFetch through kadm; an offset with an error
// counts as absent.
func (f franz) CommittedOffsets(group, topic string, parts int32) (map[int32]int64, error) {
	cl, err := newClient(f.a)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), f.a.Stage)
	defer cancel()
	fetched, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p := int32(0); p < parts; p++ {
		if got, ok := fetched.Lookup(topic, p); ok && got.Err == nil && got.At >= 0 {
			out[p] = got.At
		}
	}
	return out, nil
}
