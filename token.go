package main

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/auth/mint"
)

// mintToken implements "plantstore token": it signs a JWT with a private
// key file (or the HMAC secret file the service verifies with) and prints
// it followed by a newline.
func mintToken(args []string, stdout, stderr io.Writer) error {
	var (
		keyPath, secretPath, alg, sub, scope, iss, kid, groupsClaim, dpopKey, certPath string
		groups, aud                                                                    []string
		ttl, nbf                                                                       time.Duration
	)
	ttl = time.Hour
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.StringVar(&keyPath, "key", "", "private key file: PKCS#8 PEM or JWK (this or -hmac-secret-file)")
	fs.StringVar(&secretPath, "hmac-secret-file", "", "HMAC secret file, as serve reads it (signs HS256 unless -alg says HS384 or HS512)")
	fs.StringVar(&alg, "alg", "", "signing algorithm (default: RS256, ES256/ES384/ES512 or EdDSA from the key; HS256 for a secret)")
	fs.StringVar(&sub, "sub", "", "subject (required)")
	fs.Var(listFlag{&groups, true}, "groups", "groups, comma list")
	fs.StringVar(&groupsClaim, "groups-claim", "groups", "claim the groups go in; dotted path for nested claims (realm_access.roles)")
	fs.StringVar(&scope, "scope", "", "scopes, space-separated")
	fs.Var(listFlag{&aud, true}, "aud", "audiences, comma list")
	fs.StringVar(&iss, "iss", "", "issuer")
	fs.Var(durationFlag{d: &ttl}, "ttl", "lifetime from now; negative for a token that has already expired")
	fs.Var(durationFlag{d: &nbf}, "nbf", "not valid before now plus this (nbf claim); 0 for no nbf")
	fs.StringVar(&kid, "kid", "", "key ID (default: the key's RFC 7638 thumbprint; none for a secret)")
	fs.StringVar(&dpopKey, "dpop-key", "", "client private key file (PKCS#8 PEM or JWK) the token is bound to (cnf.jkt, RFC 9449): it is then accepted only with DPoP proofs of that key; see \"plantstore proof\"")
	fs.StringVar(&certPath, "cert", "", "client certificate file (PEM) the token is bound to (cnf.x5t#S256, RFC 8705): it is then accepted only with that certificate, as the gateway that terminates mutual TLS forwards it")
	_, rest, err := parseFlags(fs, args, env{}, nil, stderr)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return usagef("token: unexpected argument %q", rest[0])
	case (keyPath == "") == (secretPath == ""):
		return usagef("token: set one of -key and -hmac-secret-file")
	case sub == "":
		return usagef("token: -sub is required")
	case ttl == 0:
		return usagef("token: invalid value 0s for flag -ttl: want a lifetime, negative for an expired token")
	}
	var key any
	if secretPath != "" {
		secret, err := keys.ReadHMACSecret(secretPath)
		if err != nil {
			return fmt.Errorf("token: %w", err)
		}
		key = secret
	} else {
		var err error
		if key, err = readPrivateKey(keyPath); err != nil {
			return fmt.Errorf("token: %w", err)
		}
	}
	now := time.Now()
	c := mint.Claims{
		Subject: sub, Issuer: iss, Audience: aud, Groups: groups, GroupsClaim: groupsClaim,
		Scope: scope, TTL: ttl, KeyID: kid, Now: now,
	}
	if nbf != 0 {
		c.NotBefore = now.Add(nbf)
	}
	if dpopKey != "" {
		k, err := readPrivateKey(dpopKey)
		if err != nil {
			return fmt.Errorf("token: %w", err)
		}
		signer, ok := k.(crypto.Signer)
		if !ok {
			return usagef("token: -dpop-key %s: not an asymmetric private key", dpopKey)
		}
		c.BoundTo = signer.Public()
	}
	if certPath != "" {
		if c.BoundToCert, err = readCertificate(certPath); err != nil {
			return err
		}
	}
	token, err := mint.Mint(key, alg, c)
	if err != nil {
		return usagef("token: %v", err)
	}
	_, err = fmt.Fprintln(stdout, token)
	return err
}

