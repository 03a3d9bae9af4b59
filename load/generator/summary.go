// summary.go - a run's figures and gates, computed from raw rows.
//
// Owns: the summary JSON (metrics in the `metrics.<name>.values.<stat>` shape
// the reports read), percentiles (linear interpolation between closest
// ranks, as k6's Trend did, so old and new runs compare), the thresholds and
// their verdict, and the text summary. The same function serves one
// generator and the pooled rows of many: a merge is never an average.
// Must not: read or write files (record.go, main.go).
package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

var trendStats = []string{"avg", "min", "p(50)", "p(90)", "p(95)", "p(99)", "p(99.9)", "max", "count"}

type Metric struct {
	Type       string             `json:"type"`
	Contains   string             `json:"contains,omitempty"`
	Values     map[string]float64 `json:"values"`
	Thresholds map[string]Verdict `json:"thresholds,omitempty"`
}

type Verdict struct {
	OK bool `json:"ok"`
}

type StepInfo struct {
	// Skipped: not offered (a lower level of its climb failed first)
	Skipped  bool    `json:"skipped,omitempty"`
	Name     string  `json:"name"`
	Repeat   int     `json:"repeat"`
	Rate     float64 `json:"rate"`
	StartS   float64 `json:"start_s"`
	Duration float64 `json:"duration_s"`
}

type Summary struct {
	Tool          string            `json:"tool"`
	Engine        string            `json:"engine"`
	SchemaVersion int               `json:"schema_version"`
	Version       string            `json:"version"`
	Plan          *Plan             `json:"plan"`
	Generators    int               `json:"generators"`
	Index         *int              `json:"index"`
	RunID         string            `json:"run_id,omitempty"`
	GitCommit     string            `json:"git_commit,omitempty"`
	Targets       []string          `json:"targets,omitempty"`
	AuthToken     bool              `json:"auth_token"`
	StartedAt     string            `json:"started_at,omitempty"`
	FinishedAt    string            `json:"finished_at,omitempty"`
	State         map[string]any    `json:"state"`
	Metrics       map[string]Metric `json:"metrics"`
	Steps         []StepInfo        `json:"steps,omitempty"`
	// the schedule as run (a staircase climb ends at its first failing step)
	Segments         []Segment `json:"segments,omitempty"`
	SkippedSteps     []string  `json:"skipped_steps,omitempty"`
	ThresholdsOK     bool      `json:"thresholds_ok"`
	FailedThresholds []string  `json:"failed_thresholds"`
}

// Percentile of sorted values, interpolated between the closest ranks.
func Percentile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	pos := q / 100 * float64(n-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	if lo == hi {
		return sorted[lo]
	}
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}

func trend(samples []float64) Metric {
	sort.Float64s(samples)
	v := map[string]float64{"count": float64(len(samples))}
	if len(samples) > 0 {
		sum := 0.0
		for _, s := range samples {
			sum += s
		}
		v["avg"] = sum / float64(len(samples))
		v["min"] = samples[0]
		v["max"] = samples[len(samples)-1]
		for _, q := range []float64{50, 90, 95, 99, 99.9} {
			v[fmt.Sprintf("p(%g)", q)] = Percentile(samples, q)
		}
	}
	return Metric{Type: "trend", Contains: "time", Values: v}
}

func counter(count, seconds float64) Metric {
	rate := 0.0
	if seconds > 0 {
		rate = count / seconds
	}
	return Metric{Type: "counter", Values: map[string]float64{"count": count, "rate": rate}}
}

func rateMetric(passes, fails float64) Metric {
	r := 0.0
	if passes+fails > 0 {
		r = passes / (passes + fails)
	}
	return Metric{Type: "rate", Values: map[string]float64{"rate": r, "passes": passes, "fails": fails}}
}

// tally is what the metrics need from a set of rows.
type tally struct {
	batchLat, singleLat                    []float64
	produced, accepted, failed, payload    float64
	reqs, reqFailed, produceErr, produceOK float64
	sent, received                         float64
	scheduled, late, unsent, started       float64
	interrupted                            float64
}

func (t *tally) add(r *Row, slackMs float64, messageSize int, interruptedAfter float64) {
	t.scheduled++
	if r.NotSent() {
		t.unsent++
		t.failed += float64(r.Messages)
		return
	}
	t.started++
	if (r.Sent-r.Scheduled)*1000 > slackMs {
		t.late++
	}
	if interruptedAfter > 0 && r.Sent+r.LatencyMs/1000 > interruptedAfter {
		t.interrupted++
	}
	t.reqs++
	if r.Status == 0 || r.Status >= 400 {
		t.reqFailed++
	}
	if r.Route == RouteSingle {
		t.singleLat = append(t.singleLat, r.LatencyMs)
	} else {
		t.batchLat = append(t.batchLat, r.LatencyMs)
	}
	if r.Route == RouteFire {
		t.accepted += float64(r.OK)
	} else {
		t.produced += float64(r.OK)
	}
	t.failed += float64(r.Failed())
	t.payload += float64(r.OK * messageSize)
	if r.Error != "" || r.OK != r.Messages {
		t.produceErr++
	} else {
		t.produceOK++
	}
	t.sent += float64(r.BytesOut)
	t.received += float64(r.BytesIn)
}

