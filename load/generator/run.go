// run.go - one generator's run: ready check, start barrier, the attack, the record.
//
// Owns: wiring the plan's schedule and bodies into a vegeta Attacker, turning
// every vegeta Result into a Row (due time, lateness, the ingestor's
// per-message answer), counting the requests never sent, and writing this
// generator's results (gen-I/requests-<plan>.csv.gz, gen-I/summary-<plan>.json;
// with one generator also merged-<plan>.json).
// Must not: compute figures itself (summary.go) or parse answers (answer.go).
package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

type RunConfig struct {
	Plan            *Plan
	Targets         []string
	ResultsDir      string
	Generators      int
	Index           int
	BarrierListen   string
	BarrierPeer     string
	BarrierTimeout  time.Duration
	PromAddr        string
	ServeResultsFor time.Duration
	ReadyTimeout    time.Duration
	RunID           string
	GitCommit       string
	Token           string
	CAFile          string
	Log             io.Writer
}

// Exit statuses of `run` and `merge`.
const (
	exitOK         = 0
	exitFailed     = 1
	exitUsage      = 2
	exitNotReady   = 3
	exitThresholds = 99
)

func (c *RunConfig) logf(format string, a ...any) {
	fmt.Fprintf(c.Log, "[chronik-loadgen %d/%d] "+format+"\n", append([]any{c.Index, c.Generators}, a...)...)
}

func tlsConfig(caFile string) (*tls.Config, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if caFile == "" {
		caFile = os.Getenv("SSL_CERT_FILE")
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %v", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", caFile)
		}
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// waitReady polls GET /ready on every target until each answers 200.
func waitReady(ctx context.Context, client *http.Client, targets []string, token string, timeout time.Duration) error {
	for _, t := range targets {
		deadline := time.Now().Add(timeout)
		last := "no answer"
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, t+"/ready", nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			res, err := client.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<16))
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					break
				}
				last = res.Status
			} else {
				last = err.Error()
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s/ready not 200 after %s (last: %s)", t, timeout, last)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	return nil
}

// httpClient is the attacker's HTTP/1.1 client. Its write buffer holds a
// whole request (a 25 KiB batch leaves in one write, not seven 4 KiB ones:
// system calls were the generator's largest cost), no proxy from the
// environment (load goes straight to the targets), no compression. An idle
// connection is closed by the client before the server's keep-alive idle
// timeout (the ingestor's --http-header-read-timeout-ms, 10 s) can close it:
// a request sent on a connection the server is closing at that moment fails
// as connection_closed (seen at 100,000 msg/s, where most of the pool idles).
// idleConnTimeout: below every server's keep-alive idle timeout (httpClient).
const idleConnTimeout = 4 * time.Second

func httpClient(p *Plan, tlsc *tls.Config) *http.Client {
	body := p.BatchSize*(p.MessageSize+64) + 4096
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{KeepAlive: 30 * time.Second, Timeout: 10 * time.Second}).DialContext,
		TLSClientConfig:     tlsc,
		MaxIdleConnsPerHost: p.MaxInFlight,
		IdleConnTimeout:     idleConnTimeout,
		DisableCompression:  true,
		WriteBufferSize:     min(max(body, 4096), 1<<20),
		ReadBufferSize:      16 << 10,
	}}
}

func routeOf(url string) string {
	switch {
	case strings.HasSuffix(url, "/produce/fire/batch"):
		return RouteFire
	case strings.HasSuffix(url, "/produce"):
		return RouteSingle
	default:
		return RouteBatch
	}
}

