// Command sarama-driver: the compatibility driver for Go IBM/sarama
// (compat/README.md), the twin of compat/go (franz-go). One check per
// invocation against -bootstrap; prints its JSON result line(s) on stdout,
// logs (its own and sarama's) on stderr. Owns only the sarama calls: the
// skeleton, the checks' steps and verification live in the shared module
// compat/driver. Build (from this directory):
//
//	GOTOOLCHAIN=local GOFLAGS=-buildvcs=false go build -o ../../target/compat/sarama-driver .
//
// Assignors: default = sarama's default (range), range, roundrobin, and
// cooperative-sticky, which sarama >= 1.61 runs with the cooperative
// (incremental) rebalance protocol.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"chronik/compat/driver"
	"github.com/IBM/sarama"
)

func main() {
	sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Ltime)
	driver.Main("sarama", "github.com/IBM/sarama",
		driver.Checks(func(a driver.Args) driver.Client { return client{a} }))
}

// client is the shared checks' client: sarama with a's stage timeout.
type client struct{ a driver.Args }

func (c client) Describe() driver.Description {
	return driver.Description{Defaults: "not idempotent", ReadVia: "ConsumePartition",
		Idempotent: "idempotent producer (Producer.Idempotent, Net.MaxOpenRequests=1, acks=all)"}
}

// newConfig: sarama's defaults, except the protocol version (sarama's default
// is 2.8; the newest it knows enables everything, and each request is capped
// at what the broker's ApiVersions offers) and errors returned, not just logged.
func (c client) newConfig() *sarama.Config {
	conf := sarama.NewConfig()
	conf.ClientID = "chronik-compat-sarama"
	conf.Version = sarama.MaxVersion
	conf.Admin.Timeout = c.a.Stage
	conf.Net.DialTimeout = min(conf.Net.DialTimeout, c.a.Stage)
	conf.Consumer.Return.Errors = true
	return conf
}

// bounded runs f, giving up (it keeps running) after the stage timeout.
func (c client) bounded(what string, f func() error) error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	select {
	case err := <-ch:
		return err
	case <-time.After(c.a.Stage):
		return fmt.Errorf("%s: no return within %s", what, c.a.Stage)
	}
}

func (c client) closeQuietly(what string, f func() error) {
	if err := c.bounded(what, f); err != nil {
		driver.Logf("%s: %v", what, err)
	}
}

func (c client) CreateTopic(topic string, partitions int32) error {
	adm, err := sarama.NewClusterAdmin([]string{c.a.Bootstrap}, c.newConfig())
	if err != nil {
		return err
	}
	defer c.closeQuietly("close admin", adm.Close)
	return adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false)
}

// producerConfig: acks=all, 5 ms linger, successes returned. Sarama's default
// producer is not idempotent; idempotent and transactional ones also need
// one request in flight per broker.
func (c client) producerConfig(idempotent bool, txnID string) *sarama.Config {
	conf := c.newConfig()
	conf.Producer.RequiredAcks = sarama.WaitForAll
	conf.Producer.Flush.Frequency = 5 * time.Millisecond
	conf.Producer.Return.Successes = true
	if idempotent || txnID != "" {
		conf.Producer.Idempotent = true
		conf.Net.MaxOpenRequests = 1
	}
	if txnID != "" {
		conf.Producer.Transaction.ID = txnID
	}
	return conf
}

// sendAll puts msgs on the producer's input and collects every result (or
// gives up after the stage timeout); msg.Metadata is the message's index.
func (c client) sendAll(p sarama.AsyncProducer, msgs []*sarama.ProducerMessage) (map[int]driver.Pos, []string) {
	deadline := time.After(c.a.Stage)
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
	acks := map[int]driver.Pos{}
	var errs []string
	for got := 0; got < len(msgs); got++ {
		select {
		case m := <-p.Successes():
			acks[m.Metadata.(int)] = driver.Pos{P: m.Partition, O: m.Offset}
		case e := <-p.Errors():
			errs = append(errs, fmt.Sprintf("i=%v: %v", e.Msg.Metadata, e.Err))
		case <-deadline:
			errs = append(errs, fmt.Sprintf("%d of %d without a result within %s", len(msgs)-got, len(msgs), c.a.Stage))
			return acks, errs
		}
	}
	return acks, errs
}

func keyedMessages(topic, tag string, n int) []*sarama.ProducerMessage {
	msgs := make([]*sarama.ProducerMessage, n)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(driver.MessageKey(i)),
			Value: sarama.ByteEncoder(driver.MessageValue(tag, i)), Metadata: i}
	}
	return msgs
}

// Produce sends n keyed messages (acks=all) and returns where each landed.
func (c client) Produce(topic string, n int, idempotent bool) (map[int]driver.Pos, []string, error) {
	p, err := sarama.NewAsyncProducer([]string{c.a.Bootstrap}, c.producerConfig(idempotent, ""))
	if err != nil {
		return nil, nil, err
	}
	defer c.closeQuietly("close producer", p.Close)
	acks, errs := c.sendAll(p, keyedMessages(topic, topic, n))
	return acks, errs, nil
}

func (c client) ReadBack(topic string, parts int32, n int) ([]driver.Record, error) {
	return c.readParts(topic, parts, sarama.ReadUncommitted,
		func(rs []driver.Record) bool { return len(rs) >= n })
}

