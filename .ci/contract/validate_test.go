package contract_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel/high/base"
)

// complaint names one validator finding precisely: its type, subtype and,
// for parameters, the parameter. Subtype is compared without case (the
// bearer scheme may be spelled "bearer" or "Bearer" in the document).
type complaint struct {
	Type, SubType, Param string
}

func (c complaint) matches(e *verrors.ValidationError) bool {
	return e.ValidationType == c.Type && strings.EqualFold(e.ValidationSubType, c.SubType) && e.ParameterName == c.Param
}

var (
	// noBearer is the request finding for a request without a bearer
	// credential (no Authorization header, or another scheme): the
	// document requires one, and the point of the request is that it is
	// missing.
	noBearer = complaint{Type: "security", SubType: "bearer"}
	// noDPoP is the same finding for the DPoP alternative GET /plants
	// declares (SPEC section 11).
	noDPoP = complaint{Type: "security", SubType: "DPoP"}
	// badLimit is the request finding for a limit that is not an int32.
	badLimit = complaint{Type: "parameter", SubType: "query", Param: "limit"}
	// padding is the strict-mode request finding for the header that makes
	// a request too large.
	padding = complaint{Type: "strict", SubType: "undeclared-header", Param: "X-Padding"}
)

// documentValidator builds a validator from the document the service
// serves, after checking the document against the OpenAPI 3.1 schema. It
// runs in strict mode: a property, query parameter or header that the
// document does not declare is a finding even where the schema would let it
// pass, so the document has to say everything the service sends.
func documentValidator(t testing.TB, served []byte) (validator.Validator, libopenapi.Document) {
	t.Helper()
	doc, err := libopenapi.NewDocument(served)
	if err != nil {
		t.Fatalf("parsing /openapi.json: %v", err)
	}
	v, errs := validator.NewValidator(doc, validatorOptions()...)
	if len(errs) > 0 {
		t.Fatalf("building a validator from /openapi.json: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("/openapi.json is not a valid OpenAPI 3.1 document: %s", describe(e))
		}
	}
	return v, doc
}

func describe(e *verrors.ValidationError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s/%s", e.ValidationType, e.ValidationSubType)
	if e.ParameterName != "" {
		fmt.Fprintf(&b, " %s", e.ParameterName)
	}
	fmt.Fprintf(&b, "] %s: %s", e.Message, e.Reason)
	for _, f := range e.SchemaValidationErrors {
		fmt.Fprintf(&b, "; %s", f.Error())
	}
	return b.String()
}

// validatorOptions turns on strict mode and format assertions, with int32
// and int64 as formats: by default a format is only an annotation, and an
// "error" of 4294967297 would pass as an int32.
func validatorOptions() []config.Option {
	return []config.Option{
		config.WithStrictMode(),
		config.WithFormatAssertions(),
		config.WithCustomFormat("int32", intFormat(math.MinInt32, math.MaxInt32)),
		config.WithCustomFormat("int64", intFormat(math.MinInt64, math.MaxInt64)),
	}
}

