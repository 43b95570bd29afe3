package check_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/plantstore/plantstore/deploy/check"
)

// gatewayVerifies returns the SecurityPolicy and BackendTrafficPolicy that
// docs/deploy.md shows for a gateway that must verify tokens itself,
// strictly decoded.
func gatewayVerifies(t testing.TB) (*egv1a1.SecurityPolicy, *egv1a1.BackendTrafficPolicy) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	var block []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch trimmed := strings.TrimSpace(line); {
		case !in && trimmed == "```yaml":
			in, block = true, nil
		case in && trimmed == "```":
			in = false
			text := strings.Join(block, "\n")
			if !strings.Contains(text, "kind: SecurityPolicy") || !strings.Contains(text, "rateLimit:") {
				continue
			}
			objs, err := check.Decode([]byte(text))
			if err != nil {
				t.Fatalf("docs/deploy.md, the gateway that verifies tokens: %v", err)
			}
			return find[*egv1a1.SecurityPolicy](objs, ""), find[*egv1a1.BackendTrafficPolicy](objs, "")
		case in:
			block = append(block, strings.TrimPrefix(line, "  "))
		}
	}
	t.Fatal("docs/deploy.md shows no SecurityPolicy and rate-limiting BackendTrafficPolicy of a gateway that verifies tokens")
	return nil, nil
}

// TestGatewayVerifiesTokens puts the other way of docs/deploy.md in the
// prod overlay, a gateway that verifies tokens and limits by the subject
// it copies from them: the policy accepts it as documented, and refuses
// each way it goes wrong (a JWKS cached past the pre-publish rule's lead,
// a limit any caller can choose or escape, refusals outside the Error
// shape, a token check that is not the service's, no limit anywhere).
func TestGatewayVerifiesTokens(t *testing.T) {
	prod := build(t, filepath.Join("..", "overlays", "prod"))
	tests := []struct {
		name   string
		mutate func(sp *egv1a1.SecurityPolicy, bp *egv1a1.BackendTrafficPolicy, o []runtime.Object)
		want   string // "" when no violation is expected
	}{
		{"as documented", func(*egv1a1.SecurityPolicy, *egv1a1.BackendTrafficPolicy, []runtime.Object) {}, ""},
		{"as documented, without Redis", func(_ *egv1a1.SecurityPolicy, _ *egv1a1.BackendTrafficPolicy, o []runtime.Object) {
			dropEnv(ctr(o), "PLANTSTORE_REDIS_URL")
		}, ""},
		{"the JWKS cached 5 minutes", func(sp *egv1a1.SecurityPolicy, _ *egv1a1.BackendTrafficPolicy, _ []runtime.Object) {
			sp.Spec.JWT.Providers[0].RemoteJWKS.CacheDuration = nil
		}, "provider plantstore caches the JWKS for 5m0s"},
		{"a limit on a header no token sets", func(_ *egv1a1.SecurityPolicy, bp *egv1a1.BackendTrafficPolicy, _ []runtime.Object) {
			bp.Spec.RateLimit.Global.Rules[0].ClientSelectors[0].Headers[0].Name = "x-user"
		}, "counts by header x-user, which no SecurityPolicy sets"},
		{"a limit on requests Envoy did not verify", func(_ *egv1a1.SecurityPolicy, bp *egv1a1.BackendTrafficPolicy, _ []runtime.Object) {
			cs := &bp.Spec.RateLimit.Global.Rules[0].ClientSelectors[0]
			cs.Headers = cs.Headers[:1]
		}, "match Authorization too"},
		{"no Error shape for Envoy's 429", func(_ *egv1a1.SecurityPolicy, bp *egv1a1.BackendTrafficPolicy, _ []runtime.Object) {
			bp.Spec.ResponseOverride = nil
		}, "no responseOverride for Envoy's 429"},
		{"refusing requests without a token", func(sp *egv1a1.SecurityPolicy, _ *egv1a1.BackendTrafficPolicy, _ []runtime.Object) {
			sp.Spec.JWT.Optional = nil
		}, "jwt.optional must be true"},
		{"failing open", func(sp *egv1a1.SecurityPolicy, _ *egv1a1.BackendTrafficPolicy, _ []runtime.Object) {
			sp.Spec.JWT.FailOpen = ptr(true)
		}, "jwt.failOpen lets a token that does not verify through"},
		{"another issuer", func(sp *egv1a1.SecurityPolicy, _ *egv1a1.BackendTrafficPolicy, _ []runtime.Object) {
			sp.Spec.JWT.Providers[0].Issuer = "https://sso.example.com/realms/other"
		}, `trusts issuer "https://sso.example.com/realms/other", the service PLANTSTORE_JWT_ISSUER="https://sso.example.com/realms/plants"`},
		{"another audience", func(sp *egv1a1.SecurityPolicy, _ *egv1a1.BackendTrafficPolicy, _ []runtime.Object) {
			sp.Spec.JWT.Providers[0].Audiences = []string{"billing"}
		}, `accepts audience "billing"`},
		{"no limit anywhere", func(_ *egv1a1.SecurityPolicy, bp *egv1a1.BackendTrafficPolicy, o []runtime.Object) {
			bp.Spec.RateLimit = nil
			dropEnv(ctr(o), "PLANTSTORE_REDIS_URL")
		}, "no rate limit per subject for the whole deployment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := deepCopy(prod)
			sp, bp := gatewayVerifies(t)
			shipped := securityPolicy(o)
			shipped.Spec.JWT = sp.Spec.JWT
			trafficPolicy(o).Spec = bp.Spec
			tt.mutate(shipped, trafficPolicy(o), o)
			got := check.Violations(o)
			switch {
			case tt.want == "" && len(got) > 0:
				t.Errorf("Violations: got\n  %s\nwant none", strings.Join(got, "\n  "))
			case tt.want != "" && !slices.ContainsFunc(got, func(v string) bool { return strings.Contains(v, tt.want) }):
				t.Errorf("Violations after %s: got\n  %s\nwant one containing %q", tt.name, strings.Join(got, "\n  "), tt.want)
			}
		})
	}
}

