// The steps of the produce-fetch, idempotent, admin, group and commit-resume
// checks, given a client's calls (compat/README.md, "Columns"): the Go twin
// of compat_common's produce_fetch_check, idempotent_check, group_check and
// commit_resume_check. Owns the order of the steps and the verdicts; the
// client library's calls are the driver's (Client).
package driver

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Client is what these checks (and the transactions check) need of one
// client library. Every call is bounded by the stage timeout it was opened
// with.
type Client interface {
	TxnClient
	// Describe says how the client does what the checks' details name.
	Describe() Description
	CreateTopic(topic string, partitions int32) error
	// Produce sends n keyed messages of tag topic with acks=all (idempotent
	// as asked, or always when that is the client's default): where each
	// landed, and the delivery errors.
	Produce(topic string, n int, idempotent bool) (map[int]Pos, []string, error)
	// ReadBack reads partitions 0..parts-1 of topic from the start, outside
	// any group, until n records or the stage timeout.
	ReadBack(topic string, parts int32, n int) ([]Record, error)
	// StartMember starts a group member of topic with the -assignor given.
	StartMember(group, topic string) (Member, error)
	// ConsumeAndCommit has a group member take the first n records of topic
	// (a prefix of each partition) and commit past them: the records, or a
	// problem saying how that failed.
	ConsumeAndCommit(group, topic string, n int) ([]Record, string, error)
	// CommittedOffsets are the group's committed offsets on partitions
	// 0..parts-1 of topic (OffsetFetch); none committed = absent.
	CommittedOffsets(group, topic string, parts int32) (map[int32]int64, error)
	// Resume has a group member read topic from its committed offsets until
	// done or the stage timeout.
	Resume(group, topic string, done func([]Record) bool) ([]Record, error)
}

// Description is how a client does what the checks' details name.
type Description struct {
	Defaults   string // the producer's defaults, e.g. "idempotent"
	ReadVia    string // the call ReadBack reads through
	Idempotent string // how Produce(..., true) is idempotent
}

// Checks are the checks every Go driver runs, each given the client open
// makes for its arguments; a driver adds its own.
func Checks(open func(Args) Client) map[string]Check {
	with := func(check func(*Reporter, Args, Client) error) Check {
		return func(rep *Reporter, a Args) error { return check(rep, a, open(a)) }
	}
	return map[string]Check{
		"produce-fetch": with(ProduceFetch), "group": with(Group), "commit-resume": with(CommitResume),
		"idempotent": with(Idempotent), "admin": Admin,
		"transactions": with(func(rep *Reporter, a Args, c Client) error { return Transactions(rep, a, c) }),
	}
}

// Member is one group member polling on its own.
type Member interface {
	// Partitions is its assignment now, in any order.
	Partitions() []int32
	// Close leaves the group; called once.
	Close()
}

// ProduceFetch: n keyed messages acknowledged once each at distinct
// positions, then read back outside a group exactly once, in order, where
// acknowledged.
func ProduceFetch(rep *Reporter, a Args, c Client) error {
	topic, acks, errs, err := produceToNewTopic(a, c, "compat-produce", false)
	if err != nil {
		return err
	}
	d := c.Describe()
	rep.Verdict("produce", VerifyAcks(a.Messages, acks, errs),
		fmt.Sprintf("%d acked (acks=all, client defaults: %s)", a.Messages, d.Defaults))
	recs, err := c.ReadBack(topic, ProduceParts, a.Messages)
	if err != nil {
		return err
	}
	rep.Verdict("fetch", VerifyReadBack(topic, a.Messages, recs, acks),
		fmt.Sprintf("%d read back via %s, per partition %s, order and offsets as acked",
			len(recs), d.ReadVia, PartitionCounts(recs)))
	return nil
}

// produceToNewTopic creates a topic named after prefix with ProduceParts
// partitions and produces a.Messages keyed messages of its name to it.
func produceToNewTopic(a Args, c Client, prefix string, idempotent bool) (string, map[int]Pos, []string, error) {
	topic := Unique(prefix)
	if err := c.CreateTopic(topic, ProduceParts); err != nil {
		return "", nil, nil, err
	}
	acks, errs, err := c.Produce(topic, a.Messages, idempotent)
	return topic, acks, errs, err
}

// Admin: n/a, the admin APIs have their own row.
func Admin(rep *Reporter, _ Args) error {
	rep.Emit("admin", "n/a", "admin APIs are checked with Kafka's own CLI tools (the kafka-cli row)")
	return nil
}

