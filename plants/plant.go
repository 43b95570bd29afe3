// Package plants is the domain of the Plant Store: the Plant type, the
// catalog format and its validation, the access rule (access.go), the
// ordering, and the Store contract with its in-memory implementation. It
// knows nothing of HTTP or tokens: package api serves it, package postgres
// stores it.
package plants

import (
	"context"
	"errors"
	"iter"
)

// Plant is one catalog entry. Only Name and Tag are ever shown to a caller;
// ID and Readers stay inside the service.
type Plant struct {
	// ID is unique within a catalog; generated from the entry's position when
	// the file gives none.
	ID string
	// Name is non-empty.
	Name string
	// Tag is optional; empty means the plant has none.
	Tag string
	// Readers are the principals that may see the plant: "*", "user:<x>" or
	// "group:<x>".
	Readers []string
}

// NoLimit is the Query.Limit that asks for every visible plant.
const NoLimit = -1

// Query selects the plants a caller may see.
type Query struct {
	// Caller is who asks; the access rule (its principals meet a plant's
	// readers, access.go) decides what it sees.
	Caller Caller
	// Limit bounds the number of plants returned; [NoLimit] means no bound.
	Limit int
	// After, unless zero, starts the listing strictly after this key: the
	// plants listed are those that sort after it (keyset paging). The key
	// need not be a plant's still: it only marks a place in the order.
	After Key
}

// A Store lists plants in the contract's order: by name (byte order), ties
// by id. Implementations are safe for concurrent use.
type Store interface {
	// List yields the plants q.Caller may read, in order, that sort
	// after q.After, at most q.Limit of them. A non-nil error ends the sequence; it wraps
	// [ErrUnavailable] when the store cannot answer.
	List(ctx context.Context, q Query) iter.Seq2[Plant, error]
}

// A PagedStore is a [Store] whose listings depend on the caller only
// through a key it gives, so that a page made for one caller can be served
// again to any caller of the same key (see the api package's page cache).
type PagedStore interface {
	Store
	// PageKey appends to dst the key of c's listings in what the store
	// serves now: equal keys mean the same plants for every query until
	// the key changes. ok is false when the store cannot give one (no
	// catalog yet): the caller then lists.
	PageKey(dst []byte, c Caller) (key []byte, ok bool)
	// Served records a listing answered from such a page as one of the
	// store's own (plantstore_store_request_duration_seconds), taking no
	// time.
	Served()
}

// ErrUnavailable reports that the store cannot answer now (database down,
// catalog not loaded). The API answers 503 with Retry-After.
var ErrUnavailable = errors.New("store unavailable")