// intFormat checks that a JSON number is an integer within [lo, hi];
// other JSON types are not the format's business.
func intFormat(lo, hi int64) func(v any) error {
	return func(v any) error {
		var s string
		switch n := v.(type) {
		case json.Number:
			s = n.String()
		case float64:
			s = strconv.FormatFloat(n, 'f', -1, 64)
		case int, int64, int32:
			s = fmt.Sprint(n)
		default:
			return nil
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok || !r.IsInt() {
			return fmt.Errorf("%s is not an integer", s)
		}
		if r.Num().Cmp(big.NewInt(lo)) < 0 || r.Num().Cmp(big.NewInt(hi)) > 0 {
			return fmt.Errorf("%s is outside [%d, %d]", s, lo, hi)
		}
		return nil
	}
}

// errorSchema returns the document's components.schemas.Error.
func errorSchema(t testing.TB, doc libopenapi.Document) *base.Schema {
	t.Helper()
	m, err := doc.BuildV3Model()
	if err != nil {
		t.Fatalf("building the OpenAPI model: %v", err)
	}
	if m.Model.Components == nil || m.Model.Components.Schemas == nil {
		t.Fatal("/openapi.json has no components.schemas")
	}
	proxy := m.Model.Components.Schemas.GetOrZero("Error")
	if proxy == nil {
		t.Fatal("/openapi.json has no components.schemas.Error")
	}
	s, err := proxy.BuildSchema()
	if err != nil {
		t.Fatalf("components.schemas.Error: %v", err)
	}
	return s
}

// mode says how a response is checked against the document.
type mode int

const (
	// described: the request and response of a described operation, with
	// ValidateHttpRequestResponse.
	described mode = iota
	// errorShape: a response to a path or method the document does not
	// describe (404, 405; seedProblems checks that it describes only GET and
	// HEAD /plants): no operation applies, so the body is checked against
	// components.schemas.Error.
	errorShape
	// metadata: the protected resource metadata (SPEC section 11), checked
	// as a described operation and for the members RFC 9728 asks for.
	metadata
)

func TestResponsesMatchDocument(t *testing.T) {
	dev := startService(t, "-dev")
	scoped, withScope, withoutScope := scopedService(t)
	down, downToken := storeDownService(t)
	if e := do(t, http.MethodGet, down.Admin+"/readyz", nil); e.Resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz with the database down: status %d, want 503", e.Resp.StatusCode)
	}
	user := dev.Users[0]
	token := dev.Tokens[user]

	served := servedDocument(t, dev)
	if other := servedDocument(t, scoped); !bytes.Equal(served, other) {
		t.Errorf("/openapi.json differs between two instances of the same binary")
	}
	v, doc := documentValidator(t, served)
	errSchema := errorSchema(t, doc)

	var full []plant
	if err := json.Unmarshal(get(t, dev.API+"/plants", bearer(token)), &full); err != nil {
		t.Fatalf("GET /plants as %s: %v", user, err)
	}

	pad := strings.Repeat("a", 17<<10)
	tests := []struct {
		name       string
		s          *service
		method     string
		target     string // path and query
		header     http.Header
		mode       mode
		wantStatus int
		// expect are request findings the validator must report, because
		// the request breaks the document on purpose; any other finding
		// fails the test.
		expect []complaint
		// wantHeader maps a header to its exact value, or to a prefix
		// when the value ends in "*".
		wantHeader map[string]string
	}{
		{name: "200 all plants", s: dev, method: "GET", target: "/plants", header: bearer(token), wantStatus: 200,
			wantHeader: map[string]string{"Cache-Control": "no-store", "Vary": "Authorization", "X-Request-ID": "*"}},
		{name: "200 limit=2", s: dev, method: "GET", target: "/plants?limit=2", header: bearer(token), wantStatus: 200},
		{name: "200 limit=0", s: dev, method: "GET", target: "/plants?limit=0", header: bearer(token), wantStatus: 200},
		{name: "200 caller's request id", s: dev, method: "GET", target: "/plants?limit=1",
			header: withHeader(bearer(token), "X-Request-ID", "contract-check.1"), wantStatus: 200,
			wantHeader: map[string]string{"X-Request-ID": "contract-check.1"}},
		{name: "200 scope plants:read", s: scoped, method: "GET", target: "/plants", header: bearer(withScope), wantStatus: 200},
		{name: "200 scheme word in lower case", s: dev, method: "GET", target: "/plants?limit=1",
			header: http.Header{"Authorization": {"bearer " + token}}, wantStatus: 200},
		{name: "200 HEAD", s: dev, method: "HEAD", target: "/plants", header: bearer(token), wantStatus: 200,
			wantHeader: map[string]string{"Cache-Control": "no-store", "Vary": "Authorization", "X-Request-ID": "*"}},
		{name: "400 limit=abc", s: dev, method: "GET", target: "/plants?limit=abc", header: bearer(token), wantStatus: 400,
			expect: []complaint{badLimit}},
		{name: "400 limit=-1", s: dev, method: "GET", target: "/plants?limit=-1", header: bearer(token), wantStatus: 400,
			expect: []complaint{badLimit}},
		{name: "400 limit=2147483648", s: dev, method: "GET", target: "/plants?limit=2147483648", header: bearer(token), wantStatus: 400,
			expect: []complaint{badLimit}},
		// OpenAPI has no way to say "at most once" for a scalar query
		// parameter, so the validator takes the request as valid; the 400
		// answer must still match the document.
		{name: "400 limit twice", s: dev, method: "GET", target: "/plants?limit=1&limit=1", header: bearer(token), wantStatus: 400},
		// SPEC sections 2 and 11: the challenge, then the metadata URL.
		{name: "401 no token", s: dev, method: "GET", target: "/plants", wantStatus: 401, expect: []complaint{noBearer, noDPoP},
			wantHeader: map[string]string{"WWW-Authenticate": `Bearer realm="plantstore", resource_metadata="` + dev.API + metadataPath + `"`}},
		{name: "401 garbage token", s: dev, method: "GET", target: "/plants", header: bearer("garbage.not.jwt"), wantStatus: 401,
			wantHeader: map[string]string{"WWW-Authenticate": `Bearer realm="plantstore", error="invalid_token", error_description="*`}},
		{name: "401 Basic scheme", s: dev, method: "GET", target: "/plants", header: http.Header{"Authorization": {"Basic YTpi"}},
			wantStatus: 401, expect: []complaint{noBearer, noDPoP},
			wantHeader: map[string]string{"WWW-Authenticate": `Bearer realm="plantstore", error="invalid_token"*`}},
		{name: "401 two Authorization headers", s: dev, method: "GET", target: "/plants",
			header: http.Header{"Authorization": {"Bearer " + token, "Bearer " + token}}, wantStatus: 401,
			wantHeader: map[string]string{"WWW-Authenticate": `Bearer realm="plantstore", error="invalid_token"*`}},
		{name: "403 token without scope", s: scoped, method: "GET", target: "/plants", header: bearer(withoutScope), wantStatus: 403,
			wantHeader: map[string]string{"WWW-Authenticate": `Bearer realm="plantstore", error="insufficient_scope"*`}},
		{name: "200 resource metadata", s: dev, method: "GET", target: metadataPath, mode: metadata, wantStatus: 200},
		{name: "405 POST resource metadata", s: dev, method: "POST", target: metadataPath, mode: errorShape, wantStatus: 405,
			wantHeader: map[string]string{"Allow": "GET, HEAD"}},
		{name: "431 headers over 16 KiB", s: dev, method: "GET", target: "/plants", header: withHeader(bearer(token), "X-Padding", pad),
			wantStatus: 431, expect: []complaint{padding}},
		{name: "503 store down", s: down, method: "GET", target: "/plants", header: bearer(downToken), wantStatus: 503,
			wantHeader: map[string]string{"Retry-After": "*"}},
		{name: "404 /nope", s: dev, method: "GET", target: "/nope", header: bearer(token), mode: errorShape, wantStatus: 404},
		{name: "404 DELETE /nope", s: dev, method: "DELETE", target: "/nope", mode: errorShape, wantStatus: 404},
		{name: "404 /plants/", s: dev, method: "GET", target: "/plants/", header: bearer(token), mode: errorShape, wantStatus: 404},
		{name: "405 POST /plants", s: dev, method: "POST", target: "/plants", header: bearer(token), mode: errorShape, wantStatus: 405,
			wantHeader: map[string]string{"Allow": "GET, HEAD"}},
		{name: "405 DELETE /plants without token", s: dev, method: "DELETE", target: "/plants", mode: errorShape, wantStatus: 405,
			wantHeader: map[string]string{"Allow": "GET, HEAD"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ex := do(t, tc.method, tc.s.API+tc.target, tc.header)
			what := fmt.Sprintf("%s %s", tc.method, tc.target)
			if ex.Resp.StatusCode != tc.wantStatus {
				t.Fatalf("%s: status %d, want %d; body %q", what, ex.Resp.StatusCode, tc.wantStatus, ex.Body)
			}
			if mt, _, _ := mime.ParseMediaType(ex.Resp.Header.Get("Content-Type")); mt != "application/json" {
				t.Errorf("%s: Content-Type %q, want application/json", what, ex.Resp.Header.Get("Content-Type"))
			}
			for h, want := range tc.wantHeader {
				got := ex.Resp.Header.Values(h)
				if len(got) != 1 {
					t.Errorf("%s: %s header %q, want exactly one %q", what, h, got, want)
					continue
				}
				if p, ok := strings.CutSuffix(want, "*"); ok && !strings.HasPrefix(got[0], p) || !ok && got[0] != want || got[0] == "" {
					t.Errorf("%s: %s %q, want %q", what, h, got[0], want)
				}
			}

			switch tc.mode {
			case described, metadata:
				_, errs := v.ValidateHttpRequestResponse(ex.Req, ex.rewind())
				checkFindings(t, what, errs, tc.expect)
			case errorShape:
				if ok, errs := schema_validation.NewSchemaValidator(validatorOptions()...).ValidateSchemaBytes(errSchema, ex.Body); !ok {
					for _, e := range errs {
						t.Errorf("%s: body %s against components.schemas.Error: %s", what, ex.Body, describe(e))
					}
				}
			}

			// What no schema in the document may be loose about: the exact
			// shapes of SPEC sections 1 and 4.
			switch {
			case tc.method == "HEAD":
				if len(ex.Body) != 0 {
					t.Errorf("%s: body %q, want none", what, ex.Body)
				}
			case tc.mode == metadata:
				checkMetadata(t, what, ex.Body, tc.s.API)
			case tc.wantStatus == 200:
				checkPlants(t, what, ex.Body, tc.s == dev, full, tc.target)
			default:
				checkError(t, what, ex.Body, tc.wantStatus)
			}
			// SPEC section 4: messages never echo the token.
			for _, a := range tc.header.Values("Authorization") {
				if _, tok, _ := strings.Cut(a, " "); len(tok) > 3 && bytes.Contains(ex.Body, []byte(tok)) {
					t.Errorf("%s: body %q echoes the credential", what, ex.Body)
				}
			}
		})
	}
}

