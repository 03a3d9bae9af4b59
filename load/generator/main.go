// main.go - chronik-loadgen's command line: run, merge, validate, describe, version.
//
// chronik-loadgen is the project's open-model HTTP load generator for
// chronik-ingestor, built on the vegeta library (MIT). It replaced k6 (AGPL).
// load/README.md documents plans, flags, results and exit statuses.
//
// Owns: flags, their validation, and the exit status.
// Must not: hold load or summary logic.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	version       = "1.0.0"
	vegetaVersion = "v12.13.0"
)

const usage = `chronik-loadgen - open-model load for chronik-ingestor (vegeta library)

  chronik-loadgen run PLAN.json --targets URL[,URL...] --results DIR [flags]
  chronik-loadgen merge --results DIR
  chronik-loadgen validate PLAN.json...
  chronik-loadgen describe PLAN.json [overrides]
  chronik-loadgen version

Exit status: 0 thresholds held, 99 a threshold failed, 2 bad plan or flag,
3 a target not ready, 1 anything else. 'chronik-loadgen run --help' lists flags.
`

func main() {
	// The heap is small and short-lived (bodies are prebuilt); collecting
	// less often costs memory this process has plenty of, and saves CPU the
	// system under test shares.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(200)
	}
	os.Exit(mainArgs(os.Args[1:], os.Stdout, os.Stderr))
}

func mainArgs(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], stderr)
	case "merge":
		return cmdMerge(args[1:], stdout, stderr)
	case "validate":
		return cmdValidate(args[1:], stdout, stderr)
	case "describe":
		return cmdDescribe(args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintf(stdout, "chronik-loadgen %s (vegeta %s)\n", version, vegetaVersion)
		return exitOK
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "unknown command %q\n%s", args[0], usage)
	return exitUsage
}

// splitPlan takes the plan path from the front of args (flags follow it).
func splitPlan(args []string) (string, []string) {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return args[0], args[1:]
	}
	return "", args
}

// overrideFlags registers the plan overrides on fs; call resolve after Parse.
func overrideFlags(fs *flag.FlagSet) func() (Overrides, error) {
	rate := fs.Float64("rate", 0, "constant plans: requests per second")
	duration := fs.Duration("duration", 0, "constant plans: how long")
	levels := fs.String("levels", "", "staircase plans: comma-separated increasing rates (requests/s)")
	step := fs.Duration("step", 0, "staircase plans: hold per step")
	gap := fs.Duration("gap", 0, "staircase plans: idle time after each step (≥ p99_ms)")
	repeat := fs.Int("repeat", 0, "staircase plans: climbs")
	scale := fs.Float64("scale", 1, "multiply every rate")
	durationScale := fs.Float64("duration-scale", 1, "multiply every stage duration")
	batch := fs.Int("batch-size", 0, "messages per request")
	msgSize := fs.Int("message-size", 0, "bytes of every value")
	keys := fs.String("keys", "", "fixed (prebuilt bodies rotated) or fresh (new keys every request)")
	topic := fs.String("topic", "", "topic field of every message (else the ingestor's --topic)")
	timeout := fs.Duration("timeout", 0, "per request")
	maxInFlight := fs.Int("max-in-flight", 0, "concurrent requests at most")
	p99 := fs.Float64("p99-ms", 0, "gate: batch latency p(99) below this")
	errRate := fs.Float64("error-rate", 0, "gate: failed requests at most this share")
	dropped := fs.Float64("dropped-ratio", 0, "gate: dropped requests below this share of the scheduled")
	acks := fs.String("acks", "", "tag: the ingestors' acks")
	topology := fs.String("topology", "", "tag: standalone or cluster")
	return func() (Overrides, error) {
		var o Overrides
		var err error
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "rate":
				o.Rate = rate
			case "duration":
				o.Duration = duration
			case "levels":
				o.Levels, err = ParseLevels(*levels)
			case "step":
				o.Step = step
			case "gap":
				o.Gap = gap
			case "repeat":
				o.Repeat = repeat
			case "scale":
				o.Scale = scale
			case "duration-scale":
				o.DurationScale = durationScale
			case "batch-size":
				o.BatchSize = batch
			case "message-size":
				o.MessageSize = msgSize
			case "keys":
				o.Keys = keys
			case "topic":
				o.Topic = topic
			case "timeout":
				o.Timeout = timeout
			case "max-in-flight":
				o.MaxInFlight = maxInFlight
			case "p99-ms":
				o.P99Ms = p99
			case "error-rate":
				o.ErrorRate = errRate
			case "dropped-ratio":
				o.DroppedRatio = dropped
			case "acks":
				o.Acks = acks
			case "topology":
				o.Topology = topology
			}
		})
		return o, err
	}
}

