package check

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// APIPaths are the paths the gateway must send to the service: the API and
// its RFC 9728 protected resource metadata.
var APIPaths = []string{"/plants", "/.well-known/oauth-protected-resource"}

// checkServices requires one Service for the API port only and one for the
// admin port only (for Prometheus), and returns the API Service.
func checkServices(services []*corev1.Service, podLabels labels.Set, v *violations) *corev1.Service {
	var api, metrics []*corev1.Service
	for _, s := range services {
		if len(s.Spec.Selector) == 0 || !labels.SelectorFromSet(s.Spec.Selector).Matches(podLabels) {
			continue
		}
		if s.Spec.Type != "" && s.Spec.Type != corev1.ServiceTypeClusterIP {
			v.add("Service %s: type %s, want ClusterIP", s.Name, s.Spec.Type)
		}
		var toAPI, toAdmin, other bool
		for _, p := range s.Spec.Ports {
			if p.Name == "" {
				v.add("Service %s: port %d has no name", s.Name, p.Port)
			}
			switch {
			case isPort(p.TargetPort, APIPortName, APIPort):
				toAPI = true
			case isPort(p.TargetPort, AdminPortName, AdminPort):
				toAdmin = true
			default:
				other = true
			}
		}
		switch {
		case toAPI && (toAdmin || other):
			v.add("Service %s: exposes more than the API port", s.Name)
		case toAPI:
			api = append(api, s)
		case toAdmin && !other:
			metrics = append(metrics, s)
		default:
			v.add("Service %s: targets neither the API nor the admin port alone", s.Name)
		}
	}
	if len(metrics) != 1 {
		v.add("want one Service for the admin port (metrics), got %d", len(metrics))
	}
	if len(api) != 1 {
		v.add("want one Service for the API port, got %d", len(api))
		return nil
	}
	return api[0]
}

// checkRoutes requires the gateway route (HTTPRoute or Ingress) to send
// each of APIPaths, exactly, to the API Service.
func checkRoutes(routes []*gatewayv1.HTTPRoute, ingresses []*networkingv1.Ingress, api *corev1.Service, v *violations) {
	if len(routes)+len(ingresses) == 0 {
		v.add("no HTTPRoute or Ingress")
		return
	}
	if api == nil {
		return
	}
	port := api.Spec.Ports[0]
	for _, r := range routes {
		if len(r.Spec.ParentRefs) == 0 {
			v.add("HTTPRoute %s: no parentRefs", r.Name)
		}
		routed := map[string]bool{}
		for _, rule := range r.Spec.Rules {
			toAPI := false
			for _, b := range rule.BackendRefs {
				if string(b.Name) == api.Name && b.Port != nil && int32(*b.Port) == port.Port {
					toAPI = true
				}
			}
			for _, m := range rule.Matches {
				if toAPI && m.Path != nil && m.Path.Value != nil && m.Path.Type != nil && *m.Path.Type == gatewayv1.PathMatchExact {
					routed[*m.Path.Value] = true
				}
			}
		}
		for _, p := range APIPaths {
			if !routed[p] {
				v.add("HTTPRoute %s: no Exact match of %s to Service %s port %d", r.Name, p, api.Name, port.Port)
			}
		}
	}
	for _, in := range ingresses {
		routed := map[string]bool{}
		for _, rule := range in.Spec.Rules {
			if rule.HTTP == nil {
				continue
			}
			for _, p := range rule.HTTP.Paths {
				s := p.Backend.Service
				if s != nil && s.Name == api.Name && (s.Port.Name == port.Name && port.Name != "" || s.Port.Number == port.Port) &&
					p.PathType != nil && *p.PathType == networkingv1.PathTypeExact {
					routed[p.Path] = true
				}
			}
		}
		for _, p := range APIPaths {
			if !routed[p] {
				v.add("Ingress %s: no Exact path %s to Service %s port %s", in.Name, p, api.Name, port.Name)
			}
		}
	}
}
