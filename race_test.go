//go:build race

package main

// raceEnabled reports whether the tests run under the race detector, which
// changes what they may expect of memory: sync.Pool drops items at random,
// and every allocation gets shadow memory.
const raceEnabled = true
