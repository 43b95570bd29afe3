package auth

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestNewRateLimit(t *testing.T) {
	tests := []struct {
		rate    float64
		burst   int
		wantErr bool
	}{
		{rate: 10, burst: 20},
		{rate: 0.01, burst: 1},
		{rate: 0, burst: 1, wantErr: true},
		{rate: -1, burst: 1, wantErr: true},
		{rate: math.NaN(), burst: 1, wantErr: true},
		{rate: math.Inf(1), burst: 1, wantErr: true},
		{rate: 1, burst: 0, wantErr: true},
	}
	for _, tt := range tests {
		_, err := NewRateLimit(tt.rate, tt.burst)
		if (err != nil) != tt.wantErr {
			t.Errorf("NewRateLimit(%v, %d) error = %v; want error %t", tt.rate, tt.burst, err, tt.wantErr)
		}
	}
}

// TestRateLimitBuckets drains buckets at a rate slow enough (one token an
// hour) that none refills while the test runs.
func TestRateLimitBuckets(t *testing.T) {
	l, err := NewRateLimit(1.0/3600, 3)
	if err != nil {
		t.Fatal(err)
	}
	const alice, bob = 0xa11ce, 0xb0b
	tests := []struct {
		key  uint64
		want bool // allowed
	}{
		{alice, true}, {alice, true}, {alice, true},
		{alice, false}, // burst spent
		{bob, true},    // every key has its own bucket
		{alice, false},
		{0, true},
	}
	for i, tt := range tests {
		err := l.Allow(tt.key)
		if (err == nil) != tt.want {
			t.Fatalf("request %d: Allow(%#x) = %v; want allowed %t", i, tt.key, err, tt.want)
		}
		if err == nil {
			continue
		}
		var rl *RateLimitError
		if !errors.As(err, &rl) || rl.HTTPStatus() != http.StatusTooManyRequests {
			t.Fatalf("Allow(%#x) error %#v; want a *RateLimitError with status 429", tt.key, err)
		}
		// The next token is an hour away, less the little time the test ran.
		if rl.RetryAfter <= 59*time.Minute || rl.RetryAfter > time.Hour {
			t.Errorf("Allow(%#x) RetryAfter = %s; want about 1h", tt.key, rl.RetryAfter)
		}
		if got := rl.RetryAfterHeader(); got != "3600" {
			t.Errorf("Allow(%#x) Retry-After %q; want 3600", tt.key, got)
		}
	}
}

// TestRateLimitRefill checks that a spent bucket admits a request again
// once a token has come back, and that refusals do not take tokens.
func TestRateLimitRefill(t *testing.T) {
	l, err := NewRateLimit(50, 1) // one token every 20ms
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Allow(1); err != nil {
		t.Fatalf("first Allow = %v; want nil", err)
	}
	var rl *RateLimitError
	if err := l.Allow(1); !errors.As(err, &rl) || rl.RetryAfter <= 0 || rl.RetryAfter > 20*time.Millisecond {
		t.Fatalf("second Allow = %v; want a refusal with RetryAfter in (0, 20ms]", err)
	}
	// Refused attempts meanwhile must not push the next token further out.
	deadline := time.Now().Add(5 * time.Second)
	for l.Allow(1) != nil {
		if time.Now().After(deadline) {
			t.Fatal("bucket of 50/s did not refill within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRetryAfterHeader(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "1"},
		{time.Nanosecond, "1"},
		{time.Second, "1"},
		{time.Second + time.Nanosecond, "2"},
		{90 * time.Second, "90"},
		{time.Duration(math.MaxInt64), "86400"},
	}
	for _, tt := range tests {
		if got := (&RateLimitError{RetryAfter: tt.d}).RetryAfterHeader(); got != tt.want {
			t.Errorf("RetryAfterHeader(%s) = %q; want %q", tt.d, got, tt.want)
		}
	}
}

// TestRateLimitConcurrent spends one bucket from many goroutines: exactly
// burst requests pass.
func TestRateLimitConcurrent(t *testing.T) {
	const burst = 50
	l, err := NewRateLimit(1.0/3600, burst)
	if err != nil {
		t.Fatal(err)
	}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 20 {
				if l.Allow(1) == nil {
					allowed.Add(1)
				}
				l.Allow(2 + uint64(allowed.Load()))
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != burst {
		t.Errorf("%d of 320 concurrent requests passed; want the burst, %d", got, burst)
	}
}

// TestRateLimitMemoryBound sends more distinct keys than a RateLimit
// tracks: it keeps at most two generations, and a key in use survives the
// rotations.
func TestRateLimitMemoryBound(t *testing.T) {
	l, err := NewRateLimit(1.0/3600, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Allow(1); err != nil {
		t.Fatal(err)
	}
	for i := range 3 * maxRateKeys {
		l.Allow(uint64(i) + 2)
		if i%1000 == 0 && l.Allow(1) == nil {
			t.Fatalf("after %d other keys, the spent bucket of a key in use was full again", i)
		}
	}
	if n := l.keys(); n > 2*maxRateKeys {
		t.Errorf("RateLimit tracks %d keys; want at most %d", n, 2*maxRateKeys)
	}
}

// TestCallerKey: the limiter's key is the issuer and the subject, so
// alice of one issuer does not spend the budget of alice of another (SPEC
// §3, §10: they are two callers), and the two never run together.
func TestCallerKey(t *testing.T) {
	seen := map[[16]byte]string{}
	for _, c := range [][2]string{{"staff", "alice"}, {"customers", "alice"}, {"", "alice"}, {"staffalice", ""}, {"", "staffalice"}, {"staff", "alice\x00"}} {
		k := CallerKey(c[0], c[1])
		if prev, dup := seen[k]; dup {
			t.Errorf("CallerKey(%q, %q) = CallerKey of %s", c[0], c[1], prev)
		}
		seen[k] = fmt.Sprintf("(%q, %q)", c[0], c[1])
	}
	if CallerKey("staff", "alice") != CallerKey(string([]byte("staff")), string([]byte("alice"))) {
		t.Error("CallerKey is not the same for the same caller")
	}
}
