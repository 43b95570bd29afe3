package revoke

import (
	"context"
	"crypto/sha256"
	"errors"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/keys"
)

// DefaultRetention is how long a cutoff of an issuer without a
// max_lifetime is kept: longer than the lifetime of its tokens.
const DefaultRetention = 24 * time.Hour

// pruneEvery is how often expired entries are dropped from memory.
const pruneEvery = time.Minute

// Options configure [Revocations].
type Options struct {
	// Retention is how long a cutoff is kept for an issuer without a
	// max lifetime; 0 means DefaultRetention.
	Retention time.Duration
	// MaxLifetime returns the max lifetime of the tokens of an issuer
	// ("" for the unnamed one), 0 when it sets none; nil for none.
	MaxLifetime func(issuer string) time.Duration
	// Leeway is the clock skew the verifier allows: entries are kept that
	// much longer.
	Leeway time.Duration
	// Registerer, when set, takes plantstore_revocations{kind}.
	Registerer prometheus.Registerer
	// Log receives what happens to the revocations' source.
	Log *zap.Logger
}

// Revocations are the revocations in force on this replica: the last set
// read from their source. It is the [auth.Revocations] of the verifier,
// and safe for concurrent use.
type Revocations struct {
	o   Options
	set atomic.Pointer[Set]
	// mu guards entries, the source's last good entries, which a prune
	// builds the set of again.
	mu      sync.Mutex
	entries []Entry
	// sum is the SHA-256 of the file last loaded, when loaded.
	sum    [32]byte
	loaded bool
	gauge  *prometheus.GaugeVec
	// confirmed is when the set in force was last known to be the
	// store's, Unix nanoseconds; 0 before the first read.
	confirmed atomic.Int64
}

// New returns Revocations with none in force.
func New(o Options) *Revocations {
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	r := &Revocations{o: o}
	r.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "plantstore_revocations",
		Help: "Revocations in force on this replica, by kind: subject, client and issuer cutoffs, and single tokens.",
	}, []string{"kind"})
	age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "plantstore_revocations_age_seconds",
		Help: "Seconds since the revocations in force were last read from their store (the file, or PostgreSQL); +Inf before the first read. It grows while the store cannot be read and the last set serves.",
	}, r.Age)
	if o.Registerer != nil {
		o.Registerer.MustRegister(r.gauge, age)
	}
	r.mu.Lock()
	r.build(time.Now())
	r.mu.Unlock()
	return r
}

// Age returns the seconds since the set in force was last confirmed to be
// its store's ([Revocations.Replace], [Revocations.Confirm], a read of the
// file), +Inf before the first.
func (r *Revocations) Age() float64 {
	c := r.confirmed.Load()
	if c == 0 {
		return math.Inf(1)
	}
	return time.Since(time.Unix(0, c)).Seconds()
}

// Confirm records that the set in force was its store's at t.
func (r *Revocations) Confirm(t time.Time) {
	if n := t.UnixNano(); n > r.confirmed.Load() {
		r.confirmed.Store(n)
	}
}

// retention is how long a cutoff of issuer is kept.
func (r *Revocations) retention(issuer string) time.Duration {
	if r.o.MaxLifetime != nil {
		if d := r.o.MaxLifetime(issuer); d > 0 {
			return d
		}
	}
	return r.o.Retention
}

// Revoked implements auth.Revocations.
func (r *Revocations) Revoked(t auth.Revocable, now time.Time) bool {
	return r.set.Load().Revoked(t, now)
}

// Replace puts entries in force from now on, in place of the ones before.
func (r *Revocations) Replace(entries []Entry, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = slices.Clone(entries)
	r.build(now)
	r.Confirm(now)
}

// Add puts e in force at once beside the entries in force, until the next
// read of their source replaces them: for an entry just written to the
// source, which that read brings back.
func (r *Revocations) Add(e Entry, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries = append(slices.Clip(r.entries), e)
	r.build(now)
}

// Prune drops from memory the entries expired at now.
func (r *Revocations) Prune(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.build(now)
}

// build makes the set of r.entries at now; r.mu is held.
func (r *Revocations) build(now time.Time) {
	s := NewSet(r.entries, r.retention, r.o.Leeway, now)
	r.set.Store(s)
	n := s.Len()
	for i, k := range Kinds() {
		r.gauge.WithLabelValues(string(k)).Set(float64(n[i]))
	}
}

// Len returns the number of revocations in force of each kind, in the
// order of [Kinds].
func (r *Revocations) Len() [4]int { return r.set.Load().Len() }

// LoadFile puts the revocations of the file at path in force; on an error
// the ones before stay. It reports whether the file's content changed
// since the last load (a file that does not exist holds none).
func (r *Revocations) LoadFile(path string, now time.Time) (changed bool, err error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	sum := sha256.Sum256(data)
	r.mu.Lock()
	same := r.loaded && sum == r.sum
	r.mu.Unlock()
	if same {
		r.Confirm(now)
		return false, nil
	}
	entries, err := Parse(path, data)
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries, r.sum, r.loaded = entries, sum, true
	r.build(now)
	r.Confirm(now)
	return true, nil
}

// WatchFile reads the file at path again whenever it changes, as a key
// file is watched (see keys.WatchFile), and drops expired entries every
// minute: a file that cannot be read or parsed is logged and the last
// good set keeps serving. It returns a channel closed once the watch
// stopped with ctx.
func (r *Revocations) WatchFile(ctx context.Context, path string) <-chan struct{} {
	log := r.o.Log.With(zap.String("source", path))
	watched := keys.WatchFile(ctx, path, log, func() { r.reloadLogged(path, log) })
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(pruneEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				<-watched
				return
			case now := <-t.C:
				r.Prune(now)
			}
		}
	}()
	return done
}

// reloadLogged reads path again, and logs a change or a failure.
func (r *Revocations) reloadLogged(path string, log *zap.Logger) {
	changed, err := r.LoadFile(path, time.Now())
	if err != nil {
		log.Error("revocations file not applied; the last good revocations stay in force", zap.Error(err))
		return
	}
	if changed {
		n := r.Len()
		log.Info("revocations reloaded", zap.Int("subjects", n[0]), zap.Int("clients", n[1]), zap.Int("issuers", n[2]), zap.Int("tokens", n[3]))
	}
}
