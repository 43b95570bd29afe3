package revoke

import (
	"errors"
	"sync"
	"time"
)

// DefaultMaxEvents bounds the event ids an [EventFile] remembers.
const DefaultMaxEvents = 65536

// ErrTooManyEvents is the refusal of an event while an [EventFile]
// remembers as many event ids as it may, none of them old enough to
// forget: the event is not recorded, and its sender retries.
var ErrTooManyEvents = errors.New("too many security events received within their replay window; retry later")

// EventFileOptions configure an [EventFile].
type EventFileOptions struct {
	// Window is how long an event id is remembered after it was recorded:
	// at least as long as an event can still be accepted (the age its iat
	// may have, plus the clock skew allowed on either side).
	Window time.Duration
	// Max bounds the event ids remembered; 0 means DefaultMaxEvents.
	Max int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// An EventFile records the cutoffs of security events in a revocations
// file, which every replica that watches it reads again, and puts each in
// force at once in the Revocations of this replica. Each event id (the
// issuer's jti) is applied once by this replica: the ids are remembered
// in memory for the window of the options, bounded in number. Replicas
// sharing the file do not share the ids: a replayed event is refused only
// by the replica that recorded it (another adds nothing new to the file,
// the same cutoff being there already). It is safe for concurrent use;
// the writers of the file in other processes (another replica, plantstore
// revoke) are not serialised with it.
type EventFile struct {
	path string
	r    *Revocations
	o    EventFileOptions
	// mu guards the read-modify-write of the file and seen.
	mu   sync.Mutex
	seen map[eventID]time.Time // when each id may be forgotten
	// order is the ids of seen by the time they were recorded, the oldest
	// first.
	order []eventID
}

// eventID is an event, by its issuer and jti.
type eventID struct{ issuer, jti string }

// NewEventFile returns an EventFile of the revocations file at path, whose
// revocations in force are r.
func NewEventFile(path string, r *Revocations, o EventFileOptions) *EventFile {
	if o.Max <= 0 {
		o.Max = DefaultMaxEvents
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &EventFile{path: path, r: r, o: o, seen: map[eventID]time.Time{}}
}

// Record adds e, the subject cutoff of the event jti of issuer, to the
// file and puts it in force at once, unless this replica recorded that
// event before: fresh is then false and nothing changes. On an error
// nothing is remembered, and the event can be delivered again.
func (f *EventFile) Record(issuer, jti string, e Entry) (fresh bool, err error) {
	if err := e.Check(); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.o.Now()
	f.forget(now)
	id := eventID{issuer, jti}
	if _, ok := f.seen[id]; ok {
		return false, nil
	}
	if len(f.seen) >= f.o.Max {
		return false, ErrTooManyEvents
	}
	entries, err := ReadFile(f.path)
	if err != nil {
		return false, err
	}
	if !has(entries, e) {
		if err := WriteFile(f.path, append(entries, e)); err != nil {
			return false, err
		}
	}
	f.r.Add(e, now)
	f.seen[id] = now.Add(f.o.Window)
	f.order = append(f.order, id)
	return true, nil
}

// Remembered returns the number of event ids remembered now.
func (f *EventFile) Remembered() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forget(f.o.Now())
	return len(f.seen)
}

// forget drops the ids past their window at now; f.mu is held.
func (f *EventFile) forget(now time.Time) {
	n := 0
	for _, id := range f.order {
		if now.Before(f.seen[id]) {
			break
		}
		delete(f.seen, id)
		n++
	}
	if n > 0 {
		f.order = append(f.order[:0:0], f.order[n:]...)
	}
}

// has reports whether entries hold e.
func has(entries []Entry, e Entry) bool {
	for _, have := range entries {
		if have.Issuer == e.Issuer && have.Sub == e.Sub && have.Client == e.Client && have.All == e.All && have.JTI == e.JTI && have.Before.Equal(e.Before) && have.Until.Equal(e.Until) {
			return true
		}
	}
	return false
}
