package postgres

import "sync"

// noReaders remembers principals that read no plant of one catalog
// version, so that a caller's groups that no plant names are not looked up
// again on each of its requests (see Store.listOnce). The queries that use
// it check the version in the statement itself, so an entry is never
// trusted for a catalog other than the one it was found in.
//
// It is bounded: past maxCachedPrincipalBytes it starts over, so whatever
// principals callers bring, it holds a few MiB at most. It is safe for
// concurrent use.
type noReaders struct {
	mu      sync.Mutex
	version int64 // the catalog version the entries hold for; 0: none
	set     map[string]struct{}
	bytes   int
}

// maxCachedPrincipalBytes bounds noReaders, counting each entry's bytes
// plus a map slot.
const maxCachedPrincipalBytes = 4 << 20

// cacheEntryOverhead is what an entry costs beside its bytes: the map
// slot and the string header.
const cacheEntryOverhead = 48

// split returns the principals of ps known to read nothing at the
// cache's version (cached), the others (rest), and that version.
func (c *noReaders) split(ps []string) (rest, cached []string, version int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.set) == 0 {
		return ps, nil, c.version
	}
	rest = make([]string, 0, len(ps))
	for _, p := range ps {
		if _, ok := c.set[p]; ok {
			cached = append(cached, p)
		} else {
			rest = append(rest, p)
		}
	}
	return rest, cached, c.version
}

// learn records that the principals none read nothing at version.
// Versions only grow: a newer one replaces the entries, an older one is
// ignored.
func (c *noReaders) learn(version int64, none []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.advance(version) {
		return
	}
	for _, p := range none {
		if _, ok := c.set[p]; ok {
			continue
		}
		if c.bytes+len(p)+cacheEntryOverhead > maxCachedPrincipalBytes {
			c.set, c.bytes = nil, 0
		}
		if c.set == nil {
			c.set = make(map[string]struct{})
		}
		c.set[p] = struct{}{}
		c.bytes += len(p) + cacheEntryOverhead
	}
}

// saw records that the database is at version (from a listing).
func (c *noReaders) saw(version int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(version)
}

// reset empties the cache and makes version the current one, whatever it
// was: the poll's reading is authoritative (a restored backup may go back).
func (c *noReaders) reset(version int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version, c.set, c.bytes = version, nil, 0
}

// advance moves the cache to version when it is newer, dropping the
// entries, and reports whether the cache is now at version. c.mu is held.
func (c *noReaders) advance(version int64) bool {
	switch {
	case version > c.version:
		c.version, c.set, c.bytes = version, nil, 0
		return true
	case version == c.version:
		return version > 0
	}
	return false
}
