// The share check (compat/README.md, "share") through franz-go's share
// consumer (KIP-932: kgo.ShareGroup, Record.Ack, FlushAcks): the group's
// share.auto.offset.reset is set to earliest (IncrementalAlterConfigs on the
// GROUP resource), two share consumers join, N records are produced
// (acks=all) and the consumers acknowledge each record explicitly as
// driver.SharePlan says. Owns only the franz-go calls; the plan and the
// verdict live in compat/driver (share.go).
package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"chronik/compat/driver"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareQuiet: how long the consumers keep polling once every record is
// accepted, for a rejected or accepted record that comes back.
const shareQuiet = 2 * time.Second

// shareMaxRecords: records per ShareFetch, so that both consumers get some.
const shareMaxRecords = 50

// shareLockMs: the group's share.record.lock.duration.ms (Kafka's minimum).
const shareLockMs = "15000"

var ackStatus = map[string]kgo.AckStatus{
	driver.AckAccept: kgo.AckAccept, driver.AckRelease: kgo.AckRelease, driver.AckReject: kgo.AckReject,
}

// shareRun: what the consumers of one run share.
type shareRun struct {
	a            args
	topic, group string
	plan         driver.SharePlan

	mu         sync.Mutex
	deliveries []driver.ShareDelivery
	ackErrs    []string
	fetchErrs  []string
}

func (r *shareRun) add(d driver.ShareDelivery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deliveries = append(r.deliveries, d)
}

func (r *shareRun) ackError(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ackErrs = append(r.ackErrs, fmt.Sprintf(format, a...))
}

func (r *shareRun) done() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.plan.Done(r.deliveries)
}

func checkShare(rep *driver.Reporter, a args) error {
	if a.Messages < 4 {
		return fmt.Errorf("share needs --messages >= 4, got %d", a.Messages)
	}
	started := time.Now()
	run := &shareRun{a: a, topic: driver.Unique("compat-share"), group: driver.Unique("compat-share"),
		plan: driver.NewSharePlan(a.Messages)}
	if err := createTopic(a, run.topic, driver.ProduceParts); err != nil {
		return err
	}
	if err := setGroupConfigs(a, run.group, map[string]string{
		"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": shareLockMs,
	}); err != nil {
		return fmt.Errorf("IncrementalAlterConfigs on group %s: %w", run.group, err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	for c := 0; c < driver.ShareConsumers; c++ {
		cl, err := newClient(a, kgo.ShareGroup(run.group), kgo.ConsumeTopics(run.topic),
			kgo.ShareMaxRecords(shareMaxRecords), kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				for _, res := range rs {
					if res.Err != nil {
						run.ackError("consumer %d: %s[%d]: %v", c+1, res.Topic, res.Partition, res.Err)
					}
				}
			}))
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			run.consume(ctx, c, cl)
		}()
	}

	// both members in the group with partitions before the records come
	assigned, assignedIn, lastSeen := waitShareAssigned(a, run.group, run.topic)
	problems := []string{}
	if !assigned {
		problems = append(problems, fmt.Sprintf("ShareGroupDescribe did not show %d members each assigned "+
			"partitions of %s at the assignment epoch within %s (last: %s)", driver.ShareConsumers, run.topic,
			a.Stage, lastSeen))
	}

	producer, err := newClient(a, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	pctx, pcancel := context.WithTimeout(context.Background(), a.Stage)
	acks, errs, err := produceAll(pctx, producer, run.topic, run.topic, a.Messages)
	pcancel()
	producer.Close()
	if err != nil {
		errs = append(errs, "flush: "+err.Error())
	}
	produceProblems := driver.VerifyAcks(a.Messages, acks, errs)
	problems = append(problems, driver.Prefixed("produce", produceProblems)...)
	produced := time.Since(started)

	deadline := time.Now().Add(a.Stage)
	for len(produceProblems) == 0 && !run.done() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	finished := run.done()
	if finished {
		time.Sleep(shareQuiet)
	}
	stop()
	wg.Wait()

	run.mu.Lock()
	defer run.mu.Unlock()
	if !finished {
		problems = append(problems, fmt.Sprintf("not every record accepted within %s", a.Stage))
	}
	problems = append(problems, driver.VerifyShare(run.plan, run.deliveries, acks, run.ackErrs)...)
	problems = append(problems, driver.Prefixed("fetch", run.fetchErrs)...)
	summary := driver.ShareSummary(run.plan, run.deliveries)
	if len(problems) > 0 {
		problems = append(problems, "("+summary+")")
	}
	rep.Verdict("share", problems, fmt.Sprintf(
		"share group %s (share.auto.offset.reset=earliest set by IncrementalAlterConfigs on the GROUP "+
			"resource), %d kgo.ShareGroup consumers, each assigned partitions at the assignment epoch "+
			"(kadm.DescribeShareGroups) after %.1fs; %d produced (acks=all) to %d partitions by %.1fs; Record.Ack + FlushAcks, no "+
			"acknowledgement error: %s; each record accepted once, the released one on its return, the "+
			"rejected one never back (%s quiet after); %.1fs in all",
		run.group, driver.ShareConsumers, assignedIn.Seconds(), a.Messages, driver.ProduceParts,
		produced.Seconds(), summary, shareQuiet, time.Since(started).Seconds()))
	return nil
}

