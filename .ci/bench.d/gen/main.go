// Command gen writes the inputs of .ci/bench into a directory: catalogs,
// a JWKS file with one RS256, one ES256 and one EdDSA key, tokens signed
// by them (all naming issuer A), an issuers file naming A and a second
// issuer B, a catalog with A's principals, a DPoP client key with an
// ES256 token bound to it, and a client certificate (URL-escaped PEM) with
// an ES256 token bound to it. With -ports it prints free loopback ports
// instead; with -proofs it prints DPoP proofs, each with a fresh jti, for
// the bound token and a URL, one a line (with -nonce-key, each carrying
// the server nonce of now).
//
//	gen -dir DIR -plants 1000000 -tokens 10000
//	gen -ports 4
//	gen -dir DIR -proofs 100000 -url http://127.0.0.1:8080/plants
package main

import (
	"bufio"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/plantstore/plantstore/auth/dpop"
	"github.com/plantstore/plantstore/auth/mint"
)

func main() {
	dir := flag.String("dir", "", "output directory")
	big := flag.Int("plants", 1_000_000, "plants in catalog-big.json")
	ntokens := flag.Int("tokens", 10_000, "distinct RS256 tokens in tokens.txt")
	ports := flag.Int("ports", 0, "print this many free 127.0.0.1 ports and exit")
	proofs := flag.Int("proofs", 0, "print this many DPoP proofs of DIR/dpop-key.pem for DIR/token-dpop and -url, and exit")
	url := flag.String("url", "", "the htu of the proofs: the URL the requests go to, without query")
	nonceKey := flag.String("nonce-key", "", "with -proofs: give each proof the server nonce of now under this key file (-dpop-nonce-key-file)")
	flag.Parse()
	if *ports > 0 {
		printPorts(*ports)
		return
	}
	if *dir == "" {
		log.Fatal("gen: -dir is required")
	}
	if *proofs > 0 {
		must(printProofs(*dir, *proofs, *url, *nonceKey))
		return
	}
	must(writeCatalog(filepath.Join(*dir, "catalog-1k.json"), 1_000, sampleLike))
	must(writeCatalog(filepath.Join(*dir, "catalog-1k-a.json"), 1_000, func(i, n int) plant {
		return qualify(sampleLike(i, n), "a")
	}))
	must(writeCatalog(filepath.Join(*dir, "catalog-big.json"), *big, halfAndRare))

	keys := map[string]crypto.Signer{}
	var jwks struct {
		Keys []json.RawMessage `json:"keys"`
	}
	for _, alg := range []string{"RS256", "ES256", "EdDSA"} {
		priv, doc, err := mint.GenerateKey(alg)
		must(err)
		var set struct {
			Keys []json.RawMessage `json:"keys"`
		}
		must(json.Unmarshal(doc, &set))
		jwks.Keys = append(jwks.Keys, set.Keys...)
		keys[alg] = priv
		must(os.WriteFile(filepath.Join(*dir, "token-"+alg), []byte(signToken(priv, alg, "alice", "gardeners")+"\n"), 0o600))
	}
	b, err := json.Marshal(jwks)
	must(err)
	must(os.WriteFile(filepath.Join(*dir, "jwks.json"), b, 0o600))
	must(os.WriteFile(filepath.Join(*dir, "token-half"), []byte(signToken(keys["RS256"], "RS256", "someone", "half")+"\n"), 0o600))
	must(os.WriteFile(filepath.Join(*dir, "token-rare"), []byte(signToken(keys["RS256"], "RS256", "rare")+"\n"), 0o600))
	must(writeTokens(filepath.Join(*dir, "tokens.txt"), keys["RS256"], *ntokens))
	must(writeIssuerB(*dir))
	must(writeDPoP(*dir, keys["ES256"]))
	must(writeCert(*dir, keys["ES256"]))
}

// writeCert writes a client certificate as a gateway forwards it,
// URL-escaped PEM (cert-escaped.txt, nginx's $ssl_client_escaped_cert),
// and token-cert, an ES256 token for alice bound to it (cnf.x5t#S256).
func writeCert(dir string, issuerKey crypto.Signer) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bench client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	escaped := url.PathEscape(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	if err := os.WriteFile(filepath.Join(dir, "cert-escaped.txt"), []byte(escaped+"\n"), 0o600); err != nil {
		return err
	}
	token, err := mint.Mint(issuerKey, "ES256", mint.Claims{
		Subject: "alice", Issuer: issuerA, Groups: []string{"gardeners"}, Scope: "openid plants:read",
		TTL: 24 * time.Hour, BoundToCert: der,
	})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "token-cert"), []byte(token+"\n"), 0o600)
}

// The issuers of the tokens: A signs every token, B is the second issuer
// of issuers.yaml, there to be routed around.
const (
	issuerA = "https://a.bench.example"
	issuerB = "https://b.bench.example"
)

// writeIssuerB writes B's key set (a key of its own) and issuers.yaml,
// which trusts A with the keys of jwks.json and B with its own.
func writeIssuerB(dir string) error {
	_, doc, err := mint.GenerateKey("RS256")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "jwks-b.json"), doc, 0o600); err != nil {
		return err
	}
	yaml := fmt.Sprintf(`issuers:
  - name: a
    issuer: %s
    key_file: %s
    required_scope: plants:read
  - name: b
    issuer: %s
    key_file: %s
    required_scope: plants:read
`, issuerA, filepath.Join(dir, "jwks.json"), issuerB, filepath.Join(dir, "jwks-b.json"))
	return os.WriteFile(filepath.Join(dir, "issuers.yaml"), []byte(yaml), 0o600)
}

