// bodies.go - the request bodies, built before the load.
//
// Owns: the JSON shape of a batch (`[{"key","value"[,"topic"]}, ...]`) and of
// a single message, the pool of random values, and the key modes: `fixed`
// rotates prebuilt bodies (no work per request), `fresh` writes new keys into
// a copy of a prebuilt template every request. The ingestor adds the
// verification envelope (producer id, sequence, send time, CRC) to every
// record, so repeated keys and values do not weaken the loss checks.
// Must not: build a body character by character on the hot path.
package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"sync/atomic"
)

// fixedBodies is how many distinct prebuilt batch bodies a generator rotates.
const fixedBodies = 16

type Bodies struct {
	keys    string
	batches [][]byte // fixed: prebuilt bodies
	singles [][]byte
	// fresh: template pieces; a body is pieces[0] + slot + pieces[1] + slot + ...
	pieces [][]byte
	slot   atomic.Uint64
}

// randomValues is count random values of size characters of [A-Za-z0-9_-]
// (JSON-safe, so size characters are size bytes on the wire and in Kafka).
func randomValues(count, size int) []string {
	raw := make([]byte, (count*size*3+3)/4+3)
	if _, err := rand.Read(raw); err != nil {
		panic(err)
	}
	text := base64.RawURLEncoding.EncodeToString(raw)
	out := make([]string, count)
	for i := range out {
		out[i] = text[i*size : (i+1)*size]
	}
	return out
}

func NewBodies(p *Plan, generator int) *Bodies {
	values := randomValues(p.BatchSize, p.MessageSize)
	topic := ""
	if p.Topic != "" {
		t, _ := json.Marshal(p.Topic)
		topic = `,"topic":` + string(t)
	}
	gen := "g" + strconv.Itoa(generator)
	msg := func(key string, i int) string {
		return `{"key":"` + key + `","value":"` + values[i%len(values)] + `"` + topic + `}`
	}
	b := &Bodies{keys: p.Keys}
	if p.Keys == "fixed" {
		for n := 0; n < fixedBodies; n++ {
			buf := []byte{'['}
			for i := 0; i < p.BatchSize; i++ {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = append(buf, msg(gen+"-"+strconv.Itoa(n)+"-"+strconv.Itoa(i), i+n)...)
			}
			b.batches = append(b.batches, append(buf, ']'))
			b.singles = append(b.singles, []byte(msg(gen+"-"+strconv.Itoa(n)+"-s", n)))
		}
		return b
	}
	// fresh: every key starts with the request's slot
	var cur []byte
	cur = append(cur, '[')
	for i := 0; i < p.BatchSize; i++ {
		if i > 0 {
			cur = append(cur, ',')
		}
		cur = append(cur, `{"key":"`...)
		b.pieces = append(b.pieces, cur)
		m := msg("", i)
		cur = []byte("-" + gen + "-" + strconv.Itoa(i) + m[len(`{"key":"`):])
	}
	b.pieces = append(b.pieces, append(cur, ']'))
	b.singles = [][]byte{[]byte(msg(gen+"-s", 0))}
	return b
}

// Batch is the body of request n.
func (b *Bodies) Batch(n uint64) []byte {
	if b.keys == "fixed" {
		return b.batches[n%uint64(len(b.batches))]
	}
	slot := strconv.FormatUint(b.slot.Add(1), 36)
	size := len(slot) * (len(b.pieces) - 1)
	for _, p := range b.pieces {
		size += len(p)
	}
	out := make([]byte, 0, size)
	for i, p := range b.pieces {
		if i > 0 {
			out = append(out, slot...)
		}
		out = append(out, p...)
	}
	return out
}

// Single is the body of a one-message request n.
func (b *Bodies) Single(n uint64) []byte { return b.singles[n%uint64(len(b.singles))] }
