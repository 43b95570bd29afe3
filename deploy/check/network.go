package check

import (
	"encoding/json"
	"net/url"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// PostgresPort is the port the egress policy must open for the PostgreSQL
// store.
const PostgresPort = 5432

// RedisPort is the port the egress policy must open for the shared state
// of PLANTSTORE_REDIS_URL, when the URL (a Secret's, not seen here) names
// none.
const RedisPort = 6379

// selecting returns the NetworkPolicies whose podSelector matches podLabels.
func selecting(nps []*networkingv1.NetworkPolicy, podLabels labels.Set) []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, np := range nps {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err == nil && sel.Matches(podLabels) {
			out = append(out, np)
		}
	}
	return out
}

// checkNetworkPolicies requires ingress to the pods to be limited to the
// API port from named peers (the gateway) and the admin port from other
// named peers (Prometheus). The gateway's peers live in a NetworkPolicy of
// their own, added by a gateway component, so that an overlay changes its
// gateway by changing a component; no namespace is assumed here.
func checkNetworkPolicies(nps []*networkingv1.NetworkPolicy, podLabels labels.Set, v *violations) {
	selected := selecting(nps, podLabels)
	if len(selected) == 0 {
		v.add("no NetworkPolicy selects the pods")
		return
	}
	hasIngress := false
	apiPeers, adminPeers := map[string]string{}, map[string]string{}
	for _, np := range selected {
		hasIngress = hasIngress || slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
		var api, admin bool
		for i, rule := range np.Spec.Ingress {
			if len(rule.From) == 0 || len(rule.Ports) == 0 {
				v.add("NetworkPolicy %s: ingress rule %d allows every source or every port", np.Name, i)
				continue
			}
			for _, from := range rule.From {
				key := peerKey(from)
				if !specificPeer(from) {
					v.add("NetworkPolicy %s: ingress rule %d admits %s, which is everyone", np.Name, i, key)
				}
				for _, p := range rule.Ports {
					switch {
					case p.Port != nil && isPort(*p.Port, APIPortName, APIPort):
						api = true
						apiPeers[key] = np.Name
						if from.NamespaceSelector != nil && from.PodSelector == nil {
							v.add("NetworkPolicy %s: ingress rule %d admits every pod of the namespaces %s to the API port: name the gateway's pods with a podSelector", np.Name, i, labels.Set(from.NamespaceSelector.MatchLabels))
						}
					case p.Port != nil && isPort(*p.Port, AdminPortName, AdminPort):
						admin = true
						adminPeers[key] = np.Name
					default:
						v.add("NetworkPolicy %s: ingress rule %d allows port %v", np.Name, i, p.Port)
					}
				}
			}
		}
		if api && admin {
			v.add("NetworkPolicy %s opens both the API and the admin port: the gateway's peers belong in a NetworkPolicy of their own, from a gateway component (deploy/components), so that changing the gateway leaves the rest alone", np.Name)
		}
	}
	if !hasIngress {
		v.add("no NetworkPolicy limits the pods' ingress (policyTypes lacks Ingress)")
	}
	if len(apiPeers) == 0 {
		v.add("NetworkPolicy: nothing opens the API port: add a gateway component (deploy/components/gateway-namespace or ingress-nginx)")
	}
	if len(adminPeers) == 0 {
		v.add("NetworkPolicy: nothing opens the admin port to Prometheus")
	}
	for key := range apiPeers {
		if np, ok := adminPeers[key]; ok {
			v.add("NetworkPolicy %s: %s may reach the admin port as well as the API", np, key)
		}
	}
}

// specificPeer reports whether a peer names its sources: some namespaces
// by label, pods of the policy's namespace, or an address range short of
// all addresses.
func specificPeer(p networkingv1.NetworkPolicyPeer) bool {
	if p.IPBlock != nil {
		return p.IPBlock.CIDR != "0.0.0.0/0" && p.IPBlock.CIDR != "::/0"
	}
	if p.NamespaceSelector != nil {
		return len(p.NamespaceSelector.MatchLabels)+len(p.NamespaceSelector.MatchExpressions) > 0
	}
	return p.PodSelector != nil
}

func peerKey(p networkingv1.NetworkPolicyPeer) string {
	b, _ := json.Marshal(p)
	return string(b)
}

// NodeLocalDNS is the link-local address NodeLocal DNSCache answers on, on
// every node: a pod's DNS lookups go there on clusters that run it.
const NodeLocalDNS = "169.254.20.10/32"

// egressNeed is a destination port the pods must reach.
type egressNeed struct {
	port     int32
	protocol corev1.Protocol
	what     string
	// pods: the destination may run in the cluster, so a rule must name
	// its pods; an ipBlock never matches a pod on Cilium or GKE Dataplane
	// V2.
	pods bool
}

// dnsNeed is the egress every pod needs: the cluster's DNS.
var dnsNeed = egressNeed{53, corev1.ProtocolUDP, "DNS", false}

