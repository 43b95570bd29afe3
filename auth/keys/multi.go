package keys

import (
	"context"
	"errors"
)

// Combine returns a key source that consults sources in order. With one
// source it returns that source; with none, a source that always returns
// [ErrNoKeys].
//
// For a token with a kid, the first source that knows the kid answers:
// its key, or [ErrKeyMismatch] when its keys of that kid do not fit alg.
// Sources that do not know the kid are passed over; a source that fetches
// on an unknown kid (a [JWKS]) may do so, so list static sources first.
// For a token without kid, exactly one key over all sources must fit alg
// ([ErrUnknownKey] for none, [ErrAmbiguousKey] for several). [ErrNoKeys]
// is returned only when every source returns it.
func Combine(sources ...Keys) Keys {
	switch len(sources) {
	case 0:
		return multiKeys(nil)
	case 1:
		return sources[0]
	}
	return multiKeys(append([]Keys(nil), sources...))
}

type multiKeys []Keys

func (ms multiKeys) Key(ctx context.Context, kid, alg string) (Key, error) {
	var found Key
	n := 0
	allNoKeys := true
	for _, s := range ms {
		k, err := s.Key(ctx, kid, alg)
		switch {
		case err == nil:
			if kid != "" {
				return k, nil
			}
			found = k
			n++
			allNoKeys = false
		case errors.Is(err, ErrNoKeys):
		case errors.Is(err, ErrUnknownKey):
			allNoKeys = false
		default:
			// ErrKeyMismatch for a kid: this source owns the kid.
			// ErrAmbiguousKey without kid: several keys fit already.
			return Key{}, err
		}
	}
	switch {
	case n == 1:
		return found, nil
	case n > 1:
		return Key{}, ErrAmbiguousKey
	case allNoKeys:
		return Key{}, ErrNoKeys
	}
	return Key{}, ErrUnknownKey
}
