// plan.go - the declarative load plan (load/plans/*.json) and its resolved schedule.
//
// Owns: the plan schema, strict decoding and validation, the command-line
// overrides, and resolving a plan into segments of arrival rate (requests/s,
// linear within a segment) for one generator's share.
// Must not: send requests or know about HTTP.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// Dur is a Go duration written as a string in JSON ("90s", "1m30s").
type Dur time.Duration

func (d *Dur) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string like \"30s\": %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %v", s, err)
	}
	*d = Dur(v)
	return nil
}

func (d Dur) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Seconds of the duration.
func (d Dur) Seconds() float64 { return time.Duration(d).Seconds() }

type Stage struct {
	Duration Dur     `json:"duration"`
	Rate     float64 `json:"rate"`
}

type Constant struct {
	Rate     float64 `json:"rate"`
	Duration Dur     `json:"duration"`
}

type Staircase struct {
	Levels []float64 `json:"levels"`
	Step   Dur       `json:"step"`
	Gap    Dur       `json:"gap"`
	Repeat int       `json:"repeat"`
	// After a failing step, how long the system is left to drain before the
	// next climb (one generator ends a climb at its first failing step).
	Recovery Dur `json:"recovery"`
}

type Thresholds struct {
	P99Ms        float64 `json:"p99_ms"`
	ErrorRate    float64 `json:"error_rate"`
	DroppedRatio float64 `json:"dropped_ratio"`
}

// Plan is one load/plans/<name>.json file.
type Plan struct {
	Name            string          `json:"name"`
	Seed            string          `json:"seed"`
	About           string          `json:"about,omitempty"`
	Route           string          `json:"route"`
	SingleRatio     float64         `json:"single_ratio"`
	BatchSize       int             `json:"batch_size"`
	MessageSize     int             `json:"message_size"`
	Keys            string          `json:"keys"`
	Topic           string          `json:"topic,omitempty"`
	Acks            string          `json:"acks"`
	Topology        string          `json:"topology"`
	Timeout         Dur             `json:"timeout"`
	MaxInFlight     int             `json:"max_in_flight"`
	ScheduleSlackMs float64         `json:"schedule_slack_ms"`
	StartRate       float64         `json:"start_rate,omitempty"`
	Stages          []Stage         `json:"stages,omitempty"`
	Constant        *Constant       `json:"constant,omitempty"`
	Staircase       *Staircase      `json:"staircase,omitempty"`
	Thresholds      Thresholds      `json:"thresholds"`
	Translation     json.RawMessage `json:"translation,omitempty"`
	// A fault schedule for run-all.sh --faults (scripts/faults.py reads
	// and checks it); the generator only carries it.
	Faults string `json:"faults,omitempty"`
	// Tenants sharing one broker, each with its own ingestor and topic
	// (run-all.sh; scripts/tenants.py writes one plan per tenant from this
	// one and its overrides); the generator only carries it.
	Tenants json.RawMessage `json:"tenants,omitempty"`
	// How run-all.sh runs the verifying consumers (SPEC.md "consumers":
	// e.g. {"mode": "share", ...} for a KIP-932 share group); run-all.sh
	// reads and checks it, the generator only carries it.
	Consumers json.RawMessage `json:"consumers,omitempty"`
	// Set by overrides, recorded in results.
	Scale         float64 `json:"scale"`
	DurationScale float64 `json:"duration_scale"`
}

// Limits that keep a plan from asking for what one process cannot hold.
const (
	maxBatchSize   = 100000
	maxMessageSize = 1 << 20
	maxRate        = 1e6
	maxSegments    = 10000
)

// LoadPlan reads and validates a plan file (unknown fields are errors).
func LoadPlan(path string) (*Plan, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	p := &Plan{Keys: "fixed", Route: "batch", ScheduleSlackMs: 50, Scale: 1, DurationScale: 1,
		Thresholds: Thresholds{DroppedRatio: 0.01}}
	if err := dec.Decode(p); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: trailing data after the plan object", path)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return p, nil
}