// checkMetadata checks the RFC 9728 members SPEC section 11 names. The dev
// service has no -public-url, so the resource is the URL it was called at.
func checkMetadata(t *testing.T, what string, body []byte, api string) {
	t.Helper()
	var m struct {
		Resource      string   `json:"resource"`
		BearerMethods []string `json:"bearer_methods_supported"`
		DPoPAlgs      []string `json:"dpop_signing_alg_values_supported"`
		DPoPRequired  *bool    `json:"dpop_bound_access_tokens_required"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%s: body %q: %v", what, body, err)
	}
	if m.Resource != api {
		t.Errorf("%s: resource %q, want %q", what, m.Resource, api)
	}
	if len(m.BearerMethods) != 1 || m.BearerMethods[0] != "header" {
		t.Errorf("%s: bearer_methods_supported %q, want [header]", what, m.BearerMethods)
	}
	if len(m.DPoPAlgs) == 0 || m.DPoPRequired == nil {
		t.Errorf("%s: dpop_signing_alg_values_supported %q, dpop_bound_access_tokens_required %v: want both", what, m.DPoPAlgs, m.DPoPRequired)
	}
}

func withHeader(h http.Header, k, v string) http.Header {
	h = h.Clone()
	h.Set(k, v)
	return h
}

// checkFindings fails on every finding not in expect, and on every
// expected finding the validator did not report.
func checkFindings(t testing.TB, what string, errs []*verrors.ValidationError, expect []complaint) {
	t.Helper()
	seen := make([]bool, len(expect))
	for _, e := range errs {
		i := slices.IndexFunc(expect, func(c complaint) bool { return c.matches(e) })
		if i < 0 {
			t.Errorf("%s: against /openapi.json: %s", what, describe(e))
			continue
		}
		seen[i] = true
	}
	for i, c := range expect {
		if !seen[i] {
			t.Errorf("%s: the validator did not report %+v, which this request breaks on purpose; findings: %d", what, c, len(errs))
		}
	}
}

// plant is the wire shape of SPEC section 1: exactly name and, when the
// plant has one, tag.
type plant struct {
	Name string  `json:"name"`
	Tag  *string `json:"tag,omitempty"`
}

func checkPlants(t testing.TB, what string, body []byte, sameUser bool, full []plant, target string) {
	t.Helper()
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		t.Errorf("%s: body %q is not a JSON array of objects (err %v)", what, body, err)
		return
	}
	var got []plant
	for i, o := range raw {
		for k, v := range o {
			switch {
			case k != "name" && k != "tag":
				t.Errorf("%s: plant %d has field %q, want only name and tag", what, i, k)
			case string(v) == "null":
				t.Errorf("%s: plant %d has %q: null", what, i, k)
			}
		}
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if !sameUser {
		return
	}
	want := full
	switch {
	case strings.Contains(target, "limit=0"):
		want = []plant{}
	case strings.Contains(target, "limit=1"):
		want = full[:min(1, len(full))]
	case strings.Contains(target, "limit=2"):
		want = full[:min(2, len(full))]
	}
	if !slices.EqualFunc(got, want, func(a, b plant) bool {
		return a.Name == b.Name && (a.Tag == nil) == (b.Tag == nil) && (a.Tag == nil || *a.Tag == *b.Tag)
	}) {
		t.Errorf("%s: body %s, want the first %d of the caller's %d plants", what, body, len(want), len(full))
	}
}

func checkError(t testing.TB, what string, body []byte, status int) {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Errorf("%s: body %q is not a JSON object: %v", what, body, err)
		return
	}
	var e struct {
		Error   *int32  `json:"error"`
		Message *string `json:"message"`
	}
	if err := json.Unmarshal(body, &e); err != nil || len(raw) != 2 || e.Error == nil || e.Message == nil {
		t.Errorf("%s: body %s, want exactly {\"error\": %d, \"message\": \"<text>\"}", what, body, status)
		return
	}
	if int(*e.Error) != status || *e.Message == "" {
		t.Errorf("%s: body %s, want error %d and a message", what, body, status)
	}
}

// TestValidatorCatchesBrokenResponses shows that the validation above can
// fail: real exchanges with the body or a header changed must be findings.
func TestValidatorCatchesBrokenResponses(t *testing.T) {
	dev := startService(t, "-dev")
	v, _ := documentValidator(t, servedDocument(t, dev))
	token := dev.Tokens[dev.Users[0]]

	tests := []struct {
		name   string
		header http.Header
		target string
		body   string
		extra  [2]string // a response header to add
		want   bool      // want the exchange to pass
	}{
		{name: "unchanged 200", header: bearer(token), target: "/plants", want: true},
		{name: "plant without name", header: bearer(token), target: "/plants", body: `[{"tag":"x"}]`},
		{name: "plant with id", header: bearer(token), target: "/plants", body: `[{"name":"x","id":1}]`},
		{name: "tag null", header: bearer(token), target: "/plants", body: `[{"name":"x","tag":null}]`},
		{name: "object instead of array", header: bearer(token), target: "/plants", body: `{"name":"x"}`},
		{name: "undeclared response header", header: bearer(token), target: "/plants", extra: [2]string{"X-Plant-Owner", "alice"}},
		{name: "unchanged 401", target: "/plants", want: true},
		{name: "error as a string", target: "/plants", body: `{"error":"401","message":"x"}`},
		{name: "error without message", target: "/plants", body: `{"error":401}`},
		{name: "error over int32", target: "/plants", body: `{"error":4294967297,"message":"x"}`},
		{name: "error not an integer", target: "/plants", body: `{"error":401.5,"message":"x"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ex := do(t, http.MethodGet, dev.API+tc.target, tc.header)
			if tc.body != "" {
				ex.Body = []byte(tc.body)
				ex.Resp.ContentLength = int64(len(tc.body))
			}
			if tc.extra[0] != "" {
				ex.Resp.Header.Set(tc.extra[0], tc.extra[1])
			}
			_, errs := v.ValidateHttpRequestResponse(ex.Req, ex.rewind())
			// The 401 request lacks the credential on purpose.
			errs = slices.DeleteFunc(errs, func(e *verrors.ValidationError) bool { return noBearer.matches(e) || noDPoP.matches(e) })
			if got := len(errs) == 0; got != tc.want {
				var found []string
				for _, e := range errs {
					found = append(found, describe(e))
				}
				t.Errorf("validating GET %s with body %q: passes %v, want %v; findings %q", tc.target, ex.Body, got, tc.want, found)
			}
		})
	}
}
