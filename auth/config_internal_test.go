package auth

import (
	"reflect"
	"testing"
	"time"
)

// TestReloadSameness: an issuer given again with the same name, Trusts
// and Config is kept, cached tokens and all; one whose Config differs in
// any one field, whichever, is made anew. Sameness is the whole Config's,
// so a field added to Config is compared with nothing more to do; this
// test fails for a field it cannot give a value SetIssuers takes.
func TestReloadSameness(t *testing.T) {
	trust := &madeTokens{claims: map[string]Claims{}}
	current := func(v *Verifier) *issuer { return v.issuers.Load().all[0] }
	v, err := NewVerifier(Options{}, Issuer{JWS: trust})
	if err != nil {
		t.Fatal(err)
	}
	kept := current(v)
	if err := v.SetIssuers(Issuer{JWS: trust}); err != nil || current(v) != kept {
		t.Errorf("SetIssuers with the same issuer = %v, kept %v; want it kept", err, current(v) == kept)
	}
	for f := range reflect.TypeFor[Config]().Fields() {
		t.Run(f.Name, func(t *testing.T) {
			c, ok := sampleConfig(f)
			if !ok {
				t.Fatalf("no value of Config.%s (%s) that SetIssuers takes: give this test one", f.Name, f.Type)
			}
			v, err := NewVerifier(Options{}, Issuer{JWS: trust})
			if err != nil {
				t.Fatal(err)
			}
			before := current(v)
			if err := v.SetIssuers(Issuer{Config: c, JWS: trust}); err != nil {
				t.Fatalf("SetIssuers with Config.%s set: %v", f.Name, err)
			}
			if current(v) == before {
				t.Errorf("SetIssuers with Config.%s changed kept the issuer; want a new one", f.Name)
			}
		})
	}
}

// sampleConfig returns a Config whose field f alone is set, to a value
// CheckIssuers takes, and false when it has none to try.
func sampleConfig(f reflect.StructField) (Config, bool) {
	var samples []any
	switch f.Type {
	case reflect.TypeFor[string]():
		samples = []any{"x"}
	case reflect.TypeFor[[]string]():
		samples = []any{[]string{"x"}, []string{"ES256"}, []string{"at+jwt"}, []string{"claims"}}
	case reflect.TypeFor[time.Duration]():
		samples = []any{time.Hour}
	case reflect.TypeFor[BindingMode]():
		samples = []any{BindingOff}
	case reflect.TypeFor[Introspection]():
		samples = []any{Introspection{Cache: time.Hour}}
	case reflect.TypeFor[[]ClaimRule]():
		yes := true
		samples = []any{[]ClaimRule{{Path: "email_verified", Exists: &yes}}}
	}
	for _, s := range samples {
		var c Config
		reflect.ValueOf(&c).Elem().FieldByIndex(f.Index).Set(reflect.ValueOf(s))
		if _, err := CheckIssuers(Issuer{Config: c}); err == nil {
			return c, true
		}
	}
	return Config{}, false
}