// Summarize computes the summary of rows run under plan p (segments segs).
func Summarize(rows []Row, p *Plan, segs []Segment) *Summary {
	first, last := math.Inf(1), math.Inf(-1)
	for i := range rows {
		r := &rows[i]
		first = math.Min(first, r.Scheduled)
		end := r.Scheduled
		if !r.NotSent() {
			end = r.Sent + r.LatencyMs/1000
		}
		last = math.Max(last, end)
	}
	secs := 0.0
	if len(rows) > 0 {
		secs = last - first
	}
	var all tally
	steps := map[string]*tally{}
	stepEnd := map[string]float64{}
	var infos []StepInfo
	for i, s := range segs {
		if p.Staircase != nil && !s.Gap {
			steps[s.Name] = &tally{}
			gap := 0.0
			if i+1 < len(segs) && segs[i+1].Gap {
				gap = segs[i+1].Duration
			}
			stepEnd[s.Name] = s.Start + s.Duration + gap // relative; made absolute below
			infos = append(infos, StepInfo{Name: s.Name, Repeat: s.Repeat, Rate: s.Level, StartS: s.Start, Duration: s.Duration})
		}
	}
	for i := range rows {
		r := &rows[i]
		all.add(r, p.ScheduleSlackMs, p.MessageSize, 0)
		if t, ok := steps[r.Step]; ok {
			t.add(r, p.ScheduleSlackMs, p.MessageSize, first+stepEnd[r.Step])
		}
	}
	m := map[string]Metric{}
	m["batch_latency"] = trend(all.batchLat)
	if p.SingleRatio > 0 {
		m["single_latency"] = trend(all.singleLat)
	}
	if p.Route == RouteFire {
		m["messages_accepted"] = counter(all.accepted, secs)
	} else {
		m["messages_produced"] = counter(all.produced, secs)
	}
	m["messages_failed"] = counter(all.failed, secs)
	m["payload_bytes"] = counter(all.payload, secs)
	m["produce_errors"] = rateMetric(all.produceErr, all.produceOK)
	m["http_reqs"] = counter(all.reqs, secs)
	m["http_req_failed"] = rateMetric(all.reqFailed, all.reqs-all.reqFailed)
	m["data_sent"] = counter(all.sent, secs)
	m["data_received"] = counter(all.received, secs)
	m["requests_scheduled"] = counter(all.scheduled, secs)
	m["requests_late"] = counter(all.late, secs)
	m["requests_unsent"] = counter(all.unsent, secs)
	m["requests_dropped"] = counter(all.late+all.unsent, secs)
	for name, t := range steps {
		tag := "{step:" + name + "}"
		dur := 0.0
		for _, s := range infos {
			if s.Name == name {
				dur = s.Duration
			}
		}
		m["batch_latency"+tag] = trend(t.batchLat)
		m["produce_errors"+tag] = rateMetric(t.produceErr, t.produceOK)
		m["messages_produced"+tag] = counter(t.produced, dur)
		m["messages_accepted"+tag] = counter(t.accepted, dur)
		m["requests_scheduled"+tag] = counter(t.scheduled, dur)
		m["requests_started"+tag] = counter(t.started, dur)
		m["requests_dropped"+tag] = counter(t.late+t.unsent, dur)
		m["requests_interrupted"+tag] = counter(t.interrupted, dur)
	}
	s := &Summary{
		Tool: "chronik-loadgen", Engine: "vegeta " + vegetaVersion + " (library)", SchemaVersion: 1, Version: version,
		Plan: p, State: map[string]any{"testRunDurationMs": secs * 1000}, Metrics: m, Steps: infos,
	}
	s.FailedThresholds = applyThresholds(m, p, infos)
	s.ThresholdsOK = len(s.FailedThresholds) == 0
	return s
}

