// prom.go - live figures for Prometheus while the load runs.
//
// Owns: the chronik_loadgen_* metrics and their registry. Latency is a
// histogram so rates and quantiles across generators come from summed
// buckets, never from averaged percentiles.
// Must not: decide anything (the raw rows are the record).
package main

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type Live struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	messages *prometheus.CounterVec
	dropped  prometheus.Counter
	target   prometheus.Gauge
	inFlight prometheus.Gauge
}

func NewLive(plan string, index int) *Live {
	labels := prometheus.Labels{"plan": plan, "generator": strconv.Itoa(index)}
	l := &Live{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chronik_loadgen_requests_total",
			Help: "Requests answered (code 0: no answer), by route.", ConstLabels: labels}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "chronik_loadgen_request_duration_seconds",
			Help: "Request latency from the moment it left, by route.", ConstLabels: labels,
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"route"}),
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chronik_loadgen_messages_total",
			Help: "Messages by outcome per the ingestor's answers: produced, accepted (fire), failed.", ConstLabels: labels}, []string{"outcome"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "chronik_loadgen_requests_dropped_total",
			Help: "Requests that left later than schedule_slack_ms after their due time, or never.", ConstLabels: labels}),
		target: prometheus.NewGauge(prometheus.GaugeOpts{Name: "chronik_loadgen_target_rate",
			Help: "Requests per second the plan offers now (this generator's share).", ConstLabels: labels}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "chronik_loadgen_in_flight",
			Help: "Requests sent and not yet answered.", ConstLabels: labels}),
	}
	l.reg.MustRegister(l.requests, l.latency, l.messages, l.dropped, l.target, l.inFlight)
	return l
}

func (l *Live) Observe(r *Row, late bool) {
	if r.NotSent() {
		l.dropped.Inc()
		return
	}
	l.requests.WithLabelValues(r.Route, strconv.Itoa(r.Status)).Inc()
	l.latency.WithLabelValues(r.Route).Observe(r.LatencyMs / 1000)
	outcome := "produced"
	if r.Route == RouteFire {
		outcome = "accepted"
	}
	if r.OK > 0 {
		l.messages.WithLabelValues(outcome).Add(float64(r.OK))
	}
	if f := r.Failed(); f > 0 {
		l.messages.WithLabelValues("failed").Add(float64(f))
	}
	if late {
		l.dropped.Inc()
	}
}

func (l *Live) Handler() http.Handler { return promhttp.HandlerFor(l.reg, promhttp.HandlerOpts{}) }