func loadWithOverrides(path string, resolve func() (Overrides, error)) (*Plan, error) {
	if path == "" {
		return nil, errors.New("a plan file is required as the first argument")
	}
	p, err := LoadPlan(path)
	if err != nil {
		return nil, err
	}
	o, err := resolve()
	if err != nil {
		return nil, err
	}
	if err := p.ApplyOverrides(o); err != nil {
		return nil, fmt.Errorf("%s with overrides: %v", path, err)
	}
	return p, nil
}

func cmdRun(args []string, stderr io.Writer) int {
	planPath, rest := splitPlan(args)
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	resolve := overrideFlags(fs)
	targets := fs.String("targets", "", "comma-separated ingestor base URLs (http:// or https://)")
	results := fs.String("results", "", "results directory (this generator writes gen-<index>/)")
	generators := fs.Int("generators", 1, "generators in the run (each offers 1/N of every rate)")
	index := fs.Int("index", 0, "this generator's index, 0..generators-1")
	barrierListen := fs.String("barrier-listen", "", "generator 0: address the start barrier listens on")
	barrierPeer := fs.String("barrier-peer", "", "generators > 0: generator 0's barrier URL (http://host:port)")
	barrierTimeout := fs.Duration("barrier-timeout", 5*time.Minute, "how long to wait for every generator")
	readyTimeout := fs.Duration("ready-timeout", 30*time.Second, "how long each target may take to answer GET /ready with 200")
	promAddr := fs.String("prometheus-addr", "", "serve live /metrics on this address")
	serveResults := fs.Duration("serve-results-for", 0, "after the run, serve GET /results (tar.gz of gen-<index>/) on --prometheus-addr until the collector confirms with DELETE /results, or this long")
	runID := fs.String("run-id", "", "recorded in the results")
	gitCommit := fs.String("git-commit", "", "recorded in the results")
	tokenFile := fs.String("token-file", "", "bearer token file (else INGESTOR_AUTH_TOKEN)")
	caFile := fs.String("ca-file", "", "PEM CA to trust for https:// targets (else SSL_CERT_FILE, and the system's)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: chronik-loadgen run PLAN.json --targets URL[,URL...] --results DIR [flags]\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %v\n", fs.Args())
		return exitUsage
	}
	p, err := loadWithOverrides(planPath, resolve)
	if err != nil {
		fmt.Fprintln(stderr, "chronik-loadgen:", err)
		return exitUsage
	}
	c := &RunConfig{Plan: p, ResultsDir: *results, Generators: *generators, Index: *index,
		BarrierListen: *barrierListen, BarrierPeer: strings.TrimRight(*barrierPeer, "/"), BarrierTimeout: *barrierTimeout,
		PromAddr: *promAddr, ServeResultsFor: *serveResults, ReadyTimeout: *readyTimeout,
		RunID: *runID, GitCommit: *gitCommit, CAFile: *caFile, Log: stderr}
	var problems []string
	for _, t := range strings.Split(*targets, ",") {
		t = strings.TrimRight(strings.TrimSpace(t), "/")
		if t == "" {
			continue
		}
		if !strings.HasPrefix(t, "http://") && !strings.HasPrefix(t, "https://") {
			problems = append(problems, fmt.Sprintf("--targets %q: expected http://HOST:PORT or https://HOST:PORT", t))
		}
		c.Targets = append(c.Targets, t)
	}
	if len(c.Targets) == 0 {
		problems = append(problems, "--targets is required")
	}
	if c.ResultsDir == "" {
		problems = append(problems, "--results is required")
	}
	if c.Generators < 1 || c.Generators > 1000 || c.Index < 0 || c.Index >= c.Generators {
		problems = append(problems, "--generators must be 1..1000 and --index 0..generators-1")
	}
	if c.Generators > 1 && c.Index == 0 && c.BarrierListen == "" {
		problems = append(problems, "generator 0 of several needs --barrier-listen")
	}
	if c.Generators > 1 && c.Index > 0 && c.BarrierPeer == "" {
		problems = append(problems, "generators > 0 need --barrier-peer")
	}
	if c.ServeResultsFor > 0 && c.PromAddr == "" {
		problems = append(problems, "--serve-results-for needs --prometheus-addr")
	}
	c.Token = os.Getenv("INGESTOR_AUTH_TOKEN")
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			problems = append(problems, fmt.Sprintf("--token-file: %v", err))
		}
		c.Token = strings.TrimSpace(string(b))
	}
	if len(problems) > 0 {
		for _, m := range problems {
			fmt.Fprintln(stderr, "chronik-loadgen:", m)
		}
		return exitUsage
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	return Run(ctx, c)
}

