package auth

import "fmt"

// A setting is the key of a value this package's constructors take from
// their caller, as the issuers file spells it: what a [ConfigError] cites,
// so that the caller can point at the flag or the line the value came
// from. [Settings] lists them all.
type setting string

// The settings of one issuer: its [Config] and where its keys come from
// ([KeySource]), each a field of an issuer of the issuers file.
const (
	settingName           setting = "name" // the issuers file's name of the issuer; the unnamed one has none
	settingIssuer         setting = "issuer"
	settingJWKSURL        setting = "jwks_url"
	settingKeyFile        setting = "key_file"
	settingHMACSecretFile setting = "hmac_secret_file"
	settingAudiences      setting = "audiences"
	settingAlgorithms     setting = "algorithms"
	settingGroupsClaim    setting = "groups_claim"
	settingRequiredScope  setting = "required_scope"
	settingDPoP           setting = "dpop"
	settingTokenTypes     setting = "token_types"
	settingClients        setting = "clients"
	settingMaxLifetime    setting = "max_lifetime"
	settingMaxStale       setting = "max_stale"
)

// The settings every issuer shares: the list of issuers itself, [Options],
// the refresh periods of [JWKSOptions] and the rate of [NewRateLimit].
const (
	settingIssuers    setting = "issuers"
	settingLeeway     setting = "leeway"
	settingMaxGroups  setting = "max_groups"
	settingDPoPWindow setting = "dpop_window"
	settingDPoPAlgs   setting = "dpop_algorithms"
	settingPublicURL  setting = "public_url"
	settingRefresh    setting = "refresh"
	settingMinRefresh setting = "min_refresh"
	settingRate       setting = "rate"
	settingBurst      setting = "burst"

	settingDPoPNonceKeyFile  setting = "dpop_nonce_key_file"
	settingDPoPNonceLifetime setting = "dpop_nonce_lifetime"
)

// Settings returns the key of every setting a [ConfigError] can cite, in a
// fixed order: those of one issuer first, as the issuers file names them,
// then those every issuer shares.
func Settings() []string {
	return []string{
		string(settingName), string(settingIssuer),
		string(settingJWKSURL), string(settingKeyFile), string(settingHMACSecretFile),
		string(settingAudiences), string(settingAlgorithms), string(settingGroupsClaim),
		string(settingRequiredScope), string(settingDPoP),
		string(settingTokenTypes), string(settingClients),
		string(settingMaxLifetime), string(settingMaxStale),
		string(settingIssuers), string(settingLeeway), string(settingMaxGroups),
		string(settingDPoPWindow), string(settingDPoPAlgs), string(settingPublicURL),
		string(settingRefresh), string(settingMinRefresh),
		string(settingRate), string(settingBurst),
		string(settingDPoPNonceKeyFile), string(settingDPoPNonceLifetime),
	}
}

// KeySources returns the settings that name where an issuer's keys come
// from, the fields of [KeySource]: a JWKS URL, a key file, an HMAC secret
// file. An issuer that sets none of them discovers its keys from its
// issuer (OIDC discovery).
func KeySources() []string {
	return []string{string(settingJWKSURL), string(settingKeyFile), string(settingHMACSecretFile)}
}

// A ConfigError is a setting a constructor of this package refuses. Field
// is the setting's key, one of [Settings], so that the caller can point at
// the flag or the file line it came from; Issuer is the issuer's name when
// the setting is one named issuer's.
type ConfigError struct {
	Issuer string
	Field  string
	Err    error
	// index is 1 + the position of the issuer at fault in the list given
	// to [NewVerifier] or [Verifier.SetIssuers], 0 when the setting is no
	// one issuer's; first, for a value that must be unique, is that of the
	// issuer that has it first. The issuers file maps them to its lines.
	index, first int
}

// Error returns "[issuer NAME: ]FIELD: problem".
func (e *ConfigError) Error() string {
	if e.Issuer != "" {
		return "issuer " + e.Issuer + ": " + e.Field + ": " + e.Err.Error()
	}
	return e.Field + ": " + e.Err.Error()
}

// Unwrap returns e.Err.
func (e *ConfigError) Unwrap() error { return e.Err }

// configErr returns a *ConfigError for field of the issuer named issuer.
func configErr(issuer string, field setting, format string, a ...any) *ConfigError {
	return &ConfigError{Issuer: issuer, Field: string(field), Err: fmt.Errorf(format, a...)}
}