// egressNeeds returns what the service's settings make it call: DNS
// always, the identity provider (discovery and JWKS) when its URL is set,
// PostgreSQL when the store is, the trace collector when an OTLP endpoint
// is (its port, else OTLP's 4318 for HTTP and 4317 for gRPC), Redis when
// its URL is set (its port, else 6379).
func egressNeeds(env map[string]string) []egressNeed {
	needs := []egressNeed{dnsNeed}
	for _, name := range []string{"PLANTSTORE_JWT_JWKS_URL", "PLANTSTORE_JWT_ISSUER"} {
		u, err := url.Parse(env[name])
		if env[name] == "" || err != nil || u.Host == "" {
			continue
		}
		port := 443
		if u.Scheme == "http" {
			port = 80
		}
		if p, err := strconv.Atoi(u.Port()); err == nil {
			port = p
		}
		needs = append(needs, egressNeed{int32(port), corev1.ProtocolTCP, "the identity provider (" + name + ")", false})
		break
	}
	if _, ok := env["PLANTSTORE_DATABASE_URL"]; ok {
		needs = append(needs, egressNeed{PostgresPort, corev1.ProtocolTCP, "PostgreSQL", true})
	}
	if v, ok := env["PLANTSTORE_REDIS_URL"]; ok {
		port := RedisPort
		if u, err := url.Parse(v); err == nil {
			if p, err := strconv.Atoi(u.Port()); err == nil {
				port = p
			}
		}
		needs = append(needs, egressNeed{int32(port), corev1.ProtocolTCP, "Redis (PLANTSTORE_REDIS_URL)", true})
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		u, err := url.Parse(env[name])
		if env[name] == "" || err != nil || u.Host == "" {
			continue
		}
		port := 4318
		if env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "grpc" || env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "grpc" {
			port = 4317
		}
		if p, err := strconv.Atoi(u.Port()); err == nil {
			port = p
		}
		needs = append(needs, egressNeed{int32(port), corev1.ProtocolTCP, "the trace collector (" + name + ")", true})
		break
	}
	return needs
}

// checkEgress requires the pods' egress to be limited, rule by rule to
// named ports, and to reach each of needs: DNS including NodeLocal
// DNSCache, and a destination that may run in the cluster by its pods. A
// namespaceSelector alone, which admits every pod of the namespaces, is
// refused.
func checkEgress(owner string, nps []*networkingv1.NetworkPolicy, podLabels labels.Set, needs []egressNeed, v *violations) {
	var rules []networkingv1.NetworkPolicyEgressRule
	limited := false
	for _, np := range selecting(nps, podLabels) {
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
			continue
		}
		limited = true
		for i, r := range np.Spec.Egress {
			if len(r.Ports) == 0 {
				v.add("NetworkPolicy %s: egress rule %d allows every port", np.Name, i)
			}
			for _, to := range r.To {
				if to.NamespaceSelector != nil && to.PodSelector == nil {
					v.add("NetworkPolicy %s: egress rule %d reaches every pod of the namespaces %s: name the pods with a podSelector too", np.Name, i, labels.Set(to.NamespaceSelector.MatchLabels))
				}
			}
			rules = append(rules, r)
		}
	}
	if !limited {
		v.add("%s: no NetworkPolicy limits the pods' egress: want DNS, the identity provider and PostgreSQL named", owner)
		return
	}
	for _, n := range needs {
		var peers []networkingv1.NetworkPolicyPeer
		found := false
		for _, r := range rules {
			for _, p := range r.Ports {
				proto := corev1.ProtocolTCP
				if p.Protocol != nil {
					proto = *p.Protocol
				}
				if p.Port != nil && p.Port.IntVal == n.port && proto == n.protocol {
					found = true
					peers = append(peers, r.To...)
				}
			}
		}
		switch {
		case !found:
			v.add("%s: no egress rule reaches %s (%s port %d)", owner, n.what, n.protocol, n.port)
		case n == dnsNeed:
			checkDNSPeers(owner, peers, v)
		case n.pods && !slices.ContainsFunc(peers, podsOrRange):
			v.add("%s: egress to %s (%s port %d) names no pods, only every address: on Cilium and GKE Dataplane V2 an ipBlock never matches a pod, so one in the cluster is unreachable; name its pods (namespaceSelector and podSelector), and keep an ipBlock of its range for one outside", owner, n.what, n.protocol, n.port)
		}
	}
}

// podsOrRange reports whether a peer names pods of named namespaces, or an
// address range short of every address (a destination outside the
// cluster whose range is known).
func podsOrRange(p networkingv1.NetworkPolicyPeer) bool {
	if p.IPBlock != nil {
		return specificPeer(p)
	}
	return p.NamespaceSelector != nil && p.PodSelector != nil && len(p.PodSelector.MatchLabels)+len(p.PodSelector.MatchExpressions) > 0
}

// checkDNSPeers requires DNS to reach the cluster's DNS pods and NodeLocal
// DNSCache: its pods and its link-local address.
func checkDNSPeers(owner string, peers []networkingv1.NetworkPolicyPeer, v *violations) {
	has := func(app string) bool {
		return slices.ContainsFunc(peers, func(p networkingv1.NetworkPolicyPeer) bool {
			return p.NamespaceSelector != nil && p.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == "kube-system" &&
				p.PodSelector != nil && p.PodSelector.MatchLabels["k8s-app"] == app
		})
	}
	if !has("kube-dns") {
		v.add("%s: DNS egress does not reach the cluster's DNS pods (kube-system, k8s-app=kube-dns)", owner)
	}
	if !has("node-local-dns") || !slices.ContainsFunc(peers, func(p networkingv1.NetworkPolicyPeer) bool { return p.IPBlock != nil && p.IPBlock.CIDR == NodeLocalDNS }) {
		v.add("%s: DNS egress misses NodeLocal DNSCache: add the ipBlock %s and the node-local-dns pods (kube-system, k8s-app=node-local-dns), or every lookup times out where it runs", owner, NodeLocalDNS)
	}
}
