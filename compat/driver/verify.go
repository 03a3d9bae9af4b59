// Test messages and the checks on what came back - the Go twin of
// compat/python/compat_common.py (compat/README.md, "Driver contract").
// Pure functions: no Kafka client here.
package driver

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Partitions of the produce-fetch, idempotent and commit-resume topics, and
// of the group check's topic.
const (
	ProduceParts = 3
	GroupParts   = 6
)

// Record is one consumed message: partition, offset, value.
type Record struct {
	P int32
	O int64
	V []byte
}

// Pos is where a produced message landed: partition, offset.
type Pos struct {
	P int32
	O int64
}

// MessageKey and MessageValue: the i-th test message of tag.
func MessageKey(i int) []byte               { return []byte(fmt.Sprintf("key-%d", i)) }
func MessageValue(tag string, i int) []byte { return []byte(fmt.Sprintf("%s-%07d", tag, i)) }

func valueIndex(tag string, v []byte) (int, bool) {
	s := string(v)
	cut := strings.LastIndexByte(s, '-')
	if cut < 0 || s[:cut] != tag {
		return 0, false
	}
	i, err := strconv.Atoi(s[cut+1:])
	return i, err == nil
}

func VerifyAcks(n int, acks map[int]Pos, errs []string) []string {
	var problems []string
	if len(errs) > 0 {
		problems = append(problems, fmt.Sprintf("%d delivery errors, first: %s", len(errs), errs[0]))
	}
	if len(acks) != n {
		problems = append(problems, fmt.Sprintf("%d of %d acknowledged", len(acks), n))
	}
	seen := map[Pos]bool{}
	for i, a := range acks {
		if a.P < 0 || a.O < 0 {
			problems = append(problems, fmt.Sprintf("i=%d acked without partition/offset %v", i, a))
			break
		}
		if seen[a] {
			problems = append(problems, "two messages acknowledged at the same partition/offset")
			break
		}
		seen[a] = true
	}
	return problems
}

// VerifyReadBack: exactly the n messages of tag, each once, in produce order
// per partition, and (acks != nil) where the producer was told they landed.
func VerifyReadBack(tag string, n int, recs []Record, acks map[int]Pos) []string {
	var problems []string
	seen := map[int]Pos{}
	dups, foreign := 0, 0
	byPart := map[int32][]Record{}
	for _, r := range recs {
		i, ok := valueIndex(tag, r.V)
		if !ok || i < 0 || i >= n {
			foreign++
			continue
		}
		if _, dup := seen[i]; dup {
			dups++
			continue
		}
		seen[i] = Pos{r.P, r.O}
		byPart[r.P] = append(byPart[r.P], r)
	}
	if foreign > 0 {
		problems = append(problems, fmt.Sprintf("%d records that are not ours", foreign))
	}
	if dups > 0 {
		problems = append(problems, fmt.Sprintf("%d duplicates", dups))
	}
	if len(seen) != n {
		problems = append(problems, fmt.Sprintf("read %d of %d", len(seen), n))
	}
	for p, rs := range byPart {
		sort.Slice(rs, func(a, b int) bool { return rs[a].O < rs[b].O })
		last := -1
		for _, r := range rs {
			i, _ := valueIndex(tag, r.V)
			if i < last {
				problems = append(problems, fmt.Sprintf("partition %d: produce order not kept", p))
				break
			}
			last = i
		}
	}
	if acks != nil {
		moved := 0
		for i, at := range seen {
			if acks[i] != at {
				moved++
			}
		}
		if moved > 0 {
			problems = append(problems, fmt.Sprintf("%d records not at their acked position", moved))
		}
	}
	return problems
}

func PartitionCounts(recs []Record) string {
	counts := map[int32]int{}
	for _, r := range recs {
		counts[r.P]++
	}
	return fmt.Sprint(counts)
}

// ResumeState is what commit-resume phase a leaves for phase b.
type ResumeState struct {
	Topic      string          `json:"topic"`
	Group      string          `json:"group"`
	Committed  map[int32]int64 `json:"committed"`
	Consumed   [][2]int64      `json:"consumed"`
	EndOffsets map[int32]int64 `json:"end_offsets"`
}

func (s *ResumeState) start(p int32) int64 {
	if c, ok := s.Committed[p]; ok {
		return c
	}
	return 0 // never committed: auto.offset.reset=earliest
}