// TestBeforePagerRejected runs the policy on the prod overlay as rendered
// before the pager's fixes (testdata/before-pager, kustomize output of that
// commit, the dashboard left out): each defect must be reported.
func TestBeforePagerRejected(t *testing.T) {
	objs := rendered(filepath.Join("testdata", "before-pager", "prod.yaml"))(t)
	got := check.Violations(objs)
	for _, tt := range []struct{ defect, want string }{
		{"GOMEMLIMIT a literal", "GOMEMLIMIT=230MiB is written out: take it from requests.memory"},
		{"alerts without team", "alert PlantstoreAvailabilityBudgetBurnFast has no team label"},
		{"rules that merge clusters", "rule plantstore:availability_errors:ratio_rate5m aggregates by (namespace, job, env) without cluster"},
		{"no authenticated probe", "without a Probe that calls GET /plants?limit=1 with a token"},
		{"the gateway's JWKS cached 5 minutes", "provider plantstore caches the JWKS for 5m0s"},
		{"Envoy's idle timeout of an hour", "Envoy keeps idle connections to the service for 1h0m0s"},
		{"DNS without NodeLocal DNSCache", "Deployment plantstore: DNS egress misses NodeLocal DNSCache"},
		{"the migration's DNS without NodeLocal DNSCache", "Job plantstore-migrate: DNS egress misses NodeLocal DNSCache"},
		{"PostgreSQL by every address only", "Deployment plantstore: egress to PostgreSQL (TCP port 5432) names no pods"},
		{"the migration's PostgreSQL by every address only", "Job plantstore-migrate: egress to PostgreSQL (TCP port 5432) names no pods"},
		{"the trace collector's namespace whole", "NetworkPolicy plantstore-tracing: egress rule 0 reaches every pod of the namespaces"},
		{"the migration's policy synced after its hook", "NetworkPolicy plantstore-migrate: Job plantstore-migrate is an Argo CD PreSync hook and the policy it needs is not"},
		{"the migration's policy not applied with the Job", `NetworkPolicy plantstore-migrate: label app.kubernetes.io/component="", want the Job's "migrate"`},
	} {
		t.Run(tt.defect, func(t *testing.T) {
			if !slices.ContainsFunc(got, func(v string) bool { return strings.Contains(v, tt.want) }) {
				t.Errorf("Violations(testdata/before-pager/prod.yaml): got\n  %s\nwant one containing %q", strings.Join(got, "\n  "), tt.want)
			}
		})
	}
}
