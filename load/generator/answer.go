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
