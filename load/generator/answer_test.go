package main

import (
	"strings"
	"testing"
)

func TestCountReadsPerMessageAnswers(t *testing.T) {
	ok2 := `{"delivered":2,"results":[{"partition":0,"offset":1},{"partition":1,"offset":7}]}`
	partial := `{"error":"delivery_failed","detail":"1 of 2","delivered":1,"failed":1,"results":[{"partition":0,"offset":1},{"error":"MSG_TIMED_OUT","detail":"x","retriable":true}]}`
	cases := []struct {
		name, route string
		status      int
		body        string
		messages    int
		transport   string
		ok          int
		reason      string
	}{
		{"all delivered", RouteBatch, 200, ok2, 2, "", 2, ""},
		{"all delivered, spaced (full decoder)", RouteBatch, 200, `{ "delivered": 2, "results": [ {"offset":1,"partition":0}, {"partition":1,"offset":7} ] }`, 2, "", 2, ""},
		{"200 with a trailing byte", RouteBatch, 200, ok2 + "x", 2, "", 0, "malformed_answer"},
		{"200 with a leading-zero offset", RouteBatch, 200, `{"delivered":1,"results":[{"partition":0,"offset":01}]}`, 1, "", 0, "malformed_answer"},
		{"200 with one entry too many", RouteBatch, 200, ok2, 1, "", 0, "malformed_answer"},
		{"200 but one result short", RouteBatch, 200, `{"delivered":1,"results":[{"partition":0,"offset":1}]}`, 2, "", 0, "malformed_answer"},
		{"200 with a count that lies", RouteBatch, 200, `{"delivered":2,"results":[{"partition":0,"offset":1},{"error":"x"}]}`, 2, "", 0, "malformed_answer"},
		{"200 not JSON", RouteBatch, 200, `<html>ok</html>`, 2, "", 0, "malformed_answer"},
		{"200 empty", RouteBatch, 200, ``, 2, "", 0, "malformed_answer"},
		{"partial failure", RouteBatch, 504, partial, 2, "", 1, "delivery_failed"},
		{"5xx without JSON", RouteBatch, 502, `bad gateway`, 2, "", 0, "http_502"},
		{"no answer", RouteBatch, 0, ``, 2, "Post: context deadline exceeded (Client.Timeout exceeded)", 0, "timeout"},
		{"refused", RouteBatch, 0, ``, 2, "dial tcp: connect: connection refused", 0, "refused"},
		{"single ok", RouteSingle, 200, `{"topic":"t","partition":3,"offset":9}`, 1, "", 1, ""},
		{"single 200 without offset", RouteSingle, 200, `{"topic":"t"}`, 1, "", 0, "malformed_answer"},
		{"single failed", RouteSingle, 503, `{"error":"broker_unavailable"}`, 1, "", 0, "broker_unavailable"},
		{"fire accepted", RouteFire, 202, `{"accepted":100}`, 100, "", 100, ""},
		{"fire 202 counting fewer", RouteFire, 202, `{"accepted":99}`, 100, "", 0, "malformed_answer"},
		{"fire queue full", RouteFire, 503, `{"error":"queue_full","accepted":40,"rejected":60,"resend_from":40}`, 100, "", 40, "queue_full"},
		{"fire accepted out of range", RouteFire, 503, `{"error":"queue_full","accepted":400}`, 100, "", 100, "queue_full"},
	}
	for _, c := range cases {
		ok, reason := Count(c.route, c.status, []byte(c.body), c.messages, c.transport)
		if ok != c.ok || reason != c.reason {
			t.Errorf("%s: Count = (%d, %q), want (%d, %q)", c.name, ok, reason, c.ok, c.reason)
		}
	}
}

func TestAllDeliveredIsStrict(t *testing.T) {
	good := `{"delivered":3,"results":[{"partition":0,"offset":1},{"partition":-1,"offset":9223},{"partition":2,"offset":0}]}`
	if !allDelivered([]byte(good), 3) {
		t.Fatal("the compact answer must take the fast path")
	}
	for _, bad := range []string{
		good[:len(good)-1], good + " ", strings.Replace(good, `"delivered":3`, `"delivered":2`, 1),
		strings.Replace(good, `"offset":1}`, `"offset":1,"x":1}`, 1), strings.Replace(good, `"offset":0`, `"offset":-`, 1),
		strings.Replace(good, `"offset":9223`, `"offset":9223.5`, 1), `{"delivered":3}`, ``,
	} {
		if allDelivered([]byte(bad), 3) {
			t.Errorf("fast path took %q", bad)
		}
	}
}