func epoch(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Run executes the plan and returns the exit status.
func Run(ctx context.Context, c *RunConfig) int {
	p := c.Plan
	segs := p.Resolve(c.Generators)
	sched := NewSchedule(segs)
	genDir := filepath.Join(c.ResultsDir, fmt.Sprintf("gen-%d", c.Index))
	if err := os.MkdirAll(genDir, 0o755); err != nil {
		c.logf("error: %v", err)
		return exitFailed
	}
	tlsc, err := tlsConfig(c.CAFile)
	if err != nil {
		c.logf("error: %v", err)
		return exitUsage
	}
	live := NewLive(p.Name, c.Index)
	var barrier *Barrier
	resultsFetched := make(chan struct{})
	var fetchedOnce, resultsReady atomic.Bool
	mux := http.NewServeMux()
	mux.Handle("/metrics", live.Handler())
	// CPU and heap profiles of the generator itself (go tool pprof URL)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	if c.Generators > 1 && c.Index == 0 {
		barrier = NewBarrier(c.Generators)
		mux.Handle("/arrive", barrier)
	}
	// GET serves the results (as often as asked: a fetch that arrives
	// broken is fetched again); DELETE is the collector saying it has
	// unpacked them, and lets the generator exit.
	mux.HandleFunc("/results", func(w http.ResponseWriter, r *http.Request) {
		if c.ServeResultsFor <= 0 || !resultsReady.Load() {
			http.Error(w, "no results yet", http.StatusServiceUnavailable)
			return
		}
		switch r.Method {
		case http.MethodGet:
			w.Header().Set("Content-Type", "application/gzip")
			_ = writeTarGz(w, genDir, fmt.Sprintf("gen-%d", c.Index))
		case http.MethodDelete:
			if fetchedOnce.CompareAndSwap(false, true) {
				close(resultsFetched)
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("Allow", "GET, DELETE")
			http.Error(w, "GET or DELETE", http.StatusMethodNotAllowed)
		}
	})
	listened := map[string]bool{}
	for _, addr := range []string{c.PromAddr, c.BarrierListen} {
		if addr == "" || listened[addr] {
			continue
		}
		listened[addr] = true
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			c.logf("error: listen %s: %v", addr, err)
			return exitUsage
		}
		c.logf("LISTENING http=%s", ln.Addr())
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
	}

	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsc}}
	if err := waitReady(ctx, client, c.Targets, c.Token, c.ReadyTimeout); err != nil {
		c.logf("error: %v", err)
		return exitNotReady
	}
	startAt := time.Now()
	if c.Generators > 1 {
		if c.Index == 0 {
			startAt, err = barrier.Lead(ctx, c.BarrierTimeout)
		} else {
			startAt, err = Follow(ctx, c.BarrierPeer, c.Index, c.BarrierTimeout)
		}
		if err != nil {
			c.logf("error: %v", err)
			return exitFailed
		}
		c.logf("start barrier passed: all %d generators start at %s", c.Generators, startAt.UTC().Format(time.RFC3339Nano))
		time.Sleep(time.Until(startAt))
	}

	bodies := NewBodies(p, c.Index)
	header := http.Header{"Content-Type": []string{"application/json"}}
	if c.Token != "" {
		header.Set("Authorization", "Bearer "+c.Token)
	}
	batchPath := "/produce/batch"
	if p.Route == RouteFire {
		batchPath = "/produce/fire/batch"
	}
	var counter atomic.Uint64
	targeter := func(t *vegeta.Target) error {
		n := counter.Add(1) - 1
		base := c.Targets[n%uint64(len(c.Targets))]
		t.Method = http.MethodPost
		t.Header = header
		// single_ratio of the requests, spread evenly
		if p.SingleRatio > 0 && uint64(float64(n+1)*p.SingleRatio) > uint64(float64(n)*p.SingleRatio) {
			t.URL = base + "/produce"
			t.Body = bodies.Single(n)
			return nil
		}
		t.URL = base + batchPath
		t.Body = bodies.Batch(n)
		return nil
	}
	// Workers (each one request in flight) started before the load, as k6
	// pre-allocated VUs: enough for a quarter second of latency at the plan's
	// peak rate, so the first seconds do not leave late while workers start.
	peak := 0.0
	for _, s := range segs {
		peak = max(peak, s.FromRate, s.ToRate)
	}
	initial := min(p.MaxInFlight, max(16, int(math.Ceil(peak*0.25))))
	attackClient := httpClient(p, tlsc)
	newAttacker := func() *vegeta.Attacker {
		return vegeta.NewAttacker(
			vegeta.Client(attackClient),
			vegeta.Timeout(time.Duration(p.Timeout)),
			vegeta.Workers(uint64(initial)),
			vegeta.MaxWorkers(uint64(p.MaxInFlight)),
			vegeta.Connections(p.MaxInFlight),
			vegeta.KeepAlive(true),
			vegeta.HTTP2(false),
			vegeta.TLSConfig(tlsc),
			vegeta.MaxBody(4<<20),
			vegeta.Redirects(vegeta.NoFollow),
		)
	}
	rowsPath := filepath.Join(genDir, "requests-"+p.Name+".csv.gz")
	rw, err := NewRowWriter(rowsPath)
	if err != nil {
		c.logf("error: %v", err)
		return exitFailed
	}
	a := &attack{c: c, live: live, rw: rw, targeter: targeter, newAttacker: newAttacker}
	c.logf("plan %s: %d requests over %.1fs against %s", p.Name, sched.Hits(), sched.End(), strings.Join(c.Targets, ","))
	began := time.Now()
	var skipped []Segment
	if p.Staircase != nil && c.Generators == 1 {
		segs, skipped, err = a.climb(ctx, segs)
	} else {
		err = a.run(ctx, sched, began)
	}
	finished := time.Now()
	if err == nil {
		err = rw.Close()
	}
	if err != nil {
		c.logf("error: writing %s: %v", rowsPath, err)
		return exitFailed
	}
	rows := a.rows
	s := Summarize(rows, p, segs)
	s.Segments = segs
	for _, k := range skipped {
		s.SkippedSteps = append(s.SkippedSteps, k.Name)
		s.Steps = append(s.Steps, StepInfo{Name: k.Name, Repeat: k.Repeat, Rate: k.Level, Duration: k.Duration, Skipped: true})
	}
	idx := c.Index
	s.Index, s.Generators = &idx, c.Generators
	c.stamp(s, began, finished)
	if err := writeJSON(filepath.Join(genDir, "summary-"+p.Name+".json"), s); err != nil {
		c.logf("error: %v", err)
		return exitFailed
	}
	if c.Generators == 1 {
		merged := *s
		merged.Index = nil
		if err := writeJSON(filepath.Join(c.ResultsDir, "merged-"+p.Name+".json"), &merged); err != nil {
			c.logf("error: %v", err)
			return exitFailed
		}
	}
	fmt.Print(s.Text())
	resultsReady.Store(true)
	if c.ServeResultsFor > 0 {
		c.logf("serving gen-%d results at /results for up to %s", c.Index, c.ServeResultsFor)
		select {
		case <-resultsFetched:
			c.logf("results collected")
		case <-time.After(c.ServeResultsFor):
			c.logf("results were not fetched within %s", c.ServeResultsFor)
		case <-ctx.Done():
		}
	}
	if !s.ThresholdsOK {
		return exitThresholds
	}
	return exitOK
}

