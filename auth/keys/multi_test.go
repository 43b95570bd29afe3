package keys_test

import (
	"context"
	"crypto"
	"errors"
	"testing"

	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/keys"
)

// srcFailing is a key source that answers every lookup with err.
type srcFailing struct{ err error }

func (s srcFailing) Key(context.Context, string, string) (keys.Key, error) { return keys.Key{}, s.err }

func TestCombine(t *testing.T) {
	rs := func(kid string) keys.Key {
		return keys.Key{ID: kid, Public: authtest.NewKeyID(t, "RS256", kid).Verify.Public}
	}
	es := func(kid string) keys.Key {
		return keys.Key{ID: kid, Public: authtest.NewKeyID(t, "ES256", kid).Verify.Public}
	}
	hmac := keys.Key{Public: []byte("0123456789abcdef0123456789abcdef")}
	rsA, rsB, esA, esC := rs("a"), rs("b"), es("a"), es("c")
	set := func(ks ...keys.Key) keys.Keys { return keys.NewKeySet(ks) }
	var notReady *keys.KeySet // a nil set has no keys yet: ErrNoKeys
	boom := errors.New("boom")

	tests := []struct {
		name     string
		sources  []keys.Keys
		kid, alg string
		want     keys.Key
		wantErr  error
	}{
		{name: "kid in the first source", sources: []keys.Keys{set(rsA), set(rsB)}, kid: "a", alg: "RS256", want: rsA},
		{name: "kid in the second source", sources: []keys.Keys{set(rsA), set(rsB)}, kid: "b", alg: "RS256", want: rsB},
		{name: "kid in a source after one without keys", sources: []keys.Keys{notReady, set(esC)}, kid: "c", alg: "ES256", want: esC},
		{name: "first source that knows the kid decides", sources: []keys.Keys{set(esA), set(rsA)}, kid: "a", alg: "RS256", wantErr: keys.ErrKeyMismatch},
		{name: "kid nowhere", sources: []keys.Keys{set(rsA), set(esC)}, kid: "zz", alg: "RS256", wantErr: keys.ErrUnknownKey},
		{name: "kid nowhere, one source not ready", sources: []keys.Keys{notReady, set(esC)}, kid: "zz", alg: "ES256", wantErr: keys.ErrUnknownKey},
		{name: "no kid, one key fits over all sources", sources: []keys.Keys{set(rsA), set(esC), set(hmac)}, alg: "HS256", want: hmac},
		{name: "no kid, one fitting key in each of two sources", sources: []keys.Keys{set(rsA), set(rsB)}, alg: "RS256", wantErr: keys.ErrAmbiguousKey},
		{name: "no kid, two fitting keys in one source", sources: []keys.Keys{set(rsA, rsB), set(esC)}, alg: "RS256", wantErr: keys.ErrAmbiguousKey},
		{name: "no kid, nothing fits", sources: []keys.Keys{set(rsA), set(esC)}, alg: "EdDSA", wantErr: keys.ErrUnknownKey},
		{name: "no kid, fitting key beside a source not ready", sources: []keys.Keys{notReady, set(rsA)}, alg: "RS256", want: rsA},
		{name: "every source without keys", sources: []keys.Keys{notReady, notReady}, kid: "a", alg: "RS256", wantErr: keys.ErrNoKeys},
		{name: "every source without keys, no kid", sources: []keys.Keys{notReady, notReady}, alg: "RS256", wantErr: keys.ErrNoKeys},
		{name: "no sources", sources: nil, kid: "a", alg: "RS256", wantErr: keys.ErrNoKeys},
		{name: "other errors pass through", sources: []keys.Keys{srcFailing{boom}, set(rsA)}, kid: "a", alg: "RS256", wantErr: boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := keys.Combine(tt.sources...).Key(t.Context(), tt.kid, tt.alg)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Combine(%d sources).Key(%q, %s) error = %v, want %v", len(tt.sources), tt.kid, tt.alg, err, tt.wantErr)
			}
			if tt.wantErr == nil && (got.ID != tt.want.ID || !sameKey(got.Public, tt.want.Public)) {
				t.Errorf("Combine(%d sources).Key(%q, %s) = key %q %T, want %q %T", len(tt.sources), tt.kid, tt.alg, got.ID, got.Public, tt.want.ID, tt.want.Public)
			}
		})
	}

	t.Run("one source is returned as is", func(t *testing.T) {
		ks := keys.NewKeySet([]keys.Key{rsA})
		if got := keys.Combine(ks); got != keys.Keys(ks) {
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