// Validate checks every field; it is called again after overrides.
func (p *Plan) Validate() error {
	var errs []string
	bad := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }
	if p.Name == "" {
		bad("name is required")
	}
	if p.Route != "batch" && p.Route != "fire" {
		bad("route %q: expected batch or fire", p.Route)
	}
	if p.SingleRatio < 0 || p.SingleRatio > 1 || math.IsNaN(p.SingleRatio) {
		bad("single_ratio %v: expected 0..1", p.SingleRatio)
	}
	if p.SingleRatio > 0 && p.Route == "fire" {
		bad("single_ratio needs route batch (POST /produce is blocking)")
	}
	if p.BatchSize < 1 || p.BatchSize > maxBatchSize {
		bad("batch_size %d: expected 1..%d", p.BatchSize, maxBatchSize)
	}
	if p.MessageSize < 1 || p.MessageSize > maxMessageSize {
		bad("message_size %d: expected 1..%d", p.MessageSize, maxMessageSize)
	}
	if p.BatchSize*p.MessageSize > 64<<20 {
		bad("batch_size × message_size over 64 MiB")
	}
	if p.Keys != "fixed" && p.Keys != "fresh" {
		bad("keys %q: expected fixed or fresh", p.Keys)
	}
	if p.Timeout <= 0 {
		bad("timeout must be > 0")
	}
	if p.MaxInFlight < 1 || p.MaxInFlight > 1000000 {
		bad("max_in_flight %d: expected 1..1000000", p.MaxInFlight)
	}
	if p.ScheduleSlackMs <= 0 {
		bad("schedule_slack_ms must be > 0")
	}
	if p.Thresholds.P99Ms <= 0 {
		bad("thresholds.p99_ms must be > 0")
	}
	if p.Thresholds.ErrorRate < 0 || p.Thresholds.ErrorRate > 1 {
		bad("thresholds.error_rate: expected 0..1")
	}
	if p.Thresholds.DroppedRatio < 0 || p.Thresholds.DroppedRatio > 1 {
		bad("thresholds.dropped_ratio: expected 0..1")
	}
	if !(p.Scale > 0) || !(p.DurationScale > 0) {
		bad("scale and duration_scale must be > 0")
	}
	shapes := 0
	if len(p.Stages) > 0 {
		shapes++
		if len(p.Stages) > maxSegments {
			bad("too many stages")
		}
		for i, s := range p.Stages {
			if s.Duration <= 0 || s.Rate < 0 || s.Rate > maxRate {
				bad("stages[%d]: duration must be > 0 and rate 0..%g", i, maxRate)
			}
		}
		if p.StartRate < 0 || p.StartRate > maxRate {
			bad("start_rate: expected 0..%g", maxRate)
		}
	}
	if p.Constant != nil {
		shapes++
		if p.Constant.Duration <= 0 || !(p.Constant.Rate > 0) || p.Constant.Rate > maxRate {
			bad("constant: duration must be > 0 and rate in (0, %g]", maxRate)
		}
	}
	if s := p.Staircase; s != nil {
		shapes++
		if len(s.Levels) == 0 || len(s.Levels)*max(s.Repeat, 1) > maxSegments/2 {
			bad("staircase.levels: 1..%d levels", maxSegments/2)
		}
		for i, l := range s.Levels {
			if !(l > 0) || l > maxRate || (i > 0 && l <= s.Levels[i-1]) {
				bad("staircase.levels must be increasing rates in (0, %g]", maxRate)
				break
			}
		}
		if s.Step <= 0 || s.Repeat < 1 || s.Recovery < 0 {
			bad("staircase: step must be > 0, repeat ≥ 1 and recovery ≥ 0")
		}
		if s.Gap < 0 || s.Gap.Seconds()*1000 < p.Thresholds.P99Ms {
			bad("staircase.gap %s must be at least thresholds.p99_ms (%g ms): a step's requests finish in its gap", time.Duration(s.Gap), p.Thresholds.P99Ms)
		}
	}
	if shapes != 1 {
		bad("exactly one of stages, constant and staircase is required (found %d)", shapes)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// Segment is one piece of the resolved schedule: the rate goes linearly
// from FromRate to ToRate over Duration seconds.
type Segment struct {
	Name     string  `json:"name"`
	Start    float64 `json:"start_s"`
	Duration float64 `json:"duration_s"`
	FromRate float64 `json:"from_rate"`
	ToRate   float64 `json:"to_rate"`
	// staircase steps only
	Repeat int     `json:"repeat,omitempty"`
	Level  float64 `json:"rate,omitempty"`
	Gap    bool    `json:"gap,omitempty"`
}

// Hits the segment schedules.
func (s Segment) Hits() float64 { return (s.FromRate + s.ToRate) / 2 * s.Duration }

// Resolve turns the plan into this generator's segments: every rate × scale
// ÷ generators, every duration × duration_scale (staircase gaps excepted:
// they are the time a step's requests have to finish).
func (p *Plan) Resolve(generators int) []Segment {
	share := p.Scale / float64(generators)
	var segs []Segment
	at := 0.0
	add := func(s Segment) {
		s.Start = at
		at += s.Duration
		segs = append(segs, s)
	}
	switch {
	case p.Constant != nil:
		r := p.Constant.Rate * share
		add(Segment{Name: "s0", Duration: p.Constant.Duration.Seconds() * p.DurationScale, FromRate: r, ToRate: r})
	case p.Staircase != nil:
		s := p.Staircase
		for rep := 1; rep <= s.Repeat; rep++ {
			for _, l := range s.Levels {
				r := l * share
				add(Segment{Name: fmt.Sprintf("r%d_l%s", rep, fmtLevel(l)), Duration: s.Step.Seconds() * p.DurationScale,
					FromRate: r, ToRate: r, Repeat: rep, Level: l})
				if s.Gap > 0 {
					add(Segment{Name: "gap", Duration: s.Gap.Seconds(), Gap: true})
				}
			}
		}
	default:
		prev := p.StartRate * share
		for i, st := range p.Stages {
			r := st.Rate * share
			add(Segment{Name: "s" + strconv.Itoa(i), Duration: st.Duration.Seconds() * p.DurationScale, FromRate: prev, ToRate: r})
			prev = r
		}
	}
	return segs
}

func fmtLevel(l float64) string { return strconv.FormatFloat(l, 'f', -1, 64) }

// ApplyOverrides sets the plan fields named on the command line.
func (p *Plan) ApplyOverrides(o Overrides) error {
	if o.Rate != nil || o.Duration != nil {
		if p.Constant == nil {
			return fmt.Errorf("--rate/--duration apply to constant plans only (%s is not)", p.Name)
		}
		if o.Rate != nil {
			p.Constant.Rate = *o.Rate
		}
		if o.Duration != nil {
			p.Constant.Duration = Dur(*o.Duration)
		}
	}
	if o.Levels != nil || o.Step != nil || o.Gap != nil || o.Repeat != nil {
		if p.Staircase == nil {
			return fmt.Errorf("--levels/--step/--gap/--repeat apply to staircase plans only (%s is not)", p.Name)
		}
		if o.Levels != nil {
			p.Staircase.Levels = o.Levels
		}
		if o.Step != nil {
			p.Staircase.Step = Dur(*o.Step)
		}
		if o.Gap != nil {
			p.Staircase.Gap = Dur(*o.Gap)
		}
		if o.Repeat != nil {
			p.Staircase.Repeat = *o.Repeat
		}
	}
	setF := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	setI := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	setS := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	setF(&p.Scale, o.Scale)
	setF(&p.DurationScale, o.DurationScale)
	setI(&p.BatchSize, o.BatchSize)
	setI(&p.MessageSize, o.MessageSize)
	setS(&p.Keys, o.Keys)
	setS(&p.Topic, o.Topic)
	setI(&p.MaxInFlight, o.MaxInFlight)
	setF(&p.Thresholds.P99Ms, o.P99Ms)
	setF(&p.Thresholds.ErrorRate, o.ErrorRate)
	setF(&p.Thresholds.DroppedRatio, o.DroppedRatio)
	setS(&p.Acks, o.Acks)
	setS(&p.Topology, o.Topology)
	if o.Timeout != nil {
		p.Timeout = Dur(*o.Timeout)
	}
	return p.Validate()
}

// Overrides are the plan fields a command line may set (nil = not given).
type Overrides struct {
	Rate, Scale, DurationScale, P99Ms, ErrorRate, DroppedRatio *float64
	Duration, Step, Gap, Timeout                               *time.Duration
	Levels                                                     []float64
	Repeat, BatchSize, MessageSize, MaxInFlight                *int
	Keys, Topic, Acks, Topology                                *string
}

// ParseLevels reads "200,400,600".
func ParseLevels(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0) {
			return nil, fmt.Errorf("--levels %q: comma-separated positive rates", s)
		}
		out = append(out, v)
	}
	return out, nil
}