// waitShareAssigned waits (the stage timeout) until ShareGroupDescribe
// shows driver.ShareConsumers members of group, each assigned partitions
// of topic and each at the group's assignment epoch (it has heartbeated
// since the last reassignment, so the client has its assignment: a member
// still fetching a partition taken from it would lose its acknowledgements
// of it): whether it did, after how long, and what it saw last.
func waitShareAssigned(a args, group, topic string) (bool, time.Duration, string) {
	started := time.Now()
	cl, err := newClient(a)
	if err != nil {
		return false, 0, err.Error()
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	last := "nothing"
	for time.Since(started) < a.Stage {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		described, err := adm.DescribeShareGroups(ctx, group)
		cancel()
		if err == nil {
			err = described.Error()
		}
		if err != nil {
			last = err.Error()
		} else {
			g := described[group]
			parts := make([]string, 0, len(g.Members))
			with := 0
			for _, m := range g.Members {
				ps := m.Assignment[topic]
				parts = append(parts, fmt.Sprintf("%d@%d", len(ps), m.MemberEpoch))
				if len(ps) > 0 && m.MemberEpoch == g.AssignmentEpoch {
					with++
				}
			}
			last = fmt.Sprintf("state %s, assignment epoch %d, %d members, partitions@epoch each [%s]",
				g.GroupState, g.AssignmentEpoch, len(g.Members), strings.Join(parts, " "))
			if len(g.Members) == driver.ShareConsumers && with == driver.ShareConsumers {
				return true, time.Since(started), last
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false, time.Since(started), last
}

// consume polls as consumer c until ctx ends, acknowledging each record as
// the plan says and flushing the acknowledgements after every poll; then
// it leaves the group (Close).
func (r *shareRun) consume(ctx context.Context, c int, cl *kgo.Client) {
	defer cl.Close()
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				r.mu.Lock()
				r.fetchErrs = append(r.fetchErrs, fmt.Sprintf("consumer %d: %s[%d]: %v", c+1, t, p, err))
				r.mu.Unlock()
			}
		})
		n := 0
		fs.EachRecord(func(rec *kgo.Record) {
			i := driver.IndexOf(r.topic, rec.Value)
			ack := r.plan.AckFor(i, rec.DeliveryCount())
			rec.Ack(ackStatus[ack])
			r.add(driver.ShareDelivery{Consumer: c, Index: i, At: driver.Pos{P: rec.Partition, O: rec.Offset},
				Count: rec.DeliveryCount(), Ack: ack})
			n++
		})
		if n > 0 {
			fctx, fcancel := context.WithTimeout(context.Background(), r.a.Stage)
			if err := cl.FlushAcks(fctx); err != nil {
				r.ackError("consumer %d: FlushAcks: %v", c+1, err)
			}
			fcancel()
		}
	}
}

// setGroupConfigs: IncrementalAlterConfigs (SET) of configs on the GROUP
// resource group (kadm has no call for group configs).
func setGroupConfigs(a args, group string, configs map[string]string) error {
	cl, err := newClient(a)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), a.Stage)
	defer cancel()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	for name, value := range configs {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name = name
		c.Op = kmsg.IncrementalAlterConfigOpSet
		c.Value = kmsg.StringPtr(value)
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			msg := ""
			if r.ErrorMessage != nil {
				msg = ": " + *r.ErrorMessage
			}
			return fmt.Errorf("%s%s", err, msg)
		}
	}
	return nil
}
