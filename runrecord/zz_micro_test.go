package runrecord_test

import (
	"testing"
	"time"

	"github.com/agent-box/agent-box/runrecord"
)

func BenchmarkDecodeOne(b *testing.B) {
	data, _ := runrecord.Encode(sample("bench", time.Now()))
	for b.Loop() {
		runrecord.Decode(data)
	}
}
func BenchmarkFastOne(b *testing.B) {
	data, _ := runrecord.Encode(sample("bench", time.Now()))
	for b.Loop() {
		runrecord.FastDecode(data)
	}
}
func BenchmarkValidRunID(b *testing.B) {
	id := runrecord.NewRunID(time.Now())
	for b.Loop() {
		runrecord.ValidRunID(id)
	}
}
func BenchmarkValidName(b *testing.B) {
	for b.Loop() {
		runrecord.ValidName("dev-server_2.log")
	}
}
func BenchmarkTimeUnmarshal(b *testing.B) {
	raw := []byte(`"2026-12-02T14:17:01.123456789Z"`)
	var t time.Time
	for b.Loop() {
		t.UnmarshalJSON(raw)
	}
}
