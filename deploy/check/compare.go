package check

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// helmLabels are the labels Helm charts add by convention; the chart puts
// them on its objects' metadata only, never on selectors.
var helmLabels = []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart"}

// generatedName matches a name kustomize's configMapGenerator made: the
// generator's name and a hash of the data.
var generatedName = regexp.MustCompile(`^(.+)-[a-z0-9]{10}$`)

// Difference is one way two renderings of the same deployment differ: an
// object that one of them lacks (Field empty), or a field whose values
// differ.
type Difference struct {
	Object string // "Kind name"
	Field  string // a path such as spec.template.spec.containers[plantstore].env[GOMEMLIMIT].value
	Want   string // the kustomize rendering's value, "(absent)" when it has none
	Got    string // the chart's
}

func (d Difference) String() string {
	if d.Field == "" {
		return fmt.Sprintf("%s: kustomize %s, chart %s", d.Object, d.Want, d.Got)
	}
	return fmt.Sprintf("%s: %s: kustomize %s, chart %s", d.Object, d.Field, d.Want, d.Got)
}

// Compare returns how the objects the chart rendered (got) differ from
// those kustomize rendered (want), after decoding both into their API
// types (so that "1" and 1 CPU, or the order of a map's keys, are alike),
// and with what the two tools do differently by design set aside:
//
//   - the ConfigMaps kustomize generates carry a hash of their data in
//     their names (a change rolls the pods); the chart's have the plain
//     name and roll the pods by the checksum/* annotations of the pod
//     template, which are set aside;
//   - the chart's objects carry Helm's labels (helmLabels) in their
//     metadata;
//   - when want's containers name an image by tag only, got's digest is
//     set aside (the chart renders images by digest only);
//   - lists whose items all have a name (containers, env, ports, volumes,
//     mounts) are compared by name, other lists item by item.
//
// Objects that only kustomize renders by design are named in onlyWant
// (by "Kind name") and left out.
func Compare(want, got []runtime.Object, onlyWant map[string]bool) ([]Difference, error) {
	w, err := normalized(want, true)
	if err != nil {
		return nil, fmt.Errorf("kustomize: %w", err)
	}
	g, err := normalized(got, false)
	if err != nil {
		return nil, fmt.Errorf("chart: %w", err)
	}
	if tagOnly(w) {
		stripDigests(g)
	}
	var diffs []Difference
	keys := map[string]bool{}
	for k := range w {
		keys[k] = true
	}
	for k := range g {
		keys[k] = true
	}
	for _, k := range sortedKeys(keys) {
		wo, inW := w[k]
		go_, inG := g[k]
		switch {
		case inW && onlyWant[k]:
			continue
		case !inG:
			diffs = append(diffs, Difference{Object: k, Want: "renders it", Got: "does not"})
		case !inW:
			diffs = append(diffs, Difference{Object: k, Want: "does not render it", Got: "does"})
		default:
			diffValues(k, "", wo, go_, &diffs)
		}
	}
	return diffs, nil
}

// normalized returns the objects as JSON values by "Kind name", with
// kustomize's generated names (when fromKustomize) and Helm's additions
// set aside.
func normalized(objs []runtime.Object, fromKustomize bool) (map[string]any, error) {
	renames := map[string]string{}
	if fromKustomize {
		names := map[string]bool{}
		for _, o := range objs {
			if kindOf(o) == "ConfigMap" {
				acc, _ := meta.Accessor(o)
				names[acc.GetName()] = true
			}
		}
		for n := range names {
			if m := generatedName.FindStringSubmatch(n); m != nil && !names[m[1]] {
				renames[n] = m[1]
			}
		}
	}
	out := map[string]any{}
	for _, o := range objs {
		b, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		s := string(b)
		for from, to := range renames {
			s = strings.ReplaceAll(s, `"`+from+`"`, `"`+to+`"`)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return nil, err
		}
		md, _ := v["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		key := kindOf(o) + " " + name
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("%s rendered twice", key)
		}
		dropLabels(md)
		if spec, ok := v["spec"].(map[string]any); ok {
			if tpl, ok := spec["template"].(map[string]any); ok {
				tmd, _ := tpl["metadata"].(map[string]any)
				dropLabels(tmd)
				if ann, ok := tmd["annotations"].(map[string]any); ok {
					for k := range ann {
						if strings.HasPrefix(k, "checksum/") {
							delete(ann, k)
						}
					}
					if len(ann) == 0 {
						delete(tmd, "annotations")
					}
				}
			}
		}
		out[key] = v
	}
	return out, nil
}

