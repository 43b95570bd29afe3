package revoke_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/revoke"
)

// entries returns n revocations of every kind in equal shares, spread
// over 8 issuers, with ids as long as real ones (a 36-character UUID).
func entries(n int) []revoke.Entry {
	now := time.Now()
	out := make([]revoke.Entry, n)
	for i := range out {
		e := revoke.Entry{Issuer: fmt.Sprintf("issuer-%d", i%8), Before: now}
		id := fmt.Sprintf("3f0e1c52-9a4b-4d7e-8c21-%012d", i)
		switch i % 4 {
		case 0:
			e.Sub = id
		case 1:
			e.Client = id
		case 2:
			e.JTI, e.Before, e.Until = id, time.Time{}, now.Add(time.Hour)
		case 3:
			e.Sub = "user-" + id
		}
		out[i] = e
	}
	return out
}

// BenchmarkRevoked is the lookup of a token that no revocation names,
// among none and among 10,000: what every request with revocations on
// pays.
func BenchmarkRevoked(b *testing.B) {
	tok := auth.Revocable{Issuer: "issuer-1", Subject: "alice", Client: "plants-web", ID: "b9d4c0e6-5a1f-4f0e-9c3b-2d7e8a6f1b4c", IssuedAt: time.Now().UnixNano()}
	for _, n := range []int{0, 10000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			r := revoke.New(revoke.Options{})
			r.Replace(entries(n), time.Now())
			now := time.Now()
			for b.Loop() {
				if r.Revoked(tok, now) {
					b.Fatal("revoked")
				}
			}
		})
	}
}

// BenchmarkMemory reports the heap that 10,000 revocations in force take
// (the set and the entries it is built from), as bytes/10k-entries:
// docs/capacity.md cites it.
func BenchmarkMemory(b *testing.B) {
	const n = 10000
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		es := entries(n) // their strings are what the set keeps
		r := revoke.New(revoke.Options{})
		r.Replace(es, time.Now())
		es = nil
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(r)
		b.ReportMetric(float64(after.HeapAlloc)-float64(before.HeapAlloc), "bytes/10k-entries")
	}
}
