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
func newDevKey(m *auth.Metrics) (crypto.Signer, *auth.KeySet, error) {
	key, _, err := auth.GenerateKey("EdDSA")
	if err != nil {
		return nil, nil, err
	}
	kid, err := auth.Thumbprint(key.Public())
	if err != nil {
		return nil, nil, err
	}
	m.AddKeys(1)
	return key, auth.NewKeySet([]auth.Key{{ID: kid, Algorithm: "EdDSA", Public: key.Public()}}), nil
}

// printDevBanner prints, for each sample user, a curl line with a fresh
// token signed by the ephemeral -dev key. The tokens meet the configured
// policy (issuer, audience, required scope) and carry the groups at the
// configured groups claim, so each line reads exactly what it says.
func printDevBanner(w io.Writer, key crypto.Signer, dev devSetup, addr net.Addr) error {
	host, port := "127.0.0.1", "8080"
	if tcp, ok := addr.(*net.TCPAddr); ok {
		port = strconv.Itoa(tcp.Port)
		if !tcp.IP.IsUnspecified() {
			host = tcp.IP.String()
		}
	}
	base := "http://" + net.JoinHostPort(host, port)
	// The tokens meet the rules on tokens meant for this resource too:
	// their type, a client of the list, a lifetime within the cap.
	ttl, client := devTokenTTL, ""
	if c := dev.config.MaxLifetime; c > 0 {
		ttl = min(ttl, c)
	}
	if len(dev.config.Clients) > 0 {
		client = dev.config.Clients[0]
	}
	fmt.Fprintf(w, "plantstore -dev: %s, ephemeral Ed25519 key; these tokens are valid for %s:\n", dev.catalog, ttl)
	for _, u := range plants.SampleUsers() {
		token, err := auth.Mint(key, "EdDSA", auth.MintClaims{
			Subject:     u.Subject,
			Issuer:      dev.config.Issuer,
			Audience:    dev.config.Audiences,
			Groups:      u.Groups,
			GroupsClaim: dev.config.GroupsClaim,
			Scope:       dev.config.RequiredScope,
			TTL:         ttl,
			Type:        dev.config.MintType(),
			ClientID:    client,
		})
		if err != nil {
			return err
		}
		// -w '\n': the JSON body ends without a newline, which would put
		// the next prompt on its line.
		fmt.Fprintf(w, "\n# %s (reads as %s)\ncurl -sS -w '\\n' -H 'Authorization: Bearer %s' %s/plants\n",
			u.Subject, strings.Join(u.Principals(), ", "), token, base)
	}
	fmt.Fprintln(w)
	return nil
}
