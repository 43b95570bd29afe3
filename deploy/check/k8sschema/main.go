// Command k8sschema writes kubeconform's standalone strict JSON schemas,
// one <kind>[-<group>]-<version>.json per kind, from the Kubernetes API's
// swagger.json (OpenAPI v2) and from CustomResourceDefinition files.
//
// Usage:
//
//	k8sschema -out DIR [-swagger swagger.json] [CRD.yaml ...]
//
// Every object schema that lists properties gets additionalProperties: false
// unless it already says otherwise, so an unknown field is an error.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "k8sschema:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("k8sschema", flag.ContinueOnError)
	swagger := fs.String("swagger", "", "Kubernetes swagger.json (api/openapi-spec/swagger.json of k8s.io/kubernetes)")
	out := fs.String("out", "", "output directory (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("-out is required")
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	n := 0
	if *swagger != "" {
		m, err := fromSwagger(*swagger, *out)
		if err != nil {
			return err
		}
		n += m
	}
	for _, crd := range fs.Args() {
		m, err := fromCRD(crd, *out)
		if err != nil {
			return fmt.Errorf("%s: %w", crd, err)
		}
		n += m
	}
	fmt.Fprintf(stdout, "wrote %d schemas to %s\n", n, *out)
	return nil
}

// fromSwagger writes one schema per kind named in the definitions'
// x-kubernetes-group-version-kind, each with the definitions it uses.
func fromSwagger(path, out string) (int, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var spec struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	defs := map[string]any{}
	for name, d := range spec.Definitions {
		defs[name] = fix(d)
	}
	// Quantity is a string in the spec, but the API server takes YAML numbers too.
	defs["io.k8s.apimachinery.pkg.api.resource.Quantity"] = map[string]any{"oneOf": []any{
		map[string]any{"type": "string"}, map[string]any{"type": "number"},
	}}
	n := 0
	for name, d := range spec.Definitions {
		list, _ := d["x-kubernetes-group-version-kind"].([]any)
		for _, g := range list {
			m, _ := g.(map[string]any)
			group, _ := m["group"].(string)
			version, _ := m["version"].(string)
			kind, _ := m["kind"].(string)
			if strings.HasSuffix(kind, "List") || kind == "DeleteOptions" || kind == "WatchEvent" || kind == "Status" {
				continue
			}
			used := map[string]any{}
			collect(defs[name], defs, used)
			root := map[string]any{}
			for k, v := range defs[name].(map[string]any) {
				root[k] = v
			}
			root["definitions"] = used
			if err := write(out, group, version, kind, root); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// fromCRD writes one schema per served version of a CustomResourceDefinition.
func fromCRD(path, out string) (int, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var crd struct {
		Kind string `json:"kind"`
		Spec struct {
			Group string `json:"group"`
			Names struct {
				Kind string `json:"kind"`
			} `json:"names"`
			Versions []struct {
				Name   string `json:"name"`
				Served bool   `json:"served"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		return 0, err
	}
	if crd.Kind != "CustomResourceDefinition" {
		return 0, fmt.Errorf("kind %q, want CustomResourceDefinition", crd.Kind)
	}
	n := 0
	for _, v := range crd.Spec.Versions {
		if !v.Served || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		root := fix(v.Schema.OpenAPIV3Schema).(map[string]any)
		if err := write(out, crd.Spec.Group, v.Name, crd.Spec.Names.Kind, root); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// write pins apiVersion and kind in root and writes it under kubeconform's
// file name for the kind.
func write(out, group, version, kind string, root map[string]any) error {
	apiVersion := version
	suffix := ""
	if group != "" {
		apiVersion = group + "/" + version
		suffix = "-" + strings.ToLower(strings.Split(group, ".")[0])
	}
	root["$schema"] = "http://json-schema.org/draft-07/schema#"
	props, _ := root["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		root["properties"] = props
	}
	props["apiVersion"] = map[string]any{"type": "string", "enum": []any{apiVersion}}
	props["kind"] = map[string]any{"type": "string", "enum": []any{kind}}
	b, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		return err
	}
	name := strings.ToLower(kind) + suffix + "-" + strings.ToLower(version) + ".json"
	return os.WriteFile(filepath.Join(out, name), b, 0o644)
}

// fix rewrites one OpenAPI schema node into JSON Schema: int-or-string as
// oneOf, optional fields nullable, and no unknown properties on objects that
// list theirs (unless they preserve unknown fields).
func fix(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, vv := range t {
			if strings.HasPrefix(k, "x-kubernetes-") {
				continue
			}
			out[k] = fix(vv)
		}
		if f, _ := out["format"].(string); f == "int-or-string" || t["x-kubernetes-int-or-string"] == true {
			return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
		}
		props, ok := out["properties"].(map[string]any)
		if !ok {
			return out
		}
		if _, has := out["additionalProperties"]; !has && t["x-kubernetes-preserve-unknown-fields"] != true {
			out["additionalProperties"] = false
		}
		required := map[string]bool{}
		if r, ok := out["required"].([]any); ok {
			for _, x := range r {
				if s, ok := x.(string); ok {
					required[s] = true
				}
			}
		}
		for name, p := range props {
			pm, ok := p.(map[string]any)
			if !ok || required[name] {
				continue
			}
			if ty, ok := pm["type"].(string); ok {
				pm["type"] = []any{ty, "null"}
			} else if _, ok := pm["$ref"]; ok {
				props[name] = map[string]any{"oneOf": []any{pm, map[string]any{"type": "null"}}}
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i := range t {
			out[i] = fix(t[i])
		}
		return out
	}
	return v
}

// collect adds to used every definition v refers to, transitively.
func collect(v any, defs, used map[string]any) {
	switch t := v.(type) {
	case map[string]any:
		if ref, ok := t["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, "#/definitions/")
			if _, seen := used[name]; !seen {
				used[name] = defs[name]
				collect(defs[name], defs, used)
			}
		}
		for _, vv := range t {
			collect(vv, defs, used)
		}
	case []any:
		for _, vv := range t {
			collect(vv, defs, used)
		}
	}
}