func dropLabels(md map[string]any) {
	if md == nil {
		return
	}
	l, ok := md["labels"].(map[string]any)
	if !ok {
		return
	}
	for _, k := range helmLabels {
		delete(l, k)
	}
	if len(l) == 0 {
		delete(md, "labels")
	}
}

// containers returns the containers of an object's pod template.
func containers(o any) []any {
	v, _ := o.(map[string]any)
	spec, _ := v["spec"].(map[string]any)
	tpl, _ := spec["template"].(map[string]any)
	pspec, _ := tpl["spec"].(map[string]any)
	cs, _ := pspec["containers"].([]any)
	return cs
}

// tagOnly reports whether every image of the objects is named by tag only.
func tagOnly(objs map[string]any) bool {
	seen := false
	for _, o := range objs {
		for _, c := range containers(o) {
			img, _ := c.(map[string]any)["image"].(string)
			if strings.Contains(img, "@") {
				return false
			}
			seen = seen || img != ""
		}
	}
	return seen
}

func stripDigests(objs map[string]any) {
	for _, o := range objs {
		for _, c := range containers(o) {
			cm := c.(map[string]any)
			if img, ok := cm["image"].(string); ok {
				cm["image"], _, _ = strings.Cut(img, "@")
			}
		}
	}
}

// diffValues appends the differences between want and got at path.
func diffValues(object, path string, want, got any, diffs *[]Difference) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range w {
			keys[k] = true
		}
		for k := range g {
			keys[k] = true
		}
		for _, k := range sortedKeys(keys) {
			wv, inW := w[k]
			gv, inG := g[k]
			p := join(path, k)
			switch {
			case !inW:
				*diffs = append(*diffs, Difference{object, p, "(absent)", show(gv)})
			case !inG:
				*diffs = append(*diffs, Difference{object, p, show(wv), "(absent)"})
			default:
				diffValues(object, p, wv, gv, diffs)
			}
		}
		return
	case []any:
		g, ok := got.([]any)
		if !ok {
			break
		}
		if wn, gn := byName(w), byName(g); wn != nil && gn != nil {
			keys := map[string]bool{}
			for k := range wn {
				keys[k] = true
			}
			for k := range gn {
				keys[k] = true
			}
			for _, k := range sortedKeys(keys) {
				wv, inW := wn[k]
				gv, inG := gn[k]
				p := path + "[" + k + "]"
				switch {
				case !inW:
					*diffs = append(*diffs, Difference{object, p, "(absent)", show(gv)})
				case !inG:
					*diffs = append(*diffs, Difference{object, p, show(wv), "(absent)"})
				default:
					diffValues(object, p, wv, gv, diffs)
				}
			}
			return
		}
		for i := 0; i < max(len(w), len(g)); i++ {
			p := fmt.Sprintf("%s[%d]", path, i)
			switch {
			case i >= len(w):
				*diffs = append(*diffs, Difference{object, p, "(absent)", show(g[i])})
			case i >= len(g):
				*diffs = append(*diffs, Difference{object, p, show(w[i]), "(absent)"})
			default:
				diffValues(object, p, w[i], g[i], diffs)
			}
		}
		return
	}
	if !reflect.DeepEqual(want, got) {
		*diffs = append(*diffs, Difference{object, path, show(want), show(got)})
	}
}

// byName returns the items of a list by their name, or nil unless every
// item has a distinct one.
func byName(items []any) map[string]any {
	if len(items) == 0 {
		return nil
	}
	out := map[string]any{}
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return nil
		}
		n, ok := m["name"].(string)
		if !ok || n == "" {
			return nil
		}
		if _, dup := out[n]; dup {
			return nil
		}
		out[n] = it
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// show prints a value for a message: JSON, cut at 200 bytes.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
