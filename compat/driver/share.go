// The share check's plan and verdict (compat/README.md, "share"): N records
// produced, two share consumers (KIP-932) of one group acknowledging them
// explicitly; one record is released on its first delivery, one rejected.
// The Go twin of compat_common's SharePlan / verify_share and of
// ShareCheck.java. Pure functions: the client's calls are the driver's.
package driver

import (
	"fmt"
	"sort"
	"strings"
)

// The acknowledgement types a share consumer sends (KIP-932).
const (
	AckAccept  = "accept"
	AckRelease = "release"
	AckReject  = "reject"
)

// ShareConsumers: the share group's members in the check.
const ShareConsumers = 2

// ShareDelivery is one record a share consumer was handed and what it did
// with it.
type ShareDelivery struct {
	Consumer int    // 0 or 1
	Index    int    // the message's index, -1 if not one of ours
	At       Pos    // partition, offset
	Count    int32  // the delivery count the broker gave
	Ack      string // AckAccept, AckRelease or AckReject
}

// SharePlan says what a consumer does with each record: Release is released
// on its first delivery (and accepted when it comes back), Reject is
// rejected (and must never come back), every other record is accepted.
type SharePlan struct{ N, Release, Reject int }

// NewSharePlan plans n records (n >= 4).
func NewSharePlan(n int) SharePlan { return SharePlan{N: n, Release: n / 2, Reject: n / 3} }

// IndexOf is the index of the message of tag with value v, -1 if it is not one.
func IndexOf(tag string, v []byte) int {
	if i, ok := valueIndex(tag, v); ok {
		return i
	}
	return -1
}

// AckFor is the acknowledgement for message i on its count-th delivery.
func (p SharePlan) AckFor(i int, count int32) string {
	switch {
	case i == p.Reject:
		return AckReject
	case i == p.Release && count <= 1:
		return AckRelease
	}
	return AckAccept
}

// Done: every record but the rejected one accepted, the released one too
// (after its redelivery).
func (p SharePlan) Done(ds []ShareDelivery) bool {
	accepted := map[int]bool{}
	for _, d := range ds {
		if d.Ack == AckAccept && d.Index >= 0 {
			accepted[d.Index] = true
		}
	}
	return len(accepted) >= p.N-1
}

// VerifyShare judges the deliveries of a run: every record of the plan but
// the rejected one accepted exactly once, at the position its producer was
// told (acks); the released record delivered first with count 1, then once
// more with count 2 and accepted; the rejected one delivered once, never
// again; no delivery count below 1; no record that is not ours; no
// acknowledgement error (ackErrs). How the records were split between the
// consumers is not judged: one may take them all before the other's first
// fetch (ShareSummary reports the split).
func VerifyShare(p SharePlan, ds []ShareDelivery, acks map[int]Pos, ackErrs []string) []string {
	var problems []string
	if len(ackErrs) > 0 {
		problems = append(problems, fmt.Sprintf("%d acknowledgement errors, first: %s", len(ackErrs), ackErrs[0]))
	}
	accepted := map[int]int{}
	byIndex := map[int][]ShareDelivery{}
	foreign, badCount, moved := 0, 0, 0
	for _, d := range ds {
		if d.Index < 0 || d.Index >= p.N {
			foreign++
			continue
		}
		if d.Count < 1 {
			badCount++
		}
		if a, ok := acks[d.Index]; ok && a != d.At {
			moved++
		}
		byIndex[d.Index] = append(byIndex[d.Index], d)
		if d.Ack == AckAccept {
			accepted[d.Index]++
		}
	}
	if foreign > 0 {
		problems = append(problems, fmt.Sprintf("%d records that are not ours", foreign))
	}
	if badCount > 0 {
		problems = append(problems, fmt.Sprintf("%d deliveries with a delivery count below 1", badCount))
	}
	if moved > 0 {
		problems = append(problems, fmt.Sprintf("%d records not at their acked position", moved))
	}
	var missing, twice []int
	for i := 0; i < p.N; i++ {
		if i == p.Reject {
			continue
		}
		switch n := accepted[i]; {
		case n == 0:
			missing = append(missing, i)
		case n > 1:
			twice = append(twice, i)
		}
	}
	if len(missing) > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d records never accepted (first %s)",
			len(missing), p.N-1, firstInts(missing)))
	}
	if len(twice) > 0 {
		problems = append(problems, fmt.Sprintf("%d records accepted more than once (first %s)",
			len(twice), firstInts(twice)))
	}
	if got := counts(byIndex[p.Release]); got != "1,2" {
		problems = append(problems, fmt.Sprintf("released record %d: delivery counts [%s], want [1,2] "+
			"(released on the first, accepted on the second)", p.Release, got))
	}
	if got := counts(byIndex[p.Reject]); got != "1" {
		problems = append(problems, fmt.Sprintf("rejected record %d: delivery counts [%s], want [1] "+
			"(a rejected record must not come back)", p.Reject, got))
	}
	return problems
}

// ShareSummary says what the deliveries were, for a passing verdict.
func ShareSummary(p SharePlan, ds []ShareDelivery) string {
	perConsumer := make([]int, ShareConsumers)
	released := ""
	for _, d := range ds {
		if d.Consumer >= 0 && d.Consumer < ShareConsumers && d.Ack == AckAccept {
			perConsumer[d.Consumer]++
		}
		if d.Index == p.Release && d.Count >= 2 {
			released = fmt.Sprintf("consumer %d", d.Consumer+1)
		}
	}
	parts := make([]string, len(perConsumer))
	for c, n := range perConsumer {
		parts[c] = fmt.Sprint(n)
	}
	if released == "" {
		released = "no consumer"
	}
	return fmt.Sprintf("accepted %s by the %d consumers (%d deliveries); record %d released, back with "+
		"delivery count 2 to %s; record %d rejected",
		strings.Join(parts, "+"), ShareConsumers, len(ds), p.Release, released, p.Reject)
}

// counts: the delivery counts of ds, in order, comma-separated.
func counts(ds []ShareDelivery) string {
	cs := make([]int, 0, len(ds))
	for _, d := range ds {
		cs = append(cs, int(d.Count))
	}
	sort.Ints(cs)
	out := make([]string, len(cs))
	for k, c := range cs {
		out[k] = fmt.Sprint(c)
	}
	return strings.Join(out, ",")
}

func firstInts(xs []int) string {
	if len(xs) > 5 {
		xs = xs[:5]
	}
	return fmt.Sprint(xs)
}