// cmdMerge pools every generator's rows under --results into merged-<plan>.json.
func cmdMerge(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("merge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	results := fs.String("results", "", "results directory holding gen-*/")
	if err := fs.Parse(args); err != nil || *results == "" {
		fmt.Fprintln(stderr, "usage: chronik-loadgen merge --results DIR")
		return exitUsage
	}
	s, err := Merge(*results)
	if err != nil {
		fmt.Fprintln(stderr, "chronik-loadgen merge:", err)
		return exitFailed
	}
	if err := writeJSON(filepath.Join(*results, "merged-"+s.Plan.Name+".json"), s); err != nil {
		fmt.Fprintln(stderr, "chronik-loadgen merge:", err)
		return exitFailed
	}
	fmt.Fprint(stdout, s.Text())
	if !s.ThresholdsOK {
		return exitThresholds
	}
	return exitOK
}

// Merge reads every gen-*/summary-*.json and requests-*.csv.gz under dir and
// computes the summary of all their rows pooled.
func Merge(dir string) (*Summary, error) {
	summaries, _ := filepath.Glob(filepath.Join(dir, "gen-*", "summary-*.json"))
	if len(summaries) == 0 {
		return nil, fmt.Errorf("no gen-*/summary-*.json under %s", dir)
	}
	sort.Strings(summaries)
	var first *Summary
	var rows []Row
	var starts, ends []string
	seen := map[int]bool{}
	for _, path := range summaries {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var s Summary
		if err := json.Unmarshal(raw, &s); err != nil || s.Plan == nil || s.Index == nil {
			return nil, fmt.Errorf("%s: not a chronik-loadgen generator summary", path)
		}
		if first == nil {
			first = &s
		} else if s.Plan.Name != first.Plan.Name || s.Generators != first.Generators {
			return nil, fmt.Errorf("%s: plan %s of %d generators, but %s is plan %s of %d", path, s.Plan.Name, s.Generators,
				summaries[0], first.Plan.Name, first.Generators)
		}
		if seen[*s.Index] {
			return nil, fmt.Errorf("%s: generator %d appears twice", path, *s.Index)
		}
		seen[*s.Index] = true
		r, err := ReadRows(filepath.Join(filepath.Dir(path), "requests-"+s.Plan.Name+".csv.gz"))
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
		starts = append(starts, s.StartedAt)
		ends = append(ends, s.FinishedAt)
	}
	if len(seen) != first.Generators {
		return nil, fmt.Errorf("%d of %d generators' results under %s", len(seen), first.Generators, dir)
	}
	p := first.Plan
	segs := p.Resolve(first.Generators)
	if len(first.Segments) > 0 && first.Generators == 1 {
		segs = first.Segments // one generator's staircase as it ran
	}
	s := Summarize(rows, p, segs)
	s.Generators, s.Segments, s.SkippedSteps = first.Generators, first.Segments, first.SkippedSteps
	for _, st := range first.Steps {
		if st.Skipped {
			s.Steps = append(s.Steps, st)
		}
	}
	s.RunID, s.GitCommit, s.Targets, s.AuthToken = first.RunID, first.GitCommit, first.Targets, first.AuthToken
	sort.Strings(starts)
	sort.Strings(ends)
	s.StartedAt, s.FinishedAt = starts[0], ends[len(ends)-1]
	return s, nil
}

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: chronik-loadgen validate PLAN.json...")
		return exitUsage
	}
	rc := exitOK
	for _, path := range args {
		p, err := LoadPlan(path)
		if err == nil && p.Name != strings.TrimSuffix(filepath.Base(path), ".json") {
			err = fmt.Errorf("%s: name %q differs from the file name", path, p.Name)
		}
		if err != nil {
			fmt.Fprintln(stderr, "invalid:", err)
			rc = exitUsage
			continue
		}
		sched := NewSchedule(p.Resolve(1))
		fmt.Fprintf(stdout, "ok: %s (%d requests over %s at scale 1)\n", path, sched.Hits(),
			time.Duration(sched.End()*1e9).Round(time.Second))
	}
	return rc
}

func cmdDescribe(args []string, stdout, stderr io.Writer) int {
	planPath, rest := splitPlan(args)
	fs := flag.NewFlagSet("describe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	resolve := overrideFlags(fs)
	generators := fs.Int("generators", 1, "generators sharing the plan")
	if err := fs.Parse(rest); err != nil {
		return exitUsage
	}
	p, err := loadWithOverrides(planPath, resolve)
	if err != nil || *generators < 1 {
		fmt.Fprintln(stderr, "chronik-loadgen:", err)
		return exitUsage
	}
	segs := p.Resolve(*generators)
	sched := NewSchedule(segs)
	peak := 0.0
	for _, s := range segs {
		peak = max(peak, s.FromRate, s.ToRate)
	}
	out := map[string]any{"plan": p, "generators": *generators, "segments": segs, "requests": sched.Hits(),
		"duration_s": sched.End(), "peak_rate": peak, "peak_msg_per_s": peak * float64(p.BatchSize),
		"max_in_flight": strconv.Itoa(p.MaxInFlight)}
	b, _ := json.MarshalIndent(out, "", "  ")
	fmt.Fprintln(stdout, string(b))
	return exitOK
}
