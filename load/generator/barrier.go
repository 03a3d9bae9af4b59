// barrier.go - all generators of a distributed run start together.
//
// Owns: the start barrier. Generator 0 listens; every other generator
// announces itself (POST /arrive?index=I) until generator 0 answers with the
// start time, which it fixes once all N have arrived (a barrier, not a
// guess at how long pods take to start). Bounded: arrivals are counted per
// index (a repeated or out-of-range index changes nothing) and the wait ends
// with an error after the barrier timeout.
// Must not: send load.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// startDelay is how far after the last arrival the load starts, so every
// generator hears the start time before it comes.
const startDelay = 1500 * time.Millisecond

type Barrier struct {
	n       int
	mu      sync.Mutex
	arrived map[int]bool
	startAt time.Time
	done    chan struct{}
}

func NewBarrier(n int) *Barrier {
	return &Barrier{n: n, arrived: map[int]bool{}, done: make(chan struct{})}
}

func (b *Barrier) arrive(index int) (time.Time, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if index >= 0 && index < b.n {
		b.arrived[index] = true
	}
	if b.startAt.IsZero() && len(b.arrived) == b.n {
		b.startAt = time.Now().Add(startDelay)
		close(b.done)
	}
	return b.startAt, len(b.arrived)
}

// ServeHTTP answers POST /arrive?index=I: 200 {"start_unix_ms"} once all
// arrived, 202 {"arrived","of"} before.
func (b *Barrier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST /arrive?index=I", http.StatusMethodNotAllowed)
		return
	}
	index, err := strconv.Atoi(r.URL.Query().Get("index"))
	if err != nil || index < 1 || index >= b.n {
		http.Error(w, fmt.Sprintf("index must be 1..%d", b.n-1), http.StatusBadRequest)
		return
	}
	start, arrived := b.arrive(index)
	w.Header().Set("Content-Type", "application/json")
	if start.IsZero() {
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(map[string]int{"arrived": arrived, "of": b.n})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]int64{"start_unix_ms": start.UnixMilli()})
}

// Lead is generator 0's side: arrive, then wait for everyone.
func (b *Barrier) Lead(ctx context.Context, timeout time.Duration) (time.Time, error) {
	b.arrive(0)
	select {
	case <-b.done:
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.startAt, nil
	case <-time.After(timeout):
		b.mu.Lock()
		defer b.mu.Unlock()
		return time.Time{}, fmt.Errorf("start barrier: %d of %d generators arrived within %s", len(b.arrived), b.n, timeout)
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// Follow is generator I's side (I > 0): announce until the start time comes.
func Follow(ctx context.Context, peer string, index int, timeout time.Duration) (time.Time, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	url := fmt.Sprintf("%s/arrive?index=%d", peer, index)
	last := "no answer yet"
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
		res, err := client.Do(req)
		if err == nil {
			var body struct {
				StartUnixMs int64 `json:"start_unix_ms"`
			}
			status := res.StatusCode
			derr := json.NewDecoder(http.MaxBytesReader(nil, res.Body, 4096)).Decode(&body)
			res.Body.Close()
			if status == http.StatusOK && derr == nil && body.StartUnixMs > 0 {
				return time.UnixMilli(body.StartUnixMs), nil
			}
			last = res.Status
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return time.Time{}, fmt.Errorf("start barrier at %s: no start time within %s (last: %s)", peer, timeout, last)
}
