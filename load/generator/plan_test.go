package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writePlan(t *testing.T, body string) string {
	path := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const goodPlan = `{"name":"p","seed":"none","route":"batch","batch_size":10,"message_size":16,"keys":"fixed",
 "acks":"1","topology":"cluster","timeout":"10s","max_in_flight":100,"schedule_slack_ms":50,
 "constant":{"rate":20,"duration":"10s"},"thresholds":{"p99_ms":1000,"error_rate":0,"dropped_ratio":0.01}}`

func TestBadPlansAreRefusedWithTheReason(t *testing.T) {
	if _, err := LoadPlan(writePlan(t, goodPlan)); err != nil {
		t.Fatalf("good plan refused: %v", err)
	}
	cases := map[string]string{
		`"route":"batch"`:                         `"route":"fast"`,
		`"batch_size":10`:                         `"batch_size":"ten"`,
		`"keys":"fixed"`:                          `"keys":"random"`,
		`"timeout":"10s"`:                         `"timeout":"ten"`,
		`"message_size":16`:                       `"message_size":16,"bogus":1`,
		`"constant":{"rate":20,"duration":"10s"}`: `"constant":{"rate":20,"duration":"10s"},"stages":[{"duration":"1s","rate":1}]`,
		`"max_in_flight":100`:                     `"max_in_flight":0`,
		`"p99_ms":1000`:                           `"p99_ms":-1`,
	}
	for from, to := range cases {
		body := strings.Replace(goodPlan, from, to, 1)
		if _, err := LoadPlan(writePlan(t, body)); err == nil {
			t.Errorf("plan with %s accepted", to)
		}
	}
	if _, err := LoadPlan(writePlan(t, goodPlan+"{}")); err == nil {
		t.Error("trailing data accepted")
	}
}

func TestOverridesApplyOnlyToTheirShape(t *testing.T) {
	p, _ := LoadPlan(writePlan(t, goodPlan))
	rate := 50.0
	if err := p.ApplyOverrides(Overrides{Rate: &rate}); err != nil || p.Constant.Rate != 50 {
		t.Fatalf("--rate on a constant plan: %v", err)
	}
	rep := 3
	if err := p.ApplyOverrides(Overrides{Repeat: &rep}); err == nil {
		t.Fatal("--repeat accepted on a constant plan")
	}
}

func TestBodiesAreTheIngestorsBatchShape(t *testing.T) {
	for _, keys := range []string{"fixed", "fresh"} {
		p := &Plan{BatchSize: 5, MessageSize: 32, Keys: keys, Topic: `we"ird`}
		b := NewBodies(p, 3)
		seen := map[string]bool{}
		for n := uint64(0); n < 3; n++ {
			var msgs []struct{ Key, Value, Topic string }
			if err := json.Unmarshal(b.Batch(n), &msgs); err != nil || len(msgs) != 5 {
				t.Fatalf("%s body %d: %v (%d messages)", keys, n, err, len(msgs))
			}
			for _, m := range msgs {
				if len(m.Value) != 32 || m.Topic != `we"ird` || m.Key == "" {
					t.Fatalf("%s message %+v", keys, m)
				}
				seen[m.Key] = true
			}
		}
		if keys == "fresh" && len(seen) != 15 {
			t.Fatalf("fresh keys repeated: %d distinct of 15", len(seen))
		}
		var one struct{ Key, Value string }
		if err := json.Unmarshal(b.Single(0), &one); err != nil || len(one.Value) != 32 {
			t.Fatalf("single body: %v", err)
		}
	}
}
