// Command gen writes the inputs of .ci/bench into a directory: catalogs,
// a JWKS file with one RS256, one ES256 and one EdDSA key, and tokens
// signed by them. With -ports it prints free loopback ports instead.
//
//	gen -dir DIR -plants 1000000 -tokens 10000
//	gen -ports 4
package main

import (
	"bufio"
	"crypto"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/plantstore/plantstore/auth"
)

func main() {
	dir := flag.String("dir", "", "output directory")
	big := flag.Int("plants", 1_000_000, "plants in catalog-big.json")
	ntokens := flag.Int("tokens", 10_000, "distinct RS256 tokens in tokens.txt")
	ports := flag.Int("ports", 0, "print this many free 127.0.0.1 ports and exit")
	flag.Parse()
	if *ports > 0 {
		printPorts(*ports)
		return
	}
	if *dir == "" {
		log.Fatal("gen: -dir is required")
	}
	must(writeCatalog(filepath.Join(*dir, "catalog-1k.json"), 1_000, sampleLike))
	must(writeCatalog(filepath.Join(*dir, "catalog-big.json"), *big, halfAndRare))

	keys := map[string]crypto.Signer{}
	var jwks struct {
		Keys []json.RawMessage `json:"keys"`
	}
	for _, alg := range []string{"RS256", "ES256", "EdDSA"} {
		priv, doc, err := auth.GenerateKey(alg)
		must(err)
		var set struct {
			Keys []json.RawMessage `json:"keys"`
		}
		must(json.Unmarshal(doc, &set))
		jwks.Keys = append(jwks.Keys, set.Keys...)
		keys[alg] = priv
		must(os.WriteFile(filepath.Join(*dir, "token-"+alg), []byte(mint(priv, alg, "alice", "gardeners")+"\n"), 0o600))
	}
	b, err := json.Marshal(jwks)
	must(err)
	must(os.WriteFile(filepath.Join(*dir, "jwks.json"), b, 0o600))
	must(os.WriteFile(filepath.Join(*dir, "token-half"), []byte(mint(keys["RS256"], "RS256", "someone", "half")+"\n"), 0o600))
	must(os.WriteFile(filepath.Join(*dir, "token-rare"), []byte(mint(keys["RS256"], "RS256", "rare")+"\n"), 0o600))
	must(writeTokens(filepath.Join(*dir, "tokens.txt"), keys["RS256"], *ntokens))
}

func must(err error) {
	if err != nil {
		log.Fatal("gen: ", err)
	}
}

func mint(priv crypto.Signer, alg, sub string, groups ...string) string {
	token, err := auth.Mint(priv, alg, auth.MintClaims{Subject: sub, Groups: groups, Scope: "openid plants:read", TTL: 24 * time.Hour})
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
				tokens[i] = mint(priv, "RS256", fmt.Sprintf("user%05d", i), "gardeners")
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
