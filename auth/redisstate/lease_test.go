package redisstate_test

import (
	"sync"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/redisstate"
	"github.com/plantstore/plantstore/auth/redisstate/redistest"
)

// TestLeaseRoundTrips: a caller far below its shared rate, sending many
// requests at once to one replica, costs Redis far fewer scripts than
// requests, each counted under op="rate"; its DPoP requests still cost
// one script each (their proofs), most of them without the rate.
func TestLeaseRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	issuer, client := authtest.NewKey(t, "ES256"), authtest.NewKey(t, "ES256")
	r := newReplicaOf(t, issuer, redisstate.Options{URL: srv.URL(), Timeout: 4 * timeout, Rate: 10000, Burst: 10000}, 10000, 10000)
	bearer := authtest.Token(t, issuer, nil, authtest.Claims(map[string]any{"sub": "alice"}))
	token := bound(t, issuer, client, "alice")
	const senders, each, dpop = 8, 250, 40
	proofs := make([][]string, senders)
	for g := range proofs {
		for range dpop / senders {
			proofs[g] = append(proofs[g], authtest.Proof(t, client, "GET", publicURL, token, nil, nil))
		}
	}
	if err := r.send(bearer, ""); err != nil {
		t.Fatal(err)
	}
	scripts, trips, rateCalls := redisCalls(t, srv.Addr(), true), r.state.RoundTrips(), r.requests(t, redisstate.OpRate, redisstate.ResultOK)

	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for range each {
				if err := r.send(bearer, ""); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	const requests = senders * each
	scripts, trips, rateCalls = redisCalls(t, srv.Addr(), true)-scripts, r.state.RoundTrips()-trips, r.requests(t, redisstate.OpRate, redisstate.ResultOK)-rateCalls
	t.Logf("%d bearer requests: %d scripts, %d round trips", requests, scripts, trips)
	if scripts > requests/8 || trips > scripts {
		t.Errorf("%d bearer requests far below the rate cost %d scripts in %d round trips; want at most an eighth as many scripts, and no more round trips than scripts", requests, scripts, trips)
	}
	if rateCalls != float64(scripts) {
		t.Errorf("op=\"rate\" counted %v calls; want the %d scripts Redis ran", rateCalls, scripts)
	}

	scripts, rateCalls = redisCalls(t, srv.Addr(), true), r.requests(t, redisstate.OpRate, redisstate.ResultOK)
	replayCalls := r.requests(t, redisstate.OpReplay, redisstate.ResultOK)
	for g := range senders {
		wg.Go(func() {
			for _, proof := range proofs[g] {
				if err := r.send(bearer, ""); err != nil {
					t.Error(err)
					return
				}
				if err := r.send(token, proof); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	scripts = redisCalls(t, srv.Addr(), true) - scripts
	rateCalls = r.requests(t, redisstate.OpRate, redisstate.ResultOK) - rateCalls
	replayCalls = r.requests(t, redisstate.OpReplay, redisstate.ResultOK) - replayCalls
	t.Logf("%d bearer and %d DPoP requests: %d scripts, %v with the rate", dpop, dpop, scripts, rateCalls)
	if replayCalls != dpop || scripts < dpop || scripts > dpop+dpop/2 {
		t.Errorf("%d DPoP requests (and as many bearer ones) cost %d scripts, %v counted under op=\"replay\"; want one for each proof, and few more", dpop, scripts, replayCalls)
	}
	if rateCalls > dpop {
		t.Errorf("%v of %d scripts took the rate; want most requests from the lease", rateCalls, scripts)
	}
}

// TestLeaseSlowCaller: a caller sending fewer than 10 requests a second
// to a replica asks for no lease: one script a request, no token left
// on the replica; the same caller sending a few at once gets one.
func TestLeaseSlowCaller(t *testing.T) {
	srv := redistest.Start(t)
	s := newState(t, redisstate.Options{URL: srv.URL(), Rate: 100, Burst: 100})
	caller := auth.CallerKey("", "alice")
	before := redisCalls(t, srv.Addr(), true)
	const requests = 6
	for i := range requests {
		if i > 0 {
			time.Sleep(redisstate.LeaseLife + 20*time.Millisecond)
		}
		if v, err := s.Admit(t.Context(), auth.Admission{Caller: caller, Now: time.Now()}); err != nil || v.Limited {
			t.Fatalf("request %d: %+v, %v", i, v, err)
		}
		if n := s.Leased(caller); n != 0 {
			t.Fatalf("after request %d, %d tokens leased; want none", i, n)
		}
	}
	if got := redisCalls(t, srv.Addr(), true) - before; got != requests {
		t.Errorf("%d requests 120 ms apart cost %d scripts; want one each", requests, got)
	}
	for i := range 4 {
		if _, err := s.Admit(t.Context(), auth.Admission{Caller: caller, Now: time.Now()}); err != nil {
			t.Fatalf("request %d at once: %v", i, err)
		}
	}
	if n := s.Leased(caller); n == 0 {
		t.Errorf("after 4 requests at once, no token leased; want some")
	}
}

// TestLeaseDown: with the state down, a lease still held is not used:
// the request falls back to the replica's own state.
func TestLeaseDown(t *testing.T) {
	srv := redistest.Start(t)
	s := newState(t, redisstate.Options{URL: srv.URL(), Rate: 1000, Burst: 1000})
	caller := auth.CallerKey("", "alice")
	start := time.Now()
	for range 8 {
		if _, err := s.Admit(t.Context(), auth.Admission{Caller: caller, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	srv.Stop()
	// A DPoP request still calls Redis: it fails and turns the state down.
	now := time.Now()
	if _, err := s.Admit(t.Context(), auth.Admission{Caller: caller, DPoP: true, Now: now, Expires: now.Add(time.Minute), Life: time.Minute}); err == nil {
		t.Fatal("a DPoP request with Redis stopped: admitted; want an error")
	}
	if s.Leased(caller) == 0 || time.Since(start) > redisstate.LeaseLife/2 {
		t.Skip("the lease expired before the state went down; the machine is too slow for this test")
	}
	if _, err := s.Admit(t.Context(), auth.Admission{Caller: caller, Now: time.Now()}); err == nil {
		t.Errorf("a bearer request with the state down and a lease left: admitted by the lease; want an error")
	}
}

// TestLeaseLimited: a replica asking for a lease for a caller whose
// bucket is less than half full gets one request, as without leases,
// and a caller over its rate none.
func TestLeaseLimited(t *testing.T) {
	srv := redistest.Start(t)
	s := newState(t, redisstate.Options{URL: srv.URL(), Rate: 1.0 / 3600, Burst: 10})
	caller := auth.CallerKey("", "alice")
	before := redisCalls(t, srv.Addr(), true)
	var admitted int
	for i := range 15 {
		v, err := s.Admit(t.Context(), auth.Admission{Caller: caller, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if !v.Limited {
			admitted++
		}
		if n := s.Leased(caller); n > 4 {
			t.Fatalf("after request %d, %d tokens leased; want at most what leaves half the burst of 10", i, n)
		}
	}
	if admitted != 10 {
		t.Errorf("%d of 15 admitted; want the burst, 10", admitted)
	}
	if got := redisCalls(t, srv.Addr(), true) - before; got < 15-4 {
		t.Errorf("15 requests cost %d scripts; want all but those of one lease of at most 4", got)
	}
	if s.Leased(caller) != 0 {
		t.Errorf("%d tokens leased to a caller over its rate; want none", s.Leased(caller))
	}
}
