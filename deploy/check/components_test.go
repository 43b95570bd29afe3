package check_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/plantstore/plantstore/deploy/check"
)

// withComponents builds the overlay deploy/overlays/<overlay> with the
// components deploy/components/<name> on top, as an overlay that takes
// them would, and decodes the result.
func withComponents(t testing.TB, overlay string, components ...string) []runtime.Object {
	t.Helper()
	dir := t.TempDir()
	deploy, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// kustomize takes bases and components by relative paths only.
	rel, err := filepath.Rel(dir, deploy)
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\ncomponents:\n", filepath.Join(rel, "overlays", overlay))
	for _, c := range components {
		k += "  - " + filepath.Join(rel, "components", c) + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return build(t, dir)
}

// mountNamed returns the plantstore container's volumeMount of the
// volume name; the test fails without one.
func mountNamed(objs []runtime.Object, name string) *corev1.VolumeMount {
	c := ctr(objs)
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == name {
			return &c.VolumeMounts[i]
		}
	}
	panic("no volumeMount " + name)
}

// TestNonceKeyComponent builds prod with deploy/components/dpop-nonce: the
// nonce key file is the key of the Secret plantstore-dpop-nonce, mounted as
// a directory, and the whole passes the policy, which refuses the key
// through a subPath mount (the service would never see a rotation) or
// outside any mount.
func TestNonceKeyComponent(t *testing.T) {
	const file = "/etc/plantstore/dpop-nonce/key"
	tests := []struct {
		name   string
		mutate func(objs []runtime.Object)
		want   string // "" when no violation is expected
	}{
		{"as shipped", func([]runtime.Object) {}, ""},
		{"the key through a subPath mount", func(o []runtime.Object) {
			m := mountNamed(o, "dpop-nonce")
			m.MountPath, m.SubPath = file, "key"
		}, "comes through the subPath mount " + file},
		{"the key outside the mount", func(o []runtime.Object) {
			mountNamed(o, "dpop-nonce").MountPath = "/etc/plantstore/other"
		}, "PLANTSTORE_DPOP_NONCE_KEY_FILE=" + file + " is under no volumeMount"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := withComponents(t, "prod", "dpop-nonce")
			tt.mutate(objs)
			got := strings.Join(check.Violations(objs), "\n")
			switch {
			case tt.want == "" && got != "":
				t.Errorf("Violations(prod with dpop-nonce):\n%s", got)
			case tt.want != "" && !strings.Contains(got, tt.want):
				t.Errorf("Violations after %s:\n%s\nwant %q", tt.name, got, tt.want)
			}
			if tt.want != "" {
				return
			}
			var env string
			for _, cm := range objs {
				if c, ok := cm.(*corev1.ConfigMap); ok && strings.HasPrefix(c.Name, "plantstore-") && c.Data["PLANTSTORE_DPOP_NONCE_KEY_FILE"] != "" {
					env = c.Data["PLANTSTORE_DPOP_NONCE_KEY_FILE"]
				}
			}
			var secret *corev1.SecretVolumeSource
			for _, vol := range dep(objs).Spec.Template.Spec.Volumes {
				if vol.Secret != nil && vol.Name == "dpop-nonce" {
					secret = vol.Secret
				}
			}
			if env != file || secret == nil || secret.SecretName != "plantstore-dpop-nonce" || len(secret.Items) != 1 || secret.Items[0].Key != "key" {
				t.Errorf("PLANTSTORE_DPOP_NONCE_KEY_FILE=%q from %+v; want %s, the key \"key\" of the Secret plantstore-dpop-nonce", env, secret, file)
			}
		})
	}
}

