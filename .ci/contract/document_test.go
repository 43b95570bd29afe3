package contract_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// servedDocument fetches /openapi.json from the admin listener and checks
// that it is JSON.
func servedDocument(t testing.TB, s *service) []byte {
	t.Helper()
	e := do(t, http.MethodGet, s.Admin+"/openapi.json", nil)
	if e.Resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/openapi.json: status %d, want 200", s.Admin, e.Resp.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(e.Resp.Header.Get("Content-Type")); mt != "application/json" {
		t.Errorf("GET %s/openapi.json: Content-Type %q, want application/json", s.Admin, e.Resp.Header.Get("Content-Type"))
	}
	if !json.Valid(e.Body) {
		t.Fatalf("GET %s/openapi.json: body is not JSON: %.200q", s.Admin, e.Body)
	}
	return e.Body
}

// jsonDoc is a decoded OpenAPI document with local $ref resolution.
type jsonDoc struct {
	root map[string]any
}

func decodeDoc(t testing.TB, b []byte) jsonDoc {
	t.Helper()
	var root map[string]any
	if err := json.Unmarshal(b, &root); err != nil {
		t.Fatalf("decoding the OpenAPI document: %v", err)
	}
	return jsonDoc{root: root}
}

// obj returns v as an object, following local "$ref"s.
func (d jsonDoc) obj(v any) map[string]any {
	for range 10 {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		v = d.pointer(ref)
	}
	return nil
}

