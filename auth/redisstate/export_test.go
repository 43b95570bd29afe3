package redisstate

// RoundTrips returns the round trips s made to Redis for admissions.
func (s *State) RoundTrips() int64 { return s.roundTrips.Load() }
