package redisstate

// RoundTrips returns the round trips s made to Redis for admissions.
func (s *State) RoundTrips() int64 { return s.roundTrips.Load() }

// Leased returns the tokens of caller's lease on s left and unexpired.
func (s *State) Leased(caller [16]byte) int64 { return s.leases.outstanding(caller) }

// LeaseLife is how long a lease's tokens may be used.
const LeaseLife = leaseLife