// readCertificate returns the DER of the first certificate of a PEM
// file: the client's own, when the file holds its chain.
func readCertificate(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	for rest := data; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return nil, usagef("token: -cert %s: no PEM CERTIFICATE block", path)
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return nil, usagef("token: -cert %s: %v", path, err)
		}
		return block.Bytes, nil
	}
}

// readPrivateKey reads a private key file: PKCS#8 PEM or JWK. A file of
// public keys is refused with the name of the private key file to use
// instead: keygen writes PREFIX.key beside PREFIX.jwks.json.
func readPrivateKey(path string) (crypto.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key, err := mint.ParsePrivateKey(data)
	switch {
	case errors.Is(err, mint.ErrPublicKey):
		hint := "give the private key file (PKCS#8 PEM or a private JWK), such as the PREFIX.key that plantstore keygen writes"
		if prefix, ok := strings.CutSuffix(path, ".jwks.json"); ok {
			if _, statErr := os.Stat(prefix + ".key"); statErr == nil {
				hint = "use " + prefix + ".key, the private key that plantstore keygen wrote beside it"
			}
		}
		return nil, usageError{fmt.Errorf("key file %s: %w; %s", path, err, hint)}
	case err != nil:
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return key, nil
}

// keyFileHint returns err, the refusal of the -jwt-key-file path, with the
// file to give instead when path holds a private key: the service verifies
// with public keys, which keygen writes to PREFIX.jwks.json beside
// PREFIX.key. Other errors are returned as they are.
func keyFileHint(path string, err error) error {
	if err == nil || path == "" {
		return err
	}
	data, rerr := os.ReadFile(path)
	if rerr != nil {
		return err
	}
	if _, perr := mint.ParsePrivateKey(data); perr != nil {
		return err
	}
	hint := "give its public keys (a JWKS, or PEM PUBLIC KEY blocks), such as the PREFIX.jwks.json that plantstore keygen writes beside PREFIX.key"
	if prefix, ok := strings.CutSuffix(path, ".key"); ok {
		if _, statErr := os.Stat(prefix + ".jwks.json"); statErr == nil {
			hint = "use " + prefix + ".jwks.json, the public key set that plantstore keygen wrote beside it"
		}
	}
	return fmt.Errorf("%w; this is a private key, and the service verifies with public keys: %s", err, hint)
}

// proof implements "plantstore proof": it prints a DPoP proof (RFC 9449)
// for one request, signed with the client key a token is bound to.
func proof(args []string, stdout, stderr io.Writer) error {
	var keyPath, alg, method, uri, token, nonce string
	fs := flag.NewFlagSet("proof", flag.ContinueOnError)
	fs.StringVar(&keyPath, "key", "", "client private key file: PKCS#8 PEM or JWK (required; the key of token -dpop-key)")
	fs.StringVar(&alg, "alg", "", "signing algorithm (default: ES256/ES384/ES512, EdDSA or RS256 from the key)")
	fs.StringVar(&method, "method", "GET", "HTTP method of the request (htm)")
	fs.StringVar(&uri, "url", "", "URL of the request, as the service is reached (htu; query and fragment do not count) (required)")
	fs.StringVar(&token, "token", "", "access token the request presents (ath)")
	fs.StringVar(&nonce, "nonce", "", "server nonce, the DPoP-Nonce header of the service's last answer, when it asks for one (use_dpop_nonce)")
	_, rest, err := parseFlags(fs, args, env{}, nil, stderr)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return usagef("proof: unexpected argument %q", rest[0])
	case keyPath == "":
		return usagef("proof: -key is required")
	case uri == "":
		return usagef("proof: -url is required")
	}
	if err := checkProofURL(uri); err != nil {
		return usagef("proof: invalid value %q for flag -url: %v", uri, err)
	}
	if err := checkProofMethod(method); err != nil {
		return usagef("proof: invalid value %q for flag -method: %v", method, err)
	}
	key, err := readPrivateKey(keyPath)
	if err != nil {
		return fmt.Errorf("proof: %w", err)
	}
	p, err := mint.ProofWithNonce(key, alg, method, uri, token, nonce)
	if err != nil {
		return usagef("%v", err)
	}
	_, err = fmt.Fprintln(stdout, p)
	return err
}