// TestClientCertificateComponent builds prod with deploy/components/mtls
// and the gateway's half, deploy/components/mtls/gateway: together they
// pass the policy, and each way the ClientTrafficPolicy broke the
// shared Gateway (the whole Gateway targeted, a certificate required of
// every client), or left the service without the certificate, is refused.
func TestClientCertificateComponent(t *testing.T) {
	ctp := func(o []runtime.Object) *egv1a1.ClientTrafficPolicy {
		for _, x := range o {
			if p, ok := x.(*egv1a1.ClientTrafficPolicy); ok {
				return p
			}
		}
		t.Fatal("no ClientTrafficPolicy")
		return nil
	}
	cm := func(o []runtime.Object) *corev1.ConfigMap {
		for _, x := range o {
			if c, ok := x.(*corev1.ConfigMap); ok && c.Data["PLANTSTORE_JWT_ISSUER"] != "" {
				return c
			}
		}
		t.Fatal("no plantstore ConfigMap")
		return nil
	}
	mode := func(m egv1a1.ClientValidationModeType) *egv1a1.ClientValidationModeType { return &m }
	xfcc := func(m egv1a1.XFCCForwardMode) *egv1a1.XFCCForwardMode { return &m }
	tests := []struct {
		name   string
		app    []string // components on prod
		mutate func(app, gw []runtime.Object)
		want   string // "" when no violation is expected
	}{
		{"as shipped", []string{"mtls"}, func(_, _ []runtime.Object) {}, ""},
		{"the deprecated optional: true", []string{"mtls"}, func(_, gw []runtime.Object) {
			cv := ctp(gw).Spec.TLS.ClientValidation
			cv.Mode, cv.Optional = nil, true
		}, ""},
		{"the service without the component", nil, func(_, _ []runtime.Object) {}, `PLANTSTORE_CLIENT_CERT_HEADER="": behind Envoy Gateway`},
		{"no trusted proxies", []string{"mtls"}, func(app, _ []runtime.Object) { delete(cm(app).Data, "PLANTSTORE_TRUSTED_PROXIES") }, "without PLANTSTORE_TRUSTED_PROXIES"},
		{"the whole Gateway", []string{"mtls"}, func(_, gw []runtime.Object) { ctp(gw).Spec.TargetRefs[0].SectionName = nil }, "targets the whole Gateway public"},
		{"another listener", []string{"mtls"}, func(_, gw []runtime.Object) {
			s := gatewayv1.SectionName("http")
			ctp(gw).Spec.TargetRefs[0].SectionName = &s
		}, "targets listener http of Gateway public"},
		{"a certificate required of every client (the issue's policy)", []string{"mtls"}, func(_, gw []runtime.Object) {
			ctp(gw).Spec.TLS.ClientValidation.Mode = nil
		}, "requires a certificate of every client of the listener"},
		{"RequireAndVerify", []string{"mtls"}, func(_, gw []runtime.Object) {
			ctp(gw).Spec.TLS.ClientValidation.Mode = mode(egv1a1.ClientValidationRequireAndVerify)
		}, "requires a certificate of every client of the listener"},
		{"certificates not verified", []string{"mtls"}, func(_, gw []runtime.Object) {
			ctp(gw).Spec.TLS.ClientValidation.Mode = mode(egv1a1.ClientValidationRequireAny)
		}, "mode RequireAny lets a certificate that does not verify through"},
		{"no CA", []string{"mtls"}, func(_, gw []runtime.Object) { ctp(gw).Spec.TLS.ClientValidation.CACertificateRefs = nil }, "names no CA"},
		{"no header set", []string{"mtls"}, func(_, gw []runtime.Object) { ctp(gw).Spec.Headers = nil }, "headers.xForwardedClientCert unset"},
		{"a client's own header forwarded", []string{"mtls"}, func(_, gw []runtime.Object) {
			ctp(gw).Spec.Headers.XForwardedClientCert.Mode = xfcc(egv1a1.XFCCForwardModeForwardOnly)
		}, "xForwardedClientCert mode ForwardOnly"},
		{"the hash only", []string{"mtls"}, func(_, gw []runtime.Object) {
			ctp(gw).Spec.Headers.XForwardedClientCert.CertDetailsToAdd = []egv1a1.XFCCCertData{egv1a1.XFCCCertDataSubject}
		}, "without Cert among certDetailsToAdd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := withComponents(t, "prod", tt.app...)
			gw := build(t, filepath.Join("..", "components", "mtls", "gateway"))
			tt.mutate(app, gw)
			got := strings.Join(append(check.ClientCertificateViolations(app, gw), check.Violations(app)...), "\n")
			switch {
			case tt.want == "" && got != "":
				t.Errorf("violations of prod with mtls:\n%s", got)
			case tt.want != "" && !strings.Contains(got, tt.want):
				t.Errorf("violations after %s:\n%s\nwant %q", tt.name, got, tt.want)
			}
		})
	}
}
