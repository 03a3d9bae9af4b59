// Result lines, test messages and the checks on what came back - the Go twin
// of compat/python/compat_common.py (compat/README.md, "Driver contract").
// Pure functions: no Kafka client here. Both Go drivers compile this one
// file: compat/sarama/verify.go is a symbolic link to it (each driver is its
// own package main, so it cannot be imported).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

const (
	produceParts = 3
	groupParts   = 6
)

// record is one consumed message: partition, offset, value.
type record struct {
	p int32
	o int64
	v []byte
}

type pos struct {
	p int32
	o int64
}

type reporter struct {
	client, version string
	emitted         map[string]bool
}

func (r *reporter) emit(check, result, detail string) {
	line, _ := json.Marshal(map[string]string{
		"client": r.client, "version": r.version, "check": check, "result": result, "detail": detail,
	})
	fmt.Println(string(line))
	r.emitted[check] = true
}

func (r *reporter) verdict(check string, problems []string, okDetail string) {
	if len(problems) > 0 {
		d := strings.Join(problems, "; ")
		if len(d) > 2000 {
			d = d[:2000]
		}
		r.emit(check, "fail", d)
		return
	}
	r.emit(check, "pass", okDetail)
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
}

func unique(prefix string) string {
	return fmt.Sprintf("%s-%x", prefix, time.Now().UnixNano()&0xffffffffff)
}

func messageKey(i int) []byte               { return []byte(fmt.Sprintf("key-%d", i)) }
func messageValue(tag string, i int) []byte { return []byte(fmt.Sprintf("%s-%07d", tag, i)) }

func valueIndex(tag string, v []byte) (int, bool) {
	s := string(v)
	cut := strings.LastIndexByte(s, '-')
	if cut < 0 || s[:cut] != tag {
		return 0, false
	}
	i, err := strconv.Atoi(s[cut+1:])
	return i, err == nil
}

func verifyAcks(n int, acks map[int]pos, errs []string) []string {
	var problems []string
	if len(errs) > 0 {
		problems = append(problems, fmt.Sprintf("%d delivery errors, first: %s", len(errs), errs[0]))
	}
	if len(acks) != n {
		problems = append(problems, fmt.Sprintf("%d of %d acknowledged", len(acks), n))
	}
	seen := map[pos]bool{}
	for i, a := range acks {
		if a.p < 0 || a.o < 0 {
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

// verifyReadBack: exactly the n messages of tag, each once, in produce order
// per partition, and (acks != nil) where the producer was told they landed.
func verifyReadBack(tag string, n int, recs []record, acks map[int]pos) []string {
	var problems []string
	seen := map[int]pos{}
	dups, foreign := 0, 0
	byPart := map[int32][]record{}
	for _, r := range recs {
		i, ok := valueIndex(tag, r.v)
		if !ok || i < 0 || i >= n {
			foreign++
			continue
		}
		if _, dup := seen[i]; dup {
			dups++
			continue
		}
		seen[i] = pos{r.p, r.o}
		byPart[r.p] = append(byPart[r.p], r)
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
		sort.Slice(rs, func(a, b int) bool { return rs[a].o < rs[b].o })
		last := -1
		for _, r := range rs {
			i, _ := valueIndex(tag, r.v)
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

func partitionCounts(recs []record) string {
	counts := map[int32]int{}
	for _, r := range recs {
		counts[r.p]++
	}
	return fmt.Sprint(counts)
}

// resumeState is what commit-resume phase a leaves for phase b.
type resumeState struct {
	Topic      string          `json:"topic"`
	Group      string          `json:"group"`
	Committed  map[int32]int64 `json:"committed"`
	Consumed   [][2]int64      `json:"consumed"`
	EndOffsets map[int32]int64 `json:"end_offsets"`
}

func (s *resumeState) start(p int32) int64 {
	if c, ok := s.Committed[p]; ok {
		return c
	}
	return 0 // never committed: auto.offset.reset=earliest
}

// resumeDone: every partition read up to its end offset.
func (s *resumeState) resumeDone(recs []record) bool {
	high := map[int32]int64{}
	for _, r := range recs {
		if r.o+1 > high[r.p] {
			high[r.p] = r.o + 1
		}
	}
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

func verifyResume(s *resumeState, recs []record) []string {
	var problems []string
	first := map[int32]int64{}
	got := map[pos]bool{}
	for _, r := range recs {
		if _, ok := first[r.p]; !ok {
			first[r.p] = r.o
		}
		got[pos{r.p, r.o}] = true
	}
	for p, end := range s.EndOffsets {
		c := s.start(p)
		if f, ok := first[p]; c < end && (!ok || f != c) {
			problems = append(problems, fmt.Sprintf("partition %d: committed %d, first read %v", p, c, first[p]))
		}
	}
	reread := 0
	for _, c := range s.Consumed {
		if got[pos{int32(c[0]), c[1]}] {
			reread++
		}
	}
	if reread > 0 {
		problems = append(problems, fmt.Sprintf("%d records re-read that phase a had committed", reread))
	}
	missing := 0
	for p, end := range s.EndOffsets {
		for o := s.start(p); o < end; o++ {
			if !got[pos{p, o}] {
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

// splitOK: each member owns exactly per partitions, together all, none twice.
func splitOK(assigned [][]int32, per, parts int) bool {
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

func describeSplit(assigned [][]int32) string {
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

// waitStable: true once cond has held for hold in a row; false after timeout.
func waitStable(cond func() bool, timeout, hold time.Duration) bool {
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

// withTag keeps the records whose value is one of tag's messages.
func withTag(tag string, recs []record) []record {
	var out []record
	for _, r := range recs {
		if _, ok := valueIndex(tag, r.v); ok {
			out = append(out, r)
		}
	}
	return out
}

// endOf: per partition, the offset after the last record read.
func endOf(recs []record) map[int32]int64 {
	end := map[int32]int64{}
	for _, r := range recs {
		if r.o+1 > end[r.p] {
			end[r.p] = r.o + 1
		}
	}
	return end
}

// verifyTxnOffsets: the group committed, on every partition, at least past
// the last committed record (resuming re-reads nothing committed) and at most
// the last stable offset (nothing beyond what is there).
func verifyTxnOffsets(committed, dataEnd, lso map[int32]int64, parts int32) []string {
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