// attack turns the plan's schedule into requests and their answers into rows.
type attack struct {
	c           *RunConfig
	live        *Live
	rw          *RowWriter
	targeter    vegeta.Targeter
	newAttacker func() *vegeta.Attacker
	rows        []Row
	seqBase     uint64 // seq of the first request of the current schedule
}

// run sends sched's requests from began on (its times are offsets from
// began), records every answer, and a not_sent row for every request due
// but never sent (hard stop at the plan's end + the request timeout, or cancel).
func (a *attack) run(ctx context.Context, sched *Schedule, began time.Time) error {
	p := a.c.Plan
	attacker := a.newAttacker()
	if d := time.Until(began); d > 0 {
		time.Sleep(d)
	}
	results := attacker.Attack(a.targeter, sched, 0, p.Name)
	stopAt := time.Duration(sched.End()*1e9) + time.Duration(p.Timeout) + 5*time.Second
	stopTimer := time.AfterFunc(stopAt, func() { attacker.Stop() })
	defer stopTimer.Stop()
	stopCtx := context.AfterFunc(ctx, func() { attacker.Stop() })
	defer stopCtx()
	tick := time.NewTicker(time.Second)
	var answered atomic.Uint64
	done := make(chan struct{})
	defer close(done)
	go func() {
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				a.live.target.Set(sched.RateAt(time.Since(began).Seconds()))
				a.live.inFlight.Set(float64(sched.released.Load()) - float64(answered.Load()))
			}
		}
	}()
	startEpoch := epoch(began)
	seen := uint64(0)
	var werr error
	for res := range results {
		answered.Add(1)
		due, seg, ok := sched.Due(res.Seq)
		if !ok || werr != nil {
			continue // (the pacer stops at the last due hit; after a write error, drain)
		}
		route := routeOf(res.URL)
		messages := p.BatchSize
		if route == RouteSingle {
			messages = 1
		}
		status := int(res.Code)
		good, reason := Count(route, status, res.Body, messages, res.Error)
		row := Row{Seq: a.seqBase + res.Seq, Scheduled: startEpoch + due, Sent: epoch(res.Timestamp),
			LatencyMs: float64(res.Latency.Nanoseconds()) / 1e6, Route: route, Status: status,
			Messages: messages, OK: good, BytesOut: res.BytesOut, BytesIn: res.BytesIn, Step: sched.Segs[seg].Name, Error: reason}
		werr = a.record(row, (row.Sent-row.Scheduled)*1000 > p.ScheduleSlackMs)
		seen = max(seen, res.Seq+1)
	}
	for k := seen; k < sched.Hits() && werr == nil; k++ {
		due, seg, _ := sched.Due(k)
		werr = a.record(Row{Seq: a.seqBase + k, Scheduled: startEpoch + due, Route: p.Route, Messages: p.BatchSize,
			Step: sched.Segs[seg].Name, Error: errNotSent}, false)
	}
	a.seqBase += sched.Hits()
	return werr
}

