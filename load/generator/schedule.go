// schedule.go - when each request of a plan is due: the open model.
//
// Owns: the schedule (hit k is due when the integral of the rate reaches k),
// the vegeta Pacer on it, the planned rate at a time, and the segment a hit
// belongs to. Requests leave on this schedule whatever the server does; a
// request that leaves late (all max_in_flight requests busy, or the process
// starved) is measured against its due time here.
// Must not: send requests.
package main

import (
	"math"
	"sort"
	"sync/atomic"
	"time"
)

// Schedule is a resolved plan's segments with their cumulative hit counts.
type Schedule struct {
	Segs  []Segment
	cum   []float64 // hits due before segment i starts
	total float64   // hits due over the whole plan
	// Hits the pacer has released so far (for the in-flight gauge).
	released atomic.Uint64
}

func NewSchedule(segs []Segment) *Schedule {
	s := &Schedule{Segs: segs, cum: make([]float64, len(segs))}
	for i, seg := range segs {
		s.cum[i] = s.total
		s.total += seg.Hits()
	}
	return s
}

// Hits is how many requests the plan schedules (hit k is due for every k < total).
func (s *Schedule) Hits() uint64 { return uint64(math.Ceil(s.total - 1e-9)) }

// End is the plan's length in seconds.
func (s *Schedule) End() float64 {
	if len(s.Segs) == 0 {
		return 0
	}
	last := s.Segs[len(s.Segs)-1]
	return last.Start + last.Duration
}

// Due is the time (seconds from the start) at which hit k is due, and the
// index of its segment; ok is false past the plan's end.
func (s *Schedule) Due(k uint64) (at float64, seg int, ok bool) {
	x := float64(k)
	if x >= s.total-1e-9 {
		return 0, 0, false
	}
	// the last segment whose cumulative start is ≤ k and that schedules hits
	i := sort.Search(len(s.cum), func(i int) bool { return s.cum[i] > x }) - 1
	for i > 0 && s.Segs[i].Hits() == 0 {
		i--
	}
	for i < len(s.Segs)-1 && x-s.cum[i] >= s.Segs[i].Hits() {
		i++
	}
	seg0 := s.Segs[i]
	rem := x - s.cum[i]
	a := seg0.FromRate
	c2 := (seg0.ToRate - seg0.FromRate) / (2 * seg0.Duration)
	// a·τ + c2·τ² = rem, in the form that stays exact when c2 → 0
	disc := a*a + 4*c2*rem
	if disc < 0 {
		disc = 0
	}
	den := a + math.Sqrt(disc)
	tau := 0.0
	if den > 0 {
		tau = 2 * rem / den
	}
	tau = math.Min(math.Max(tau, 0), seg0.Duration)
	return seg0.Start + tau, i, true
}

// RateAt is the planned rate (requests/s) at t seconds.
func (s *Schedule) RateAt(t float64) float64 {
	for _, seg := range s.Segs {
		if t >= seg.Start && t < seg.Start+seg.Duration {
			return seg.FromRate + (seg.ToRate-seg.FromRate)*(t-seg.Start)/seg.Duration
		}
	}
	return 0
}

// SegmentAt is the index of the segment holding time t (the last one past the end).
func (s *Schedule) SegmentAt(t float64) int {
	for i, seg := range s.Segs {
		if t < seg.Start+seg.Duration {
			return i
		}
	}
	return len(s.Segs) - 1
}

// Pace implements vegeta.Pacer: wait until hit `hits` is due; stop after the last.
func (s *Schedule) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	at, _, ok := s.Due(hits)
	if !ok {
		return 0, true
	}
	s.released.Store(hits)
	wait := time.Duration(at*1e9) - elapsed
	if wait < 0 {
		return 0, false
	}
	return wait, false
}

// Rate implements vegeta.Pacer.
func (s *Schedule) Rate(elapsed time.Duration) float64 { return s.RateAt(elapsed.Seconds()) }
