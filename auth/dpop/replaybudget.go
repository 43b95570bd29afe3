package dpop

// ReplayCacheBytes bounds the heap one replica's DPoP replay cache holds
// when full: ReplayEntries proofs of at most replayEntryBytes each,
// every one from another caller and another key, the most its counts hold
// (TestReplayCacheBytes measures it: about 43.4 MiB). Whoever sizes a
// replica's memory counts it whole, whether or not DPoP is used today.
const ReplayCacheBytes = ReplayEntries * replayEntryBytes

// replayEntryBytes is the heap one remembered proof takes, its indexes
// included, rounded up from the measured 173.5 bytes.
const replayEntryBytes = 176