// Idempotent: an idempotent producer's n messages acknowledged and read back
// once each, in order.
func Idempotent(rep *Reporter, a Args, c Client) error {
	topic, acks, errs, err := produceToNewTopic(a, c, "compat-idempotent", true)
	if err != nil {
		return err
	}
	problems := VerifyAcks(a.Messages, acks, errs)
	if len(problems) == 0 {
		recs, err := c.ReadBack(topic, ProduceParts, a.Messages)
		if err != nil {
			return err
		}
		problems = VerifyReadBack(topic, a.Messages, recs, acks)
	}
	rep.Verdict("idempotent", problems,
		fmt.Sprintf("%s: %d acked and read back once, in order", c.Describe().Idempotent, a.Messages))
	return nil
}

// Group: three members split GroupParts partitions 2 each, one leaves (3
// each), one joins (2 each again), each split held for a second within the
// stage timeout.
func Group(rep *Reporter, a Args, c Client) error {
	topic, group := Unique("compat-group"), Unique("compat-group")
	if err := c.CreateTopic(topic, GroupParts); err != nil {
		return err
	}
	var members []Member
	defer func() {
		for _, m := range members {
			m.Close()
		}
	}()
	split := func() [][]int32 {
		out := make([][]int32, len(members))
		for k, m := range members {
			out[k] = slices.Sorted(slices.Values(m.Partitions()))
		}
		return out
	}
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
				m, err := c.StartMember(group, topic)
				if err != nil {
					return err
				}
				members = append(members, m)
			}
		case "leave":
			members[0].Close()
			members = members[1:]
		}
		t0 := time.Now()
		ok := WaitStable(func() bool { return SplitOK(split(), st.per, GroupParts) }, a.Stage, time.Second)
		stages = append(stages, fmt.Sprintf("%s: %s after %.1fs", st.label, DescribeSplit(split()),
			time.Since(t0).Seconds()))
		Logf("%s", stages[len(stages)-1])
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: wanted %d each within %s, have %s",
				st.label, st.per, a.Stage, DescribeSplit(split())))
			break
		}
	}
	rep.Verdict(GroupCheckName(a), problems, strings.Join(stages, "; "))
	return nil
}

// CommitResume: phase a (-phase a) produces n messages, has a group member
// consume and commit the first half and checks the commit with OffsetFetch,
// leaving its state in -state; the broker restarts; phase b resumes the
// group and must read exactly the records not committed.
func CommitResume(rep *Reporter, a Args, c Client) error {
	if a.Phase == "a" {
		return resumePhaseA(rep, a, c)
	}
	raw, err := os.ReadFile(a.State)
	if err != nil {
		return err
	}
	var s ResumeState
	if err := json.Unmarshal(raw, &s); err != nil {
		return err
	}
	recs, err := c.Resume(s.Group, s.Topic, s.ResumeDone)
	if err != nil {
		return err
	}
	rep.Verdict("commit-resume", VerifyResume(&s, recs),
		fmt.Sprintf("resumed after broker restart at %v, read the other %d", s.Committed, len(recs)))
	return nil
}

func resumePhaseA(rep *Reporter, a Args, c Client) error {
	topic, acks, errs, err := produceToNewTopic(a, c, "compat-resume", false)
	group := Unique("compat-resume")
	if err != nil {
		return err
	}
	if p := VerifyAcks(a.Messages, acks, errs); len(p) > 0 {
		rep.Emit("commit-resume", "fail", fmt.Sprintf("phase a produce: %v", p))
		return nil
	}
	recs, problem, err := c.ConsumeAndCommit(group, topic, a.Messages/2)
	if err != nil {
		return err
	}
	if problem != "" {
		rep.Emit("commit-resume", "fail", problem)
		return nil
	}
	s := ResumeState{Topic: topic, Group: group, Committed: EndOf(recs), EndOffsets: map[int32]int64{}}
	for _, r := range recs {
		s.Consumed = append(s.Consumed, [2]int64{int64(r.P), r.O})
	}
	for _, at := range acks {
		if at.O+1 > s.EndOffsets[at.P] {
			s.EndOffsets[at.P] = at.O + 1
		}
	}
	fetched, err := c.CommittedOffsets(group, topic, ProduceParts)
	if err != nil {
		return err
	}
	for p, o := range s.Committed {
		if fetched[p] != o {
			rep.Emit("commit-resume", "fail", fmt.Sprintf("committed %v, OffsetFetch says %v", s.Committed, fetched))
			return nil
		}
	}
	raw, _ := json.Marshal(s)
	if err := os.WriteFile(a.State, raw, 0o644); err != nil {
		return err
	}
	Logf("phase a: consumed %d, committed %v", len(recs), s.Committed)
	return nil
}
