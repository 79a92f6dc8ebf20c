package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agent-box/agent-box/runrecord"
)

// decodeReps is how many times each way decodes every record.
const decodeReps = 15

// benchDecode times runrecord.Decode over the records a process_list of
// the smallest list size reads with limit=all (the records process_list
// generates, read back from disk), two ways: the bytes as Encode wrote
// them, which the hand-written decoder takes, and the same bytes with one
// key in another case, which it refuses, so that Decode hands the record
// to encoding/json (the same checks follow either way). One record is what
// a supervisor reads at its start.
func (b *bench) benchDecode() []metric {
	n := b.cfg.listSizes[0]
	name := fmt.Sprintf("Decode of %s records (process_list limit=all), median", countLabel(n))
	fail := func(err error) []metric { return []metric{failed(name, err)} }
	root := filepath.Join(b.work, "decode-state")
	store, _, err := runrecord.Open(root)
	if err != nil {
		return fail(err)
	}
	if err := genRecords(store, 0, n, false); err != nil {
		return fail(err)
	}
	paths, err := filepath.Glob(filepath.Join(root, "runs", "*", "*", "record.json"))
	if err != nil {
		return fail(err)
	}
	if len(paths) != n {
		return fail(fmt.Errorf("found %d records of %d", len(paths), n))
	}
	var fast, slow [][]byte
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return fail(err)
		}
		other := bytes.Replace(data, []byte(`"cwd"`), []byte(`"Cwd"`), 1)
		if bytes.Equal(other, data) {
			return fail(fmt.Errorf("%s has no cwd", p))
		}
		fast, slow = append(fast, data), append(slow, other)
	}
	all := func(records [][]byte) (time.Duration, error) {
		t0 := time.Now()
		for _, data := range records {
			if _, err := runrecord.Decode(data); err != nil {
				return 0, err
			}
		}
		return time.Since(t0), nil
	}
	var ours, base []time.Duration
	// One unmeasured round of each first (encoding/json learns the types
	// on first use); then the two interleave, so drift hits both alike.
	for i := -1; i < decodeReps; i++ {
		d, err := all(fast)
		if err != nil {
			return fail(err)
		}
		db, err := all(slow)
		if err != nil {
			return fail(err)
		}
		if i >= 0 {
			ours, base = append(ours, d), append(base, db)
		}
	}
	m := metric{Name: name, Unit: "ms", Value: ms(median(ours)), Samples: len(ours)}
	m.setBaseline("encoding/json (Decode's fallback)", ms(median(base)))
	perRecord := func(ds []time.Duration) float64 { return ms(median(ds)) * 1000 / float64(n) }
	m.Note = fmt.Sprintf("one record (a supervisor's start reads one): %.1f µs, encoding/json %.1f µs; %d B a record",
		perRecord(ours), perRecord(base), len(fast[0]))
	return []metric{m}
}
