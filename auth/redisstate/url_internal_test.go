package redisstate

import (
	"errors"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/observability/setting"
)

// TestURL: only redis:// and rediss:// URLs, and no refusal shows a
// password; New refuses the others as the setting redis_url.
func TestURL(t *testing.T) {
	for _, s := range []string{"redis://127.0.0.1:6379/0", "rediss://user:pw@redis.example.com:6380/2", "redis://:pw@localhost"} {
		if _, err := parseURL(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{"http://127.0.0.1:6379", "unix:///run/redis.sock", "127.0.0.1:6379", "redis://", "redis://u:sekrit@host/notanumber"} {
		_, err := parseURL(s)
		if !errors.Is(err, errURL) {
			t.Errorf("%s: %v; want errURL", s, err)
		} else if strings.Contains(err.Error(), "sekrit") {
			t.Errorf("%s: %v shows the password", s, err)
		}
		var se *setting.Error
		if _, err := New(Options{URL: s}); !errors.As(err, &se) || se.Key != "redis_url" || strings.Contains(err.Error(), "sekrit") {
			t.Errorf("New(%s) = %v; want the *setting.Error of redis_url, without the password", s, err)
		}
	}
}
