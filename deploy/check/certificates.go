package check

import (
	"slices"
	"strings"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// XFCCHeader is the header Envoy forwards a client certificate in, which
// PLANTSTORE_CLIENT_CERT_HEADER must name behind Envoy Gateway.
const XFCCHeader = "X-Forwarded-Client-Cert"

// ClientCertificateViolations checks the two halves of certificate-bound
// tokens behind Envoy Gateway (deploy/components/mtls): app, the objects
// of an overlay, and gateway, those applied in the Gateway's namespace. The
// ClientTrafficPolicy must configure the listener the HTTPRoute attaches
// to, never the whole Gateway, and verify a client certificate only when
// one is given (the listener's other routes and callers without one are
// unaffected), against a CA; Envoy must set X-Forwarded-Client-Cert itself
// with the certificate, replacing a client's own; and the service must read
// that header, from trusted proxies.
func ClientCertificateViolations(app, gateway []runtime.Object) []string {
	var v violations
	m := sortByKind(app)
	if len(m.deps) != 1 {
		v.add("want exactly one Deployment, got %d", len(m.deps))
		return v
	}
	env := configEnv(m.deps[0].Spec.Template.Spec.Containers, m.configMaps, &v)
	if h := env["PLANTSTORE_CLIENT_CERT_HEADER"]; !strings.EqualFold(h, XFCCHeader) {
		v.add("PLANTSTORE_CLIENT_CERT_HEADER=%q: behind Envoy Gateway the certificate comes in %s", h, XFCCHeader)
	}
	if env["PLANTSTORE_TRUSTED_PROXIES"] == "" {
		v.add("PLANTSTORE_CLIENT_CERT_HEADER without PLANTSTORE_TRUSTED_PROXIES: the service ignores the header from every peer")
	}
	var parents []gatewayv1.ParentReference
	for _, r := range m.routes {
		parents = append(parents, r.Spec.ParentRefs...)
	}
	var ctps []*egv1a1.ClientTrafficPolicy
	for _, o := range gateway {
		if p, ok := o.(*egv1a1.ClientTrafficPolicy); ok {
			ctps = append(ctps, p)
		}
	}
	if len(ctps) != 1 {
		v.add("want one ClientTrafficPolicy in the gateway's objects, got %d", len(ctps))
		return v
	}
	p := ctps[0]
	ns := ""
	if acc, err := meta.Accessor(p); err == nil {
		ns = acc.GetNamespace()
	}
	if len(p.Spec.TargetRefs) == 0 {
		v.add("ClientTrafficPolicy %s: no targetRefs", p.Name)
	}
	for _, t := range p.Spec.TargetRefs {
		if t.SectionName == nil {
			v.add("ClientTrafficPolicy %s: targets the whole Gateway %s: name the listener the HTTPRoute attaches to (sectionName), so the Gateway's other listeners keep their own settings", p.Name, t.Name)
			continue
		}
		if !slices.ContainsFunc(parents, func(r gatewayv1.ParentReference) bool {
			return r.Name == t.Name && r.SectionName != nil && *r.SectionName == *t.SectionName &&
				(r.Namespace == nil || string(*r.Namespace) == ns)
		}) {
			v.add("ClientTrafficPolicy %s: targets listener %s of Gateway %s in %s, to which no HTTPRoute of the service attaches", p.Name, *t.SectionName, t.Name, ns)
		}
	}
	cv := (*egv1a1.ClientValidationContext)(nil)
	if p.Spec.TLS != nil {
		cv = p.Spec.TLS.ClientValidation
	}
	switch {
	case cv == nil:
		v.add("ClientTrafficPolicy %s: no tls.clientValidation: Envoy asks no client for a certificate", p.Name)
	case len(cv.CACertificateRefs) == 0:
		v.add("ClientTrafficPolicy %s: clientValidation names no CA", p.Name)
	}
	if cv != nil {
		switch mode := cv.Mode; {
		case mode == nil && !cv.Optional, mode != nil && *mode == egv1a1.ClientValidationRequireAndVerify:
			v.add("ClientTrafficPolicy %s: clientValidation requires a certificate of every client of the listener, which refuses the callers of the shared Gateway that have none: mode VerifyIfGiven", p.Name)
		case mode != nil && *mode != egv1a1.ClientValidationVerifyIfGiven:
			v.add("ClientTrafficPolicy %s: clientValidation mode %s lets a certificate that does not verify through: mode VerifyIfGiven", p.Name, *mode)
		}
	}
	var xfcc *egv1a1.XForwardedClientCert
	if p.Spec.Headers != nil {
		xfcc = p.Spec.Headers.XForwardedClientCert
	}
	switch {
	case xfcc == nil || xfcc.Mode == nil:
		v.add("ClientTrafficPolicy %s: headers.xForwardedClientCert unset: Envoy drops the header and forwards no certificate", p.Name)
	case *xfcc.Mode != egv1a1.XFCCForwardModeSanitizeSet && *xfcc.Mode != egv1a1.XFCCForwardModeAppendForward:
		v.add("ClientTrafficPolicy %s: xForwardedClientCert mode %s: want SanitizeSet, so that Envoy sets the header itself and a client's own never reaches the service", p.Name, *xfcc.Mode)
	case !slices.Contains(xfcc.CertDetailsToAdd, egv1a1.XFCCCertDataCert):
		v.add("ClientTrafficPolicy %s: xForwardedClientCert without Cert among certDetailsToAdd: the service needs the certificate, not only its hash", p.Name)
	}
	return v
}