// ResumeDone: every partition read up to its end offset.
func (s *ResumeState) ResumeDone(recs []Record) bool {
	high := EndOf(recs)
	for p, end := range s.EndOffsets {
		h, ok := high[p]
		if !ok {
			h = s.start(p)
		}
		if h < end {
			return false
		}
	}
	return true
}

func VerifyResume(s *ResumeState, recs []Record) []string {
	var problems []string
	first := map[int32]int64{}
	got := map[Pos]bool{}
	for _, r := range recs {
		if _, ok := first[r.P]; !ok {
			first[r.P] = r.O
		}
		got[Pos{r.P, r.O}] = true
	}
	for p, end := range s.EndOffsets {
		c := s.start(p)
		if f, ok := first[p]; c < end && (!ok || f != c) {
			problems = append(problems, fmt.Sprintf("partition %d: committed %d, first read %v", p, c, first[p]))
		}
	}
	reread := 0
	for _, c := range s.Consumed {
		if got[Pos{int32(c[0]), c[1]}] {
			reread++
		}
	}
	if reread > 0 {
		problems = append(problems, fmt.Sprintf("%d records re-read that phase a had committed", reread))
	}
	missing := 0
	for p, end := range s.EndOffsets {
		for o := s.start(p); o < end; o++ {
			if !got[Pos{p, o}] {
				missing++
			}
		}
	}
	if missing > 0 {
		problems = append(problems, fmt.Sprintf("%d uncommitted records not read", missing))
	}
	if len(got) != len(recs) {
		problems = append(problems, fmt.Sprintf("%d duplicate deliveries in phase b", len(recs)-len(got)))
	}
	return problems
}

// SplitOK: each member owns exactly per partitions, together all, none twice.
func SplitOK(assigned [][]int32, per, parts int) bool {
	all := map[int32]bool{}
	total := 0
	for _, a := range assigned {
		if len(a) != per {
			return false
		}
		total += len(a)
		for _, p := range a {
			all[p] = true
		}
	}
	return total == parts && len(all) == parts
}

func DescribeSplit(assigned [][]int32) string {
	parts := make([]string, len(assigned))
	for k, a := range assigned {
		s := make([]string, len(a))
		for j, p := range a {
			s[j] = strconv.Itoa(int(p))
		}
		parts[k] = "[" + strings.Join(s, ",") + "]"
	}
	return strings.Join(parts, " ")
}

// WaitStable: true once cond has held for hold in a row; false after timeout.
func WaitStable(cond func() bool, timeout, hold time.Duration) bool {
	deadline := time.Now().Add(timeout)
	var since time.Time
	for time.Now().Before(deadline) {
		if cond() {
			if since.IsZero() {
				since = time.Now()
			}
			if time.Since(since) >= hold {
				return true
			}
		} else {
			since = time.Time{}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// WithTag keeps the records whose value is one of tag's messages.
func WithTag(tag string, recs []Record) []Record {
	var out []Record
	for _, r := range recs {
		if _, ok := valueIndex(tag, r.V); ok {
			out = append(out, r)
		}
	}
	return out
}

// EndOf: per partition, the offset after the last Record read.
func EndOf(recs []Record) map[int32]int64 {
	end := map[int32]int64{}
	for _, r := range recs {
		if r.O+1 > end[r.P] {
			end[r.P] = r.O + 1
		}
	}
	return end
}

// VerifyTxnOffsets: the group committed, on every partition, at least past
// the last committed Record (resuming re-reads nothing committed) and at most
// the last stable offset (nothing beyond what is there).
func VerifyTxnOffsets(committed, dataEnd, lso map[int32]int64, parts int32) []string {
	var problems []string
	for p := int32(0); p < parts; p++ {
		c, ok := committed[p]
		if !ok {
			if dataEnd[p] > 0 {
				problems = append(problems, fmt.Sprintf("partition %d: no committed offset, committed records end at %d",
					p, dataEnd[p]))
			}
			continue
		}
		if c < dataEnd[p] || c > lso[p] {
			problems = append(problems, fmt.Sprintf("partition %d: group committed %d, want %d..%d "+
				"(end of the committed records .. last stable offset)", p, c, dataEnd[p], lso[p]))
		}
	}
	return problems
}
