package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeIngestor answers like chronik-ingestor's /produce/batch after `delay`;
// `answer` may replace the body and status of request n.
func fakeIngestor(t *testing.T, delay time.Duration, answer func(n int64, messages int) (int, string)) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ready" {
			w.WriteHeader(200)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var msgs []map[string]any
		if err := json.Unmarshal(body, &msgs); err != nil {
			http.Error(w, `{"error":"invalid_json"}`, 400)
			return
		}
		i := n.Add(1)
		time.Sleep(delay)
		if answer != nil {
			if status, text := answer(i, len(msgs)); status != 0 {
				w.WriteHeader(status)
				_, _ = w.Write([]byte(text))
				return
			}
		}
		results := make([]string, len(msgs))
		for j := range results {
			results[j] = fmt.Sprintf(`{"partition":%d,"offset":%d}`, j%3, i*1000+int64(j))
		}
		fmt.Fprintf(w, `{"delivered":%d,"results":[%s]}`, len(msgs), strings.Join(results, ","))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func constantPlan(rate float64, d time.Duration) *Plan {
	return &Plan{Name: "t", Seed: "none", Route: RouteBatch, BatchSize: 10, MessageSize: 16, Keys: "fixed",
		Timeout: Dur(5 * time.Second), MaxInFlight: 1000, ScheduleSlackMs: 50, Scale: 1, DurationScale: 1,
		Constant:   &Constant{Rate: rate, Duration: Dur(d)},
		Thresholds: Thresholds{P99Ms: 5000, ErrorRate: 0, DroppedRatio: 0.01}}
}

func runOnce(t *testing.T, c *RunConfig) (int, *Summary, []Row) {
	t.Helper()
	if c.ResultsDir == "" {
		c.ResultsDir = t.TempDir()
	}
	if c.Generators == 0 {
		c.Generators = 1
	}
	c.ReadyTimeout, c.BarrierTimeout, c.Log = 5*time.Second, 20*time.Second, io.Discard
	rc := Run(context.Background(), c)
	gen := filepath.Join(c.ResultsDir, fmt.Sprintf("gen-%d", c.Index))
	raw, err := os.ReadFile(filepath.Join(gen, "summary-"+c.Plan.Name+".json"))
	if err != nil {
		t.Fatalf("summary: %v (exit %d)", err, rc)
	}
	var s Summary
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	rows, err := ReadRows(filepath.Join(gen, "requests-"+c.Plan.Name+".csv.gz"))
	if err != nil {
		t.Fatal(err)
	}
	return rc, &s, rows
}

// Open model: a server that takes 300 ms per request does not slow the
// offered rate down; the latency holds the wait.
func TestSlowServerDoesNotLowerTheOfferedRate(t *testing.T) {
	srv, served := fakeIngestor(t, 300*time.Millisecond, nil)
	rc, s, rows := runOnce(t, &RunConfig{Plan: constantPlan(100, 2*time.Second), Targets: []string{srv.URL}})
	if rc != exitOK {
		t.Fatalf("exit %d, failed %v", rc, s.FailedThresholds)
	}
	if len(rows) != 200 || served.Load() != 200 {
		t.Fatalf("%d rows, %d served; want 200 each", len(rows), served.Load())
	}
	first := rows[0].Sent
	for _, r := range rows {
		if r.LatencyMs < 300 {
			t.Fatalf("request %d latency %.1f ms, below the server's 300 ms wait", r.Seq, r.LatencyMs)
		}
		if late := (r.Sent - r.Scheduled) * 1000; late > 50 {
			t.Fatalf("request %d left %.1f ms late", r.Seq, late)
		}
	}
	// 200 requests at 100/s leave within 2 s, not 200 × 300 ms / workers
	if span := rows[len(rows)-1].Sent - first; span > 2.2 || span < 1.8 {
		t.Fatalf("200 requests left over %.2f s, want about 2 s", span)
	}
	if got := s.Metrics["messages_produced"].Values["count"]; got != 2000 {
		t.Fatalf("messages_produced %v, want 2000", got)
	}
}

// With too few requests allowed in flight the schedule cannot be kept: the
// late requests are counted as dropped and fail the run.
func TestRequestsThatCannotLeaveOnTimeAreDropped(t *testing.T) {
	srv, _ := fakeIngestor(t, 200*time.Millisecond, nil)
	p := constantPlan(100, 2*time.Second)
	p.MaxInFlight = 5
	rc, s, _ := runOnce(t, &RunConfig{Plan: p, Targets: []string{srv.URL}})
	dropped := s.Metrics["requests_dropped"].Values["count"]
	if rc != exitThresholds || dropped < 100 {
		t.Fatalf("exit %d with %v dropped; want 99 and most of 200 dropped", rc, dropped)
	}
}