func (a *attack) record(row Row, late bool) error {
	if err := a.rw.Write(&row); err != nil {
		return err
	}
	a.live.Observe(&row, late)
	a.rows = append(a.rows, row)
	return nil
}

// climb runs a staircase step by step and ends a climb at its first failing
// step: the levels above it are not offered (they are reported as skipped and
// never count as held), and the next climb starts after the step's gap plus
// the staircase's recovery time, so a system that fell behind drains first
// and the next climb measures it, not the backlog. Used with one generator
// (several would each judge only their share: they run the whole staircase).
// Returns the segments as run (start times from the run's start).
func (a *attack) climb(ctx context.Context, plan []Segment) ([]Segment, []Segment, error) {
	p := a.c.Plan
	recovery := time.Duration(p.Staircase.Recovery)
	start := time.Now()
	var ran []Segment
	var skipped []Segment
	failedClimb := 0
	for i, seg := range plan {
		if seg.Gap || ctx.Err() != nil {
			continue
		}
		if seg.Repeat == failedClimb {
			skipped = append(skipped, seg)
			continue
		}
		gap := 0.0
		if i+1 < len(plan) && plan[i+1].Gap {
			gap = plan[i+1].Duration
		}
		at := time.Now()
		step := seg
		step.Start = at.Sub(start).Seconds()
		sched := NewSchedule([]Segment{{Name: seg.Name, Duration: seg.Duration, FromRate: seg.FromRate, ToRate: seg.ToRate,
			Repeat: seg.Repeat, Level: seg.Level}})
		first := len(a.rows)
		if err := a.run(ctx, sched, at); err != nil {
			return ran, skipped, err
		}
		// the step's requests finish in its gap
		if d := time.Until(at.Add(time.Duration((seg.Duration + gap) * 1e9))); d > 0 {
			time.Sleep(d)
		}
		ran = append(ran, step)
		if gap > 0 {
			ran = append(ran, Segment{Name: "gap", Start: step.Start + seg.Duration, Duration: time.Since(at).Seconds() - seg.Duration, Gap: true})
		}
		probe := Summarize(a.rows[first:], p, []Segment{{Name: seg.Name, Duration: seg.Duration, FromRate: seg.FromRate,
			ToRate: seg.ToRate, Repeat: seg.Repeat, Level: seg.Level}, {Name: "gap", Start: seg.Duration, Duration: time.Since(at).Seconds() - seg.Duration, Gap: true}})
		if !probe.ThresholdsOK {
			failedClimb = seg.Repeat
			a.c.logf("step %s failed (%s): the rest of climb %d is skipped; %s to recover", seg.Name,
				strings.Join(probe.FailedThresholds, "; "), seg.Repeat, recovery)
			select {
			case <-ctx.Done():
			case <-time.After(recovery):
			}
		}
	}
	return ran, skipped, nil
}

func (c *RunConfig) stamp(s *Summary, began, finished time.Time) {
	s.RunID, s.GitCommit, s.Targets, s.AuthToken = c.RunID, c.GitCommit, c.Targets, c.Token != ""
	s.StartedAt = began.UTC().Format(time.RFC3339Nano)
	s.FinishedAt = finished.UTC().Format(time.RFC3339Nano)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// writeTarGz streams dir's regular files as prefix/<name> in a tar.gz.
func writeTarGz(w io.Writer, dir, prefix string) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: prefix + "/" + e.Name(), Mode: 0o644, Size: info.Size(), ModTime: info.ModTime()}); err != nil {
			return err
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		_, err = io.Copy(tw, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}
