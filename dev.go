package main

import (
	"crypto"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/auth/mint"
	"github.com/plantstore/plantstore/plants"
)

// devTokenTTL is how long the tokens printed by -dev stay valid.
const devTokenTTL = 12 * time.Hour

// devSetup is what the -dev banner describes: the policy its tokens must
// meet and where the catalog comes from.
type devSetup struct {
	config  auth.Config
	catalog string
}

// newDevKey returns the ephemeral Ed25519 key of -dev and the key set that
// verifies it.
func newDevKey(m *auth.Metrics) (crypto.Signer, *keys.KeySet, error) {
	key, _, err := mint.GenerateKey("EdDSA")
	if err != nil {
		return nil, nil, err
	}
	kid, err := keys.Thumbprint(key.Public())
	if err != nil {
		return nil, nil, err
	}
	m.AddKeys(1)
	return key, keys.NewKeySet([]keys.Key{{ID: kid, Algorithm: "EdDSA", Public: key.Public()}}), nil
}

// printDevBanner prints, for each sample user, a curl line with a fresh
// token signed by the ephemeral -dev key. Each token carries what the
// configured issuer's rules ask of a token (auth.Config.Token: issuer,
// audience, required scope, the groups at the configured groups claim,
// and each rule's own), so each line reads exactly what it says.
func printDevBanner(w io.Writer, key crypto.Signer, dev devSetup, addr net.Addr) error {
	host, port := "127.0.0.1", "8080"
	if tcp, ok := addr.(*net.TCPAddr); ok {
		port = strconv.Itoa(tcp.Port)
		if !tcp.IP.IsUnspecified() {
			host = tcp.IP.String()
		}
	}
	base := "http://" + net.JoinHostPort(host, port)
	now := time.Now()
	var lines strings.Builder
	valid := time.Duration(0)
	for _, u := range plants.SampleUsers() {
		typ, claims, err := dev.config.Token(u.Subject, u.Groups, now, devTokenTTL)
		if err != nil {
			return err
		}
		token, err := mint.Sign(key, "EdDSA", typ, claims)
		if err != nil {
			return err
		}
		// What the rules left of the lifetime (a cap on it shortens it).
		valid = time.Duration(claims["exp"].(float64)-claims["iat"].(float64)) * time.Second
		// -w '\n': the JSON body ends without a newline, which would put
		// the next prompt on its line.
		fmt.Fprintf(&lines, "\n# %s (reads as %s)\ncurl -sS -w '\\n' -H 'Authorization: Bearer %s' %s/plants\n",
			u.Subject, strings.Join(u.Principals(), ", "), token, base)
	}
	fmt.Fprintf(w, "plantstore -dev: %s, ephemeral Ed25519 key; these tokens are valid for %s:\n%s\n", dev.catalog, valid, lines.String())
	return nil
}