// writeDPoP writes a client key (dpop-key.pem, ES256) and token-dpop, an
// ES256 token for alice bound to it.
func writeDPoP(dir string, issuerKey crypto.Signer) error {
	client, _, err := mint.GenerateKey("ES256")
	if err != nil {
		return err
	}
	pem, err := mint.MarshalPrivateKey(client)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "dpop-key.pem"), pem, 0o600); err != nil {
		return err
	}
	token, err := mint.Mint(issuerKey, "ES256", mint.Claims{
		Subject: "alice", Issuer: issuerA, Groups: []string{"gardeners"}, Scope: "openid plants:read",
		TTL: 24 * time.Hour, BoundTo: client.Public(),
	})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "token-dpop"), []byte(token+"\n"), 0o600)
}

// printProofs prints n GET proofs for url and the token of token-dpop,
// made on every core.
func printProofs(dir string, n int, url, nonceKey string) error {
	if url == "" {
		return fmt.Errorf("-proofs needs -url")
	}
	// The nonce the server issues now, made by the server's own code from
	// the same key file: good for the lifetime's first three quarters at
	// least, longer than a run.
	var nonce string
	if nonceKey != "" {
		nonces, err := dpop.LoadNonces(nonceKey, dpop.DefaultNonceLifetime)
		if err != nil {
			return err
		}
		nonce = nonces.Issue(time.Now())
	}
	data, err := os.ReadFile(filepath.Join(dir, "dpop-key.pem"))
	if err != nil {
		return err
	}
	key, err := mint.ParsePrivateKey(data)
	if err != nil {
		return err
	}
	token, err := os.ReadFile(filepath.Join(dir, "token-dpop"))
	if err != nil {
		return err
	}
	tok := strings.TrimSpace(string(token))
	proofs := make([]string, n)
	errs := make([]error, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for w := range errs {
		wg.Go(func() {
			for i := w; i < n && errs[w] == nil; i += len(errs) {
				proofs[i], errs[w] = mint.ProofWithNonce(key, "ES256", "GET", url, tok, nonce)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	bw := bufio.NewWriterSize(os.Stdout, 1<<20)
	for _, p := range proofs {
		bw.WriteString(p)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// qualify rewrites p's readers as principals of the issuer named name:
// user:x becomes user@name:x, group:g group@name:g; "*" stays.
func qualify(p plant, name string) plant {
	readers := make([]string, len(p.Readers))
	for i, r := range p.Readers {
		kind, rest, ok := strings.Cut(r, ":")
		if ok {
			r = kind + "@" + name + ":" + rest
		}
		readers[i] = r
	}
	p.Readers = readers
	return p
}

func must(err error) {
	if err != nil {
		log.Fatal("gen: ", err)
	}
}

func signToken(priv crypto.Signer, alg, sub string, groups ...string) string {
	token, err := mint.Mint(priv, alg, mint.Claims{Subject: sub, Issuer: issuerA, Groups: groups, Scope: "openid plants:read", TTL: 24 * time.Hour})
	must(err)
	return token
}

// writeTokens writes n tokens of distinct users, one a line, signed on
// every core.
func writeTokens(path string, priv crypto.Signer, n int) error {
	tokens := make([]string, n)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				tokens[i] = signToken(priv, "RS256", fmt.Sprintf("user%05d", i), "gardeners")
			}
		})
	}
	wg.Wait()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	for _, t := range tokens {
		bw.WriteString(t)
		bw.WriteByte('\n')
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

type plant struct {
	Name    string   `json:"name"`
	Tag     string   `json:"tag,omitempty"`
	Readers []string `json:"readers"`
}

var tags = []string{"aroid", "succulent", "fern", "herb", "palm", ""}

// sampleLike gives plant i of n readers among a few groups and users, as
// the sample catalog does; alice (group gardeners) sees about half.
func sampleLike(i, n int) plant {
	sets := [][]string{
		{"*"}, {"group:gardeners"}, {"group:botanists", "user:bob"},
		{"group:gardeners", "group:botanists"}, {"user:alice"},
		{"group:botanists"}, {"user:carol", "group:gardeners", "*"},
	}
	return plant{Name: fmt.Sprintf("Plant %07d", (i*7919)%n), Tag: tags[i%len(tags)], Readers: sets[i%len(sets)]}
}

// halfAndRare gives half the plants to group:half and one in a thousand
// to user:rare, spread over the name order.
func halfAndRare(i, n int) plant {
	p := plant{Name: fmt.Sprintf("Plant %07d", (i*7919)%n), Tag: tags[i%len(tags)], Readers: []string{"group:other"}}
	if i%2 == 0 {
		p.Readers = []string{"group:half"}
	}
	if i%1000 == 7 {
		p.Readers = append(p.Readers, "user:rare")
	}
	return p
}

func writeCatalog(path string, n int, f func(i, n int) plant) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(out, 1<<20)
	bw.WriteString("[\n")
	for i := range n {
		if i > 0 {
			bw.WriteString(",\n")
		}
		b, err := json.Marshal(f(i, n))
		if err != nil {
			return err
		}
		bw.Write(b)
	}
	bw.WriteString("\n]\n")
	if err := bw.Flush(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// printPorts prints n distinct ports that were free on 127.0.0.1.
func printPorts(n int) {
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		must(err)
		lns = append(lns, ln)
		fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
}
