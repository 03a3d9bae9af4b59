// answer.go - what the ingestor said about each message of a request.
//
// Owns: reading an answer body into (acknowledged, reason). Messages are
// counted from the ingestor's per-message answer, never assumed from a
// status: a 200 whose body does not account for every message sent is a
// `malformed_answer` and counts every message as failed.
// Must not: decide pass/fail of the run.
package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// Routes, as recorded in the raw results.
const (
	RouteBatch  = "batch"
	RouteFire   = "fire"
	RouteSingle = "single"
)

type answerBody struct {
	Delivered  *int              `json:"delivered"`
	Results    []json.RawMessage `json:"results"`
	Accepted   *int              `json:"accepted"`
	Offset     *int64            `json:"offset"`
	Partition  *int32            `json:"partition"`
	Error      string            `json:"error"`
	KafkaError string            `json:"kafka_error"`
}

// Count says how many of `messages` the answer acknowledged (blocking
// routes) or accepted (fire), and why the rest were not ("" when all were).
// status 0 means no HTTP answer; transportErr is vegeta's error then.
func Count(route string, status int, body []byte, messages int, transportErr string) (ok int, reason string) {
	if status == 0 {
		return 0, transportReason(transportErr)
	}
	if status == 200 && route == RouteBatch && allDelivered(body, messages) {
		return messages, ""
	}
	var a answerBody
	parsed := json.Unmarshal(body, &a) == nil
	httpReason := "http_" + strconv.Itoa(status)
	switch route {
	case RouteFire:
		if status == 202 {
			if parsed && a.Accepted != nil && *a.Accepted == messages {
				return messages, ""
			}
			return 0, "malformed_answer"
		}
		// 503 queue_full: the first `accepted` were queued; otherwise nothing.
		if parsed && a.Accepted != nil {
			ok = min(max(*a.Accepted, 0), messages)
		}
		return ok, failReason(parsed, a, httpReason)
	case RouteSingle:
		if status == 200 {
			if parsed && a.Offset != nil && a.Partition != nil {
				return 1, ""
			}
			return 0, "malformed_answer"
		}
		return 0, failReason(parsed, a, httpReason)
	default: // batch
		if !parsed || len(a.Results) != messages {
			if status == 200 {
				return 0, "malformed_answer"
			}
			return 0, failReason(parsed, a, httpReason)
		}
		for _, r := range a.Results {
			if bytes.Contains(r, []byte(`"offset"`)) {
				ok++
			}
		}
		if a.Delivered == nil || *a.Delivered != ok {
			return 0, "malformed_answer"
		}
		if status == 200 {
			if ok != messages {
				return 0, "malformed_answer"
			}
			return ok, ""
		}
		return ok, failReason(parsed, a, httpReason)
	}
}

func failReason(parsed bool, a answerBody, fallback string) string {
	if parsed && a.Error != "" && len(a.Error) <= 64 {
		return a.Error
	}
	return fallback
}

func transportReason(err string) string {
	switch {
	case strings.Contains(err, "Timeout") || strings.Contains(err, "deadline exceeded") || strings.Contains(err, "timeout"):
		return "timeout"
	case strings.Contains(err, "connection refused"):
		return "refused"
	case strings.Contains(err, "reset by peer") || strings.Contains(err, "EOF"):
		return "connection_closed"
	default:
		return "no_response"
	}
}

// allDelivered is the hot path: true only when body is exactly the
// ingestor's compact all-delivered answer for `messages` messages,
// {"delivered":N,"results":[{"partition":P,"offset":O},...]} with N entries.
// Anything else (spaces, other fields, another order) goes through the full
// JSON decoder, which then judges it; encoding/json was a third of the
// generator's CPU at 1,000 requests/s.
func allDelivered(body []byte, messages int) bool {
	rest, ok := cutPrefix(body, `{"delivered":`)
	if !ok {
		return false
	}
	n, rest, ok := cutInt(rest)
	if !ok || n != int64(messages) {
		return false
	}
	if rest, ok = cutPrefix(rest, `,"results":[`); !ok {
		return false
	}
	for i := 0; i < messages; i++ {
		if i > 0 {
			if rest, ok = cutPrefix(rest, `,`); !ok {
				return false
			}
		}
		if rest, ok = cutPrefix(rest, `{"partition":`); !ok {
			return false
		}
		if _, rest, ok = cutInt(rest); !ok {
			return false
		}
		if rest, ok = cutPrefix(rest, `,"offset":`); !ok {
			return false
		}
		if _, rest, ok = cutInt(rest); !ok {
			return false
		}
		if rest, ok = cutPrefix(rest, `}`); !ok {
			return false
		}
	}
	return string(rest) == "]}"
}

func cutPrefix(b []byte, prefix string) ([]byte, bool) {
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return b, false
	}
	return b[len(prefix):], true
}

// cutInt reads a JSON integer (optional minus, no leading zeros, at most 18 digits).
func cutInt(b []byte) (int64, []byte, bool) {
	i, neg := 0, false
	if i < len(b) && b[i] == '-' {
		neg, i = true, 1
	}
	start := i
	var v int64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' && i-start < 18 {
		v = v*10 + int64(b[i]-'0')
		i++
	}
	if i == start || (b[start] == '0' && i-start > 1) || (i < len(b) && b[i] >= '0' && b[i] <= '9') {
		return 0, b, false
	}
	if neg {
		v = -v
	}
	return v, b[i:], true
}