// Bad answers are failures: 5xx, partial per-message failures, malformed bodies.
func TestBadAnswersAreCountedAsFailures(t *testing.T) {
	srv, _ := fakeIngestor(t, 0, func(n int64, messages int) (int, string) {
		switch n % 4 {
		case 1:
			return 503, `{"error":"broker_unavailable"}`
		case 2:
			res := []string{`{"error":"MSG_TIMED_OUT","detail":"x","retriable":true}`}
			for i := 1; i < messages; i++ {
				res = append(res, fmt.Sprintf(`{"partition":0,"offset":%d}`, i))
			}
			return 504, fmt.Sprintf(`{"error":"delivery_failed","delivered":%d,"failed":1,"results":[%s]}`, messages-1, strings.Join(res, ","))
		case 3:
			return 200, `{"delivered":10,"results":[`
		}
		return 0, ""
	})
	rc, s, rows := runOnce(t, &RunConfig{Plan: constantPlan(40, time.Second), Targets: []string{srv.URL}})
	if rc != exitThresholds {
		t.Fatalf("exit %d, want 99", rc)
	}
	reasons := map[string]int{}
	for _, r := range rows {
		reasons[r.Error]++
	}
	if reasons["broker_unavailable"] != 10 || reasons["delivery_failed"] != 10 || reasons["malformed_answer"] != 10 || reasons[""] != 10 {
		t.Fatalf("reasons %v", reasons)
	}
	m := s.Metrics
	// 10 ok requests × 10 + 10 partial × 9
	if m["messages_produced"].Values["count"] != 190 || m["messages_failed"].Values["count"] != 210 {
		t.Fatalf("produced %v failed %v", m["messages_produced"].Values, m["messages_failed"].Values)
	}
	if m["produce_errors"].Values["rate"] != 0.75 {
		t.Fatalf("produce_errors %v", m["produce_errors"].Values)
	}
}

// Two generators behind the start barrier start together, share the rate,
// and their merge equals one result set holding the same samples.
func TestTwoGeneratorsStartTogetherAndMergeExactly(t *testing.T) {
	srv, served := fakeIngestor(t, 5*time.Millisecond, nil)
	dir := t.TempDir()
	p := constantPlan(100, 2*time.Second)
	addr := "127.0.0.1:" + freePort(t)
	var wg sync.WaitGroup
	rcs := make([]int, 2)
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := &RunConfig{Plan: p, Targets: []string{srv.URL}, ResultsDir: dir, Generators: 2, Index: i,
				ReadyTimeout: 5 * time.Second, BarrierTimeout: 20 * time.Second, Log: io.Discard}
			if i == 0 {
				c.BarrierListen = addr
			} else {
				time.Sleep(700 * time.Millisecond) // arrives late: generator 0 must wait for it
				c.BarrierPeer = "http://" + addr
			}
			rcs[i] = Run(context.Background(), c)
		}(i)
	}
	wg.Wait()
	if rcs[0] != 0 || rcs[1] != 0 || served.Load() != 200 {
		t.Fatalf("exits %v, served %d (want 0, 0 and 100 + 100)", rcs, served.Load())
	}
	var all []Row
	var firsts []float64
	for i := 0; i < 2; i++ {
		rows, err := ReadRows(filepath.Join(dir, fmt.Sprintf("gen-%d", i), "requests-t.csv.gz"))
		if err != nil {
			t.Fatal(err)
		}
		firsts = append(firsts, rows[0].Scheduled)
		all = append(all, rows...)
	}
	if d := firsts[0] - firsts[1]; d > 0.02 || d < -0.02 {
		t.Fatalf("generators started %.3f s apart", d)
	}
	merged, err := Merge(dir)
	if err != nil {
		t.Fatal(err)
	}
	whole := Summarize(all, p, p.Resolve(2))
	if !reflect.DeepEqual(merged.Metrics, whole.Metrics) {
		t.Fatalf("merge differs from the pooled samples:\n%v\n%v", merged.Metrics["batch_latency"], whole.Metrics["batch_latency"])
	}
	if merged.Metrics["http_reqs"].Values["count"] != 200 {
		t.Fatalf("merged http_reqs %v", merged.Metrics["http_reqs"].Values)
	}
}

