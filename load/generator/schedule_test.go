package main

import (
	"math"
	"testing"
	"time"
)

func TestConstantScheduleIsEvenlySpaced(t *testing.T) {
	s := NewSchedule([]Segment{{Name: "s0", Duration: 10, FromRate: 20, ToRate: 20}})
	if s.Hits() != 200 {
		t.Fatalf("hits %d, want 200", s.Hits())
	}
	for _, k := range []uint64{0, 1, 57, 199} {
		at, _, ok := s.Due(k)
		if !ok || math.Abs(at-float64(k)/20) > 1e-9 {
			t.Fatalf("hit %d due at %v, want %v", k, at, float64(k)/20)
		}
	}
	if _, _, ok := s.Due(200); ok {
		t.Fatal("hit 200 is past the plan")
	}
}

func TestRampScheduleIntegratesTheRate(t *testing.T) {
	// 0 -> 100 req/s over 10 s, then 100 -> 0 over 10 s: 500 + 500 hits
	segs := []Segment{{Name: "s0", Start: 0, Duration: 10, FromRate: 0, ToRate: 100}, {Name: "s1", Start: 10, Duration: 10, FromRate: 100, ToRate: 0}}
	s := NewSchedule(segs)
	if s.Hits() != 1000 {
		t.Fatalf("hits %d, want 1000", s.Hits())
	}
	prev := -1.0
	for k := uint64(0); k < s.Hits(); k++ {
		at, seg, _ := s.Due(k)
		if at < prev {
			t.Fatalf("hit %d due at %v before hit %d (%v)", k, at, k-1, prev)
		}
		prev = at
		// the integral of the rate up to `at` is k
		var h float64
		if at <= 10 {
			h = 5 * at * at
		} else {
			h = 500 + 100*(at-10) - 5*(at-10)*(at-10)
		}
		if math.Abs(h-float64(k)) > 1e-6 {
			t.Fatalf("hit %d due at %v where %v hits are due", k, at, h)
		}
		if (at < 10 && seg != 0) || (at > 10 && seg != 1) {
			t.Fatalf("hit %d at %v in segment %d", k, at, seg)
		}
	}
}

func TestStaircaseSkipsGaps(t *testing.T) {
	p := &Plan{Scale: 1, DurationScale: 1, Staircase: &Staircase{Levels: []float64{10, 20}, Step: Dur(2 * time.Second), Gap: Dur(time.Second), Repeat: 2}}
	segs := p.Resolve(1)
	if len(segs) != 8 || segs[0].Name != "r1_l10" || segs[2].Name != "r1_l20" || segs[6].Name != "r2_l20" || !segs[1].Gap {
		t.Fatalf("segments %+v", segs)
	}
	s := NewSchedule(segs)
	if s.Hits() != 120 {
		t.Fatalf("hits %d, want 120", s.Hits())
	}
	for k := uint64(0); k < s.Hits(); k++ {
		at, seg, _ := s.Due(k)
		if segs[seg].Gap || at < segs[seg].Start || at >= segs[seg].Start+segs[seg].Duration {
			t.Fatalf("hit %d due at %v in %+v", k, at, segs[seg])
		}
	}
	// two generators share the rate
	if h := NewSchedule(p.Resolve(2)).Hits(); h != 60 {
		t.Fatalf("a generator of two schedules %d hits, want 60", h)
	}
}

func TestPacerWaitsForTheDueTimeAndStops(t *testing.T) {
	s := NewSchedule([]Segment{{Name: "s0", Duration: 1, FromRate: 10, ToRate: 10}})
	if w, stop := s.Pace(0, 3); stop || w != 300*time.Millisecond {
		t.Fatalf("Pace(0, 3) = %v %v", w, stop)
	}
	if w, stop := s.Pace(time.Second, 3); stop || w != 0 {
		t.Fatalf("behind schedule: Pace = %v %v, want 0 (send now)", w, stop)
	}
	if _, stop := s.Pace(time.Second, 10); !stop {
		t.Fatal("Pace after the last hit must stop")
	}
}
