// record.go - every request's raw result, on disk.
//
// Owns: the Row (one request), its CSV form (gzip), and reading the rows of
// one or more generators back. The summary and the reports are computed from
// these rows, so pooling generators' rows is exactly one result set holding
// the same samples.
// Must not: compute percentiles or gates (summary.go).
package main

import (
	"bufio"
	"compress/gzip"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"
)

// Row is one request as planned and as answered.
type Row struct {
	Seq       uint64
	Scheduled float64 // epoch seconds
	Sent      float64 // epoch seconds; 0 = never sent
	LatencyMs float64
	Route     string
	Status    int
	Messages  int
	OK        int
	BytesOut  uint64
	BytesIn   uint64
	Step      string
	Error     string
}

// Failed messages of the row.
func (r *Row) Failed() int { return r.Messages - r.OK }

// NotSent is a scheduled request the generator never sent.
func (r *Row) NotSent() bool { return r.Error == errNotSent }

const errNotSent = "not_sent"

var csvHeader = []string{"seq", "scheduled_s", "sent_s", "latency_ms", "route", "status", "messages", "ok", "failed",
	"bytes_out", "bytes_in", "step", "error"}

type RowWriter struct {
	f  *os.File
	gz *gzip.Writer
	w  *csv.Writer
}

func NewRowWriter(path string) (*RowWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	gz, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	w := csv.NewWriter(bufio.NewWriterSize(gz, 1<<16))
	if err := w.Write(csvHeader); err != nil {
		return nil, err
	}
	return &RowWriter{f: f, gz: gz, w: w}, nil
}

func fmtSecs(v float64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatFloat(v, 'f', 6, 64)
}

func (rw *RowWriter) Write(r *Row) error {
	return rw.w.Write([]string{
		strconv.FormatUint(r.Seq, 10), fmtSecs(r.Scheduled), fmtSecs(r.Sent),
		strconv.FormatFloat(r.LatencyMs, 'f', 3, 64), r.Route, strconv.Itoa(r.Status),
		strconv.Itoa(r.Messages), strconv.Itoa(r.OK), strconv.Itoa(r.Failed()),
		strconv.FormatUint(r.BytesOut, 10), strconv.FormatUint(r.BytesIn, 10), r.Step, r.Error,
	})
}

func (rw *RowWriter) Close() error {
	rw.w.Flush()
	if err := rw.w.Error(); err != nil {
		return err
	}
	// the csv writer's bufio.Writer was flushed by w.Flush
	if err := rw.gz.Close(); err != nil {
		return err
	}
	return rw.f.Close()
}

// ReadRows reads one requests-*.csv.gz file.
func ReadRows(path string) ([]Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	r := csv.NewReader(bufio.NewReader(gz))
	r.ReuseRecord = true
	head, err := r.Read()
	if err != nil || len(head) != len(csvHeader) || head[0] != "seq" {
		return nil, fmt.Errorf("%s: not a chronik-loadgen requests file", path)
	}
	var rows []Row
	for line := 2; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		row, err := parseRow(rec)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
		rows = append(rows, row)
	}
}

func parseRow(rec []string) (Row, error) {
	var row Row
	var err error
	num := func(s string) float64 {
		if s == "" || err != nil {
			return 0
		}
		var v float64
		v, err = strconv.ParseFloat(s, 64)
		return v
	}
	row.Seq = uint64(num(rec[0]))
	row.Scheduled = num(rec[1])
	row.Sent = num(rec[2])
	row.LatencyMs = num(rec[3])
	row.Route = rec[4]
	row.Status = int(num(rec[5]))
	row.Messages = int(num(rec[6]))
	row.OK = int(num(rec[7]))
	row.BytesOut = uint64(num(rec[9]))
	row.BytesIn = uint64(num(rec[10]))
	row.Step = rec[11]
	row.Error = rec[12]
	if err == nil && (row.OK < 0 || row.OK > row.Messages) {
		err = fmt.Errorf("ok %d outside 0..messages %d", row.OK, row.Messages)
	}
	return row, err
}
