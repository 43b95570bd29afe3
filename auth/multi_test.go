package auth_test

import (
	"context"
	"crypto"
	"errors"
	"testing"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
)

// srcFailing is a key source that answers every lookup with err.
type srcFailing struct{ err error }

func (s srcFailing) Key(context.Context, string, string) (auth.Key, error) { return auth.Key{}, s.err }

func TestCombine(t *testing.T) {
	rs := func(kid string) auth.Key {
		return auth.Key{ID: kid, Public: authtest.NewKeyID(t, "RS256", kid).Verify.Public}
	}
	es := func(kid string) auth.Key {
		return auth.Key{ID: kid, Public: authtest.NewKeyID(t, "ES256", kid).Verify.Public}
	}
	hmac := auth.Key{Public: []byte("0123456789abcdef0123456789abcdef")}
	rsA, rsB, esA, esC := rs("a"), rs("b"), es("a"), es("c")
	set := func(keys ...auth.Key) auth.Keys { return auth.NewKeySet(keys) }
	var notReady *auth.KeySet // a nil set has no keys yet: ErrNoKeys
	boom := errors.New("boom")

	tests := []struct {
		name     string
		sources  []auth.Keys
		kid, alg string
		want     auth.Key
		wantErr  error
	}{
		{name: "kid in the first source", sources: []auth.Keys{set(rsA), set(rsB)}, kid: "a", alg: "RS256", want: rsA},
		{name: "kid in the second source", sources: []auth.Keys{set(rsA), set(rsB)}, kid: "b", alg: "RS256", want: rsB},
		{name: "kid in a source after one without keys", sources: []auth.Keys{notReady, set(esC)}, kid: "c", alg: "ES256", want: esC},
		{name: "first source that knows the kid decides", sources: []auth.Keys{set(esA), set(rsA)}, kid: "a", alg: "RS256", wantErr: auth.ErrKeyMismatch},
		{name: "kid nowhere", sources: []auth.Keys{set(rsA), set(esC)}, kid: "zz", alg: "RS256", wantErr: auth.ErrUnknownKey},
		{name: "kid nowhere, one source not ready", sources: []auth.Keys{notReady, set(esC)}, kid: "zz", alg: "ES256", wantErr: auth.ErrUnknownKey},
		{name: "no kid, one key fits over all sources", sources: []auth.Keys{set(rsA), set(esC), set(hmac)}, alg: "HS256", want: hmac},
		{name: "no kid, one fitting key in each of two sources", sources: []auth.Keys{set(rsA), set(rsB)}, alg: "RS256", wantErr: auth.ErrAmbiguousKey},
		{name: "no kid, two fitting keys in one source", sources: []auth.Keys{set(rsA, rsB), set(esC)}, alg: "RS256", wantErr: auth.ErrAmbiguousKey},
		{name: "no kid, nothing fits", sources: []auth.Keys{set(rsA), set(esC)}, alg: "EdDSA", wantErr: auth.ErrUnknownKey},
		{name: "no kid, fitting key beside a source not ready", sources: []auth.Keys{notReady, set(rsA)}, alg: "RS256", want: rsA},
		{name: "every source without keys", sources: []auth.Keys{notReady, notReady}, kid: "a", alg: "RS256", wantErr: auth.ErrNoKeys},
		{name: "every source without keys, no kid", sources: []auth.Keys{notReady, notReady}, alg: "RS256", wantErr: auth.ErrNoKeys},
		{name: "no sources", sources: nil, kid: "a", alg: "RS256", wantErr: auth.ErrNoKeys},
		{name: "other errors pass through", sources: []auth.Keys{srcFailing{boom}, set(rsA)}, kid: "a", alg: "RS256", wantErr: boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := auth.Combine(tt.sources...).Key(t.Context(), tt.kid, tt.alg)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Combine(%d sources).Key(%q, %s) error = %v, want %v", len(tt.sources), tt.kid, tt.alg, err, tt.wantErr)
			}
			if tt.wantErr == nil && (got.ID != tt.want.ID || !sameKey(got.Public, tt.want.Public)) {
				t.Errorf("Combine(%d sources).Key(%q, %s) = key %q %T, want %q %T", len(tt.sources), tt.kid, tt.alg, got.ID, got.Public, tt.want.ID, tt.want.Public)
			}
		})
	}

	t.Run("one source is returned as is", func(t *testing.T) {
		ks := auth.NewKeySet([]auth.Key{rsA})
		if got := auth.Combine(ks); got != auth.Keys(ks) {
			t.Errorf("Combine(ks) = %v, want ks itself", got)
		}
	})
}

func sameKey(a, b any) bool {
	if ea, ok := a.(interface{ Equal(x crypto.PublicKey) bool }); ok {
		return ea.Equal(b)
	}
	ab, aok := a.([]byte)
	bb, bok := b.([]byte)
	return aok && bok && string(ab) == string(bb)
}