// readParts reads partitions 0..parts-1 of topic from the oldest offset with
// a plain (group-less) consumer until done(records) or the stage timeout.
func (c client) readParts(topic string, parts int32, level sarama.IsolationLevel, done func([]driver.Record) bool) ([]driver.Record, error) {
	conf := c.newConfig()
	conf.Consumer.IsolationLevel = level
	cons, err := sarama.NewConsumer([]string{c.a.Bootstrap}, conf)
	if err != nil {
		return nil, err
	}
	defer c.closeQuietly("close consumer", cons.Close)
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
	return c.collect(msgs, errs, done)
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
func (c client) collect(msgs <-chan *sarama.ConsumerMessage, errs <-chan error, done func([]driver.Record) bool) ([]driver.Record, error) {
	var recs []driver.Record
	deadline := time.Now().Add(c.a.Stage)
	for !done(recs) && time.Now().Before(deadline) {
		select {
		case m := <-msgs:
			recs = append(recs, driver.Record{P: m.Partition, O: m.Offset, V: m.Value})
		case err := <-errs:
			return recs, fmt.Errorf("consume: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return recs, nil
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
func (c client) groupConfig(assignor string) *sarama.Config {
	conf := c.newConfig()
	if s := strategy(assignor); s != nil {
		conf.Consumer.Group.Rebalance.GroupStrategies = s
	}
	conf.Consumer.Offsets.AutoCommit.Enable = false
	conf.Consumer.Offsets.Initial = sarama.OffsetOldest
	return conf
}

// member is one consumer-group member running Consume in a loop on its own
// goroutine (an eager rebalance ends a session, a cooperative one updates
// it). Its assignment is the live session's Claims(); onMessage (optional)
// sees every message its claims deliver.
type member struct {
	c         client
	cg        sarama.ConsumerGroup
	topic     string
	onMessage func(sarama.ConsumerGroupSession, *sarama.ConsumerMessage)
	mu        sync.Mutex
	sess      sarama.ConsumerGroupSession
	errs      chan error
	stop      context.CancelFunc
	done      chan struct{}
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

func (c client) StartMember(group, topic string) (driver.Member, error) {
	return c.startMember(c.groupConfig(c.a.Assignor), group, topic, nil)
}

func (c client) startMember(conf *sarama.Config, group, topic string,
	onMessage func(sarama.ConsumerGroupSession, *sarama.ConsumerMessage)) (*member, error) {
	cg, err := sarama.NewConsumerGroup([]string{c.a.Bootstrap}, group, conf)
	if err != nil {
		return nil, err
	}
	m := &member{c: c, cg: cg, topic: topic, onMessage: onMessage, errs: make(chan error, 16), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	m.stop = cancel
	go func() {
		for err := range cg.Errors() {
			driver.Logf("group %s: %v", group, err)
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
				driver.Logf("Consume: %v", err)
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

func (m *member) Partitions() []int32 {
	if s := m.session(); s != nil {
		return s.Claims()[m.topic]
	}
	return nil
}

// Close ends the session and leaves the group (Close sends LeaveGroup),
// each bounded by the stage timeout.
func (m *member) Close() {
	m.stop()
	m.c.closeQuietly("end session", func() error { <-m.done; return nil })
	m.c.closeQuietly("close consumer group", m.cg.Close)
}

func (c client) Resume(group, topic string, done func([]driver.Record) bool) ([]driver.Record, error) {
	msgs := make(chan *sarama.ConsumerMessage)
	m, err := c.startMember(c.groupConfig("default"), group, topic,
		func(sess sarama.ConsumerGroupSession, msg *sarama.ConsumerMessage) {
			select {
			case msgs <- msg:
			case <-sess.Context().Done():
			}
		})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	return c.collect(msgs, m.errs, done)
}

// ConsumeAndCommit: a group member takes the first n messages (a prefix of
// each partition: its claims deliver in order) and marks each; then
// session.Commit() commits them synchronously.
func (c client) ConsumeAndCommit(group, topic string, n int) ([]driver.Record, string, error) {
	var mu sync.Mutex
	var recs []driver.Record
	var sess sarama.ConsumerGroupSession
	reached := make(chan struct{})
	m, err := c.startMember(c.groupConfig("default"), group, topic,
		func(s sarama.ConsumerGroupSession, msg *sarama.ConsumerMessage) {
			mu.Lock()
			defer mu.Unlock()
			if len(recs) >= n {
				return // taken past the half, never marked
			}
			recs = append(recs, driver.Record{P: msg.Partition, O: msg.Offset, V: msg.Value})
			s.MarkOffset(msg.Topic, msg.Partition, msg.Offset+1, "")
			if len(recs) == n {
				sess = s
				close(reached)
			}
		})
	if err != nil {
		return nil, "", err
	}
	defer m.Close()
	select {
	case <-reached:
	case <-time.After(c.a.Stage):
		mu.Lock()
		defer mu.Unlock()
		return nil, fmt.Sprintf("phase a consumed %d of %d within %s", len(recs), n, c.a.Stage), nil
	}
	drainErrors(m.errs)
	if err := c.bounded("session.Commit", func() error { sess.Commit(); return nil }); err != nil {
		return nil, "", err
	}
	select {
	case err := <-m.errs:
		return nil, "phase a commit: " + err.Error(), nil
	default:
	}
	return recs, "", nil
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

// CommittedOffsets: OffsetFetch through the ClusterAdmin.
func (c client) CommittedOffsets(group, topic string, parts int32) (map[int32]int64, error) {
	adm, err := sarama.NewClusterAdmin([]string{c.a.Bootstrap}, c.newConfig())
	if err != nil {
		return nil, err
	}
	defer c.closeQuietly("close admin", adm.Close)
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
