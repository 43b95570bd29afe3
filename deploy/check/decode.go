// Package check holds the offline checks of the Kubernetes manifests in
// deploy/: strict decoding of every object into its Kubernetes API type and
// the deployment policy the service's operation relies on.
package check

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

// newObject returns an empty object of the type for apiVersion and kind, or
// nil for a kind the manifests are not expected to hold.
func newObject(apiVersion, kind string) runtime.Object {
	switch apiVersion + " " + kind {
	case "v1 Namespace":
		return &corev1.Namespace{}
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}
	case "v1 Secret":
		return &corev1.Secret{}
	case "v1 Service":
		return &corev1.Service{}
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}
	case "batch/v1 Job":
		return &batchv1.Job{}
	case "autoscaling/v2 HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}
	case "networking.k8s.io/v1 Ingress":
		return &networkingv1.Ingress{}
	case "gateway.networking.k8s.io/v1 HTTPRoute":
		return &gatewayv1.HTTPRoute{}
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}
	case "monitoring.coreos.com/v1 PodMonitor":
		return &monitoringv1.PodMonitor{}
	case "monitoring.coreos.com/v1 PrometheusRule":
		return &monitoringv1.PrometheusRule{}
	case "monitoring.coreos.com/v1 Probe":
		return &monitoringv1.Probe{}
	case "gateway.envoyproxy.io/v1alpha1 SecurityPolicy":
		return &egv1a1.SecurityPolicy{}
	case "gateway.envoyproxy.io/v1alpha1 BackendTrafficPolicy":
		return &egv1a1.BackendTrafficPolicy{}
	case "gateway.envoyproxy.io/v1alpha1 ClientTrafficPolicy":
		return &egv1a1.ClientTrafficPolicy{}
	}
	return nil
}

// Decode splits a multi-document YAML stream and decodes every document
// strictly into its API type: an unknown or duplicated field, a value of the
// wrong type, a missing apiVersion, kind or name, or a kind outside the
// expected set is an error naming the document.
func Decode(stream []byte) ([]runtime.Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var objs []runtime.Object
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var tm struct {
			metav1.TypeMeta `json:",inline"`
			Metadata        struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if tm.APIVersion == "" || tm.Kind == "" || tm.Metadata.Name == "" {
			return nil, fmt.Errorf("document %d: apiVersion, kind and metadata.name are required", i)
		}
		obj := newObject(tm.APIVersion, tm.Kind)
		if obj == nil {
			return nil, fmt.Errorf("document %d (%s %s): unexpected kind %s", i, tm.Kind, tm.Metadata.Name, tm.APIVersion+"/"+tm.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("document %d (%s %s): %w", i, tm.Kind, tm.Metadata.Name, err)
		}
		objs = append(objs, obj)
	}
}