func TestMergeRefusesMissingGenerators(t *testing.T) {
	srv, _ := fakeIngestor(t, 0, nil)
	dir := t.TempDir()
	p := constantPlan(20, 500*time.Millisecond)
	// generator 1 of 2 never ran: index 0 alone behind a barrier would wait, so write its files as one of one and relabel
	rc, _, _ := runOnce(t, &RunConfig{Plan: p, Targets: []string{srv.URL}, ResultsDir: dir})
	if rc != 0 {
		t.Fatalf("exit %d", rc)
	}
	path := filepath.Join(dir, "gen-0", "summary-t.json")
	raw, _ := os.ReadFile(path)
	_ = os.WriteFile(path, []byte(strings.Replace(string(raw), `"generators": 1`, `"generators": 2`, 1)), 0o644)
	if _, err := Merge(dir); err == nil || !strings.Contains(err.Error(), "1 of 2") {
		t.Fatalf("merge of 1 of 2 generators: %v", err)
	}
}

func freePort(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	port := srv.Listener.Addr().String()
	srv.Close()
	return port[strings.LastIndex(port, ":")+1:]
}

// One generator ends a climb at its first failing step: the levels above it
// are skipped (reported, never offered) and the next climb starts again low.
func TestStaircaseClimbEndsAtTheFirstFailingStep(t *testing.T) {
	var mu sync.Mutex
	var recent []time.Time
	srv, _ := fakeIngestor(t, 0, func(n int64, messages int) (int, string) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		recent = append(recent, now)
		for len(recent) > 0 && now.Sub(recent[0]) > 500*time.Millisecond {
			recent = recent[1:]
		}
		if len(recent) > 15 { // over ~30 requests/s: overloaded
			return 503, `{"error":"broker_unavailable"}`
		}
		return 0, ""
	})
	p := constantPlan(1, time.Second)
	p.Constant = nil
	p.Thresholds.P99Ms = 400
	p.Staircase = &Staircase{Levels: []float64{10, 20, 60, 80}, Step: Dur(time.Second), Gap: Dur(500 * time.Millisecond),
		Repeat: 2, Recovery: Dur(200 * time.Millisecond)}
	rc, s, rows := runOnce(t, &RunConfig{Plan: p, Targets: []string{srv.URL}})
	if rc != exitThresholds {
		t.Fatalf("exit %d, want 99 (the 60/s steps fail)", rc)
	}
	if strings.Join(s.SkippedSteps, ",") != "r1_l80,r2_l80" {
		t.Fatalf("skipped %v, want r1_l80 and r2_l80", s.SkippedSteps)
	}
	for _, r := range rows {
		if strings.HasSuffix(r.Step, "_l80") {
			t.Fatalf("a request of the skipped step %s was sent", r.Step)
		}
	}
	held := map[string]bool{}
	for _, st := range s.Steps {
		failed := false
		for _, f := range s.FailedThresholds {
			failed = failed || strings.Contains(f, "{step:"+st.Name+"}")
		}
		held[st.Name] = !failed && !st.Skipped
	}
	if !held["r1_l10"] || !held["r1_l20"] || held["r1_l60"] || !held["r2_l10"] || held["r2_l60"] || held["r2_l80"] {
		t.Fatalf("held %v (failed %v)", held, s.FailedThresholds)
	}
}

// After the load a generator serves its results until the collector says it
// has them: GET as often as asked (a broken fetch is fetched again), then
// DELETE, and only then does it exit.
func TestResultsAreServedUntilTheCollectorConfirms(t *testing.T) {
	srv, _ := fakeIngestor(t, 0, nil)
	addr := "127.0.0.1:" + freePort(t)
	c := &RunConfig{Plan: constantPlan(20, 500*time.Millisecond), Targets: []string{srv.URL}, ResultsDir: t.TempDir(),
		Generators: 1, PromAddr: addr, ServeResultsFor: 30 * time.Second,
		ReadyTimeout: 5 * time.Second, BarrierTimeout: 20 * time.Second, Log: io.Discard}
	done := make(chan int, 1)
	go func() { done <- Run(context.Background(), c) }()
	url := "http://" + addr + "/results"
	get := func() int {
		r, err := http.Get(url)
		if err != nil {
			return 0
		}
		defer r.Body.Close()
		n, _ := io.Copy(io.Discard, r.Body)
		if r.StatusCode == 200 && n == 0 {
			t.Fatal("an empty tar.gz")
		}
		return r.StatusCode
	}
	deadline := time.Now().Add(20 * time.Second)
	for get() != 200 {
		if time.Now().After(deadline) {
			t.Fatal("no results within 20 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if get() != 200 {
		t.Fatal("a second GET was not served: a broken first fetch would lose the results")
	}
	select {
	case rc := <-done:
		t.Fatalf("the generator exited (%d) before the collector confirmed", rc)
	case <-time.After(300 * time.Millisecond):
	}
	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	r, err := http.DefaultClient.Do(req)
	if err != nil || r.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE /results: %v %v", err, r)
	}
	r.Body.Close()
	select {
	case rc := <-done:
		if rc != 0 {
			t.Fatalf("exit %d", rc)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the generator did not exit after DELETE /results")
	}
}