// checkProofURL refuses a -url that no request can have: the proof's htu
// must be the absolute http or https URL the service is reached at.
func checkProofURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want the absolute URL of the request, such as http://127.0.0.1:8080/plants")
	}
	return nil
}

// checkProofMethod refuses a -method that no request carries as it is
// written. Methods are case-sensitive, and the service compares htm with
// the request's method byte for byte, so "get" would match no GET.
func checkProofMethod(m string) error {
	if m == "" || strings.Trim(m, "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") != "" {
		return errors.New("want an HTTP method, such as GET")
	}
	if up := strings.ToUpper(m); up != m {
		return fmt.Errorf("methods are case-sensitive, and the request's method is compared as it is sent; want %s", up)
	}
	return nil
}

// keygen implements "plantstore keygen": PREFIX.key (PKCS#8 PEM, mode 0600)
// and PREFIX.jwks.json (the public JWKS). Existing files are overwritten
// only with -force; without it keygen refuses, naming them and -force.
func keygen(args []string, stdout, stderr io.Writer) error {
	var alg, out string
	var force bool
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	fs.StringVar(&alg, "alg", "RS256", "RS256, ES256 or EdDSA")
	fs.StringVar(&out, "out", "", "output prefix: writes PREFIX.key and PREFIX.jwks.json (required)")
	fs.BoolVar(&force, "force", false, "replace PREFIX.key and PREFIX.jwks.json when they exist (a new key: tokens signed with the old one no longer verify once the service reads the new PREFIX.jwks.json)")
	_, rest, err := parseFlags(fs, args, env{}, nil, stderr)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return usagef("keygen: unexpected argument %q", rest[0])
	case out == "":
		return usagef("keygen: -out is required")
	case alg != "RS256" && alg != "ES256" && alg != "EdDSA":
		return usagef("keygen: invalid value %q for flag -alg: want RS256, ES256 or EdDSA", alg)
	}
	if !force {
		var exist []string
		for _, name := range []string{out + ".key", out + ".jwks.json"} {
			if _, err := os.Lstat(name); err == nil {
				exist = append(exist, name)
			}
		}
		if len(exist) > 0 {
			verb := "exist"
			if len(exist) == 1 {
				verb = "exists"
			}
			return fmt.Errorf("keygen: %s already %s: -force replaces %s.key and %s.jwks.json with a new key pair (tokens of the old key are then refused), or choose another -out", strings.Join(exist, " and "), verb, out, out)
		}
	}
	priv, jwks, err := mint.GenerateKey(alg)
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	pemBytes, err := mint.MarshalPrivateKey(priv)
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if err := writeKeyFile(out+".key", pemBytes, 0o600, force); err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if err := writeKeyFile(out+".jwks.json", jwks, 0o644, force); err != nil {
		if !force {
			_ = os.Remove(out + ".key")
		}
		return fmt.Errorf("keygen: %w", err)
	}
	kid, err := keys.Thumbprint(priv.Public())
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s.key (private, PKCS#8 PEM) and %s.jwks.json (public JWKS); alg %s, kid %s\n", out, out, alg, kid)
	return nil
}

// writeKeyFile writes data to a file that must not exist yet or, with
// replace, to a new file renamed over the one at path: a file of another
// mode (a private key made readable) is never written into, and a reader
// of path sees the old content or the new, never part of it.
func writeKeyFile(path string, data []byte, perm os.FileMode, replace bool) error {
	if !replace {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			os.Remove(path)
			return err
		}
		return f.Close()
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