// applyThresholds records each gate's verdict in its metric and returns the failed ones.
func applyThresholds(m map[string]Metric, p *Plan, steps []StepInfo) []string {
	var failed []string
	gate := func(metric, expr string, ok bool) {
		mt, present := m[metric]
		if !present {
			return
		}
		if mt.Thresholds == nil {
			mt.Thresholds = map[string]Verdict{}
		}
		mt.Thresholds[expr] = Verdict{OK: ok}
		m[metric] = mt
		if !ok {
			failed = append(failed, metric+": "+expr)
		}
	}
	th := p.Thresholds
	val := func(metric, stat string) float64 { return m[metric].Values[stat] }
	budget := func(scheduled float64) float64 { return math.Max(1, math.Ceil(scheduled*th.DroppedRatio)) }
	p99 := fmt.Sprintf("p(99)<%g", th.P99Ms)
	errRate := fmt.Sprintf("rate<=%g", th.ErrorRate)
	if p.Staircase != nil {
		for _, s := range steps {
			tag := "{step:" + s.Name + "}"
			lat := m["batch_latency"+tag].Values
			gate("batch_latency"+tag, p99, lat["count"] > 0 && lat["p(99)"] < th.P99Ms)
			gate("produce_errors"+tag, errRate, val("produce_errors"+tag, "rate") <= th.ErrorRate)
			produced := "messages_produced" + tag
			if p.Route == RouteFire {
				produced = "messages_accepted" + tag
			}
			gate(produced, "count>0", val(produced, "count") > 0)
			b := budget(val("requests_scheduled"+tag, "count"))
			dropped := val("requests_dropped"+tag, "count") + val("requests_interrupted"+tag, "count")
			gate("requests_dropped"+tag, fmt.Sprintf("count+interrupted<%g", b), dropped < b)
		}
		sort.Strings(failed)
		return failed
	}
	lat := m["batch_latency"].Values
	gate("batch_latency", p99, lat["count"] > 0 && lat["p(99)"] < th.P99Ms)
	if p.SingleRatio > 0 {
		sl := m["single_latency"].Values
		gate("single_latency", p99, sl["count"] > 0 && sl["p(99)"] < th.P99Ms)
	}
	gate("http_req_failed", errRate, val("http_req_failed", "rate") <= th.ErrorRate)
	gate("produce_errors", errRate, val("produce_errors", "rate") <= th.ErrorRate)
	if p.Route == RouteFire {
		gate("messages_accepted", "count>0", val("messages_accepted", "count") > 0)
	} else {
		gate("messages_produced", "count>0", val("messages_produced", "count") > 0)
	}
	b := budget(val("requests_scheduled", "count"))
	gate("requests_dropped", fmt.Sprintf("count<%g", b), val("requests_dropped", "count") < b)
	sort.Strings(failed)
	return failed
}

// Text is the human summary printed at the end of a run or merge.
func (s *Summary) Text() string {
	var b strings.Builder
	p := s.Plan
	who := "merged"
	if s.Index != nil {
		who = fmt.Sprintf("generator %d of %d", *s.Index, s.Generators)
	} else if s.Generators > 1 {
		who = fmt.Sprintf("%d generators pooled", s.Generators)
	}
	fmt.Fprintf(&b, "\nchronik-loadgen %s (seed %s) %.1fs, %s\n", p.Name, p.Seed, s.State["testRunDurationMs"].(float64)/1000, who)
	fmt.Fprintf(&b, "  route=%s acks=%s topology=%s batch=%d message=%dB keys=%s scale=%g duration_scale=%g\n",
		p.Route, p.Acks, p.Topology, p.BatchSize, p.MessageSize, p.Keys, p.Scale, p.DurationScale)
	names := make([]string, 0, len(s.Metrics))
	for n := range s.Metrics {
		if !strings.Contains(n, "{") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		mt := s.Metrics[n]
		var text string
		switch mt.Type {
		case "trend":
			parts := []string{}
			for _, st := range trendStats {
				if v, ok := mt.Values[st]; ok {
					if st == "count" {
						parts = append(parts, fmt.Sprintf("%s=%.0f", st, v))
					} else {
						parts = append(parts, fmt.Sprintf("%s=%.2fms", st, v))
					}
				}
			}
			text = strings.Join(parts, " ")
		case "counter":
			text = fmt.Sprintf("%.0f %.1f/s", mt.Values["count"], mt.Values["rate"])
		case "rate":
			text = fmt.Sprintf("%.2f%% (%.0f of %.0f)", mt.Values["rate"]*100, mt.Values["passes"], mt.Values["passes"]+mt.Values["fails"])
		}
		fmt.Fprintf(&b, "  %-22s %s\n", n, text)
	}
	if len(s.Steps) > 0 {
		fmt.Fprintf(&b, "  steps:\n")
		for _, st := range s.Steps {
			if st.Skipped {
				fmt.Fprintf(&b, "    %-12s %8g req/s  skipped (a lower level of climb %d failed)\n", st.Name, st.Rate, st.Repeat)
				continue
			}
			tag := "{step:" + st.Name + "}"
			lat := s.Metrics["batch_latency"+tag].Values
			ok := "held"
			for _, f := range s.FailedThresholds {
				if strings.Contains(f, tag) {
					ok = "FAILED"
				}
			}
			fmt.Fprintf(&b, "    %-12s %8g req/s  p99=%.1fms  errors=%.2f%%  dropped=%.0f  %s\n", st.Name, st.Rate,
				lat["p(99)"], s.Metrics["produce_errors"+tag].Values["rate"]*100,
				s.Metrics["requests_dropped"+tag].Values["count"]+s.Metrics["requests_interrupted"+tag].Values["count"], ok)
		}
	}
	if s.ThresholdsOK {
		b.WriteString("  thresholds: all passed\n")
	} else {
		fmt.Fprintf(&b, "  thresholds FAILED: %s\n", strings.Join(s.FailedThresholds, "; "))
	}
	return b.String()
}
