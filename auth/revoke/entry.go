// Package revoke owns the revocations of tokens: the entries (a cutoff for
// a subject, a client or a whole issuer, or one token by its jti), the set
// every replica holds in memory and the pipeline asks on each request
// (see auth.Revocations), and where the entries come from (a file
// watched for changes).
package revoke

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/plantstore/plantstore/observability/setting"
)

// A Kind is what an [Entry] revokes.
type Kind string

// The kinds of revocation, the kind label of plantstore_revocations.
const (
	KindSubject Kind = "subject" // the tokens of one subject issued before a cutoff
	KindClient  Kind = "client"  // the tokens issued to one client before a cutoff
	KindIssuer  Kind = "issuer"  // every token of the issuer issued before a cutoff
	KindToken   Kind = "token"   // one token, by its jti, until its exp
)

// Kinds returns every Kind, in a fixed order.
func Kinds() []Kind { return []Kind{KindSubject, KindClient, KindIssuer, KindToken} }

// An Entry is one revocation, scoped to an issuer. Exactly one of Sub,
// Client, All and JTI is set; a cutoff (Sub, Client, All) has Before, a
// JTI has Until.
type Entry struct {
	// Issuer is the configured name of the issuer, "" for the unnamed
	// issuer of the -jwt-* flags.
	Issuer string    `yaml:"issuer,omitempty"`
	Sub    string    `yaml:"sub,omitempty"`
	Client string    `yaml:"client,omitempty"`
	All    bool      `yaml:"all,omitempty"`
	JTI    string    `yaml:"jti,omitempty"`
	Before time.Time `yaml:"before,omitempty"`
	Until  time.Time `yaml:"until,omitempty"`
}

// Kind returns what e revokes, "" when it names nothing or several.
func (e Entry) Kind() Kind {
	var k Kind
	n := 0
	for _, c := range []struct {
		set  bool
		kind Kind
	}{{e.Sub != "", KindSubject}, {e.Client != "", KindClient}, {e.All, KindIssuer}, {e.JTI != "", KindToken}} {
		if c.set {
			k, n = c.kind, n+1
		}
	}
	if n != 1 {
		return ""
	}
	return k
}

// Check returns why e is not a revocation, nil when it is one.
func (e Entry) Check() error {
	switch e.Kind() {
	case "":
		return errors.New("want exactly one of sub, client, all: true and jti")
	case KindToken:
		if e.Until.IsZero() {
			return errors.New("a jti needs until: the token's exp")
		}
		if !e.Before.IsZero() {
			return errors.New("a jti is revoked until its exp; before is for sub, client and all")
		}
	default:
		if e.Before.IsZero() {
			return errors.New("a cutoff needs before: the time tokens issued until are refused")
		}
		if !e.Until.IsZero() {
			return errors.New("until is for a jti; a cutoff has before")
		}
	}
	return nil
}

// String describes e in one line, as "plantstore revoke" prints it.
func (e Entry) String() string {
	iss := "the unnamed issuer"
	if e.Issuer != "" {
		iss = "issuer " + e.Issuer
	}
	before := e.Before.UTC().Format(time.RFC3339)
	switch e.Kind() {
	case KindSubject:
		return fmt.Sprintf("tokens of subject %q of %s issued before %s", e.Sub, iss, before)
	case KindClient:
		return fmt.Sprintf("tokens issued to client %q by %s before %s", e.Client, iss, before)
	case KindIssuer:
		return fmt.Sprintf("every token of %s issued before %s", iss, before)
	case KindToken:
		return fmt.Sprintf("the token with jti %q of %s, until %s", e.JTI, iss, e.Until.UTC().Format(time.RFC3339))
	}
	return "no revocation"
}

// fileShape is the YAML document of a revocations file.
type fileShape struct {
	Revocations []Entry `yaml:"revocations"`
}

// Parse reads the revocations of a file's content: a YAML document
// `revocations: [...]`, each item an [Entry] (unknown keys refused). An
// empty document has none. Its errors are *setting.Error naming the file
// name and the line.
func Parse(name string, data []byte) ([]Entry, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, &setting.Error{File: name, Err: err}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f fileShape
	if err := dec.Decode(&f); err != nil {
		return nil, &setting.Error{File: name, Err: err}
	}
	lines := entryLines(&root)
	for i, e := range f.Revocations {
		if err := e.Check(); err != nil {
			se := &setting.Error{File: name, Err: fmt.Errorf("revocation %d: %w", i+1, err)}
			if i < len(lines) {
				se.Line = lines[i]
			}
			return nil, se
		}
	}
	return f.Revocations, nil
}

// entryLines returns the line of each item of the revocations list of a
// parsed document.
func entryLines(root *yaml.Node) []int {
	if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "revocations" {
			var lines []int
			for _, item := range m.Content[i+1].Content {
				lines = append(lines, item.Line)
			}
			return lines
		}
	}
	return nil
}

// ReadFile reads the revocations of the file at path; a file that does not
// exist has none.
func ReadFile(path string) ([]Entry, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// WriteFile replaces the file at path with entries, in the shape Parse
// reads, at once: a watcher reads the old file or the new one, never half
// of one.
func WriteFile(path string, entries []Entry) error {
	var b strings.Builder
	b.WriteString("# Revocations: see plantstore revoke -h.\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(fileShape{Revocations: entries}); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(b.String()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