// pointer resolves a local JSON pointer such as "#/components/schemas/Plant".
func (d jsonDoc) pointer(ref string) any {
	if !strings.HasPrefix(ref, "#/") {
		return nil
	}
	var v any = d.root
	for tok := range strings.SplitSeq(strings.TrimPrefix(ref, "#/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[tok]
	}
	return v
}

// at walks object keys from v, following $refs at every step.
func (d jsonDoc) at(v any, keys ...string) map[string]any {
	m := d.obj(v)
	for _, k := range keys {
		if m == nil {
			return nil
		}
		m = d.obj(m[k])
	}
	return m
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func strList(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// schemaType is a schema's "type" ("integer", or "integer" from
// ["integer"]); "" when it is absent or names more than one type.
func schemaType(m map[string]any) string {
	switch t := m["type"].(type) {
	case string:
		return t
	case []any:
		if len(t) == 1 {
			s, _ := t[0].(string)
			return s
		}
	}
	return ""
}

// isRefTo reports whether v is {"$ref": "#/components/schemas/<name>"}.
func isRefTo(v any, name string) bool {
	m, _ := v.(map[string]any)
	return m != nil && m["$ref"] == "#/components/schemas/"+name
}

// metadataPath is the protected resource metadata document (SPEC section
// 11, RFC 9728), the one path of the API listener besides /plants.
const metadataPath = "/.well-known/oauth-protected-resource"

// errorStatuses are the error statuses of SPEC section 4 that GET /plants
// itself can answer (429 only with -rate-limit, or for a DPoP proof the
// replay cache has no room for); each must be described with the Error
// schema. 404 and 405 belong to no described operation and are checked
// against the Error schema directly by TestResponsesMatchDocument.
var errorStatuses = []string{"400", "401", "403", "429", "431", "500", "503"}

// seedProblems lists every way the document departs from the seed's
// interface (seeds/000_59edd242d93519af.txt) and from SPEC sections 1, 2,
// 4 and 7 as far as a document can say them.
func seedProblems(d jsonDoc) []string {
	var p []string
	bad := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }

	if got := str(d.root, "openapi"); got != "3.1.0" {
		bad("openapi: got %q, want 3.1.0", got)
	}
	info := d.at(d.root, "info")
	if got := str(info, "version"); got != "1.0.0" {
		bad("info.version: got %q, want 1.0.0", got)
	}
	if lic := d.at(info, "license"); str(lic, "name") != "MIT" && str(lic, "identifier") != "MIT" {
		bad("info.license: got %v, want MIT", lic)
	}

	paths := d.at(d.root, "paths")
	// SPEC section 1: /plants and the protected resource metadata (section
	// 11) are the only paths of the API listener.
	if got := slices.Sorted(maps.Keys(paths)); !slices.Equal(got, []string{metadataPath, "/plants"}) {
		bad("paths: got %q, want only /plants and %s", got, metadataPath)
	}
	if s, ok := d.at(paths, metadataPath, "get")["security"].([]any); !ok || len(s) != 0 {
		bad("GET %s security: got %v, want [] (no credential needed)", metadataPath, d.at(paths, metadataPath, "get")["security"])
	}
	item := d.at(paths, "/plants")
	for _, method := range []string{"put", "post", "delete", "options", "patch", "trace"} {
		if _, ok := item[method]; ok {
			bad("/plants: describes %s, want only get (and head)", method)
		}
	}
	op := d.at(item, "get")
	if op == nil {
		bad("/plants: no get operation")
		op = map[string]any{}
	}

	// limit: an optional int32 query parameter; after, the optional
	// paging cursor, a string; no other parameter.
	var params []map[string]any
	for _, list := range []any{item["parameters"], op["parameters"]} {
		l, _ := list.([]any)
		for _, x := range l {
			params = append(params, d.obj(x))
		}
	}
	if len(params) != 2 {
		bad("GET /plants: %d parameters, want exactly two (limit and after)", len(params))
	}
	var limit, after map[string]any
	for _, prm := range params {
		if str(prm, "name") == "limit" && str(prm, "in") == "query" {
			limit = prm
		}
		if str(prm, "name") == "after" && str(prm, "in") == "query" {
			after = prm
		}
	}
	if after == nil {
		bad("GET /plants: no query parameter named after")
	} else if after["required"] == true || schemaType(d.at(after, "schema")) != "string" {
		bad("after: want an optional string")
	}
	if limit == nil {
		bad("GET /plants: no query parameter named limit")
	} else {
		if limit["required"] == true {
			bad("limit: required, want optional")
		}
		sch := d.at(limit, "schema")
		if schemaType(sch) != "integer" || str(sch, "format") != "int32" {
			bad("limit schema: got type %v format %q, want integer int32", sch["type"], str(sch, "format"))
		}
	}

	// Bearer security for the whole interface.
	schemes := d.at(d.root, "components", "securitySchemes")
	isBearer := func(reqs any) bool {
		list, _ := reqs.([]any)
		if len(list) == 0 {
			return false
		}
		for _, r := range list {
			req, _ := r.(map[string]any)
			if len(req) == 0 {
				return false // {} makes the credential optional
			}
			for name := range req {
				s := d.at(schemes, name)
				if str(s, "type") != "http" || !strings.EqualFold(str(s, "scheme"), "bearer") {
					return false
				}
			}
		}
		return true
	}
	hasBearer := func(reqs any) bool {
		list, _ := reqs.([]any)
		bearer := false
		for _, r := range list {
			req, _ := r.(map[string]any)
			if len(req) == 0 {
				return false
			}
			bearer = bearer || isBearer([]any{req})
		}
		return bearer
	}
	if !isBearer(d.root["security"]) {
		bad("security: got %v, want a bearer (type http, scheme bearer) requirement for the whole interface", d.root["security"])
	}
	// GET /plants may name the DPoP scheme (SPEC section 11) beside the
	// bearer one, never an empty requirement that makes the credential
	// optional.
	if s, ok := op["security"]; ok && !hasBearer(s) {
		bad("GET /plants security: got %v, want the bearer requirement among its alternatives", s)
	}

	// Plant and Error exactly as the seed has them.
	schemas := d.at(d.root, "components", "schemas")
	plant := d.at(schemas, "Plant")
	if schemaType(plant) != "object" {
		bad("Plant: type %v, want object", plant["type"])
	}
	if got := strList(plant["required"]); !slices.Equal(got, []string{"name"}) {
		bad("Plant.required: got %q, want [name]", got)
	}
	if got := slices.Sorted(maps.Keys(d.at(plant, "properties"))); !slices.Equal(got, []string{"name", "tag"}) {
		bad("Plant.properties: got %q, want [name tag]", got)
	}
	for _, f := range []string{"name", "tag"} {
		if got := schemaType(d.at(plant, "properties", f)); got != "string" {
			bad("Plant.%s: type %q, want string", f, got)
		}
	}
	errSchema := d.at(schemas, "Error")
	if schemaType(errSchema) != "object" {
		bad("Error: type %v, want object", errSchema["type"])
	}
	if got := strList(errSchema["required"]); !slices.Equal(got, []string{"error", "message"}) {
		bad("Error.required: got %q, want [error message]", got)
	}
	if got := slices.Sorted(maps.Keys(d.at(errSchema, "properties"))); !slices.Equal(got, []string{"error", "message"}) {
		bad("Error.properties: got %q, want [error message]", got)
	}
	if e := d.at(errSchema, "properties", "error"); schemaType(e) != "integer" || str(e, "format") != "int32" {
		bad("Error.error: type %v format %q, want integer int32", e["type"], str(e, "format"))
	}
	if got := schemaType(d.at(errSchema, "properties", "message")); got != "string" {
		bad("Error.message: type %q, want string", got)
	}

	// Responses: 200 is an array of Plant, every error status the Error shape.
	responses := d.at(op, "responses")
	ok200 := d.at(responses, "200", "content", "application/json")
	arr := d.at(ok200, "schema")
	if schemaType(arr) != "array" || !isRefTo(arr["items"], "Plant") {
		bad("GET /plants 200 application/json: schema %v, want an array of #/components/schemas/Plant", ok200["schema"])
	}
	for _, code := range errorStatuses {
		resp := d.at(responses, code)
		if resp == nil {
			bad("GET /plants: no %s response (SPEC section 4)", code)
			continue
		}
		if sch := d.at(resp, "content", "application/json")["schema"]; !isRefTo(sch, "Error") {
			bad("GET /plants %s application/json: schema %v, want #/components/schemas/Error", code, sch)
		}
	}
	if d.at(responses, "401", "headers", "WWW-Authenticate") == nil {
		bad("GET /plants 401: no WWW-Authenticate header described (SPEC section 2)")
	}
	if d.at(responses, "403", "headers", "WWW-Authenticate") == nil {
		bad("GET /plants 403: no WWW-Authenticate header described (SPEC section 2)")
	}
	if d.at(responses, "503", "headers", "Retry-After") == nil {
		bad("GET /plants 503: no Retry-After header described (SPEC section 4)")
	}
	return p
}

func TestServedDocumentKeepsSeedInterface(t *testing.T) {
	s := startService(t, "-dev")
	served := servedDocument(t, s)

	// Each mutation breaks one promise of the seed; seedProblems must see it.
	tests := []struct {
		name   string
		mutate func(d jsonDoc)
		want   string // "" for no problem; else a substring of one
	}{
		{name: "served document", mutate: func(jsonDoc) {}},
		{name: "OpenAPI 3.0", mutate: func(d jsonDoc) { d.root["openapi"] = "3.0.3" }, want: "openapi"},
		{name: "limit as int64", mutate: func(d jsonDoc) { d.at(limitParam(d), "schema")["format"] = "int64" }, want: "limit schema"},
		{name: "Plant with id", mutate: func(d jsonDoc) {
			d.at(d.root, "components", "schemas", "Plant", "properties")["id"] = map[string]any{"type": "integer"}
		}, want: "Plant.properties"},
		{name: "Error.message optional", mutate: func(d jsonDoc) {
			d.at(d.root, "components", "schemas", "Error")["required"] = []any{"error"}
		}, want: "Error.required"},
		{name: "no security", mutate: func(d jsonDoc) { delete(d.root, "security") }, want: "security"},
		{name: "credential optional on /plants", mutate: func(d jsonDoc) {
			d.at(d.root, "paths", "/plants", "get")["security"] = []any{map[string]any{"bearerAuth": []any{}}, map[string]any{}}
		}, want: "GET /plants security"},
		{name: "metadata path undescribed", mutate: func(d jsonDoc) { delete(d.at(d.root, "paths"), metadataPath) }, want: "paths"},
		{name: "metadata behind the credential", mutate: func(d jsonDoc) {
			delete(d.at(d.root, "paths", metadataPath, "get"), "security")
		}, want: "no credential needed"},
		{name: "401 undescribed", mutate: func(d jsonDoc) {
			delete(d.at(d.root, "paths", "/plants", "get", "responses"), "401")
		}, want: "no 401 response"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := decodeDoc(t, served)
			tc.mutate(d)
			problems := seedProblems(d)
			if tc.want == "" {
				for _, p := range problems {
					t.Errorf("served /openapi.json: %s", p)
				}
				return
			}
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("seedProblems after %s: got %q, want one mentioning %q", tc.name, problems, tc.want)
			}
		})
	}
}

// limitParam returns the limit parameter object of GET /plants (following
// a $ref), or an empty object.
func limitParam(d jsonDoc) map[string]any {
	op := d.at(d.root, "paths", "/plants", "get")
	l, _ := op["parameters"].([]any)
	for _, x := range l {
		if p := d.obj(x); str(p, "name") == "limit" {
			return p
		}
	}
	return map[string]any{}
}
